/* Time and billed-cost model of serverless MoE layers (seed paper 002,
 * Sec. III-C/III-D, equations (3)-(11)); one function per expert replica.
 *
 * The paper's equations were extracted from a PDF and are partly garbled;
 * serverless_cost.c quotes each one as read and marks every interpretation.
 * Designs (a_e): 1 = pipelined indirect transfer through external storage
 * with pipeline degree beta, 2 = non-pipelined indirect, 3 = direct
 * invocation (payload-limited).  Token counts are per MoE layer and expert
 * for one batch; an expert that receives no token is not invoked and costs
 * nothing (s_{e,i} = 0 in eq. (4)). */
#ifndef MS_SERVERLESS_COST_H
#define MS_SERVERLESS_COST_H

#include <stdint.h>

#include "sim/serverless/serverless_platform.h"

enum { MS_SL_PIPE = 1, MS_SL_INDIRECT = 2, MS_SL_DIRECT = 3 };

/* Shape of the MoE model as the cost model needs it. */
typedef struct {
    uint32_t L, J, K;
    double expert_bytes;     /* P_{e,i}: parameters of one expert (bytes) */
    double expert_flops;     /* FLOPs of one token through one expert */
    double dense_bytes;      /* non-MoE layer parameters (bytes) */
    double dense_flops;      /* FLOPs of one token through one non-MoE layer */
    double token_bytes;      /* D^in = D^o: one token's activation */
} ms_sl_model;

/* One expert's deployment: memory option index and replica count g. */
typedef struct {
    uint8_t mem;
    uint8_t g;
} ms_sl_cfg;

typedef struct {
    uint32_t L, J;
    uint32_t beta;   /* pipeline degree (design 1 only) */
    uint8_t *a;      /* [L] design per layer */
    ms_sl_cfg *cfg;  /* [L*J] */
} ms_sl_plan;

void ms_sl_plan_alloc(ms_sl_plan *p, uint32_t L, uint32_t J);
void ms_sl_plan_free(ms_sl_plan *p);
void ms_sl_plan_copy(ms_sl_plan *dst, const ms_sl_plan *src);

/* ---- per-expert formulas ---- */
double ms_sl_tcal(const ms_sl_platform *p, const ms_sl_model *m, double mem_mb);           /* eq. (3), U_j */
double ms_sl_head(const ms_sl_platform *p, const ms_sl_model *m);                          /* T^{h,E} */
uint32_t ms_sl_per_replica(uint32_t d, uint32_t g);                                        /* r = ceil(d/g) */
/* One replica's execution time t^rep_{a,e,i} for r tokens (eqs. (6), (8), (10)). */
double ms_sl_rep_time(const ms_sl_platform *p, const ms_sl_model *m, int a, double mem_mb, uint32_t r, uint32_t beta);
/* Constraint (12c): P + M^itrm + r (D^in + D^o) <= M_j. */
int ms_sl_fits_memory(const ms_sl_platform *p, const ms_sl_model *m, double mem_mb, uint32_t r);
/* Constraint (12f): direct transfer needs r D^in <= D^p. */
int ms_sl_fits_payload(const ms_sl_platform *p, const ms_sl_model *m, uint32_t r);
/* Billed cost (USD) of all g replicas of one expert: g t^rep M_j price (eqs. (4)-(5)). */
double ms_sl_expert_cost(const ms_sl_platform *p, double mem_mb, uint32_t g, double t_rep);

/* ---- layer and model ---- */
/* T^load: start the next non-MoE function and download its parameters. */
double ms_sl_load_time(const ms_sl_platform *p, const ms_sl_model *m);
/* T^NE: one non-MoE layer (plus gate) on n tokens, in a nonmoe_mb function. */
double ms_sl_nonmoe_time(const ms_sl_platform *p, const ms_sl_model *m, uint64_t n_tokens);
/* T^head + T^tail + sum_e T^NE_e: the latency outside the MoE layers. */
double ms_sl_fixed_latency(const ms_sl_platform *p, const ms_sl_model *m, uint64_t n_tokens);
/* MoE-E2E latency of one layer (eqs. (7), (9), (11)) from the replicas'
 * largest t^rep, largest per-replica input, and the layer's total tokens. */
double ms_sl_layer_latency(const ms_sl_platform *p, const ms_sl_model *m, int a, double max_rep, uint32_t max_r,
                           uint64_t layer_tokens);

typedef struct {
    double cost;       /* USD, all MoE layers */
    double latency;    /* s, end to end (12d left-hand side) */
    double moe_latency;/* s, sum of MoE-E2E latencies */
    uint64_t tokens;   /* tokens in the batch */
    uint32_t fixes;    /* experts whose replicas had to grow at serving time */
} ms_sl_eval;

/* Bills a plan against token counts d [L*J] of a batch of n_tokens tokens.
 * Where the counts overflow an expert's memory (12c) or, under direct
 * transfer, the payload (12f), the expert is replicated at serving time as
 * Alg. 2 lines 13-16 do (g grows to the smallest count that fits, up to
 * 64 * G; beyond that the evaluation fails).  fixes counts such experts. */
int ms_sl_evaluate(const ms_sl_platform *p, const ms_sl_model *m, const ms_sl_plan *plan, const uint32_t *d,
                   uint64_t n_tokens, ms_sl_eval *out, ms_err *err);

/* CPU-cluster baseline: every expert of a layer runs concurrently on the
 * cluster's vCPUs; cost = price x (run time rounded up to the billing
 * period) x the MoE layers' share of the run time. */
void ms_sl_cluster(const ms_sl_platform *p, const ms_sl_model *m, const uint32_t *d, uint64_t n_tokens,
                   ms_sl_eval *out);

#endif
