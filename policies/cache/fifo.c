/* fifo: evicts the evictable expert that was loaded first; hits do not
 * refresh it. */
#include <stdlib.h>

#include "policies/lib/expert_list.h"
#include "policies/policy.h"

typedef struct {
    ms_xlist list;
    uint32_t J;
} fifo_state;

static void *fifo_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)p;
    (void)err;
    fifo_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    ms_xlist_init(&s->list, env->meta->L * env->meta->J);
    return s;
}

static void fifo_destroy(void *st)
{
    fifo_state *s = st;
    ms_xlist_free(&s->list);
    free(s);
}

static void fifo_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fifo_state *s = st;
    ms_xlist_push_front(&s->list, l * s->J + e);
}

static void fifo_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fifo_state *s = st;
    ms_xlist_remove(&s->list, l * s->J + e);
}

static int fifo_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    fifo_state *s = st;
    return ms_xlist_oldest_evictable(&s->list, v, s->J, l, e);
}

static const ms_param_spec fifo_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const ms_cache_ops fifo_ops = {
    .create = fifo_create, .destroy = fifo_destroy, .on_insert = fifo_insert,
    .on_evict = fifo_evict, .victim = fifo_victim,
};
const ms_policy_desc ms_policy_cache_fifo = {
    .name = "fifo", .kind = MS_KIND_CACHE, .params = fifo_params, .cache = &fifo_ops,
    .summary = "first in, first out: the earliest loaded evictable expert goes",
};
