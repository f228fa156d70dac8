/* Optimal Deployment Selection (seed paper 002, Alg. 1) and the exact
 * per-design subproblem it starts from.
 *
 * Per-design subproblem (problem (12) with a_e fixed for every layer): the
 * paper solves it with Gurobi (MIQCP).  We solve it exactly over the discrete
 * options instead, in two steps:
 *  1. per layer, enumeration: for every threshold on the replicas' largest
 *     t^rep (and, under direct transfer, on the largest per-replica input)
 *     each expert takes its cheapest (memory, replicas) option under the
 *     thresholds; this yields the layer's Pareto set of (latency, cost);
 *  2. across layers, dynamic programming (multiple-choice knapsack) over the
 *     latency budget T^limit - T^head - T^tail - sum T^NE, discretised into
 *     `grid` units with every layer latency rounded UP (so the result always
 *     meets the target; it is optimal among plans whose rounded latencies fit:
 *     exact when latencies are multiples of the unit, within one unit per
 *     layer of slack otherwise).
 *  beta (design 1) is taken from {1, 2, 4, ...} up to and including the
 *  largest expert load (not every integer), the best kept.
 * ODS then mixes designs per layer (cheapest first, dropping the slowest
 * layer's choice while the target is missed, at most 2|E| rounds) and falls
 * back to the cheapest single-design plan, as Alg. 1 lines 18-20 do. */
#ifndef MS_SERVERLESS_ODS_H
#define MS_SERVERLESS_ODS_H

#include "sim/serverless/serverless_cost.h"

typedef struct {
    int feasible[4];        /* per design 1..3: the single-design problem has a solution */
    double design_cost[4];  /* its planned cost */
    int mixed;              /* 1: the mixed plan met the target; 0: fallback to one design */
    int rounds;             /* Alg. 1 iterations used */
    double planned_cost, planned_latency;
} ms_sl_ods_info;

/* Solves problem (12) with every layer on design a, for planned counts d
 * [L*J] of a batch of n_tokens; fills plan, per-layer costs and latencies.
 * Returns 0 when feasible, 1 when no plan meets target_s. */
int ms_sl_solve_design(const ms_sl_platform *p, const ms_sl_model *m, int a, const uint32_t *d, uint64_t n_tokens,
                       double target_s, int grid, ms_sl_plan *plan, double *layer_cost, double *layer_lat);

/* Alg. 1.  Fails with a one-line error naming the target and the fastest
 * achievable latency when no design meets target_s. */
int ms_sl_ods(const ms_sl_platform *p, const ms_sl_model *m, const uint32_t *d, uint64_t n_tokens, double target_s,
              int grid, ms_sl_plan *plan, ms_sl_ods_info *info, ms_err *err);

/* Plan with every expert at mem_mb (which need not be an option: LambdaML's
 * 3008 MB is appended as an extra option index n_mem when absent), one
 * replica, design a everywhere.  The platform copy gets the extra option. */
void ms_sl_fixed_plan(ms_sl_platform *p, double mem_mb, int a, ms_sl_plan *plan);

#endif
