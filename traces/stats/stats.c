/* Trace statistics (definitions in stats.h): one streaming pass; every
 * per-activation update is O(1) and every per-iteration update touches only
 * the experts that iteration activated, so long traces stay cheap. */
#include "traces/stats/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

/* Sparse per-layer counters over J experts: counts, weight sums and the list
 * of experts touched since the last reset (so a reset costs what was added). */
typedef struct {
    uint64_t *c;        /* [L][J] */
    double *w;          /* [L][J] */
    uint32_t *touched;  /* [L][J] expert ids, first n_touched[l] valid */
    uint32_t *n_touched; /* [L] */
} scope;

/* Entropy curve through iterations: a request's running counts with their
 * incremental sum of c log2 c (entropy = log2 n - S / n, O(1) per
 * activation), and per (layer, point) sums over requests. */
typedef struct {
    uint64_t *cnt;   /* [L][J] counts of the current request */
    double *cum_s;   /* [L] sum c log2 c over cnt */
    uint64_t *cum_n; /* [L] sum c */
    double *sum;     /* [L][MS_STATS_CURVE_MAX] */
    uint64_t *n;     /* [L][MS_STATS_CURVE_MAX] */
    uint64_t requests[MS_STATS_CURVE_MAX];
    uint32_t len;
} curve_acc;

/* Running sums whose means are the per-layer entropies of one scope. */
typedef struct {
    double *h_sum, *hw_sum; /* [L] */
    uint64_t *h_n, *hw_n;   /* [L] */
} entropy_mean;

#define CLOG_TABLE 4096u

struct ms_stats {
    uint32_t L, J, K;
    double clog2c[CLOG_TABLE]; /* c log2 c, c < CLOG_TABLE */
    char model_name[MS_NAME_MAX];
    int finished;
    int ids_only; /* probs_kind topk_ids: the weighted entropies are NaN */
    uint64_t n_requests, n_iterations, n_decode_steps, n_rows;
    uint64_t *activations, *missing; /* [L] */

    scope iter, req;
    entropy_mean iter_h, req_h;
    uint64_t *trace_c; /* [L][J] */
    double *trace_w;   /* [L][J] */

    curve_acc curve_all, curve_dec; /* all iterations / decode steps only */

    /* reuse: per (l, e) the iteration (1-based) / decode step (1-based) of
     * its last activation in the current request, 0 = none yet */
    uint32_t *last_iter, *last_decode; /* [L][J] */
    uint64_t *prev_num, *prev_den, *win_num, *any_num, *any_den; /* [L] */
    uint32_t *half_seen; /* [L][J] request stamp (n_requests + 1) of a first-half decode activation */
    uint64_t *half_num, *half_den; /* [L] */

    /* inter-layer, pair p = (p, p+1); 32-bit counts halve the memory of the
     * randomly accessed matrices (ms_stats_add bounds the rows) */
    uint32_t *top1_joint; /* [L-1][J][J] */
    uint32_t *co;         /* [L-1][J][J] co[p][e][f]: rows with e at p and f at p+1 */
    uint64_t *co_occ;     /* [L-1][J] rows with e at p and any activation at p+1 */

    /* one row's valid ids per layer */
    uint32_t *row_ids;   /* [L][K] */
    uint32_t *row_n;     /* [L] */
    uint32_t *row_top1;  /* [L] */
    double *scratch;     /* [J] */

    ms_stats_report rep;
};

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

static double ratio_or_nan(double num, double den)
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
    ms_stats *s = ms_xcalloc(1, sizeof *s);
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
    s->n_requests++;
    s->n_iterations += req->n_iters;
    s->n_decode_steps += dstep;
    return 0;
}

/* ---------- finishing ---------- */

static double *alloc_nan(uint32_t n)
{
    double *v = ms_xcalloc(n, sizeof *v);
    for (uint32_t i = 0; i < n; i++)
        v[i] = NAN;
    return v;
}

static void finish_entropy(ms_stats *s)
{
    ms_stats_report *rp = &s->rep;
    for (uint32_t l = 0; l < s->L; l++) {
        rp->h_iter[l] = ratio_or_nan(s->iter_h.h_sum[l], (double)s->iter_h.h_n[l]);
        rp->hw_iter[l] = ratio_or_nan(s->iter_h.hw_sum[l], (double)s->iter_h.hw_n[l]);
        rp->h_req[l] = ratio_or_nan(s->req_h.h_sum[l], (double)s->req_h.h_n[l]);
        rp->hw_req[l] = ratio_or_nan(s->req_h.hw_sum[l], (double)s->req_h.hw_n[l]);
        if (s->ids_only) /* the 1/K placeholders are not the router's weights */
            rp->hw_iter[l] = rp->hw_req[l] = NAN;
        for (uint32_t e = 0; e < s->J; e++)
            s->scratch[e] = (double)s->trace_c[(size_t)l * s->J + e];
        rp->h_trace[l] = ms_entropy_bits(s->scratch, s->J);
        rp->hw_trace[l] = s->ids_only ? NAN : ms_entropy_bits(s->trace_w + (size_t)l * s->J, s->J);
    }
}

static void finish_reuse(ms_stats *s)
{
    for (uint32_t l = 0; l < s->L; l++) {
        s->rep.reuse_prev[l] = ratio_or_nan((double)s->prev_num[l], (double)s->prev_den[l]);
        s->rep.reuse_w8[l] = ratio_or_nan((double)s->win_num[l], (double)s->prev_den[l]);
        s->rep.reuse_half[l] = ratio_or_nan((double)s->half_num[l], (double)s->half_den[l]);
        s->rep.reuse_any[l] = ratio_or_nan((double)s->any_num[l], (double)s->any_den[l]);
    }
}

/* Mutual information and its arithmetic normalisation from a J x J joint
 * count matrix. */
static void mutual_information(const uint32_t *joint, uint32_t J, double *scratch_x, double *scratch_y,
                               double *mi, double *nmi)
{
    double n = 0;
    memset(scratch_x, 0, J * sizeof *scratch_x);
    memset(scratch_y, 0, J * sizeof *scratch_y);
    for (uint32_t a = 0; a < J; a++)
        for (uint32_t b = 0; b < J; b++) {
            double c = (double)joint[(size_t)a * J + b];
            scratch_x[a] += c;
            scratch_y[b] += c;
            n += c;
        }
    if (!(n > 0)) {
        *mi = *nmi = NAN;
        return;
    }
    double i_xy = 0;
    for (uint32_t a = 0; a < J; a++)
        for (uint32_t b = 0; b < J; b++) {
            double c = (double)joint[(size_t)a * J + b];
            if (c > 0)
                i_xy += c / n * log2(c * n / (scratch_x[a] * scratch_y[b]));
        }
    double hx = ms_entropy_bits(scratch_x, J), hy = ms_entropy_bits(scratch_y, J);
    *mi = i_xy > 0 ? i_xy : 0.0;
    *nmi = hx + hy > 0 ? 2 * *mi / (hx + hy) : 1.0;
    if (*nmi > 1)
        *nmi = 1; /* rounding */
}

/* succ_hit and succ_base of one layer pair (definitions in stats.h). */
static void successor_hits(const uint32_t *co, const uint64_t *occ, uint32_t J, double *colsum,
                           double *hit, double *base)
{
    double den = 0, num = 0;
    memset(colsum, 0, J * sizeof *colsum);
    for (uint32_t e = 0; e < J; e++) {
        const uint32_t *row = co + (size_t)e * J;
        uint32_t best = 0;
        for (uint32_t f = 0; f < J; f++) {
            colsum[f] += (double)row[f];
            if (row[f] > best)
                best = row[f];
        }
        num += (double)best;
        den += (double)occ[e];
    }
    double best_col = 0;
    for (uint32_t f = 0; f < J; f++)
        if (colsum[f] > best_col)
            best_col = colsum[f];
    *hit = ratio_or_nan(num, den);
    *base = ratio_or_nan(best_col, den);
}

static void finish_pairs(ms_stats *s)
{
    uint32_t J = s->J;
    double *y = ms_xcalloc(J, sizeof *y);
    for (uint32_t p = 0; p + 1 < s->L; p++) {
        const uint32_t *joint = s->top1_joint + (size_t)p * J * J;
        mutual_information(joint, J, s->scratch, y, &s->rep.mi_top1[p], &s->rep.nmi_top1[p]);
        successor_hits(s->co + (size_t)p * J * J, s->co_occ + (size_t)p * J, J, s->scratch,
                       &s->rep.succ_hit[p], &s->rep.succ_base[p]);
    }
    free(y);
}

/* Skew of one layer's whole-trace counts, sorted ascending into x. */
static void layer_skew(ms_stats *s, uint32_t l, double *x)
{
    uint32_t J = s->J;
    for (uint32_t e = 0; e < J; e++)
        x[e] = (double)s->trace_c[(size_t)l * J + e];
    gsl_sort(x, 1, J);
    double total = 0, gini_num = 0;
    for (uint32_t i = 0; i < J; i++) {
        total += x[i];
        gini_num += (2.0 * (i + 1) - J - 1) * x[i];
    }
    if (!(total > 0))
        return; /* stays NaN */
    double top10 = 0, topk = 0;
    for (uint32_t i = 0; i < s->rep.top10_n; i++)
        top10 += x[J - 1 - i];
    for (uint32_t i = 0; i < s->K; i++)
        topk += x[J - 1 - i];
    s->rep.top10_share[l] = top10 / total;
    s->rep.topk_share[l] = topk / total;
    s->rep.gini[l] = gini_num / (J * total);
    s->rep.max_mean[l] = gsl_stats_max(x, 1, J) / gsl_stats_mean(x, 1, J);
}

/* Means per point and layer, then over layers (NaN skipped). */
static void finish_curve(const curve_acc *c, uint32_t L, ms_stats_curve *out)
{
    out->len = c->len;
    out->mean = alloc_nan(c->len);
    out->layer = alloc_nan(L * c->len);
    out->requests = ms_xcalloc(c->len, sizeof *out->requests);
    for (uint32_t i = 0; i < c->len; i++) {
        double sum = 0;
        uint32_t n = 0;
        for (uint32_t l = 0; l < L; l++) {
            size_t k = (size_t)l * MS_STATS_CURVE_MAX + i;
            double h = ratio_or_nan(c->sum[k], (double)c->n[k]);
            out->layer[(size_t)l * c->len + i] = h;
            if (!isnan(h)) {
                sum += h;
                n++;
            }
        }
        out->mean[i] = ratio_or_nan(sum, n);
        out->requests[i] = c->requests[i];
    }
}

static double mean_skip_nan(const double *v, uint32_t n)
{
    double sum = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!isnan(v[i])) {
            sum += v[i];
            k++;
        }
    return ratio_or_nan(sum, k);
}

static void finish_means(ms_stats_report *rp)
{
    ms_stats_means *m = &rp->mean;
    uint32_t L = rp->L, P = rp->n_pairs;
    m->h_iter = mean_skip_nan(rp->h_iter, L);
    m->h_req = mean_skip_nan(rp->h_req, L);
    m->h_trace = mean_skip_nan(rp->h_trace, L);
    m->hw_iter = mean_skip_nan(rp->hw_iter, L);
    m->hw_req = mean_skip_nan(rp->hw_req, L);
    m->hw_trace = mean_skip_nan(rp->hw_trace, L);
    m->reuse_prev = mean_skip_nan(rp->reuse_prev, L);
    m->reuse_w8 = mean_skip_nan(rp->reuse_w8, L);
    m->reuse_half = mean_skip_nan(rp->reuse_half, L);
    m->reuse_any = mean_skip_nan(rp->reuse_any, L);
    m->mi_top1 = mean_skip_nan(rp->mi_top1, P);
    m->nmi_top1 = mean_skip_nan(rp->nmi_top1, P);
    m->succ_hit = mean_skip_nan(rp->succ_hit, P);
    m->succ_base = mean_skip_nan(rp->succ_base, P);
    m->top10_share = mean_skip_nan(rp->top10_share, L);
    m->topk_share = mean_skip_nan(rp->topk_share, L);
    m->gini = mean_skip_nan(rp->gini, L);
    m->max_mean = mean_skip_nan(rp->max_mean, L);
}

void ms_stats_finish(ms_stats *s)
{
    if (s->finished)
        return;
    s->finished = 1;
    ms_stats_report *rp = &s->rep;
    uint32_t L = s->L, P = L - 1;
    rp->L = L;
    rp->J = s->J;
    rp->K = s->K;
    rp->n_requests = s->n_requests;
    rp->n_iterations = s->n_iterations;
    rp->n_decode_steps = s->n_decode_steps;
    rp->n_rows = s->n_rows;
    rp->activations = s->activations;
    rp->missing = s->missing;
    for (uint32_t l = 0; l < L; l++) {
        rp->activations_total += s->activations[l];
        rp->missing_total += s->missing[l];
    }
    rp->h_max = log2((double)s->J);
    rp->h_iter = alloc_nan(L);
    rp->h_req = alloc_nan(L);
    rp->h_trace = alloc_nan(L);
    rp->hw_iter = alloc_nan(L);
    rp->hw_req = alloc_nan(L);
    rp->hw_trace = alloc_nan(L);
    rp->reuse_prev = alloc_nan(L);
    rp->reuse_w8 = alloc_nan(L);
    rp->reuse_half = alloc_nan(L);
    rp->reuse_any = alloc_nan(L);
    rp->reuse_prev_den = s->prev_den;
    rp->reuse_any_den = s->any_den;
    rp->n_pairs = P;
    rp->mi_top1 = alloc_nan(P ? P : 1);
    rp->nmi_top1 = alloc_nan(P ? P : 1);
    rp->succ_hit = alloc_nan(P ? P : 1);
    rp->succ_base = alloc_nan(P ? P : 1);
    rp->top10_share = alloc_nan(L);
    rp->topk_share = alloc_nan(L);
    rp->gini = alloc_nan(L);
    rp->max_mean = alloc_nan(L);
    rp->top10_n = (s->J + 9) / 10;

    finish_entropy(s);
    finish_reuse(s);
    finish_pairs(s);
    double *x = ms_xcalloc(s->J, sizeof *x);
    for (uint32_t l = 0; l < L; l++)
        layer_skew(s, l, x);
    free(x);
    finish_curve(&s->curve_all, L, &rp->curve);
    finish_curve(&s->curve_dec, L, &rp->curve_decode);
    finish_means(rp);
}

const ms_stats_report *ms_stats_report_get(const ms_stats *s)
{
    return s && s->finished ? &s->rep : NULL;
}

/* ---------- JSON ---------- */

static cJSON *json_number(double v)
{
    return isnan(v) || isinf(v) ? cJSON_CreateNull() : cJSON_CreateNumber(v);
}

static cJSON *json_doubles(const double *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, json_number(v[i]));
    return a;
}

static cJSON *json_counts(const uint64_t *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

/* One metric: per-layer (or per-pair) array and its mean over layers. */
static void json_metric(cJSON *per, cJSON *mean, const char *name, const double *v, uint32_t n, double m)
{
    cJSON_AddItemToObject(per, name, json_doubles(v, n));
    cJSON_AddItemToObject(mean, name, json_number(m));
}

static cJSON *json_curve(const ms_stats_curve *c, uint32_t L)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "cap", MS_STATS_CURVE_MAX);
    cJSON_AddItemToObject(o, "mean", json_doubles(c->mean, c->len));
    cJSON_AddItemToObject(o, "requests", json_counts(c->requests, c->len));
    cJSON *layers = cJSON_AddArrayToObject(o, "per_layer");
    for (uint32_t l = 0; l < L; l++)
        cJSON_AddItemToArray(layers, json_doubles(c->layer + (size_t)l * c->len, c->len));
    return o;
}

cJSON *ms_stats_to_json(const ms_stats *s)
{
    const ms_stats_report *rp = ms_stats_report_get(s);
    if (!rp)
        return NULL;
    const ms_stats_means *m = &rp->mean;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON_AddNumberToObject(o, "L", rp->L);
    cJSON_AddNumberToObject(o, "J", rp->J);
    cJSON_AddNumberToObject(o, "K", rp->K);
    cJSON_AddNumberToObject(o, "requests", (double)rp->n_requests);
    cJSON_AddNumberToObject(o, "iterations", (double)rp->n_iterations);
    cJSON_AddNumberToObject(o, "decode_steps", (double)rp->n_decode_steps);
    cJSON_AddNumberToObject(o, "rows", (double)rp->n_rows);
    cJSON_AddNumberToObject(o, "activations", (double)rp->activations_total);
    cJSON_AddNumberToObject(o, "missing_cells", (double)rp->missing_total);
    cJSON_AddNumberToObject(o, "entropy_max", rp->h_max);
    cJSON_AddNumberToObject(o, "top10_experts", rp->top10_n);

    cJSON *per = cJSON_AddObjectToObject(o, "per_layer");
    cJSON *mean = cJSON_AddObjectToObject(o, "mean");
    cJSON_AddItemToObject(per, "activations", json_counts(rp->activations, rp->L));
    cJSON_AddItemToObject(per, "missing_cells", json_counts(rp->missing, rp->L));
    json_metric(per, mean, "entropy_iteration", rp->h_iter, rp->L, m->h_iter);
    json_metric(per, mean, "entropy_request", rp->h_req, rp->L, m->h_req);
    json_metric(per, mean, "entropy_trace", rp->h_trace, rp->L, m->h_trace);
    json_metric(per, mean, "entropy_weighted_iteration", rp->hw_iter, rp->L, m->hw_iter);
    json_metric(per, mean, "entropy_weighted_request", rp->hw_req, rp->L, m->hw_req);
    json_metric(per, mean, "entropy_weighted_trace", rp->hw_trace, rp->L, m->hw_trace);
    json_metric(per, mean, "reuse_prev_step", rp->reuse_prev, rp->L, m->reuse_prev);
    json_metric(per, mean, "reuse_last_8_steps", rp->reuse_w8, rp->L, m->reuse_w8);
    json_metric(per, mean, "reuse_second_half", rp->reuse_half, rp->L, m->reuse_half);
    json_metric(per, mean, "reuse_any_earlier", rp->reuse_any, rp->L, m->reuse_any);
    json_metric(per, mean, "top10_share", rp->top10_share, rp->L, m->top10_share);
    json_metric(per, mean, "topk_share", rp->topk_share, rp->L, m->topk_share);
    json_metric(per, mean, "gini", rp->gini, rp->L, m->gini);
    json_metric(per, mean, "max_mean_ratio", rp->max_mean, rp->L, m->max_mean);

    cJSON *pairs = cJSON_AddObjectToObject(o, "layer_pairs");
    json_metric(pairs, mean, "mi_top1", rp->mi_top1, rp->n_pairs, m->mi_top1);
    json_metric(pairs, mean, "nmi_top1", rp->nmi_top1, rp->n_pairs, m->nmi_top1);
    json_metric(pairs, mean, "successor_hit", rp->succ_hit, rp->n_pairs, m->succ_hit);
    json_metric(pairs, mean, "successor_baseline", rp->succ_base, rp->n_pairs, m->succ_base);

    cJSON_AddItemToObject(o, "entropy_curve", json_curve(&rp->curve, rp->L));
    cJSON_AddItemToObject(o, "entropy_curve_decode", json_curve(&rp->curve_decode, rp->L));
    return o;
}

/* ---------- table ---------- */

static void print_cell(FILE *out, double v, int width, int prec)
{
    if (isnan(v))
        fprintf(out, " %*s", width, "-");
    else
        fprintf(out, " %*.*f", width, prec, v);
}

static void print_header(FILE *out)
{
    fprintf(out, "%5s %8s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s\n",
            "layer", "acts", "miss", "H_it", "H_req", "H_tr", "Hw_it", "Hw_req", "Hw_tr", "reuseP", "reuseA",
            "MI1", "NMI1", "succ", "base", "top10%", "topK", "gini", "max/mn");
}

static void print_metrics(FILE *out, const double *v, int n)
{
    for (int i = 0; i < n; i++)
        print_cell(out, v[i], 6, 3);
    fputc('\n', out);
}

/* Points i = 1, 2, 4, ... and the last one. */
static void print_curve(FILE *out, const char *label, const ms_stats_curve *c)
{
    fprintf(out, "%s:", label);
    for (uint32_t i = 1; i <= c->len; i *= 2)
        fprintf(out, " i=%u %.3f", i, c->mean[i - 1]);
    if (c->len && (c->len & (c->len - 1)))
        fprintf(out, " i=%u %.3f", c->len, c->mean[c->len - 1]);
    if (!c->len)
        fprintf(out, " -");
    fputc('\n', out);
}

void ms_stats_print(const ms_stats *s, FILE *out)
{
    const ms_stats_report *rp = ms_stats_report_get(s);
    if (!rp)
        return;
    fprintf(out, "model %s: L=%u J=%u K=%u; %llu requests, %llu iterations (%llu decode), %llu rows\n",
            s->model_name[0] ? s->model_name : "(unnamed)", rp->L, rp->J, rp->K,
            (unsigned long long)rp->n_requests, (unsigned long long)rp->n_iterations,
            (unsigned long long)rp->n_decode_steps, (unsigned long long)rp->n_rows);
    fprintf(out, "entropy in bits (max log2(J) = %.3f); H = activation counts, Hw = router weights;\n"
                 "MI1/NMI1/succ/base compare layer l with l+1; top10%% = share of the top %u experts\n\n",
            rp->h_max, rp->top10_n);
    print_header(out);
    for (uint32_t l = 0; l < rp->L; l++) {
        int has_pair = l < rp->n_pairs;
        double v[] = {rp->h_iter[l], rp->h_req[l], rp->h_trace[l], rp->hw_iter[l], rp->hw_req[l],
                      rp->hw_trace[l], rp->reuse_prev[l], rp->reuse_any[l],
                      has_pair ? rp->mi_top1[l] : NAN, has_pair ? rp->nmi_top1[l] : NAN,
                      has_pair ? rp->succ_hit[l] : NAN, has_pair ? rp->succ_base[l] : NAN,
                      rp->top10_share[l], rp->topk_share[l], rp->gini[l], rp->max_mean[l]};
        fprintf(out, "%5u %8llu %6llu", l, (unsigned long long)rp->activations[l],
                (unsigned long long)rp->missing[l]);
        print_metrics(out, v, (int)(sizeof v / sizeof v[0]));
    }
    const ms_stats_means *m = &rp->mean;
    double v[] = {m->h_iter, m->h_req, m->h_trace, m->hw_iter, m->hw_req, m->hw_trace, m->reuse_prev,
                  m->reuse_any, m->mi_top1, m->nmi_top1, m->succ_hit, m->succ_base, m->top10_share,
                  m->topk_share, m->gini, m->max_mean};
    fprintf(out, "%5s %8llu %6llu", "mean", (unsigned long long)rp->activations_total,
            (unsigned long long)rp->missing_total);
    print_metrics(out, v, (int)(sizeof v / sizeof v[0]));

    fprintf(out, "\nmean over layers: entropy iteration %.3f, request %.3f, trace %.3f bits (max %.3f)\n",
            m->h_iter, m->h_req, m->h_trace, rp->h_max);
    fprintf(out, "reuse: previous decode step %.3f, any earlier iteration %.3f, last %d decode steps %.3f, "
                 "second half of the decode steps from the first %.3f\n",
            m->reuse_prev, m->reuse_any, MS_STATS_REUSE_WINDOW, m->reuse_w8, m->reuse_half);
    fprintf(out, "layer l -> l+1: top-1 MI %.3f bits, NMI %.3f; most frequent successor hit %.3f (baseline %.3f)\n",
            m->mi_top1, m->nmi_top1, m->succ_hit, m->succ_base);
    fprintf(out, "skew: top 10%% (%u experts) share %.3f, top K (%u) share %.3f, gini %.3f, max/mean %.3f\n", rp->top10_n,
            m->top10_share, rp->K, m->topk_share, m->gini, m->max_mean);
    fprintf(out, "missing cells: %llu of %llu (%.2f%%)\n", (unsigned long long)rp->missing_total,
            (unsigned long long)(rp->missing_total + rp->activations_total),
            rp->missing_total + rp->activations_total
                ? 100.0 * (double)rp->missing_total / (double)(rp->missing_total + rp->activations_total)
                : 0.0);
    fprintf(out, "entropy of a request's first i iterations (mean over requests, then layers):\n");
    print_curve(out, "  all iterations (i=1 prefill)", &rp->curve);
    print_curve(out, "  decode steps only", &rp->curve_decode);
}

void ms_stats_free(ms_stats *s)
{
    if (!s)
        return;
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
