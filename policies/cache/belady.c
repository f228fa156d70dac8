/* belady: evicts the evictable expert whose next activation lies furthest
 * in the future (never used again first; ties to the lower (layer, expert)).
 * With bypass=1 (default) the incoming expert is a candidate too: when its
 * own next use is no sooner than every victim's, it is streamed through a
 * transient buffer instead of cached (the optimum once caches may bypass,
 * as `static` does).  With the engine's next-use pre-pass it is the offline
 * bound every cache is measured against.
 *
 * The victim is the evictable member with the largest next use, ties (the
 * experts of one layer next used in the same iteration, and every expert
 * never used again) to the lowest x = l * J + e, i.e. the smallest
 * (UINT64_MAX - next, x): a total order, so the victim is the one a scan
 * over all members gives (as before issue 18), whatever their order.
 * ms_view_evictable() decides what may go (in flight, protected by the
 * running step, on another GPU: skipped).
 *
 * Members sit in two indexed heaps (policies/lib/xheap.h): by_next, by that
 * key, and expiry, by next ascending.  A member's next use, once read,
 * stays exact while the running step is below it: ms_view_next_use is the
 * first activation after the running step (or the running step itself for
 * an expert the running layer uses and has not served yet: a prefetch at
 * the layer's start must not evict what it is about to use), and the
 * running step never goes back (the engine's steps only advance).  So
 * before each search the members whose stored next is below the running
 * step (expiry's smallest) read theirs again, and those whose stored next
 * is the running step once each (before the running layer's loads the view
 * gives the running step again, after them the next use beyond it).  Every
 * other key is still exact, and the search visits by_next in key order
 * until a member is evictable. */
#include <stdlib.h>

#include "policies/lib/expert_list.h"
#include "policies/lib/xheap.h"
#include "policies/policy.h"

typedef struct {
    ms_xheap by_next; /* members by (UINT64_MAX - next use, x): the victim first */
    ms_xheap expiry;  /* members by next use: the first to go stale first */
    uint64_t *next;   /* [NX] a member's next use, read at insertion or on expiry */
    uint32_t *due;    /* [NX] scratch: the members whose stored next is the running step */
    uint32_t J;
    int bypass;
    uint32_t chosen; /* victim found by admit(), handed to the victim() call that follows */
} belady_state;

static void *belady_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    uint32_t nx = env->meta->L * env->meta->J;
    belady_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->bypass = (int)ms_param_num(p, "bypass");
    s->chosen = MS_NIL;
    ms_xheap_init(&s->by_next, nx);
    ms_xheap_init(&s->expiry, nx);
    s->next = ms_xcalloc(nx ? nx : 1, sizeof *s->next);
    s->due = ms_xcalloc(nx ? nx : 1, sizeof *s->due);
    return s;
}

static void belady_destroy(void *st)
{
    belady_state *s = st;
    ms_xheap_free(&s->by_next);
    ms_xheap_free(&s->expiry);
    free(s->next);
    free(s->due);
    free(s);
}

/* x's next use as the view gives it now, into both heaps */
static void read_next(belady_state *s, const ms_view *v, uint32_t x)
{
    uint64_t next = ms_view_next_use(v, x / s->J, x % s->J);
    s->next[x] = next;
    ms_xheap_set(&s->by_next, x, UINT64_MAX - next, 0);
    ms_xheap_set(&s->expiry, x, next, 0);
}

static void belady_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    belady_state *s = st;
    read_next(s, v, l * s->J + e);
}

static void belady_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    belady_state *s = st;
    uint32_t x = l * s->J + e;
    ms_xheap_remove(&s->by_next, x);
    ms_xheap_remove(&s->expiry, x);
}

/* The evictable member with the furthest next use; MS_NIL when none. */
static uint32_t furthest_member(belady_state *s, const ms_view *v, uint64_t *next_out)
{
    uint64_t step = ms_view_step(v);
    uint32_t x, n_due = 0;
    while ((x = ms_xheap_top(&s->expiry)) != MS_NIL && s->next[x] < step)
        read_next(s, v, x); /* its use at s->next[x] is past: the one after */
    while ((x = ms_xheap_top(&s->expiry)) != MS_NIL && s->next[x] == step) {
        ms_xheap_remove(&s->expiry, x); /* read once each below: the view may give the running step again */
        s->due[n_due++] = x;
    }
    for (uint32_t i = 0; i < n_due; i++)
        read_next(s, v, s->due[i]);
    uint32_t best = ms_xheap_first_evictable(&s->by_next, v, s->J);
    *next_out = best == MS_NIL ? 0 : s->next[best];
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
