/* lru: least-recently-used over (layer, expert) pairs shared by all layers.
 * A hit or a load makes the expert most recent; the victim is the least
 * recent evictable one. */
#include <stdlib.h>

#include "policies/lib/expert_list.h"
#include "policies/policy.h"

typedef struct {
    ms_xlist list;
    uint32_t J;
} lru_state;

static void *lru_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)p;
    (void)err;
    lru_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    ms_xlist_init(&s->list, env->meta->L * env->meta->J);
    return s;
}

static void lru_destroy(void *st)
{
    lru_state *s = st;
    ms_xlist_free(&s->list);
    free(s);
}

static void lru_touch(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    lru_state *s = st;
    ms_xlist_push_front(&s->list, l * s->J + e);
}

static void lru_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    lru_state *s = st;
    ms_xlist_remove(&s->list, l * s->J + e);
}

static int lru_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    lru_state *s = st;
    return ms_xlist_oldest_evictable(&s->list, v, s->J, l, e);
}

static const ms_param_spec lru_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const ms_cache_ops lru_ops = {
    .create = lru_create, .destroy = lru_destroy, .on_insert = lru_touch,
    .on_access = lru_touch, .on_evict = lru_evict, .victim = lru_victim,
};
const ms_policy_desc ms_policy_cache_lru = {
    .name = "lru", .kind = MS_KIND_CACHE, .params = lru_params, .cache = &lru_ops,
    .summary = "least recently used (layer, expert) pair, one cache shared by all layers",
};
