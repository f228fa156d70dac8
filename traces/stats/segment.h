/* Segment-level routing consistency of a trace: SRP and SCH of "Not All
 * Models Suit Expert Offloading" (Liang et al., arXiv 2505.16056, App. C.1;
 * reference code github ljcleo/moe-lrc src/30_srp_calc.py, 31_srp_refine.py,
 * 41_sch_calc.py, 42_sch_refine.py), computed with the reference code's rules.
 * traces/stats/stats.h owns one; `moesim trace stats` prints it and targets
 * files name it (statistic = srp | sch, traces/stats/targets.h).
 *
 * A sequence is one request's rows in order (prefill rows included, one
 * token per row, as the paper's teacher-forced text); a row's token is the
 * L*K cells (layer, slot) in that order, each valid cell the key
 * l*J + expert (the whole model: every layer's experts in one group).
 * Missing cells (-1) are skipped.
 *
 * SRP(m): for every window of m consecutive rows of a sequence (all start
 * positions, windows wholly inside the sequence) and every key e, f = the
 * rows of the window that chose e.  A segment router with threshold a marks
 * e active on all m rows of every window with f >= a; against the true
 * activations (each window counts its own rows) its F1 is
 *     2 sum_{f >= a} f / (m * #{(window, key): f >= a} + sum f),
 * and SRP is the best F1 over a = 0 .. m, pooled over all sequences.  At
 * model level the reference code sums the per-expert counts before choosing
 * a (31_srp_refine.py `value.sum(dim=1)`), so one threshold serves every
 * expert; this module does the same.  Undefined (NaN) without a window.
 *
 * SCH(m, rho): one cache of C = round(rho * K * L) keys (the model-level
 * "global" cache), empty at each sequence's start.  On row i the row's keys
 * are one access batch: each is a hit when it was cached at the batch start,
 * or when it was never used before in the sequence and fewer than C distinct
 * keys were (a free slot counts as a hit, as calc_fsf counts it); then the
 * keys are served in cell order: a key not cached is loaded, and when the
 * cache is full the cached key with the fewest remaining uses in rows
 * i .. i+m-1 (uses in row i already served not counted) is evicted, ties to
 * the key used longest ago.  SCH is the mean over sequences with an access
 * of hits / accesses (every sequence weighs the same, as pop.mean).
 *
 * Computed for windows m in MS_SEG_WINDOWS and rho in MS_SEG_RHOS (the
 * published points, Tables 1, 2, 8: m = 16 for SRP, rho = 2). */
#ifndef MS_SEGMENT_H
#define MS_SEGMENT_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "sim/core/err.h"
#include "traces/format/trace.h"

#define MS_SEG_N_WINDOWS 4 /* m = 4, 16, 64, 256 */
#define MS_SEG_N_RHOS 1    /* rho = 2 */

typedef struct ms_segment ms_segment;

/* L, J, K >= 1 and L * J <= 2^26; NULL + err otherwise. */
ms_segment *ms_segment_new(uint32_t L, uint32_t J, uint32_t K, ms_err *err);
/* Accumulates one request (already checked: ids in [-1, J), no id twice in
 * a row and layer). */
void ms_segment_add(ms_segment *sg, const ms_request *req);
void ms_segment_free(ms_segment *sg);

/* The computed grid: index of window m / rho, -1 when not computed. */
int ms_segment_window_index(double m);
int ms_segment_rho_index(double rho);
uint32_t ms_segment_window(int i);
double ms_segment_rho(int i);

/* SRP(m) and SCH(m, rho) as fractions 0 .. 1; NaN when undefined or (m, rho)
 * is not in the grid. */
double ms_segment_srp(const ms_segment *sg, uint32_t m);
double ms_segment_sch(const ms_segment *sg, uint32_t m, double rho);

/* {"srp": {"4": f1, ...}, "sch_rho_2": {"4": hit, ...}, ...} (null = NaN). */
cJSON *ms_segment_to_json(const ms_segment *sg);
/* Two readable lines per grid. */
void ms_segment_print(const ms_segment *sg, FILE *out);

/* ---- the two statistics on one sequence of keys (the module's kernels,
 * exposed for tests): keys[T][width], -1 = no access, every key in
 * [0, n_keys), no key twice in a row. ---- */

/* Adds the (window, key) pairs of windows of m rows to hist[f], f = 1 .. m
 * (hist has m + 1 entries; hist[0] untouched) and returns the number of
 * windows (0 when T < m).  cnt: n_keys zeros, left zero. */
uint64_t ms_srp_windows(const int32_t *keys, uint32_t T, uint32_t width, uint32_t m, uint32_t *cnt,
                        uint64_t *hist);
/* SRP from the pooled histogram above: windows W, keys n_keys. */
double ms_srp_from_hist(const uint64_t *hist, uint32_t m, uint64_t windows, uint64_t n_keys);
/* SCH hits of one sequence with a cache of `entries` keys (>= 1) and window
 * m (>= 1); *accesses gets the valid cells. */
uint64_t ms_sch_sequence(const int32_t *keys, uint32_t T, uint32_t width, uint32_t n_keys, uint32_t m,
                         uint64_t entries, uint64_t *accesses);

#endif
