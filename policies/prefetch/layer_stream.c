/* layer-stream: whole-layer streaming.  When layer l starts, every expert
 * of layers l .. l + ahead that is neither cached nor queued is queued for
 * a copy, in ascending expert id, first come first served (priority 0: the
 * engine's queue is FIFO among equal priorities).  Layers past the last
 * wrap round to the next iteration's first layers.  The requests are
 * whole-layer fetches (ms_policy_desc.whole_layer): they never expire, an
 * expert the layer does not route still crosses PCIe, and the layer's expert
 * compute waits for every copy of the layer, as a whole-module fetch
 * blocks the module's forward.
 *   DeepSpeed ZeRO-3 (PartitionedParameterCoordinator.fetch_sub_module:
 *   fetch the module now needed, prefetch the next modules of the recorded
 *   trace, on a separate stream): ahead=1, copies overlapped.
 *   HF Accelerate (AlignDevicesHook.pre_forward copies the module's every
 *   tensor before its forward): ahead=0 with the framework's copies=sync.
 *   vLLM cpu_offload_gb (maybe_offload_to_cpu: the offloaded parameters of
 *   the first layers are copied to the GPU at every forward): ahead=0,
 *   layers=N with `--cache pin-layers:first=N` (docs/policies.md).
 *   HF Accelerate device_map="auto" (the first R layers on the GPU, the
 *   rest offloaded): ahead=0,from=R with `--cache pin-layers:last=R`.
 * When layer l starts, the previous layer's experts are freed (if it is a
 * streamed one), as the frameworks free a layer's weights after its forward.
 * The cache must hold (ahead + 1) x J experts besides what it keeps
 * resident, or copies find no room and are dropped (prefetch.dropped). */
#include <stdlib.h>

#include "policies/policy.h"

typedef struct {
    uint32_t ahead, from, end, L, J; /* streamed: layers from .. end-1 */
} stream_state;

static int streamed(const stream_state *s, uint32_t l) { return l >= s->from && l < s->end; }

static void *stream_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    uint32_t L = env->meta->L, ahead = (uint32_t)ms_param_num(p, "ahead"), layers = (uint32_t)ms_param_num(p, "layers");
    uint32_t from = (uint32_t)ms_param_num(p, "from");
    if (layers > L) {
        ms_fail(err, "layers = %u: more than the trace's %u MoE layers", layers, L);
        return NULL;
    }
    if (from >= L || (layers && from + layers > L)) {
        ms_fail(err, "from = %u: layers from .. from + layers - 1 (layers = %u) must be within the trace's %u MoE layers",
                from, layers, L);
        return NULL;
    }
    if (ahead >= L) {
        ms_fail(err, "ahead = %u: must be below the trace's %u MoE layers", ahead, L);
        return NULL;
    }
    stream_state *s = ms_xcalloc(1, sizeof *s);
    *s = (stream_state){.ahead = ahead, .from = from, .end = layers ? from + layers : L, .L = L, .J = env->meta->J};
    return s;
}

static void stream_destroy(void *st)
{
    free(st);
}

/* Queues every expert of layer t not cached or queued yet, ascending. */
static void stream_layer(const stream_state *s, ms_view *v, uint32_t t)
{
    for (uint32_t e = 0; e < s->J; e++)
        if (!ms_view_cached(v, t, e) && !ms_view_queued(v, t, e))
            ms_view_prefetch(v, t, e, 0.0);
}

/* The weights of the layer that ran before l are freed after its forward
 * (DeepSpeed releases a module's gathered parameters, Accelerate's
 * post_forward moves them back to "meta", vLLM's copies are temporaries):
 * every expert of a streamed layer is copied again at its next run. */
static void free_layer(const stream_state *s, ms_view *v, uint32_t l)
{
    uint32_t prev = (l + s->L - 1) % s->L;
    if (!streamed(s, prev))
        return;
    for (uint32_t e = 0; e < s->J; e++)
        ms_view_release(v, prev, e);
}

static void stream_layer_start(void *st, ms_view *v, uint32_t l)
{
    const stream_state *s = st;
    free_layer(s, v, l);
    for (uint32_t i = 0; i <= s->ahead; i++) {
        uint32_t t = (l + i) % s->L;
        if (streamed(s, t))
            stream_layer(s, v, t);
    }
}

static const ms_param_spec stream_params[] = {
    {"ahead", MS_PARAM_INT, "1", 0, 4096, NULL, "layers streamed ahead of the running one (0: the running layer only)"},
    {"layers", MS_PARAM_INT, "0", 0, 65536, NULL, "stream only N MoE layers from `from` on (0 = all from `from`)"},
    {"from", MS_PARAM_INT, "0", 0, 65536, NULL, "the first streamed MoE layer"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_prefetch_ops stream_ops = {
    .create = stream_create, .destroy = stream_destroy, .on_layer_start = stream_layer_start,
};
const ms_policy_desc ms_policy_prefetch_layer_stream = {
    .name = "layer-stream", .kind = MS_KIND_PREFETCH, .params = stream_params, .prefetch = &stream_ops,
    .whole_layer = 1,
    .summary = "whole-layer streaming (DeepSpeed ZeRO-3, HF Accelerate, vLLM cpu_offload_gb): every expert of the next layers",
};
