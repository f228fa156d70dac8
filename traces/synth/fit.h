/* Fitting the synthetic generator to a trace (`moesim trace fit`).
 *
 * ms_fit_trace reads a trace (recorded or generated), measures it with the
 * stats module (traces/stats/stats.h) and chooses generator knobs (traces/synth/gen.h)
 * so that `moesim trace gen --params` writes traffic with the same shape.
 * Every knob is in one of four groups, and the CLI prints which:
 *
 *   copied:    model shape (L, J, K, shared experts, hidden size, per-layer
 *              expert and dense bytes), probs kind, embedding size,
 *              speculative depth, token ids, request count; the request
 *              lengths as a list ([lengths]: request i of the twin has the
 *              lengths of source request i mod n, so a twin of the source's
 *              size has its exact iteration count) when the source has at
 *              most MS_FIT_MAX_LENGTHS requests;
 *   measured:  per-layer popularity of prompt rows ([popularity]) and, for a
 *              one-request trace with both, of decode rows by phase of the
 *              generation ([decode_popularity], [decode_phase2] ..): P phases
 *              of the decode steps (ms_gen_decode_phase; options.decode_phases,
 *              default 2, the halves; at most the decode steps), so a
 *              generation's routing drifts as the source's does (one decode
 *              popularity when a phase has no activations).  Each the
 *              activation counts c plus a pseudo-count a per layer chosen so
 *              that N draws from (c + a) / (N + a J) are expected to touch as
 *              many distinct experts as the source did (N = the layer's
 *              activations in that phase): the empirical distribution alone
 *              would give a twin with fewer distinct experts (a resample
 *              repeats the frequent ones) and so optimistic hit rates;
 *              lognormal lengths: medians = geometric means, sigmas = standard
 *              deviations of the log lengths, clip ranges widened to the
 *              observed ones; arrival rate = (n-1) / span;
 *   measured, repeated tokens (traces/stats/repeats.h): per request, the
 *              period of its decode routing and the probability that a step
 *              repeats the step one period back ([periods], by moments from
 *              the exact-lag reuse profile), when at least one request has a
 *              loop and the source has at most MS_FIT_MAX_LENGTHS requests;
 *   searched:  1-D root finding (GSL Brent) on small trial generations with
 *              fixed seeds, so the result is deterministic, one knob per
 *              statistic (means over layers, stats.h definitions):
 *                gate_alpha (log)   -> request entropy h_req
 *                locality t [-1, 1] -> previous-step reuse reuse_prev
 *                   (t >= 0: decode_reuse = t, decode_mix = 0.4;
 *                    t < 0: decode_reuse = 0, decode_mix = 0.4 (1 + t))
 *                token_repeat       -> cross-request overlap xreq_overlap
 *                   (two or more requests)
 *                token_noise        -> share of whole cross-request repeats
 *                   xreq_exact (when token_repeat > 0)
 *                decode_recall      -> reuse within 8 decode steps reuse_w8
 *                layer_corr         -> layer l -> l+1 top-1 MI mi_top1
 *                weight_power (log) -> weighted iteration entropy hw_iter
 *              in `passes` rounds of coordinate search.  A target outside what
 *              a knob can reach gets the nearer end of its range, and the
 *              knob is reported as at a bound;
 *   estimated by moments (two or more requests): pref_alpha so that
 *              log2 J - E[H(Dirichlet(pref_alpha))] = h_trace - h_req (a 1-D
 *              search on that gap couples with gate_alpha's and diverged);
 *   not fitted (defaults, reported): trans_alpha (succ_hit, its statistic, is
 *              dominated by sample size on small traces), cluster_skew,
 *              request_conc, clusters
 *              (min(8, requests)), balance, embeddings' noise, spec_noise,
 *              token_affinity; with one request also pref_alpha, and
 *              clusters = 1, request_conc = 10^6 (every generated request
 *              follows the source's popularity).
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

#define MS_FIT_DECODE_PHASES 2  /* default decode phases of a one-request source: the halves */
#define MS_FIT_MAX_LENGTHS 4096 /* sources with more requests get lognormal lengths only */

typedef struct {
    uint64_t seed;          /* seed written to the params; trials use seed+1.. (default 1) */
    uint32_t trial_seeds;   /* trial generations averaged per evaluation (default 2) */
    uint32_t passes;        /* rounds of coordinate search (default 2) */
    uint32_t decode_phases; /* decode phases of a one-request source, 1 .. MS_GEN_MAX_PHASES;
                               0 = MS_FIT_DECODE_PHASES; an error on several requests */
} ms_fit_options;

/* The fitted statistics: means over layers (stats.h definitions). */
typedef struct {
    double hw_iter, h_req, h_trace, reuse_prev, reuse_w8, reuse_half, mi_top1, succ_hit, h_iter, gini;
    double xreq;            /* xreq_overlap (traces/stats/repeats.h); NaN when not measured */
    double xreq_exact;      /* xreq_exact (repeats.h); NaN when not measured */
} ms_fit_stats;

/* One searched knob: its name, the statistic it matches and whether the
 * search ended at a bound of its range (target out of reach), or was skipped
 * (nothing to match). */
typedef struct {
    const char *knob, *statistic;
    double value;
    double source_value, fitted_value; /* the statistic: source / twin trials */
    int at_bound;           /* 0 inside, -1 at the low end, +1 at the high end */
    int skipped;            /* 1: no such statistic in the source (e.g. no decode steps) */
    const char *why;        /* reason when skipped */
} ms_fit_knob;

#define MS_FIT_MAX_SEARCHED 12

typedef struct {
    ms_gen_params p;            /* fitted knobs; p.popularity / layer bytes point below */
    ms_model model;             /* the trace's shape */
    double *popularity;         /* [L][J] prompt rows (all rows without decode) */
    double *decode_popularity;  /* [p.decode_phases][L][J] decode rows by phase, or NULL */
    uint32_t *prompt_lens, *output_lens; /* [requests] or NULL */
    uint32_t *periods;          /* [requests] decode routing periods, or NULL (no loop found) */
    double *period_repeats;     /* [requests] their repeat probabilities */
    uint32_t n_loops;           /* requests with a period and a repeat probability > 0 */
    uint64_t *expert_bytes, *dense_bytes; /* [L] */
    double *source_freq;        /* [L][J] the source's activation share of each expert per layer */
    int calibrated;             /* 1: popularity corrected once against trial generations;
                                 * -1: tried and not kept (the shares did not come closer) */
    double calib_tv[2];         /* mean over layers of the total variation distance between the
                                 * twin's and the source's activation shares: before, after */
    ms_fit_stats source;        /* measured on the trace */
    ms_fit_stats fitted;        /* mean over the trial seeds at the fitted knobs */
    ms_fit_knob searched[MS_FIT_MAX_SEARCHED];
    uint32_t n_searched;
    uint32_t trials;            /* trial generations run */
} ms_fit_result;

void ms_fit_default_options(ms_fit_options *o);
int ms_fit_trace(const char *path, const ms_fit_options *o, ms_fit_result *r, ms_err *err);
/* Writes the params file (traces/synth/gen_params.h) through sim/core/out.h (checked
 * output, a temporary renamed into place; "-" is standard output). */
int ms_fit_write(const ms_fit_result *r, const char *source_path, const char *out_path, ms_err *err);
/* Prints what was copied, measured, searched (value, statistic source /
 * fitted, bounds) and not fitted. */
void ms_fit_print(const ms_fit_result *r, FILE *out);
void ms_fit_free(ms_fit_result *r);

/* Statistics of a trace file / of a generation run (finished; free with
 * ms_stats_free).  NULL + err on failure. */
ms_stats *ms_fit_stats_of_trace(const char *path, ms_err *err);
ms_stats *ms_fit_stats_of_gen(const ms_gen_params *p, const ms_model *model, ms_err *err);
void ms_fit_stats_from_report(const ms_stats_report *rep, ms_fit_stats *out);
/* The fitted statistics of a generation run: the stats module's means plus,
 * when with_xreq, xreq_overlap (else NaN); when shares is not NULL, also the
 * run's activation shares into shares[L][J] (ms_fit_expert_shares). */
int ms_fit_measure_gen(const ms_gen_params *p, const ms_model *model, int with_xreq, ms_fit_stats *out,
                       double *shares, ms_err *err);

/* [L][J] each layer's activation counts of a finished report as shares of
 * that layer's activations (0 for a layer without any); caller frees. */
double *ms_fit_expert_shares(const ms_stats_report *rep);

/* Pseudo-count a >= 0 for counts c[0..J) such that N = sum c draws from
 * (c + a) / (N + a J) are expected to touch as many distinct experts as c
 * has non-zero entries (a = 0 when they already would); out gets the
 * smoothed distribution.  Exposed for tests. */
double ms_fit_coverage_smooth(const double *c, uint32_t J, double *out);

#endif
