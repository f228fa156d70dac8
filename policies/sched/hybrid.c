/* hybrid: HybriMoE's hybrid CPU-GPU scheduling strategy, HSS (seed 003,
 * Sec. IV-B).
 *
 * mode=paper: before each layer's experts run, simulate the GPU, CPU and PCIe
 * timelines (ms_hss_paper) with this platform's times: t_gpu / t_cpu from the
 * roofline model at the expert's token count, t_copy = one H2D copy, the link
 * free at ms_view_link_free(), an in-flight (late) expert ready when the link
 * frees; the experts the simulation gives the CPU run there, the rest on the
 * GPU (uncached ones become on-demand copies).  cpu_first adds the paper's
 * slower first CPU expert to the plan (the engine's CPU model has none, so 0).
 * Applies to prefill and decode.
 *
 * mode=code (kTransformers HybriMoE KExpertsCache.HSS / calc_experts): a
 * one-token step (input_tensor.size(0) == 1, experts.py:436: the token
 * count, not the phase: a one-token prefill takes this path, a batched
 * decode does not) runs the head/tail greedy of ms_hss_code with the code's
 * profiled constants; any other step runs every expert on the GPU, as the
 * code does.  The experts come in the cache's order (`mrs:mode=code`: hits,
 * then misses, in topk(sorted=False) order). */
#include <stdlib.h>
#include <string.h>

#include "sim/core/timing.h"
#include "policies/lib/cpu_threads.h"
#include "policies/lib/hybrimoe_hss.h"
#include "policies/policy.h"

typedef struct {
    int code;
    uint32_t threads;
    ms_hss_opts opts;
    ms_hss_code_costs costs;
} hybrid_state;

static void *hybrid_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    uint32_t threads;
    if (ms_cpu_threads_read(p, env, &threads, err))
        return NULL;
    hybrid_state *s = ms_xcalloc(1, sizeof *s);
    s->code = !strcmp(ms_param_str(p, "mode"), "code");
    s->threads = threads;
    s->opts.cpu_first = ms_param_num(p, "cpu_first");
    s->opts.guard = (int)ms_param_num(p, "guard");
    s->costs = (ms_hss_code_costs){
        .gpu = ms_param_num(p, "code_gpu"), .gpu_first = ms_param_num(p, "code_gpu_first"),
        .cpu = ms_param_num(p, "code_cpu"), .cpu_first = ms_param_num(p, "code_cpu_first"),
        .move = ms_param_num(p, "code_move"),
    };
    return s;
}

static void hybrid_destroy(void *st)
{
    free(st);
}

static void place_paper(hybrid_state *s, ms_view *v, uint32_t l, uint32_t n, const ms_act *acts,
                        const uint8_t *cached, uint8_t *on_cpu)
{
    const ms_platform *pf = ms_view_platform(v);
    double bytes = ms_view_expert_bytes(v, l), params = ms_view_expert_params(v, l);
    double now = ms_view_now(v), link = ms_view_link_free(v) - now;
    ms_hss_expert buf[64]; /* a layer's activated experts: on the stack up to 64 */
    ms_hss_expert *x = n > 64 ? ms_xcalloc(n, sizeof *x) : buf;
    double t_copy = ms_t_copy_h2d(pf, bytes), t_gpu = 0, t_cpu = 0;
    for (uint32_t i = 0; i < n; i++) {
        int late = cached[i] && !ms_view_resident(v, l, acts[i].expert);
        if (i == 0 || acts[i].tokens != acts[i - 1].tokens) { /* one-row steps: 1 token each */
            t_gpu = ms_t_expert_gpu(pf, bytes, params, acts[i].tokens);
            t_cpu = ms_t_expert_cpu_on(pf, bytes, params, acts[i].tokens, s->threads, 0.0);
        }
        x[i] = (ms_hss_expert){
            .load = acts[i].tokens, .cached = cached[i], .ready = late ? link : 0.0,
            .t_gpu = t_gpu, .t_cpu = t_cpu, .t_copy = t_copy,
        };
    }
    ms_hss_opts o = s->opts;
    o.link_free = link;
    ms_hss_paper(x, n, &o, on_cpu, NULL);
    if (x != buf)
        free(x);
}

static void place_code(hybrid_state *s, ms_view *v, uint32_t n, const ms_act *acts, const uint8_t *cached,
                       uint8_t *on_cpu)
{
    if (ms_view_batch_rows(v) != 1)
        return; /* calc_experts: a multi-token step runs everything on the GPU */
    uint32_t buf[64]; /* on the stack up to 64 experts, as place_paper's */
    uint32_t *tokens = n > 64 ? ms_xcalloc(n, sizeof *tokens) : buf;
    for (uint32_t i = 0; i < n; i++)
        tokens[i] = acts[i].tokens;
    ms_hss_code(tokens, cached, n, &s->costs, on_cpu);
    if (tokens != buf)
        free(tokens);
}

static void hybrid_place(void *st, ms_view *v, uint32_t l, uint32_t n, const ms_act *acts, const uint8_t *cached,
                         uint8_t *on_cpu)
{
    hybrid_state *s = st;
    if (s->code)
        place_code(s, v, n, acts, cached, on_cpu);
    else
        place_paper(s, v, l, n, acts, cached, on_cpu);
}

static uint32_t hybrid_threads(const void *st)
{
    return ((const hybrid_state *)st)->threads;
}

static const ms_param_spec hybrid_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code", "paper: three-timeline simulation; code: kTransformers head/tail greedy"},
    {"cpu_first", MS_PARAM_DOUBLE, "0", 0, 1e3, NULL, "paper: extra seconds of the first CPU expert in the plan"},
    {"guard", MS_PARAM_INT, "1", 0, 1, NULL, "paper: 1 = skip moves / CPU steals that finish the expert later"},
    {"code_gpu", MS_PARAM_DOUBLE, "0.5", 0, 1e9, NULL, "code: GPU cost per expert"},
    {"code_gpu_first", MS_PARAM_DOUBLE, "0", 0, 1e9, NULL, "code: GPU intercept when its queue is empty"},
    {"code_cpu", MS_PARAM_DOUBLE, "1.0", 0, 1e9, NULL, "code: CPU cost per token"},
    {"code_cpu_first", MS_PARAM_DOUBLE, "0.79", 0, 1e9, NULL, "code: CPU intercept when its queue is empty"},
    {"code_move", MS_PARAM_DOUBLE, "0.41791011235117914", 0, 1e9, NULL, "code: one transfer"},
    MS_CPU_THREADS_PARAM,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_sched_ops hybrid_ops = {
    .create = hybrid_create, .destroy = hybrid_destroy, .place = hybrid_place, .cpu_threads = hybrid_threads,
};
const ms_policy_desc ms_policy_sched_hybrid = {
    .name = "hybrid", .kind = MS_KIND_SCHED, .params = hybrid_params, .sched = &hybrid_ops,
    .summary = "HybriMoE HSS: simulated GPU/CPU/PCIe timelines split a layer's experts",
};
