/* belady: evicts the evictable expert whose next activation lies furthest
 * in the future (never used again first; ties to the lower (layer, expert)).
 * With bypass=1 (default) the incoming expert is a candidate too: when its
 * own next use is no sooner than every victim's, it is streamed through a
 * transient buffer instead of cached (the optimum once caches may bypass,
 * as `static` does).  With the engine's next-use pre-pass it is the offline
 * bound every cache is measured against. */
#include <stdlib.h>

#include "policies/lib/expert_list.h"
#include "policies/policy.h"

typedef struct {
    ms_xset members;
    uint32_t J;
    int bypass;
    uint32_t chosen; /* victim found by admit(), handed to the victim() call that follows */
} belady_state;

static void *belady_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    belady_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->bypass = (int)ms_param_num(p, "bypass");
    s->chosen = MS_NIL;
    ms_xset_init(&s->members, env->meta->L * env->meta->J);
    return s;
}

static void belady_destroy(void *st)
{
    belady_state *s = st;
    ms_xset_free(&s->members);
    free(s);
}

static void belady_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    belady_state *s = st;
    ms_xset_add(&s->members, l * s->J + e);
}

static void belady_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    belady_state *s = st;
    ms_xset_remove(&s->members, l * s->J + e);
}

/* The evictable member with the furthest next use; MS_NIL when none. */
static uint32_t furthest_member(const belady_state *s, const ms_view *v, uint64_t *next_out)
{
    uint32_t best = MS_NIL;
    uint64_t best_next = 0;
    for (uint32_t i = 0; i < s->members.n; i++) {
        uint32_t x = s->members.items[i];
        if (!ms_view_evictable(v, x / s->J, x % s->J))
            continue;
        uint64_t next = ms_view_next_use(v, x / s->J, x % s->J);
        if (best == MS_NIL || next > best_next || (next == best_next && x < best)) {
            best = x;
            best_next = next;
        }
    }
    *next_out = best_next;
    return best;
}

static int belady_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    belady_state *s = st;
    uint64_t next;
    uint32_t best = s->chosen;
    s->chosen = MS_NIL;
    if (best == MS_NIL || !ms_view_evictable(v, best / s->J, best % s->J))
        best = furthest_member(s, v, &next);
    if (best == MS_NIL)
        return 0;
    *l = best / s->J;
    *e = best % s->J;
    return 1;
}

static int belady_admit(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    belady_state *s = st;
    if (!s->bypass || ms_view_fits(v, l, e))
        return 1;
    uint64_t victim_next;
    s->chosen = furthest_member(s, v, &victim_next);
    if (s->chosen == MS_NIL)
        return 1; /* nothing evictable: the engine reports the cache too small */
    if (victim_next > ms_view_next_use(v, l, e))
        return 1;
    s->chosen = MS_NIL;
    return 0;
}

static const ms_param_spec belady_params[] = {
    {"bypass", MS_PARAM_INT, "1", 0, 1, NULL, "1: stream an expert whose next use is furthest instead of caching it"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops belady_ops = {
    .create = belady_create, .destroy = belady_destroy, .on_insert = belady_insert,
    .on_evict = belady_evict, .victim = belady_victim, .admit = belady_admit,
};
const ms_policy_desc ms_policy_cache_belady = {
    .name = "belady", .kind = MS_KIND_CACHE, .params = belady_params, .cache = &belady_ops,
    .needs_future = 1,
    .summary = "offline optimum: evict the expert whose next use is furthest in the future",
};
