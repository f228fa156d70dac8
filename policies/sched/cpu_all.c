/* cpu-all: KTransformers' decode placement (kvcache-ai/ktransformers
 * optimize_rules/DeepSeek-V3-Chat.yaml: model.layers.*.mlp.experts ->
 * KTransformersExperts, generate_device "cpu", generate_op KExpertsCPU;
 * attention, gate and shared experts on CUDA).  Every routed expert runs on
 * the host CPU; the dense work (attention, norms, gate, shared experts) stays
 * on the GPU as always.  No expert weight crosses PCIe. */
#include <stdlib.h>

#include "policies/lib/cpu_threads.h"
#include "policies/policy.h"

typedef struct {
    uint32_t threads;
} cpu_all_state;

static void *cpu_all_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    uint32_t threads;
    if (ms_cpu_threads_read(p, env, &threads, err))
        return NULL;
    cpu_all_state *s = ms_xcalloc(1, sizeof *s);
    s->threads = threads;
    return s;
}

static void cpu_all_destroy(void *st)
{
    free(st);
}

static void cpu_all_place(void *st, ms_view *v, uint32_t l, uint32_t n, const ms_act *acts, const uint8_t *cached,
                          uint8_t *on_cpu)
{
    (void)st;
    (void)v;
    (void)l;
    (void)acts;
    (void)cached;
    for (uint32_t i = 0; i < n; i++)
        on_cpu[i] = 1;
}

static uint32_t cpu_all_threads(const void *st)
{
    return ((const cpu_all_state *)st)->threads;
}

static const ms_param_spec cpu_all_params[] = {
    MS_CPU_THREADS_PARAM,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_sched_ops cpu_all_ops = {
    .create = cpu_all_create, .destroy = cpu_all_destroy, .place = cpu_all_place, .cpu_threads = cpu_all_threads,
};
const ms_policy_desc ms_policy_sched_cpu_all = {
    .name = "cpu-all", .kind = MS_KIND_SCHED, .params = cpu_all_params, .sched = &cpu_all_ops,
    .summary = "KTransformers: every routed expert runs on the CPU, dense and shared work on the GPU",
};
