/* lfu: evicts the evictable expert with the fewest accesses (hits and
 * loads); ties go to the least recently used.  reset=1 forgets an expert's
 * count when it is evicted (classic in-cache LFU); reset=0 keeps it.
 *
 * The victim is the smallest (count, last_use) among the members for which
 * ms_view_evictable() holds (in flight, protected by the running step or on
 * another GPU: skipped).  last_use is a tick drawn afresh at every touch and
 * every member was touched when it joined, so no two members share one: the
 * pair is a total order and the victim does not depend on the order members
 * are visited in (the scan over the member set before issue 18 gave the
 * same victim).  The members sit in an indexed heap keyed by that pair
 * (policies/lib/xheap.h); a touch only raises x's key, and the victim search
 * visits members in key order until one is evictable, usually the first. */
#include <stdlib.h>

#include "policies/lib/xheap.h"
#include "policies/policy.h"

typedef struct {
    ms_xheap order; /* the members by (count, last_use) */
    uint64_t *count, *last_use;
    uint64_t tick;
    uint32_t J;
    int reset;
} lfu_state;

static void *lfu_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    uint32_t nx = env->meta->L * env->meta->J;
    lfu_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->reset = (int)ms_param_num(p, "reset");
    ms_xheap_init(&s->order, nx);
    s->count = ms_xcalloc(nx ? nx : 1, sizeof *s->count);
    s->last_use = ms_xcalloc(nx ? nx : 1, sizeof *s->last_use);
    return s;
}

static void lfu_destroy(void *st)
{
    lfu_state *s = st;
    ms_xheap_free(&s->order);
    free(s->count);
    free(s->last_use);
    free(s);
}

static void lfu_touch(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    lfu_state *s = st;
    uint32_t x = l * s->J + e;
    s->count[x]++;
    s->last_use[x] = ++s->tick;
    ms_xheap_set(&s->order, x, s->count[x], s->last_use[x]);
}

static void lfu_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    lfu_state *s = st;
    uint32_t x = l * s->J + e;
    ms_xheap_remove(&s->order, x);
    if (s->reset)
        s->count[x] = 0;
}

static int lfu_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    lfu_state *s = st;
    uint32_t best = ms_xheap_first_evictable(&s->order, v, s->J);
    if (best == MS_NIL)
        return 0;
    *l = best / s->J;
    *e = best % s->J;
    return 1;
}

static const ms_param_spec lfu_params[] = {
    {"reset", MS_PARAM_INT, "1", 0, 1, NULL, "1: forget an expert's count when it is evicted; 0: keep it"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops lfu_ops = {
    .create = lfu_create, .destroy = lfu_destroy, .on_insert = lfu_touch,
    .on_access = lfu_touch, .on_evict = lfu_evict, .victim = lfu_victim,
};
const ms_policy_desc ms_policy_cache_lfu = {
    .name = "lfu", .kind = MS_KIND_CACHE, .params = lfu_params, .cache = &lfu_ops,
    .summary = "least frequently used; ties to the least recent",
};
