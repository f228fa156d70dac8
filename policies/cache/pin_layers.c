/* pin-layers: the experts of MoE layers first .. last-1 (last = 0: L) are
 * resident from the start (loaded with the model, free) and never evicted;
 * the experts of the other layers share the remaining slots, least recently
 * used out first.  With `--prefetch layer-stream:ahead=0,layers=N` and first = N it is
 * vLLM's cpu_offload_gb (the first layers' weights copied at every forward,
 * the rest resident); with `--sched cpu-layers:layers=N` it is llama.cpp's
 * --n-cpu-moe N (the first N layers' experts never reach the GPU); with first = 0,
 * last = R and `layer-stream:ahead=0,from=R` it is HF Accelerate's
 * device_map="auto" (the first R layers resident, the rest streamed).  The cache
 * must hold (last - first) x J experts, plus a layer's J for streaming
 * (docs/policies.md "pin-layers"); a pinned expert the preload could not
 * place is loaded on demand and then kept. */
#include <stdlib.h>

#include "policies/policy.h"

typedef struct {
    uint32_t first, last, L, J;
    uint64_t clock, *used; /* [L * J] last insert or access of an unpinned expert, 0 = not cached */
} pin_state;

static int pinned(const pin_state *s, uint32_t l) { return l >= s->first && l < s->last; }

static void *pin_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    uint32_t first = (uint32_t)ms_param_num(p, "first"), last = (uint32_t)ms_param_num(p, "last"), L = env->meta->L;
    if (first > L) {
        ms_fail(err, "first = %u: more than the trace's %u MoE layers", first, L);
        return NULL;
    }
    if (last > L) {
        ms_fail(err, "last = %u: more than the trace's %u MoE layers", last, L);
        return NULL;
    }
    if (last && last < first) {
        ms_fail(err, "last = %u: below first = %u", last, first);
        return NULL;
    }
    pin_state *s = ms_xcalloc(1, sizeof *s);
    *s = (pin_state){.first = first, .last = last ? last : L, .L = L, .J = env->meta->J};
    s->used = ms_xcalloc((size_t)L * s->J, sizeof *s->used);
    return s;
}

static void pin_destroy(void *st)
{
    pin_state *s = st;
    free(s->used);
    free(s);
}

/* Layers first .. last-1, ascending, as far as the capacity goes. */
static uint32_t pin_preload(void *st, const ms_view *v, uint32_t cap, uint32_t *ls, uint32_t *es)
{
    (void)v;
    const pin_state *s = st;
    uint32_t n = 0;
    for (uint32_t l = s->first; l < s->last; l++)
        for (uint32_t e = 0; e < s->J && n < cap; e++, n++) {
            ls[n] = l;
            es[n] = e;
        }
    return n;
}

static void pin_touch(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    pin_state *s = st;
    if (!pinned(s, l))
        s->used[l * s->J + e] = ++s->clock;
}

static void pin_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    pin_state *s = st;
    if (!pinned(s, l))
        s->used[l * s->J + e] = 0;
}

/* The least recently used evictable expert of the unpinned layers. */
static int pin_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    const pin_state *s = st;
    uint64_t best = UINT64_MAX;
    for (uint32_t x = 0; x < s->L * s->J; x++)
        if (s->used[x] && s->used[x] < best && ms_view_evictable(v, x / s->J, x % s->J)) {
            best = s->used[x];
            *l = x / s->J;
            *e = x % s->J;
        }
    return best != UINT64_MAX;
}

static const ms_param_spec pin_params[] = {
    {"first", MS_PARAM_INT, "0", 0, 65536, NULL, "layers first..last-1 are resident and never evicted"},
    {"last", MS_PARAM_INT, "0", 0, 65536, NULL, "end of the resident layers, exclusive (0 = L)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops pin_ops = {
    .create = pin_create, .destroy = pin_destroy, .preload = pin_preload, .on_insert = pin_touch,
    .on_access = pin_touch, .on_evict = pin_evict, .victim = pin_victim,
};
const ms_policy_desc ms_policy_cache_pin_layers = {
    .name = "pin-layers", .kind = MS_KIND_CACHE, .params = pin_params, .cache = &pin_ops,
    .summary = "layers first..last-1 resident (vLLM cpu_offload_gb, llama.cpp --n-cpu-moe, Accelerate device_map); the others LRU",
};
