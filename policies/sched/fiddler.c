/* fiddler: Fiddler-style CPU execution of missed experts.  An activated
 * expert that holds no GPU slot runs on the CPU instead of being copied;
 * cached (hit or in-flight) experts run on the GPU.
 * when=always (docs/policies.md): every miss.  when=faster (Fiddler's latency
 * test): a miss runs on the CPU only when t_cpu(tokens) < t_copy +
 * t_gpu(tokens) on this platform, else it is copied on demand. */
#include <stdlib.h>
#include <string.h>

#include "sim/core/timing.h"
#include "policies/lib/cpu_threads.h"
#include "policies/policy.h"

typedef struct {
    int faster;
    uint32_t threads;
} fiddler_state;

static void *fiddler_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    uint32_t threads;
    if (ms_cpu_threads_read(p, env, &threads, err))
        return NULL;
    fiddler_state *s = ms_xcalloc(1, sizeof *s);
    s->faster = !strcmp(ms_param_str(p, "when"), "faster");
    s->threads = threads;
    return s;
}

static void fiddler_destroy(void *st)
{
    free(st);
}

static int cpu_is_faster(const fiddler_state *s, const ms_view *v, uint32_t l, uint32_t tokens)
{
    const ms_platform *pf = ms_view_platform(v);
    double bytes = ms_view_expert_bytes(v, l), params = ms_view_expert_params(v, l);
    return ms_t_expert_cpu_on(pf, bytes, params, tokens, s->threads, 0.0) <
           ms_t_copy_h2d(pf, bytes) + ms_t_expert_gpu(pf, bytes, params, tokens);
}

static void fiddler_place(void *st, ms_view *v, uint32_t l, uint32_t n, const ms_act *acts, const uint8_t *cached,
                          uint8_t *on_cpu)
{
    fiddler_state *s = st;
    for (uint32_t i = 0; i < n; i++)
        if (!cached[i])
            on_cpu[i] = !s->faster || cpu_is_faster(s, v, l, acts[i].tokens);
}

static uint32_t fiddler_threads(const void *st)
{
    return ((const fiddler_state *)st)->threads;
}

static const ms_param_spec fiddler_params[] = {
    {"when", MS_PARAM_ENUM, "always", 0, 0, "always|faster", "always: every miss on the CPU; faster: only when CPU beats copy + GPU"},
    MS_CPU_THREADS_PARAM,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_sched_ops fiddler_ops = {
    .create = fiddler_create, .destroy = fiddler_destroy, .place = fiddler_place, .cpu_threads = fiddler_threads,
};
const ms_policy_desc ms_policy_sched_fiddler = {
    .name = "fiddler", .kind = MS_KIND_SCHED, .params = fiddler_params, .sched = &fiddler_ops,
    .summary = "Fiddler: a missed expert runs on the CPU instead of being loaded",
};
