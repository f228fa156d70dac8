/* The timing model (ms_t_copy_h2d, ms_t_expert_gpu and ms_t_dense_gpu are
 * inline in timing.h). */
#include "sim/core/timing.h"

double ms_t_copy_ssd_h2d(const ms_platform *p, double bytes)
{
    double bw = p->ssd_bw < p->h2d_bw ? p->ssd_bw : p->h2d_bw;
    return p->ssd_latency_s + p->h2d_latency_s + bytes / bw;
}

double ms_t_expert_cpu_on(const ms_platform *p, double bytes, double params, double tokens, uint32_t threads,
                          double dequant_bw)
{
    double n = threads ? (double)threads : (double)p->cpu_cores;
    double t = ms_t_max2(bytes / p->dram_bw, 2.0 * params * tokens / (p->cpu_flops_per_core * n));
    if (dequant_bw > 0)
        t += bytes / (n * dequant_bw);
    return t + p->cpu_launch_s;
}

double ms_t_expert_cpu(const ms_platform *p, double bytes, double params, double tokens)
{
    return ms_t_expert_cpu_on(p, bytes, params, tokens, 0, 0.0);
}

int ms_gpu_memory_bound(const ms_platform *p, double bytes, double params, double tokens)
{
    return bytes / p->hbm_bw >= 2.0 * params * tokens / p->gpu_flops;
}
