/* What the parts of the trace statistics share (internal to
 * traces/stats/stats*.c; the contract is stats.h): stats.c accumulates,
 * stats_finish.c turns the counters into the report, stats_out.c prints it
 * as JSON or a table. */
#ifndef MS_STATS_PARTS_H
#define MS_STATS_PARTS_H

#include <stdint.h>

#include "traces/stats/locality.h"
#include "traces/stats/segment.h"
#include "traces/stats/stats.h"

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

    ms_locality *loc; /* LRU stack distances and reuse distances (locality.h) */
    ms_segment *seg;  /* SRP / SCH (segment.h) */

    ms_stats_report rep;
};


/* stats.c: num / den, NaN when den is 0 */
double st_ratio_or_nan(double num, double den);

#endif
