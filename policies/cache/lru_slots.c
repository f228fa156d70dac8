/* lru-slots: Mixtral-Offloading's expert cache (seed 001: "Mixtral-Offloading
 * [16] combines a layer-wise speculative expert prefetching and a LRU-based
 * expert cache"; docs/policies.md: "per-layer LRU with `slots` per
 * layer; requested experts marked most-recent before loading").
 *
 * Every layer is its own eviction group of `slots` experts (Mixtral-
 * Offloading: eviction_group = layer, main_size = L x slots):
 *  - preload=1 (default): the model load places experts J-slots..J-1 of every
 *    layer on the GPU, as Mixtral-Offloading's build_model does
 *    (offload = expert_idx < offload_per_layer, offload_per_layer = J-slots);
 *    in each layer the lowest id is the least recent.
 *  - on_gate(l): the layer's requested experts that are cached become most
 *    recent, in activation order, before any load (mark_used before _swap).
 *    A hit needs no further touch (on_access is not used), and a loaded
 *    expert becomes most recent when it takes its slot (swap: move_to_end),
 *    so the order matches Mixtral-Offloading's.
 *  - full(l, e) = layer l already holds `slots` experts; the victim is then the
 *    least recent evictable expert of l (choose_expert_to_evict).
 *
 * Budget: L x slots experts (in bytes: the sum of slots x that layer's expert
 * size) must fit the cache (--cache-experts / --cache-gb).  The policy is not
 * told the budget when it is created, so the check is lazy: when the engine
 * asks for a victim because the budget is exhausted while the incoming
 * expert's layer holds fewer than `slots` experts (and no layer holds more),
 * the budget is below L x slots; victim() then refuses (returns 0), which
 * ends the run with the engine's one-line "GPU expert cache ... raise the
 * cache size" error at the first on-demand load into such a layer (a
 * prefetch into it is dropped).  With preload=1 that happens on the first
 * miss of the first layer the preload could not fill.
 *
 * Approximations (the engine has one H2D copy engine and is not changed):
 *  - "up to min(3, slots, misses) swaps in flight": Mixtral-Offloading
 *    overlaps up to buffer_size-1 = 3 swaps of one layer; here a layer's loads
 *    queue on the single copy engine one after another (so its misses cost
 *    the same total copy time, without the overlap of buffers).
 *  - "each swap also copies the victim GPU->CPU": not modelled; an evicted
 *    expert is dropped (the host keeps its copy).  The D2H copy uses the
 *    other PCIe direction in Mixtral-Offloading, so H2D time is unchanged;
 *    only D2H traffic is missing from the byte counts.
 *  - Mixtral-Offloading waits for an in-flight copy before reusing its slot;
 *    the engine never evicts an expert in flight or one the running layer
 *    needs.  When all of a full layer's experts are such, full() answers 0
 *    and the layer takes one expert over `slots` if the budget has room;
 *    otherwise the least recent evictable expert of another layer makes
 *    room.  A layer over `slots` is brought back first: its least recent
 *    evictable expert is the victim when another layer needs room.
 *
 * mode=code: mixtral-offloading's public code (dvmazur/mixtral-offloading
 * ce545188, src/expert_cache.py, custom_layers.py; docs/policies.md):
 *  - a step takes `unique()` ids: the cached ones (ascending) are marked most
 *    recent first, then the others (ascending) are loaded
 *    (MS_ORDER_HITS_FIRST);
 *  - nothing is protected (MS_PROTECT_NONE): the victim is always the least
 *    recent expert of the incoming expert's own layer, which may be one of
 *    the step's hits or an expert the step loaded earlier (it still
 *    computes: the code captured it before the swap); a layer never holds
 *    more than `slots` and never gives a slot to another layer.
 * The public code has no prefetcher (README: "upcoming"); with one, an
 * expert whose prefetch copy is still in flight is not a victim, and a
 * layer whose experts are all such falls back to the paper-mode rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/expert_list.h"
#include "policies/policy.h"

typedef struct {
    ms_xlist *lru;      /* [L] per-layer recency over expert ids, head = most recent */
    uint64_t *last_use; /* [L*J] tick of the last touch, to compare layers */
    uint64_t tick;
    uint32_t L, J, K, slots;
    int preload, code;
} slots_state;

static void slots_destroy(void *st)
{
    slots_state *s = st;
    for (uint32_t l = 0; l < s->L; l++)
        ms_xlist_free(&s->lru[l]);
    free(s->lru);
    free(s->last_use);
    free(s);
}

static void *slots_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    const ms_trace_meta *m = env->meta;
    uint32_t slots = (uint32_t)ms_param_num(p, "slots"); /* 0: resolved from the budget in preload */
    if (slots != 0 && slots < m->K && !env->surplus_streams) {
        ms_fail(err,
                "slots=%u is below trace %s's top-k K=%u: one token's experts would not fit in a layer (a framework "
                "with surplus = stream runs the rest through a transient buffer)",
                slots, env->trace_path, m->K);
        return NULL;
    }
    if (slots > m->J) {
        ms_fail(err, "slots=%u is above trace %s's J=%u experts per layer", slots, env->trace_path, m->J);
        return NULL;
    }
    slots_state *s = ms_xcalloc(1, sizeof *s);
    s->L = m->L;
    s->J = m->J;
    s->K = m->K;
    s->slots = slots;
    s->preload = (int)ms_param_num(p, "preload");
    s->code = !strcmp(ms_param_str(p, "mode"), "code");
    s->lru = ms_xcalloc(s->L, sizeof *s->lru);
    for (uint32_t l = 0; l < s->L; l++)
        ms_xlist_init(&s->lru[l], s->J);
    s->last_use = ms_xcalloc((size_t)s->L * s->J, sizeof *s->last_use);
    return s;
}

static void touch(slots_state *s, uint32_t l, uint32_t e)
{
    ms_xlist_push_front(&s->lru[l], e);
    s->last_use[(size_t)l * s->J + e] = ++s->tick;
}

/* slots=0: as many per layer as the budget gives every layer (the budget in
 * experts of the largest layer / L), at least K and at most J. */
static void resolve_auto_slots(slots_state *s, const ms_view *v)
{
    if (s->slots != 0)
        return;
    double per_layer = HUGE_VAL;
    for (uint32_t l = 0; l < s->L; l++)
        per_layer = fmin(per_layer, floor(ms_view_capacity_experts(v, l) / s->L));
    s->slots = per_layer < s->K ? s->K : per_layer > s->J ? s->J : (uint32_t)per_layer;
}

/* Mixtral-Offloading's initial placement: experts J-slots..J-1 of each layer.
 * The engine calls this before the replay, so auto slots resolve here. */
static uint32_t slots_preload(void *st, const ms_view *v, uint32_t cap, uint32_t *ls, uint32_t *es)
{
    slots_state *s = st;
    resolve_auto_slots(s, v);
    uint32_t n = 0;
    for (uint32_t l = 0; s->preload && l < s->L; l++)
        for (uint32_t e = s->J - s->slots; e < s->J && n < cap; e++) {
            ls[n] = l;
            es[n++] = e;
        }
    return n;
}

static void slots_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    touch(st, l, e);
}

static void slots_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    slots_state *s = st;
    ms_xlist_remove(&s->lru[l], e);
}

/* "mark_used" of every requested expert before anything is loaded. */
static void slots_gate(void *st, const ms_view *v, uint32_t l)
{
    slots_state *s = st;
    uint32_t n;
    const ms_act *acts = ms_view_activated(v, l, &n);
    for (uint32_t i = 0; i < n; i++)
        if (s->lru[l].in[acts[i].expert])
            touch(s, l, acts[i].expert);
}

static int layer_oldest_evictable(const slots_state *s, const ms_view *v, uint32_t l, uint32_t *e)
{
    for (uint32_t x = s->lru[l].tail; x != MS_NIL; x = s->lru[l].prev[x])
        if (ms_view_evictable(v, l, x)) {
            *e = x;
            return 1;
        }
    return 0;
}

static int layer_has_evictable(const slots_state *s, const ms_view *v, uint32_t l)
{
    uint32_t e;
    return layer_oldest_evictable(s, v, l, &e);
}

/* Least recent evictable expert over the layers other than `skip` (only
 * those above their slots when over_only). */
static int oldest_evictable_elsewhere(const slots_state *s, const ms_view *v, uint32_t skip, int over_only,
                                      uint32_t *l, uint32_t *e)
{
    int found = 0;
    for (uint32_t k = 0; k < s->L; k++) {
        uint32_t x;
        if (k == skip || (over_only && s->lru[k].n <= s->slots) || !layer_oldest_evictable(s, v, k, &x))
            continue;
        if (!found || s->last_use[(size_t)k * s->J + x] < s->last_use[(size_t)*l * s->J + *e]) {
            *l = k;
            *e = x;
            found = 1;
        }
    }
    return found;
}

static int slots_full(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)e;
    slots_state *s = st;
    return s->lru[l].n >= s->slots && layer_has_evictable(s, v, l);
}

static int slots_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    slots_state *s = st;
    uint32_t li, ei;
    if (!ms_view_incoming(v, &li, &ei))
        return 0;
    if (s->lru[li].n >= s->slots && layer_oldest_evictable(s, v, li, e)) {
        *l = li;
        return 1;
    }
    if (oldest_evictable_elsewhere(s, v, li, 1, l, e))
        return 1; /* a layer over its slots gives one back */
    if (s->lru[li].n < s->slots)
        return 0; /* the budget is below L x slots: refuse (see the top of the file) */
    return oldest_evictable_elsewhere(s, v, li, 0, l, e); /* li's slots are all pinned */
}

static void slots_step_rules(const void *st, ms_step_rules *out)
{
    const slots_state *s = st;
    if (s->code) {
        out->order = MS_ORDER_HITS_FIRST;
        out->protect = MS_PROTECT_NONE;
    }
}

static const ms_param_spec slots_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code",
     "paper: activation order, the step's experts kept; code: mixtral-offloading's code (hits then misses, "
     "ascending; the layer's LRU expert is the victim even when the step uses it)"},
    {"slots", MS_PARAM_INT, "0", 0, 65536, NULL,
     "GPU slots per layer (Mixtral-Offloading: J - offload_per_layer; its demo: 8 - 4); 0 = the budget / L, at least "
     "K; L x slots must fit the cache"},
    {"preload", MS_PARAM_INT, "1", 0, 1, NULL,
     "1: experts J-slots..J-1 of every layer resident from the start (Mixtral-Offloading's model load); 0: empty"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops slots_ops = {
    .create = slots_create, .destroy = slots_destroy, .preload = slots_preload, .on_insert = slots_insert,
    .on_evict = slots_evict, .on_gate = slots_gate, .victim = slots_victim,
    .full = slots_full, .step_rules = slots_step_rules,
};
const ms_policy_desc ms_policy_cache_lru_slots = {
    .name = "lru-slots", .kind = MS_KIND_CACHE, .params = slots_params, .cache = &slots_ops,
    .summary = "Mixtral-Offloading: per-layer LRU with `slots` experts per layer",
};
