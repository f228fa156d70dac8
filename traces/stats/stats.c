/* Trace statistics (definitions in stats.h): one streaming pass; every
 * per-activation update is O(1) and every per-iteration update touches only
 * the experts that iteration activated, so long traces stay cheap.
 * This file accumulates; stats_finish.c makes the report, stats_out.c prints
 * it (stats_parts.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "traces/stats/stats_parts.h"

/* ---------- small helpers ---------- */

/* c log2 c for integer counts, from a table below CLOG_TABLE (log2 would
 * dominate the per-activation cost); the table lives in each ms_stats, so
 * nothing global is written. */
static double clog2c(const double *table, uint64_t c)
{
    return c < CLOG_TABLE ? table[c] : (double)c * log2((double)c);
}

static void clog2c_fill(double *table)
{
    for (uint32_t c = 0; c < CLOG_TABLE; c++)
        table[c] = c ? c * log2((double)c) : 0.0;
}

double st_ratio_or_nan(double num, double den)
{
    return den > 0 ? num / den : NAN;
}

double ms_entropy_bits(const double *w, uint32_t n)
{
    double total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += w[i];
    if (!(total > 0))
        return NAN;
    double h = 0;
    for (uint32_t i = 0; i < n; i++)
        if (w[i] > 0) {
            double p = w[i] / total;
            h -= p * log2(p);
        }
    return h > 0 ? h : 0.0; /* no -0 */
}

static void scope_alloc(scope *sc, uint32_t L, uint32_t J)
{
    sc->c = ms_xcalloc((size_t)L * J, sizeof *sc->c);
    sc->w = ms_xcalloc((size_t)L * J, sizeof *sc->w);
    sc->touched = ms_xcalloc((size_t)L * J, sizeof *sc->touched);
    sc->n_touched = ms_xcalloc(L, sizeof *sc->n_touched);
}

static void scope_free(scope *sc)
{
    free(sc->c);
    free(sc->w);
    free(sc->touched);
    free(sc->n_touched);
}

static void scope_add(scope *sc, uint32_t J, uint32_t l, uint32_t e, double w)
{
    size_t i = (size_t)l * J + e;
    if (sc->c[i] == 0)
        sc->touched[(size_t)l * J + sc->n_touched[l]++] = e;
    sc->c[i]++;
    sc->w[i] += w;
}

/* Entropy from the total n and S = sum c log2 c of integer counts:
 * H = log2 n - S / n.  NaN when n = 0. */
static double count_entropy(uint64_t n, double s)
{
    if (!n)
        return NAN;
    double h = log2((double)n) - s / (double)n;
    return h > 0 ? h : 0.0; /* rounding */
}

/* Entropy of layer l's counts over the touched experts; NaN when empty. */
static double scope_count_entropy(const scope *sc, uint32_t J, uint32_t l, const double *table)
{
    uint64_t n = 0;
    double s = 0;
    for (uint32_t t = 0; t < sc->n_touched[l]; t++) {
        uint64_t c = sc->c[(size_t)l * J + sc->touched[(size_t)l * J + t]];
        n += c;
        s += clog2c(table, c);
    }
    return count_entropy(n, s);
}

/* Entropy of layer l's weight sums over the touched experts; NaN when empty
 * or all weights are 0. */
static double scope_weight_entropy(const scope *sc, uint32_t J, uint32_t l, double *scratch)
{
    uint32_t n = sc->n_touched[l];
    for (uint32_t t = 0; t < n; t++)
        scratch[t] = sc->w[(size_t)l * J + sc->touched[(size_t)l * J + t]];
    return ms_entropy_bits(scratch, n);
}

static void scope_reset(scope *sc, uint32_t L, uint32_t J)
{
    for (uint32_t l = 0; l < L; l++) {
        for (uint32_t t = 0; t < sc->n_touched[l]; t++) {
            size_t i = (size_t)l * J + sc->touched[(size_t)l * J + t];
            sc->c[i] = 0;
            sc->w[i] = 0;
        }
        sc->n_touched[l] = 0;
    }
}

static void entropy_mean_alloc(entropy_mean *m, uint32_t L)
{
    m->h_sum = ms_xcalloc(L, sizeof *m->h_sum);
    m->hw_sum = ms_xcalloc(L, sizeof *m->hw_sum);
    m->h_n = ms_xcalloc(L, sizeof *m->h_n);
    m->hw_n = ms_xcalloc(L, sizeof *m->hw_n);
}

static void entropy_mean_free(entropy_mean *m)
{
    free(m->h_sum);
    free(m->hw_sum);
    free(m->h_n);
    free(m->hw_n);
}

/* Adds the entropies of every layer of a scope that has activations. */
static void entropy_mean_add_scope(entropy_mean *m, const scope *sc, uint32_t L, uint32_t J,
                                   const double *table, double *scratch)
{
    for (uint32_t l = 0; l < L; l++) {
        double h = scope_count_entropy(sc, J, l, table);
        if (!isnan(h)) {
            m->h_sum[l] += h;
            m->h_n[l]++;
        }
        double hw = scope_weight_entropy(sc, J, l, scratch);
        if (!isnan(hw)) {
            m->hw_sum[l] += hw;
            m->hw_n[l]++;
        }
    }
}

static void curve_acc_alloc(curve_acc *c, uint32_t L, uint32_t J)
{
    c->cnt = ms_xcalloc((size_t)L * J, sizeof *c->cnt);
    c->cum_s = ms_xcalloc(L, sizeof *c->cum_s);
    c->cum_n = ms_xcalloc(L, sizeof *c->cum_n);
    c->sum = ms_xcalloc((size_t)L * MS_STATS_CURVE_MAX, sizeof *c->sum);
    c->n = ms_xcalloc((size_t)L * MS_STATS_CURVE_MAX, sizeof *c->n);
}

static void curve_acc_free(curve_acc *c)
{
    free(c->cnt);
    free(c->cum_s);
    free(c->cum_n);
    free(c->sum);
    free(c->n);
}

static void curve_acc_add(curve_acc *c, uint32_t J, uint32_t l, uint32_t e, const double *table)
{
    size_t i = (size_t)l * J + e;
    uint64_t before = c->cnt[i]++;
    c->cum_s[l] += clog2c(table, before + 1) - clog2c(table, before);
    c->cum_n[l]++;
}

/* Adds point i (0-based: after the request's first i+1 iterations). */
static void curve_acc_point(curve_acc *c, uint32_t L, uint32_t i)
{
    if (i >= MS_STATS_CURVE_MAX)
        return;
    c->requests[i]++;
    if (i + 1 > c->len)
        c->len = i + 1;
    for (uint32_t l = 0; l < L; l++) {
        if (!c->cum_n[l])
            continue;
        c->sum[(size_t)l * MS_STATS_CURVE_MAX + i] += count_entropy(c->cum_n[l], c->cum_s[l]);
        c->n[(size_t)l * MS_STATS_CURVE_MAX + i]++;
    }
}

/* Clears the request's counts; req lists every expert the request touched. */
static void curve_acc_reset(curve_acc *c, const scope *req, uint32_t L, uint32_t J)
{
    for (uint32_t l = 0; l < L; l++) {
        for (uint32_t t = 0; t < req->n_touched[l]; t++)
            c->cnt[(size_t)l * J + req->touched[(size_t)l * J + t]] = 0;
        c->cum_s[l] = 0;
        c->cum_n[l] = 0;
    }
}

/* ---------- construction ---------- */

/* Largest J*J*(L-1) co-activation matrix accepted (cells, per matrix; two
 * matrices of 4-byte counts: at most 512 MiB). */
#define MS_STATS_MAX_PAIR_CELLS ((uint64_t)1 << 26)

ms_stats *ms_stats_new(const ms_trace_meta *meta, ms_err *err)
{
    if (!meta) {
        ms_fail(err, "stats: no trace metadata");
        return NULL;
    }
    if (meta->L < 1 || meta->J < 1 || meta->K < 1 || meta->K > meta->J) {
        ms_fail(err, "stats: unusable dimensions L=%u J=%u K=%u (need L, J, K >= 1 and K <= J)",
                meta->L, meta->J, meta->K);
        return NULL;
    }
    uint64_t pair_cells = (uint64_t)(meta->L - 1) * meta->J * meta->J;
    if (pair_cells > MS_STATS_MAX_PAIR_CELLS) {
        ms_fail(err, "stats: L=%u J=%u: co-activation matrices of %llu cells exceed the limit %llu",
                meta->L, meta->J, (unsigned long long)pair_cells,
                (unsigned long long)MS_STATS_MAX_PAIR_CELLS);
        return NULL;
    }
    ms_locality *loc = ms_locality_new(meta->L, meta->J, meta->K, err);
    if (!loc)
        return NULL;
    ms_segment *seg = ms_segment_new(meta->L, meta->J, meta->K, err);
    if (!seg) {
        ms_locality_free(loc);
        return NULL;
    }
    ms_stats *s = ms_xcalloc(1, sizeof *s);
    s->loc = loc;
    s->seg = seg;
    clog2c_fill(s->clog2c);
    uint32_t L = meta->L, J = meta->J, K = meta->K;
    s->L = L;
    s->J = J;
    s->K = K;
    snprintf(s->model_name, sizeof s->model_name, "%s", meta->model_name);
    s->ids_only = meta->probs_kind == MS_PROBS_TOPK_IDS;
    size_t LJ = (size_t)L * J;
    s->activations = ms_xcalloc(L, sizeof *s->activations);
    s->missing = ms_xcalloc(L, sizeof *s->missing);
    scope_alloc(&s->iter, L, J);
    scope_alloc(&s->req, L, J);
    entropy_mean_alloc(&s->iter_h, L);
    entropy_mean_alloc(&s->req_h, L);
    s->trace_c = ms_xcalloc(LJ, sizeof *s->trace_c);
    s->trace_w = ms_xcalloc(LJ, sizeof *s->trace_w);
    curve_acc_alloc(&s->curve_all, L, J);
    curve_acc_alloc(&s->curve_dec, L, J);
    s->last_iter = ms_xcalloc(LJ, sizeof *s->last_iter);
    s->last_decode = ms_xcalloc(LJ, sizeof *s->last_decode);
    s->prev_num = ms_xcalloc(L, sizeof *s->prev_num);
    s->prev_den = ms_xcalloc(L, sizeof *s->prev_den);
    s->win_num = ms_xcalloc(L, sizeof *s->win_num);
    s->half_seen = ms_xcalloc(LJ, sizeof *s->half_seen);
    s->half_num = ms_xcalloc(L, sizeof *s->half_num);
    s->half_den = ms_xcalloc(L, sizeof *s->half_den);
    s->any_num = ms_xcalloc(L, sizeof *s->any_num);
    s->any_den = ms_xcalloc(L, sizeof *s->any_den);
    s->top1_joint = ms_xcalloc((size_t)pair_cells, sizeof *s->top1_joint);
    s->co = ms_xcalloc((size_t)pair_cells, sizeof *s->co);
    s->co_occ = ms_xcalloc((size_t)(L - 1) * J, sizeof *s->co_occ);
    s->row_ids = ms_xcalloc((size_t)L * K, sizeof *s->row_ids);
    s->row_n = ms_xcalloc(L, sizeof *s->row_n);
    s->row_top1 = ms_xcalloc(L, sizeof *s->row_top1);
    s->scratch = ms_xcalloc(J, sizeof *s->scratch);
    return s;
}

/* ---------- validation (before anything is accumulated) ---------- */

static int check_row_cells(const ms_stats *s, const ms_request *req, uint32_t row, ms_err *err)
{
    for (uint32_t l = 0; l < s->L; l++) {
        size_t base = ((size_t)row * s->L + l) * s->K;
        for (uint32_t k = 0; k < s->K; k++) {
            int32_t e = req->topk_ids[base + k];
            float w = req->topk_w[base + k];
            if (e < -1 || e >= (int32_t)s->J)
                return ms_fail(err, "stats: request %llu: topk_ids[row %u][layer %u][slot %u] = %d outside [-1, %u)",
                               (unsigned long long)req->id, row, l, k, e, s->J);
            if (!isfinite(w) || w < 0)
                return ms_fail(err, "stats: request %llu: topk_w[row %u][layer %u][slot %u] = %g is not a finite weight >= 0",
                               (unsigned long long)req->id, row, l, k, (double)w);
            for (uint32_t k2 = 0; e >= 0 && k2 < k; k2++)
                if (req->topk_ids[base + k2] == e)
                    return ms_fail(err, "stats: request %llu: topk_ids[row %u][layer %u]: expert %d in slots %u and %u",
                                   (unsigned long long)req->id, row, l, e, k2, k);
        }
    }
    return 0;
}

static int check_request(const ms_stats *s, const ms_request *req, ms_err *err)
{
    unsigned long long id = (unsigned long long)req->id;
    if (req->n_iters > 0 && !req->iters)
        return ms_fail(err, "stats: request %llu: n_iters = %u but no iterations", id, req->n_iters);
    if (req->n_rows > 0 && (!req->topk_ids || !req->topk_w))
        return ms_fail(err, "stats: request %llu: n_rows = %u but no topk_ids / topk_w", id, req->n_rows);
    for (uint32_t i = 0; i < req->n_iters; i++) {
        const ms_iteration *it = &req->iters[i];
        if (it->phase != MS_PHASE_PREFILL && it->phase != MS_PHASE_DECODE)
            return ms_fail(err, "stats: request %llu: iteration %u: phase = %d is neither prefill nor decode",
                           id, i, (int)it->phase);
        if ((uint64_t)it->row0 + it->n_rows > req->n_rows)
            return ms_fail(err, "stats: request %llu: iteration %u: rows [%u, %llu) outside n_rows = %u", id, i,
                           it->row0, (unsigned long long)it->row0 + it->n_rows, req->n_rows);
    }
    for (uint32_t r = 0; r < req->n_rows; r++)
        if (check_row_cells(s, req, r, err))
            return -1;
    return 0;
}

/* ---------- accumulation ---------- */

/* Collects row r's valid ids per layer into row_ids / row_n / row_top1 and
 * counts missing cells. */
static void gather_row(ms_stats *s, const ms_request *req, uint32_t r)
{
    for (uint32_t l = 0; l < s->L; l++) {
        size_t base = ((size_t)r * s->L + l) * s->K;
        uint32_t n = 0;
        double best_w = -1;
        for (uint32_t k = 0; k < s->K; k++) {
            int32_t e = req->topk_ids[base + k];
            if (e < 0) {
                s->missing[l]++;
                continue;
            }
            s->row_ids[(size_t)l * s->K + n++] = (uint32_t)e;
            if (req->topk_w[base + k] > best_w) { /* strict: lowest slot wins ties */
                best_w = req->topk_w[base + k];
                s->row_top1[l] = (uint32_t)e;
            }
        }
        s->row_n[l] = n;
    }
}

/* Reuse bookkeeping for one activation; only an expert's first activation in
 * an iteration counts (the iteration's set is the union over its rows). */
static void note_reuse(ms_stats *s, uint32_t l, uint32_t e, uint32_t iter1, uint32_t dstep1, int decode)
{
    size_t i = (size_t)l * s->J + e;
    if (s->last_iter[i] == iter1)
        return;
    if (decode) {
        s->any_den[l]++;
        if (s->last_iter[i] != 0)
            s->any_num[l]++;
        if (dstep1 >= 2) {
            s->prev_den[l]++;
            if (s->last_decode[i] == dstep1 - 1)
                s->prev_num[l]++;
            if (s->last_decode[i] != 0 && s->last_decode[i] + MS_STATS_REUSE_WINDOW >= dstep1)
                s->win_num[l]++;
        }
        s->last_decode[i] = dstep1;
    }
    s->last_iter[i] = iter1;
}

static void add_activation(ms_stats *s, uint32_t l, uint32_t e, double w, int decode)
{
    size_t i = (size_t)l * s->J + e;
    curve_acc_add(&s->curve_all, s->J, l, e, s->clog2c);
    if (decode)
        curve_acc_add(&s->curve_dec, s->J, l, e, s->clog2c);
    scope_add(&s->iter, s->J, l, e, w);
    scope_add(&s->req, s->J, l, e, w);
    s->trace_c[i]++;
    s->trace_w[i] += w;
    s->activations[l]++;
}

static void add_layer_pairs(ms_stats *s)
{
    uint32_t J = s->J, K = s->K;
    for (uint32_t p = 0; p + 1 < s->L; p++) {
        uint32_t na = s->row_n[p], nb = s->row_n[p + 1];
        if (!na || !nb)
            continue;
        size_t m = (size_t)p * J * J;
        s->top1_joint[m + (size_t)s->row_top1[p] * J + s->row_top1[p + 1]]++;
        for (uint32_t a = 0; a < na; a++) {
            uint32_t e = s->row_ids[(size_t)p * K + a];
            s->co_occ[(size_t)p * J + e]++;
            for (uint32_t b = 0; b < nb; b++)
                s->co[m + (size_t)e * J + s->row_ids[(size_t)(p + 1) * K + b]]++;
        }
    }
}

static void add_row(ms_stats *s, const ms_request *req, uint32_t r, uint32_t iter1, uint32_t dstep1, int decode)
{
    gather_row(s, req, r);
    for (uint32_t l = 0; l < s->L; l++) {
        size_t base = ((size_t)r * s->L + l) * s->K;
        for (uint32_t k = 0; k < s->K; k++) {
            int32_t e = req->topk_ids[base + k];
            if (e < 0)
                continue;
            add_activation(s, l, (uint32_t)e, req->topk_w[base + k], decode);
            note_reuse(s, l, (uint32_t)e, iter1, dstep1, decode);
        }
    }
    add_layer_pairs(s);
    s->n_rows++;
}

/* Clears the per-request state, touching only what the request set. */
static void end_request(ms_stats *s)
{
    entropy_mean_add_scope(&s->req_h, &s->req, s->L, s->J, s->clog2c, s->scratch);
    for (uint32_t l = 0; l < s->L; l++) {
        for (uint32_t t = 0; t < s->req.n_touched[l]; t++) {
            size_t i = (size_t)l * s->J + s->req.touched[(size_t)l * s->J + t];
            s->last_iter[i] = 0;
            s->last_decode[i] = 0;
        }
    }
    curve_acc_reset(&s->curve_all, &s->req, s->L, s->J);
    curve_acc_reset(&s->curve_dec, &s->req, s->L, s->J);
    scope_reset(&s->req, s->L, s->J);
}

/* reuse_half: activations of the second half of the request's decode steps
 * whose expert was active at that layer in the first half. */
static void add_halves(ms_stats *s, const ms_request *req)
{
    uint32_t n_dec = 0, stamp = (uint32_t)(s->n_requests + 1), L = s->L, J = s->J, K = s->K;
    for (uint32_t i = 0; i < req->n_iters; i++)
        n_dec += req->iters[i].phase == MS_PHASE_DECODE;
    uint32_t half = n_dec / 2, d = 0;
    if (half == 0)
        return;
    for (uint32_t i = 0; i < req->n_iters; i++) {
        const ms_iteration *it = &req->iters[i];
        if (it->phase != MS_PHASE_DECODE)
            continue;
        d++;
        for (uint32_t r = it->row0; r < it->row0 + it->n_rows; r++)
            for (uint32_t l = 0; l < L; l++)
                for (uint32_t k = 0; k < K; k++) {
                    int32_t e = req->topk_ids[((size_t)r * L + l) * K + k];
                    if (e < 0)
                        continue;
                    size_t x = (size_t)l * J + (uint32_t)e;
                    if (d <= half) {
                        s->half_seen[x] = stamp;
                    } else {
                        s->half_den[l]++;
                        s->half_num[l] += s->half_seen[x] == stamp;
                    }
                }
    }
}

int ms_stats_add(ms_stats *s, const ms_request *req, ms_err *err)
{
    if (s->finished)
        return ms_fail(err, "stats: request %llu added after ms_stats_finish", (unsigned long long)req->id);
    if (check_request(s, req, err))
        return -1;
    if (s->n_rows + req->n_rows > UINT32_MAX)
        return ms_fail(err, "stats: request %llu: more than %u token rows in all: co-activation counts would overflow",
                       (unsigned long long)req->id, UINT32_MAX);
    uint32_t dstep = 0;
    for (uint32_t i = 0; i < req->n_iters; i++) {
        const ms_iteration *it = &req->iters[i];
        int decode = it->phase == MS_PHASE_DECODE;
        if (decode)
            dstep++;
        for (uint32_t r = it->row0; r < it->row0 + it->n_rows; r++)
            add_row(s, req, r, i + 1, dstep, decode);
        entropy_mean_add_scope(&s->iter_h, &s->iter, s->L, s->J, s->clog2c, s->scratch);
        scope_reset(&s->iter, s->L, s->J);
        curve_acc_point(&s->curve_all, s->L, i);
        if (decode)
            curve_acc_point(&s->curve_dec, s->L, dstep - 1);
    }
    end_request(s);
    add_halves(s, req);
    ms_locality_add(s->loc, req);
    ms_segment_add(s->seg, req);
    s->n_requests++;
    s->n_iterations += req->n_iters;
    s->n_decode_steps += dstep;
    return 0;
}


void ms_stats_free(ms_stats *s)
{
    if (!s)
        return;
    ms_locality_free(s->loc);
    ms_segment_free(s->seg);
    free(s->activations);
    free(s->missing);
    scope_free(&s->iter);
    scope_free(&s->req);
    entropy_mean_free(&s->iter_h);
    entropy_mean_free(&s->req_h);
    free(s->trace_c);
    free(s->trace_w);
    curve_acc_free(&s->curve_all);
    curve_acc_free(&s->curve_dec);
    free(s->last_iter);
    free(s->last_decode);
    free(s->prev_num);
    free(s->prev_den);
    free(s->win_num);
    free(s->half_seen);
    free(s->half_num);
    free(s->half_den);
    free(s->any_num);
    free(s->any_den);
    free(s->top1_joint);
    free(s->co);
    free(s->co_occ);
    free(s->row_ids);
    free(s->row_n);
    free(s->row_top1);
    free(s->scratch);
    ms_stats_report *rp = &s->rep;
    double *owned[] = {rp->h_iter, rp->h_req, rp->h_trace, rp->hw_iter, rp->hw_req, rp->hw_trace,
                       rp->reuse_prev, rp->reuse_w8, rp->reuse_half, rp->reuse_any, rp->mi_top1, rp->nmi_top1, rp->succ_hit,
                       rp->succ_base, rp->top10_share, rp->topk_share, rp->gini, rp->max_mean,
                       rp->curve.mean, rp->curve.layer, rp->curve_decode.mean, rp->curve_decode.layer};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        free(owned[i]);
    free(rp->curve.requests);
    free(rp->curve_decode.requests);
    free(s);
}
