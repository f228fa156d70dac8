/* The timing model: pure functions of a platform profile (docs/engine.md).
 * Seconds and bytes throughout. */
#ifndef MS_TIMING_H
#define MS_TIMING_H

#include "sim/core/profile.h"

/* One host->device copy of `bytes` from pinned host memory:
 * latency + bytes / bandwidth. */
double ms_t_copy_h2d(const ms_platform *p, double bytes);
/* The same expert read from SSD first: the SSD read and the H2D copy
 * pipeline in chunks, so the slower of the two sets the pace. */
double ms_t_copy_ssd_h2d(const ms_platform *p, double bytes);
/* Expert FFN on the GPU, a roofline: max(weight bytes / HBM bandwidth,
 * 2 x params x tokens / FLOP/s) + kernel launch. */
double ms_t_expert_gpu(const ms_platform *p, double bytes, double params, double tokens);
/* Non-expert work of one layer (attention, norms, gate, shared experts) over
 * `tokens` token rows, same roofline over the dense weights. */
double ms_t_dense_gpu(const ms_platform *p, double bytes, double params, double tokens);
/* Expert FFN on the host CPU (Fiddler / HybriMoE): roofline over DRAM
 * bandwidth and all cores' FLOP/s, plus a dispatch overhead. */
double ms_t_expert_cpu(const ms_platform *p, double bytes, double params, double tokens);
/* Whether a GPU op (expert or dense) sits on the memory side of the roofline:
 * bytes / HBM bandwidth >= 2 x params x tokens / FLOP/s. */
int ms_gpu_memory_bound(const ms_platform *p, double bytes, double params, double tokens);

#endif
