/* The timing model: pure functions of a platform profile (docs/engine.md).
 * Seconds and bytes throughout. */
#ifndef MS_TIMING_H
#define MS_TIMING_H

#include "sim/core/profile.h"

/* The larger of a and b (b when they compare equal). */
static inline double ms_t_max2(double a, double b)
{
    return a > b ? a : b;
}
/* The three the simulated timeline asks for every op are inline.
 * One host->device copy of `bytes` from pinned host memory:
 * latency + bytes / bandwidth. */
static inline double ms_t_copy_h2d(const ms_platform *p, double bytes)
{
    return p->h2d_latency_s + bytes / p->h2d_bw;
}
/* The same expert read from SSD first: the SSD read and the H2D copy
 * pipeline in chunks, so the slower of the two sets the pace. */
double ms_t_copy_ssd_h2d(const ms_platform *p, double bytes);
/* Expert FFN on the GPU, a roofline: max(weight bytes / HBM bandwidth,
 * 2 x params x tokens / FLOP/s) + kernel launch. */
static inline double ms_t_expert_gpu(const ms_platform *p, double bytes, double params, double tokens)
{
    return ms_t_max2(bytes / p->hbm_bw, 2.0 * params * tokens / p->gpu_flops) + p->launch_s;
}
/* Non-expert work of one layer (attention, norms, gate, shared experts) over
 * `tokens` token rows, same roofline over the dense weights. */
static inline double ms_t_dense_gpu(const ms_platform *p, double bytes, double params, double tokens)
{
    return ms_t_max2(bytes / p->hbm_bw, 2.0 * params * tokens / p->gpu_flops) + p->launch_s;
}
/* Expert FFN on the host CPU (Fiddler, HybriMoE, llama.cpp --n-cpu-moe,
 * KTransformers), docs/policies.md "CPU expert compute":
 *   max(bytes / dram_bw, 2 x params x tokens / (threads x cpu_flops_per_core))
 *   + bytes / (threads x dequant_bw) + cpu_launch_s
 * bytes are the expert's stored (possibly quantised) bytes: DRAM moves them
 * once; the FLOPs are the unquantised matmuls'.  threads 0 = the platform's
 * cpu_cores.  dequant_bw: bytes per second one thread dequantises (the
 * framework's cpu_dequant_bw), 0 = free (an unquantised expert). */
double ms_t_expert_cpu_on(const ms_platform *p, double bytes, double params, double tokens, uint32_t threads,
                          double dequant_bw);
/* ms_t_expert_cpu_on with every core and no dequantisation. */
double ms_t_expert_cpu(const ms_platform *p, double bytes, double params, double tokens);
/* Whether a GPU op (expert or dense) sits on the memory side of the roofline:
 * bytes / HBM bandwidth >= 2 x params x tokens / FLOP/s. */
int ms_gpu_memory_bound(const ms_platform *p, double bytes, double params, double tokens);

#endif
