/* The timing model (ms_t_copy_h2d, ms_t_expert_gpu and ms_t_dense_gpu are
 * inline in timing.h). */
#include "sim/core/timing.h"

double ms_t_copy_ssd_h2d(const ms_platform *p, double bytes)
{
    double bw = p->ssd_bw < p->h2d_bw ? p->ssd_bw : p->h2d_bw;
    return p->ssd_latency_s + p->h2d_latency_s + bytes / bw;
}

double ms_t_expert_cpu(const ms_platform *p, double bytes, double params, double tokens)
{
    double flops = p->cpu_flops_per_core * p->cpu_cores;
    return ms_t_max2(bytes / p->dram_bw, 2.0 * params * tokens / flops) + p->cpu_launch_s;
}

int ms_gpu_memory_bound(const ms_platform *p, double bytes, double params, double tokens)
{
    return bytes / p->hbm_bw >= 2.0 * params * tokens / p->gpu_flops;
}
