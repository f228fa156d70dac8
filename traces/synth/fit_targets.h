/* Fitting a model's routing knobs to its published locality targets
 * (`moesim trace fit --against MODEL`; docs/generator.md "Per-model
 * routing").
 *
 * Starting from the model's current defaults (ms_gen_model_defaults), the
 * knobs of the routing's reuse are searched together by GSL's Nelder-Mead
 * simplex (gsl_multimin_fminimizer_nmsimplex2) on seeded trial generations
 * measured by the same statistics as `trace stats` and `trace fit`
 * (traces/stats/stats.h, locality.h, targets.h), minimising
 *   sum over targets of ((trial value - target) / tolerance)^2
 * (a target's tolerance in its own units: absolute, or relative x |target|).
 * Searched, each through a map that keeps it inside its range:
 *   pref_alpha       exp(x0), 0.01 .. 100: how concentrated a request's
 *                    experts are (the working set large caches see);
 *   locality t       tanh(x1), -1 .. 1: t >= 0 decode_reuse = t with
 *                    decode_mix 0.4; t < 0 decode_reuse 0, decode_mix
 *                    0.4 (1 + t) (the same map as `trace fit`): reuse of the
 *                    previous step (small caches);
 *   decode_recall    0.95 / (1 + exp(-x2)): reuse a few steps back (middle
 *                    sizes);
 *   pref_drift       0.2 / (1 + exp(-x3)): how fast a request's preference
 *                    moves on (segment cache hits at long windows; a
 *                    profile's 0 starts the search at 0.002).
 * The result is never worse than the start: when the rounded best point
 * costs more than the profile's knobs, those are written again.
 * Trials: trial_seeds generations of trial_requests requests each with
 * seeds seed+1 ..; the same flags give the same result. */
#ifndef MS_FIT_TARGETS_H
#define MS_FIT_TARGETS_H

#include <stdint.h>
#include <stdio.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"
#include "traces/stats/targets.h"
#include "traces/synth/gen.h"

#define MS_FIT_TARGET_KNOBS 4

typedef struct {
    uint64_t seed;            /* trials use seed+1 .. seed+trial_seeds (default 1) */
    uint32_t trial_seeds;     /* generations averaged per evaluation (default 2) */
    uint64_t trial_requests;  /* requests per trial generation (default 16) */
    uint32_t max_evals;       /* objective evaluations at most (default 80) */
} ms_fit_targets_options;

typedef struct {
    ms_gen_params p;                       /* the defaults with the fitted knobs */
    double start_cost, cost;               /* objective at the start / at the result */
    double measured[MS_TARGETS_MAX];       /* trial means at the result */
    double start_measured[MS_TARGETS_MAX]; /* trial means at the start */
    uint32_t evals;                        /* objective evaluations run */
    uint32_t generations;                  /* trial generations run */
} ms_fit_targets_result;

void ms_fit_targets_default_options(ms_fit_targets_options *o);

/* Fits the knobs above for model m to ts (whose model must be m's name).
 * 0, or -1 + err. */
int ms_fit_targets(const ms_model *m, const ms_targets *ts, const ms_fit_targets_options *o,
                   ms_fit_targets_result *r, ms_err *err);

/* The [routing] section and its [source] lines for the profile (every knob
 * the search sets, rounded to 4 significant digits), with the targets
 * against start and result as comments; through sim/core/out.h ("-" =
 * standard output). */
int ms_fit_targets_write(const ms_model *m, const ms_targets *ts, const ms_fit_targets_options *o,
                         const ms_fit_targets_result *r, const char *out_path, ms_err *err);

#endif
