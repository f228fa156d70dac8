/* Trace statistics: entropy, reuse, inter-layer co-activation and popularity
 * skew of expert routing, accumulated in one streaming pass over requests.
 *
 * Usage: s = ms_stats_new(meta, &err); ms_stats_add(s, req, &err) per request
 * (in trace order); ms_stats_finish(s); then read ms_stats_report_get(s),
 * print it or turn it into JSON; ms_stats_free(s).  The core only needs requests in memory, so it
 * works on hand-built requests as well as on a trace reader's output.
 *
 * Definitions (an "activation" is one valid top-k cell: row r, layer l,
 * slot k with id e >= 0; cells with id -1 are missing, skipped and counted):
 *
 * Entropy (bits), per layer, of the distribution p_e = c_e / sum c, where c_e
 * counts the activations of expert e at that layer in a scope (fMoE, Sec. 2.4,
 * Fig. 3b: entropy of expert activations; each token row contributes its K
 * chosen experts).  The weighted variant uses c_e = sum of the router weights
 * topk_w of those cells instead (the gate's preference among the chosen
 * experts).  Scopes:
 *   iteration: one iteration (all its rows); mean over every iteration of the
 *              trace in which the layer has at least one activation.  For a
 *              decode iteration (one row) the count entropy is log2(K) when all
 *              K cells are present: the finest grain is the most predictable.
 *   request:   all rows of one request; mean over requests.
 *   trace:     all rows of the trace (one distribution).
 * h_max = log2(J) is the entropy of a uniform spread over all experts.
 * Entropy curve (Fig. 3c): curve[i-1] = mean over layers of (mean over the
 * requests with at least i iterations of the count entropy of that request's
 * activations in its first i iterations), i = 1..min(longest request,
 * MS_STATS_CURVE_MAX); iteration 1 is the prefill.  The decode curve is the
 * same over decode steps only (prefill left out): it starts at the single-step
 * entropy (log2(K) for one row) and shows how aggregation over steps loses
 * predictability, as in the paper's figure.
 *
 * Reuse (decode iterations only; the set of experts of iteration t at layer l
 * is the union over its rows):
 *   reuse_prev: fraction of (decode step t >= 2, l, e) activations whose e was
 *               also active at l in decode step t-1 of the same request.
 *   reuse_w8:   the same activations as reuse_prev, whose e was active at l in
 *               any of the MS_STATS_REUSE_WINDOW (8) decode steps before t of
 *               the same request (medium-range temporal locality: what an LRU
 *               cache of a few steps' experts keeps).
 *   reuse_half: fraction of the activations of the second half of a request's
 *               decode steps (steps > floor(n/2)) whose e was active at l in
 *               its first half: how well the start of a generation predicts
 *               its end (low = the routing drifts).
 *   reuse_any:  fraction of (decode step t >= 1, l, e) activations whose e was
 *               active at l in any earlier iteration of the request (prefill
 *               included).
 *
 * Inter-layer co-activation, for layer pairs (l, l+1), l = 0..L-2, over the
 * token rows where both layers have at least one activation:
 *   mi_top1:   mutual information (bits) between the top-1 expert (largest
 *              weight, lowest slot on ties) of layer l and that of l+1.
 *   nmi_top1:  2 I(X;Y) / (H(X) + H(Y)) (arithmetic normalisation, 0..1);
 *              1 when both top-1 experts are constant.
 *   succ_hit:  for each expert e of layer l, succ(e) is the expert of l+1
 *              most often active in the same row as e (lowest id on ties);
 *              succ_hit is the fraction of (row, e active at l) pairs whose
 *              row also activates succ(e) at l+1.  An in-sample oracle: succ is
 *              learnt on the same trace.
 *   succ_base: the same fraction for the context-free guess "the expert of
 *              l+1 most often active in those pairs", for comparison.
 *
 * Popularity skew per layer, over the whole-trace counts c_e of all J experts:
 *   top10_share: share of activations of the ceil(J/10) most active experts;
 *   topk_share:  share of the K most active experts;
 *   gini:        Gini coefficient of (c_0..c_{J-1}), 0 = even, (J-1)/J = one
 *                expert takes all;
 *   max_mean:    max c_e / mean c_e.
 *
 * Undefined values (no activations, no decode steps, L = 1) are NaN: "-" in
 * the table, null in JSON.  Means over layers skip NaN. */
#ifndef MS_STATS_H
#define MS_STATS_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "traces/format/trace.h"

#define MS_STATS_CURVE_MAX 256
#define MS_STATS_REUSE_WINDOW 8

typedef struct ms_stats ms_stats;

/* Means over layers (NaN values skipped); all of the per-layer metrics. */
typedef struct {
    double h_iter, h_req, h_trace;
    double hw_iter, hw_req, hw_trace;
    double reuse_prev, reuse_w8, reuse_half, reuse_any;
    double mi_top1, nmi_top1, succ_hit, succ_base;
    double top10_share, topk_share, gini, max_mean;
} ms_stats_means;

/* Entropy through iterations: point i-1 is for the first i iterations. */
typedef struct {
    uint32_t len;        /* points: min(longest request, MS_STATS_CURVE_MAX) */
    double *mean;        /* [len] mean over layers */
    double *layer;       /* [L][len] per layer */
    uint64_t *requests;  /* [len] requests with at least i iterations */
} ms_stats_curve;

/* Filled by ms_stats_finish; arrays owned by the ms_stats. */
typedef struct {
    uint32_t L, J, K;
    uint64_t n_requests, n_iterations, n_decode_steps, n_rows;
    uint64_t activations_total, missing_total;
    uint64_t *activations; /* [L] valid cells */
    uint64_t *missing;     /* [L] cells with id -1 */
    double h_max;          /* log2(J) */
    double *h_iter, *h_req, *h_trace;    /* [L] count entropy (bits) */
    double *hw_iter, *hw_req, *hw_trace; /* [L] weight entropy (bits) */
    double *reuse_prev, *reuse_w8, *reuse_half, *reuse_any; /* [L] */
    uint64_t *reuse_prev_den, *reuse_any_den; /* [L] denominators */
    uint32_t n_pairs;                    /* L - 1 */
    double *mi_top1, *nmi_top1, *succ_hit, *succ_base; /* [L-1], pair (l, l+1) */
    double *top10_share, *topk_share, *gini, *max_mean; /* [L] */
    const uint64_t *expert_counts;       /* [L][J] activations of each expert over the whole trace */
    uint32_t top10_n;                    /* ceil(J/10) */
    ms_stats_curve curve;                /* over all iterations */
    ms_stats_curve curve_decode;         /* over decode steps only */
    ms_stats_means mean;
} ms_stats_report;

/* Dimensions are taken from meta (L, J, K >= 1, K <= J); the request table is
 * not used.  NULL + err on unusable dimensions. */
ms_stats *ms_stats_new(const ms_trace_meta *meta, ms_err *err);
/* Accumulates one request.  Ids must lie in [-1, J), no id twice in one
 * (row, layer), weights finite and >= 0, iterations inside n_rows; otherwise
 * -1 + err naming request, field and value (nothing of it is accumulated). */
int ms_stats_add(ms_stats *s, const ms_request *req, ms_err *err);
/* Computes the report; call once after the last ms_stats_add. */
void ms_stats_finish(ms_stats *s);
/* The report (valid after ms_stats_finish, NULL before). */
const ms_stats_report *ms_stats_report_get(const ms_stats *s);
/* Everything in the report as one JSON object (caller frees with cJSON_Delete). */
cJSON *ms_stats_to_json(const ms_stats *s);
/* The cache-locality statistics (traces/stats/locality.h), complete after
 * ms_stats_finish. */
const struct ms_locality *ms_stats_locality(const ms_stats *s);
/* SRP / SCH (traces/stats/segment.h), complete after ms_stats_add. */
const struct ms_segment *ms_stats_segment(const ms_stats *s);
/* Readable table: one row per layer, then the means over layers. */
void ms_stats_print(const ms_stats *s, FILE *out);
void ms_stats_free(ms_stats *s);

/* Shannon entropy (bits) of weights w[0..n) normalised by their sum; NaN when
 * the sum is 0.  Exposed for tests. */
double ms_entropy_bits(const double *w, uint32_t n);

#endif
