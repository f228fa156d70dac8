/* HybriMoE (seed 003) formulas shared by the `mrs` cache, the `hybrimoe`
 * prefetcher and the `hybrid` scheduler: pure functions, no engine state.
 *
 *  - MRS (Minus Recent Score): S <- alpha * TopP(s) + (1 - alpha) * S.
 *  - HSS (hybrid scheduling strategy), paper form: three simulated timelines
 *    (GPU, CPU, PCIe) advanced earliest-first.
 *  - HSS, public-code form (kTransformers HybriMoE `KExpertsCache.HSS`):
 *    head/tail greedy over a cached-first list with fixed unit costs.
 *  - Impact of a prefetch: the latency it is expected to save. */
#ifndef MS_HYBRIMOE_HSS_H
#define MS_HYBRIMOE_HSS_H

#include <stdint.h>

#include "sim/core/fminmax.h"

/* One MRS step over a layer's J experts, in place:
 *   S[e] <- alpha * TopP(s)[e] + (1 - alpha) * S[e]
 * where TopP keeps the p largest scores of s (ties to the lower id) and
 * zeroes the rest.  order_bug = 1 reproduces the public code's ordering bug:
 * `S[mask] = alpha * topk_values + ...` pairs the top-p VALUES (sorted by
 * score, descending) with the top-p experts sorted by ID (ascending), so the
 * largest score goes to the lowest-id expert of the top-p set. */
void ms_mrs_update(double *S, const float *s, uint32_t J, uint32_t p, double alpha, int order_bug);
/* The same update in float32, as kTransformers' CUDA tensor computes it:
 * S[top] = alpha * s_top + (1 - alpha) * S[top], S[rest] = (1 - alpha) * S[rest],
 * every product and sum rounded to float (unboosted scores reach exactly 0
 * after about 150 halvings, and then tie). */
void ms_mrs_update_f32(float *S, const float *s, uint32_t J, uint32_t p, float alpha, int order_bug);

/* One activated expert as the paper HSS sees it.  Times in any one unit. */
typedef struct {
    double load;   /* tokens routed to it (the paper's "load") */
    int cached;    /* weights hold a GPU slot */
    double ready;  /* cached: when its weights are usable on the GPU (0 = now) */
    double t_gpu;  /* GPU compute time */
    double t_cpu;  /* CPU compute time */
    double t_copy; /* host -> GPU transfer time */
} ms_hss_expert;

typedef struct {
    double link_free; /* when the PCIe timeline can start its first move */
    double cpu_first; /* extra time of the first expert the CPU computes (paper Fig. 3e) */
    int guard;        /* 1: a move or a CPU steal happens only when it finishes that
                         expert earlier than leaving it where it is; 0: never skip */
} ms_hss_opts;

/* Paper HSS (Sec. IV-B).  GPU queue = cached experts by load descending; CPU
 * queue = uncached experts by load ascending.  Repeatedly the timeline that
 * frees first acts (ties: GPU, link, CPU, so that the link can claim the
 * one uncached expert the CPU would otherwise take):
 *   GPU  takes the head of its queue (waiting for its weights if needed);
 *   CPU  takes the head of its queue; when that is empty it takes the
 *        lowest-load expert of the GPU queue ("the CPU may process cached
 *        experts from low to high load when idle");
 *   link moves the highest-load expert of the CPU queue to the GPU, where it
 *        is inserted into the GPU queue by load (after equal loads);
 * until every expert is computed.  With guard, a declined move or steal
 * leaves that timeline idle until another one acts.  Writes on_cpu[n] (1 = CPU) and, when not
 * NULL, moved[n] (1 = transferred by the link); returns the simulated
 * makespan (the later of the GPU's and the CPU's last finish). */
double ms_hss_paper(const ms_hss_expert *x, uint32_t n, const ms_hss_opts *o, uint8_t *on_cpu, uint8_t *moved);

/* The public code's cost model (units of its profiling, not seconds). */
typedef struct {
    double gpu;       /* per expert, any load (0.5) */
    double gpu_first; /* added when the GPU queue is empty (0) */
    double cpu;       /* per token (1.0) */
    double cpu_first; /* added when the CPU queue is empty (0.79) */
    double move;      /* one transfer (0.41791011235117914) */
} ms_hss_code_costs;

/* Code HSS (decode): experts ordered cached-first then uncached, each part by
 * tokens descending (stable); t_gpu(head) = gpu (+ gpu_first when the GPU has
 * nothing yet) plus, for an uncached head, the wait for the link
 * max(0, move_total + move - gpu_total); t_cpu(tail) = cpu x tokens
 * (+ cpu_first when the CPU has nothing yet); the GPU takes the head if
 * gpu_total + t_gpu <= cpu_total + t_cpu, else the CPU takes the tail.
 * Writes on_cpu[n]; returns max(gpu_total, cpu_total). */
double ms_hss_code(const uint32_t *tokens, const uint8_t *cached, uint32_t n, const ms_hss_code_costs *c,
                   uint8_t *on_cpu);

/* Impact-driven prefetch priority: the expected latency a prefetch saves.
 * Without it the expert costs min(t_cpu, t_copy + t_gpu) (the HSS runs it on
 * the CPU or copies it on demand); with it, t_gpu.  Impact =
 * prob x max(0, min(t_cpu, t_copy + t_gpu) - t_gpu). */
static inline double ms_hybrimoe_impact(double prob, double t_cpu, double t_copy, double t_gpu)
{ /* inline: hybrimoe asks it for every candidate of every predicted layer */
    double without = ms_fmin(t_cpu, t_copy + t_gpu);
    return prob * ms_fmax(0.0, without - t_gpu);
}

#endif
