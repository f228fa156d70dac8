/* BO loop of seed paper 002 (Alg. 2): adjusts Q key-value pairs of the
 * profiled table from billed-cost feedback on a BO batch, with decaying
 * multi-dimensional epsilon-greedy search; the single-epsilon and random
 * samplers are the paper's comparisons (Fig. 13).
 *
 * One iteration tau: eps_tau = eps_0 / (1 + rho tau) (line 3); the table is
 * the profiled one with the Q pairs written in (line 4); predict the BO
 * batch, plan with ODS, bill against the batch's real counts (lines 5-28).
 * Feedback (lines 11-21): where |predicted - real| > alpha at an expert the
 * batch's token ids join the limited range L; the first mu Q dimensions'
 * eps is multiplied by (1 + rho' tau), rho' = rho1 when the real load
 * overflows the planned memory, rho2 when it overflows the payload under
 * direct transfer, rho3 otherwise (INTERPRETATION: once per iteration, with
 * the most severe case, not once per expert, which would grow eps without
 * bound; eps is capped at 1).  Next pairs (lines 30-31): per dimension, with
 * probability 1 - eps the pair of the best history entry, else a new pair:
 * dimensions 1..mu Q from L (token features of the BO batch, layers and
 * experts the feedback flagged as under-predicted), the rest from P (any
 * profiled or BO-batch token, layer, expert).  Values are whole numbers in
 * [1, vmax], vmax = 1 + the largest count in the table.  Stops after
 * `iters` iterations or when the best cost moved by less than zeta
 * (relative) over lambda iterations (line 33).  The paper's Gaussian-process
 * surrogate is not modelled: its acquisition is the epsilon-greedy search.
 * All randomness comes from a gsl_rng (mt19937) seeded with `seed`. */
#ifndef MS_SERVERLESS_BO_H
#define MS_SERVERLESS_BO_H

#include <stdio.h>

#include "sim/serverless/serverless_cost.h"
#include "sim/serverless/serverless_predict.h"

typedef enum { MS_SL_BO_MULTI = 0, MS_SL_BO_SINGLE = 1, MS_SL_BO_RANDOM = 2 } ms_sl_sampler;

typedef struct {
    ms_sl_sampler sampler;
    int iters, Q, lambda;
    double mu, eps0, rho, rho1, rho2, rho3, alpha, zeta;
    unsigned long seed;
    int grid;
    double target_s;
} ms_sl_bo_params;

void ms_sl_bo_defaults(ms_sl_bo_params *p);

/* Runs Alg. 2; best receives the table of the cheapest iteration (the
 * profiled table itself when no adjustment beat it).  Writes one CSV row
 * per iteration to log (sampler,iter,cost_usd,best_usd) when log != NULL. */
int ms_sl_bo(const ms_sl_platform *p, const ms_sl_model *m, const ms_sl_table *base, ms_sl_pred_kind kind,
             const ms_sl_batch *batch, const ms_sl_bo_params *bp, ms_sl_table *best, FILE *log, ms_err *err);

/* Billed cost of planning with table t on batch b (predict, ODS, bill on
 * real counts); INFINITY when ODS finds no plan. */
double ms_sl_table_cost(const ms_sl_platform *p, const ms_sl_model *m, const ms_sl_table *t, ms_sl_pred_kind kind,
                        const ms_sl_batch *b, double target_s, int grid, uint32_t *pred, ms_sl_plan *plan);

#endif
