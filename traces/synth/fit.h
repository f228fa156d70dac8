/* Fitting the synthetic generator to a trace (`moesim trace fit`).
 *
 * ms_fit_trace reads a trace (recorded or generated), measures it with the
 * stats module (traces/stats/stats.h) and chooses generator knobs (traces/synth/gen.h)
 * so that `moesim trace gen --params` writes traffic with the same shape:
 *
 *   copied:    model shape (L, J, K, shared experts, hidden size, per-layer
 *              expert and dense bytes), probs kind, embedding size,
 *              speculative depth, token ids, request count;
 *   measured:  per-layer popularity = the trace's activation counts per
 *              expert plus a pseudo-count (1 % of the layer's activations
 *              spread evenly, so an expert never seen keeps a small share);
 *              lengths: prompt / output medians = geometric means, sigmas =
 *              standard deviations of the log lengths (0 for one request), clip
 *              ranges widened to the observed ones; arrival rate = (n-1) / span
 *              (0 for one request or simultaneous arrivals);
 *   searched:  1-D root finding (GSL Brent) on small trial generations with
 *              fixed seeds, so the result is deterministic:
 *                gate_alpha (log scale)  -> mean weighted iteration entropy hw_iter
 *                locality t in [-1, 1]   -> mean previous-step reuse reuse_prev
 *                   (t >= 0: decode_reuse = t, decode_mix = 0.4;
 *                    t < 0: decode_reuse = 0, decode_mix = 0.4 (1 + t))
 *                layer_corr              -> mean top-1 mutual information mi_top1
 *                pref_alpha (log scale)  -> mean request entropy h_req (only with
 *                                           two or more requests)
 *              in `passes` rounds of coordinate search.  A target outside what
 *              a knob can reach gets the nearer end of its range.
 *   one request: clusters = 1 and request_conc = 10^6, so every generated
 *              request follows the source's popularity (more requests are more
 *              samples of the same request, not new topics).
 *
 * Trial generations use seeds seed+1 .. seed+trial_seeds (their statistics
 * averaged); the written params carry `seed` itself, so the twin is a fresh
 * draw, not one the search has seen. */
#ifndef MS_FIT_H
#define MS_FIT_H

#include <stdint.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"
#include "traces/synth/gen.h"
#include "traces/stats/stats.h"

typedef struct {
    uint64_t seed;          /* seed written to the params; trials use seed+1.. (default 1) */
    uint32_t trial_seeds;   /* trial generations averaged per evaluation (default 2) */
    uint32_t passes;        /* rounds of coordinate search (default 2) */
} ms_fit_options;

/* The fitted statistics: means over layers (stats.h definitions). */
typedef struct {
    double hw_iter, h_req, h_trace, reuse_prev, mi_top1, h_iter, gini;
} ms_fit_stats;

typedef struct {
    ms_gen_params p;            /* fitted knobs; p.popularity / layer bytes point below */
    ms_model model;             /* the trace's shape */
    double *popularity;         /* [L][J] */
    uint64_t *expert_bytes, *dense_bytes; /* [L] */
    ms_fit_stats source;        /* measured on the trace */
    ms_fit_stats fitted;        /* mean over the trial seeds at the fitted knobs */
    uint32_t trials;            /* trial generations run */
} ms_fit_result;

void ms_fit_default_options(ms_fit_options *o);
int ms_fit_trace(const char *path, const ms_fit_options *o, ms_fit_result *r, ms_err *err);
/* Writes the params file (traces/synth/gen_params.h) through sim/core/out.h (checked
 * output, a temporary renamed into place; "-" is standard output). */
int ms_fit_write(const ms_fit_result *r, const char *source_path, const char *out_path, ms_err *err);
void ms_fit_free(ms_fit_result *r);

/* Statistics of a trace file / of a generation run (finished; free with
 * ms_stats_free).  NULL + err on failure. */
ms_stats *ms_fit_stats_of_trace(const char *path, ms_err *err);
ms_stats *ms_fit_stats_of_gen(const ms_gen_params *p, const ms_model *model, ms_err *err);
void ms_fit_stats_from_report(const ms_stats_report *rep, ms_fit_stats *out);

#endif
