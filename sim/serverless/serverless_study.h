/* The comparison of seed paper 002's Fig. 14 on a trace, as a library call
 * (`moesim serverless` and `moesim claims` both run it).
 *
 * Requests [0, train) of the trace profile the key-value table, the next
 * bo_split fraction is the BO batch, the rest the test batch (prompt tokens
 * only).  The test batch's real routing is billed under five deployments:
 *   predicted+BO     ODS on the predictions of the table the BO loop
 *                    (multi-epsilon sampler) learnt;
 *   real             ODS on the test batch's real counts (the oracle);
 *   predicted-noBO   ODS on the predictions of the profiled table;
 *   LambdaML         every expert at the platform's LambdaML memory, no
 *                    replicas, indirect (storage) transfer;
 *   CPU-cluster      the platform's CPU cluster, hourly billing.
 * Besides, the prediction error of the three predictors and of the three BO
 * samplers' tables on the test batch (Fig. 10, Fig. 13) and each sampler's
 * test-batch cost.  Deterministic: the BO samplers draw from a seeded RNG. */
#ifndef MS_SERVERLESS_STUDY_H
#define MS_SERVERLESS_STUDY_H

#include <stdint.h>
#include <stdio.h>

#include "sim/core/err.h"
#include "sim/serverless/serverless_cost.h"

enum { MS_SL_DEP_PRED_BO, MS_SL_DEP_REAL, MS_SL_DEP_PRED_NOBO, MS_SL_DEP_LAMBDAML, MS_SL_DEP_CPU, MS_SL_N_DEP };

typedef struct {
    const char *trace;
    const char *profile;    /* serverless platform: a name in sim/profiles/serverless/ or a .ini path */
    const char *model;      /* model profile; NULL: the trace's */
    const char *predictor;  /* "paper", "position" or "lina" */
    double target_s;        /* end-to-end latency target of a plan */
    double train, bo_split; /* fractions of the requests, train + bo_split < 1 */
    unsigned bo_iters, grid;
    unsigned long seed;
    FILE *bo_log;           /* one CSV row per BO iteration (sampler,iter,cost_usd,best_usd), or NULL */
} ms_sl_study_opts;

typedef struct {
    ms_sl_eval dep[MS_SL_N_DEP];  /* the five deployments, billed on the test batch */
    double pred_error[3];         /* paper, position, lina: mean |predicted - real| tokens per expert */
    double bo_pred_error[3];      /* the chosen predictor after BO: multi-eps, single-eps, random */
    double bo_test_cost[3];       /* the test batch's cost planned with each sampler's table */
    size_t test_tokens, train_tokens, table_keys;
    uint64_t test_first, test_last; /* the test batch's requests */
} ms_sl_study;

/* "predicted+BO", "real", "predicted-noBO", "LambdaML", "CPU-cluster". */
const char *ms_sl_dep_name(int dep);
/* "multi-eps", "single-eps", "random". */
const char *ms_sl_sampler_name(int sampler);
/* "paper", "position", "lina". */
const char *ms_sl_predictor_name(int kind);

/* Runs the study; 0, or -1 with err (a trace too small to split, a model
 * whose shape differs from the trace's, no feasible plan). */
int ms_sl_study_run(const ms_sl_study_opts *o, ms_sl_study *s, ms_err *err);

#endif
