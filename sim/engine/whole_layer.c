/* Whole-layer fetches (ms_policy_desc.whole_layer; docs/policies.md
 * "layer-stream"): a framework that fetches a layer's every parameter before
 * the layer's forward (DeepSpeed ZeRO-3 fetch_sub_module blocks on the
 * module's parameters; HF Accelerate's pre_forward hook; vLLM's offloaded
 * state_dict) moves the bytes of experts the layer does not route and starts
 * its compute only when all have arrived.  The prefetcher's requests never
 * expire (loop.c); here, at layer l's gate, after its on-demand loads, the
 * requests still queued for layer l start in expert order ahead of every
 * other prefetch, and the layer's expert compute waits for the last copy of
 * its experts (ready or in flight). */
#include <math.h>

#include "sim/engine/state.h"

int eng_whole_layer_wait(ms_view *v, uint32_t l, double *t_exp)
{
    if (v->G > 1) {
        v->failed = 1;
        return ms_fail(v->err, "prefetch policy '%s' fetches whole layers, which runs on one GPU (this run has %u)",
                       v->pf->name, v->G);
    }
    double ready = *t_exp;
    for (uint32_t x = l * v->J; x < (l + 1) * v->J && !v->failed; x++) {
        if (v->queued[x])
            eng_start_queued(v, x);
        if (v->cached[x] && isfinite(v->ready_t[x]) && v->ready_t[x] > ready)
            ready = v->ready_t[x];
    }
    *t_exp = ready;
    return v->failed ? -1 : 0;
}
