/* neighbor: ZeRO-Infinity's neighbor-aware cache as MoE-Infinity evaluates
 * it (seed 004: "NEIGHBOR-AWARE: an approach adopted by ZERO-INFINITY which
 * enforces the neighbors of experts to be cached together"; docs/policies.md:
 * "LRU with layers [l, l+3) pinned").
 *
 * One LRU over all (layer, expert) pairs (a hit or a load makes the expert
 * most recent).  The victim is the least recent evictable expert whose layer
 * is outside [l, l + window) of the running layer l (ms_view_layer): the
 * layers about to run keep their experts.  wrap=0 (default) reads the window
 * literally (no layers past L-1); wrap=1 continues it into layers 0, 1, ...
 * of the next iteration, which run next in decode.  When every evictable
 * expert lies inside the window (e.g. L <= window), the victim is the plain
 * least recent evictable expert, so a load never fails for the window's
 * sake. */
#include <stdlib.h>

#include "policies/lib/base_predict.h"
#include "policies/lib/expert_list.h"
#include "policies/policy.h"

typedef struct {
    ms_xlist list;
    uint32_t L, J, window;
    int wrap;
} neighbor_state;

static void *neighbor_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    neighbor_state *s = ms_xcalloc(1, sizeof *s);
    s->L = env->meta->L;
    s->J = env->meta->J;
    s->window = (uint32_t)ms_param_num(p, "window");
    s->wrap = (int)ms_param_num(p, "wrap");
    ms_xlist_init(&s->list, s->L * s->J);
    return s;
}

static void neighbor_destroy(void *st)
{
    neighbor_state *s = st;
    ms_xlist_free(&s->list);
    free(s);
}

static void neighbor_touch(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    neighbor_state *s = st;
    ms_xlist_push_front(&s->list, l * s->J + e);
}

static void neighbor_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    neighbor_state *s = st;
    ms_xlist_remove(&s->list, l * s->J + e);
}

static int neighbor_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    neighbor_state *s = st;
    uint32_t run = ms_view_layer(v);
    for (uint32_t x = s->list.tail; x != MS_NIL; x = s->list.prev[x]) {
        uint32_t xl = x / s->J, xe = x % s->J;
        if (!ms_base_in_window(run, xl, s->window, s->L, s->wrap) && ms_view_evictable(v, xl, xe)) {
            *l = xl;
            *e = xe;
            return 1;
        }
    }
    return ms_xlist_oldest_evictable(&s->list, v, s->J, l, e); /* everything left is a neighbour */
}

static const ms_param_spec neighbor_params[] = {
    {"window", MS_PARAM_INT, "3", 1, 65536, NULL, "layers [l, l+window) of the running layer l keep their experts"},
    {"wrap", MS_PARAM_INT, "0", 0, 1, NULL, "1: the window continues into the next iteration's first layers"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops neighbor_ops = {
    .create = neighbor_create, .destroy = neighbor_destroy, .on_insert = neighbor_touch,
    .on_access = neighbor_touch, .on_evict = neighbor_evict, .victim = neighbor_victim,
};
const ms_policy_desc ms_policy_cache_neighbor = {
    .name = "neighbor", .kind = MS_KIND_CACHE, .params = neighbor_params, .cache = &neighbor_ops,
    .summary = "ZeRO-Infinity neighbor-aware: LRU that never evicts layers [l, l+3) of the running layer",
};
