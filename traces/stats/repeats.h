/* Repeated tokens in decode routing: the statistics `moesim trace fit` fits
 * the generator's repeat knobs to (traces/synth/gen_repeat.c).
 *
 * A decode step's activation set S_t is, per layer l, the experts active at l
 * in its rows (as for reuse_prev, traces/stats/stats.h).
 *
 * Period of one request (decode_period, period_repeat): exact-lag reuse
 *   r(d) = sum_t |S_t & S_{t-d}| / sum_t |S_t|   (over layers and the steps t >= d)
 * for d = 2 .. W, W = min(MS_PERIOD_MAX_LAG, decode steps - 1) (lag 1 is
 * previous-step reuse, fitted by the locality knob).  For each candidate P in
 * [2, W/2], M(P) = mean of r(d) over the multiples of P in [2, W] and b(P) =
 * mean over the other lags; the period is the P of the largest contrast
 * M - b among those whose contrast exceeds MS_PERIOD_MIN_Z standard errors,
 * sd(other lags) x sqrt(1/#multiples + 1/#others) (the smallest P on ties;
 * none when no P passes: a peak at one lag of a noisy profile is not a loop;
 * both real traces have none, while without the rule gpt-oss's lag 5 peak,
 * 0.21 against 0.13, was taken for a loop).  A loop that copies step t - P with probability q, chained, gives
 * r(kP) = q^k + (1 - q^k) b, so the repeat probability is the q in [0, 1]
 * with (1/m) sum_{k=1..m} q^k = (M - b) / (1 - b), m = the number of
 * multiples (estimated by moments).
 *
 * Cross-request repeats (token_repeat): over the first MS_XREQ_STEPS
 * decode steps of the trace, each step of a request after the first is
 * compared with every stored step of the earlier requests; xreq_overlap is the
 * mean over such steps of max_j |S_t & S_j| / |S_t| (1 = the step's routing
 * occurred, whole, in an earlier request: the same token again), and
 * xreq_exact the share of those steps whose best overlap is 1 (token_noise:
 * a token repeated in another context comes back near, not whole). */
#ifndef MS_STATS_REPEATS_H
#define MS_STATS_REPEATS_H

#include <stdint.h>

#include "traces/format/trace.h"

#define MS_PERIOD_MAX_LAG 16
#define MS_PERIOD_MIN_Z 2.0 /* the conventional two-standard-error rule */
#define MS_XREQ_STEPS 2048 /* = MS_GEN_TOKEN_POOL, the generator's pool (checked there) */

typedef struct {
    uint32_t period;   /* 0 = no loop */
    double repeat;     /* estimated copy probability (0 without a period) */
    double r_mult, r_other; /* M and b at the period */
} ms_period;

/* The decode routing period of one request (all zero with fewer than 4
 * decode steps). */
void ms_period_of_request(const ms_trace_meta *m, const ms_request *r, ms_period *out);

typedef struct ms_xreq ms_xreq;
ms_xreq *ms_xreq_new(const ms_trace_meta *m);
void ms_xreq_add(ms_xreq *x, const ms_request *r);
/* Mean max overlap; NaN when no step had an earlier request to compare with. */
double ms_xreq_mean(const ms_xreq *x);
/* Share of those steps found whole in an earlier request; NaN as above. */
double ms_xreq_exact(const ms_xreq *x);
void ms_xreq_free(ms_xreq *x);

#endif
