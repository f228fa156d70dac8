/* Trace statistics at the end of the pass (stats_parts.h): entropies,
 * reuse, mutual information and successor hits between layers, skew and the
 * curves, from the accumulated counters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "traces/stats/stats_parts.h"

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
        rp->h_iter[l] = st_ratio_or_nan(s->iter_h.h_sum[l], (double)s->iter_h.h_n[l]);
        rp->hw_iter[l] = st_ratio_or_nan(s->iter_h.hw_sum[l], (double)s->iter_h.hw_n[l]);
        rp->h_req[l] = st_ratio_or_nan(s->req_h.h_sum[l], (double)s->req_h.h_n[l]);
        rp->hw_req[l] = st_ratio_or_nan(s->req_h.hw_sum[l], (double)s->req_h.hw_n[l]);
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
        s->rep.reuse_prev[l] = st_ratio_or_nan((double)s->prev_num[l], (double)s->prev_den[l]);
        s->rep.reuse_w8[l] = st_ratio_or_nan((double)s->win_num[l], (double)s->prev_den[l]);
        s->rep.reuse_half[l] = st_ratio_or_nan((double)s->half_num[l], (double)s->half_den[l]);
        s->rep.reuse_any[l] = st_ratio_or_nan((double)s->any_num[l], (double)s->any_den[l]);
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
    *hit = st_ratio_or_nan(num, den);
    *base = st_ratio_or_nan(best_col, den);
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
            double h = st_ratio_or_nan(c->sum[k], (double)c->n[k]);
            out->layer[(size_t)l * c->len + i] = h;
            if (!isnan(h)) {
                sum += h;
                n++;
            }
        }
        out->mean[i] = st_ratio_or_nan(sum, n);
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
    return st_ratio_or_nan(sum, k);
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
    rp->expert_counts = s->trace_c;

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

const struct ms_locality *ms_stats_locality(const ms_stats *s)
{
    return s->loc;
}

const struct ms_segment *ms_stats_segment(const ms_stats *s)
{
    return s->seg;
}
