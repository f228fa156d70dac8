/* cpu-layers: llama.cpp's --n-cpu-moe N (PR ggml-org/llama.cpp #15077,
 * common/arg.cpp: the tensor overrides blk.i.ffn_{up,down,gate}_exps ->
 * CPU buffer for i < N).  The routed experts of the first `layers` MoE
 * layers always run on the host CPU (their weights stay in host memory and
 * never cross PCIe); every other layer's experts run on the GPU.  The
 * placement is static and routing-unaware.  For the GPU layers' experts to be
 * resident, as llama.cpp loads them with the model, pair it with
 * `--cache pin-layers:first=N` and a cache of (L - N) x J experts
 * (docs/policies.md "cpu-layers"). */
#include <stdlib.h>

#include "policies/lib/cpu_threads.h"
#include "policies/policy.h"

typedef struct {
    uint32_t layers, threads;
} cpu_layers_state;

static void *cpu_layers_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    uint32_t layers = (uint32_t)ms_param_num(p, "layers"), threads;
    if (layers == 0) {
        ms_fail(err, "layers = 0: give how many of the first MoE layers run their experts on the CPU (1..%u)",
                env->meta->L);
        return NULL;
    }
    if (layers > env->meta->L) {
        ms_fail(err, "layers = %u: more than the trace's %u MoE layers", layers, env->meta->L);
        return NULL;
    }
    if (ms_cpu_threads_read(p, env, &threads, err))
        return NULL;
    cpu_layers_state *s = ms_xcalloc(1, sizeof *s);
    s->layers = layers;
    s->threads = threads;
    return s;
}

static void cpu_layers_destroy(void *st)
{
    free(st);
}

static void cpu_layers_place(void *st, ms_view *v, uint32_t l, uint32_t n, const ms_act *acts,
                             const uint8_t *cached, uint8_t *on_cpu)
{
    (void)v;
    (void)acts;
    (void)cached;
    const cpu_layers_state *s = st;
    for (uint32_t i = 0; i < n; i++)
        on_cpu[i] = l < s->layers;
}

static uint32_t cpu_layers_threads(const void *st)
{
    return ((const cpu_layers_state *)st)->threads;
}

static const ms_param_spec cpu_layers_params[] = {
    {"layers", MS_PARAM_INT, "0", 0, 65536, NULL, "the first N MoE layers' experts run on the CPU (required, >= 1)"},
    MS_CPU_THREADS_PARAM,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_sched_ops cpu_layers_ops = {
    .create = cpu_layers_create, .destroy = cpu_layers_destroy, .place = cpu_layers_place,
    .cpu_threads = cpu_layers_threads,
};
const ms_policy_desc ms_policy_sched_cpu_layers = {
    .name = "cpu-layers", .kind = MS_KIND_SCHED, .params = cpu_layers_params, .sched = &cpu_layers_ops,
    .summary = "llama.cpp --n-cpu-moe N: the first N MoE layers' experts run on the CPU",
};
