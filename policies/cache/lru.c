/* lru: least-recently-used over (layer, expert) pairs shared by all layers.
 * A hit or a load makes the expert most recent; the victim is the least
 * recent evictable one.
 *
 * order=first (default): a layer step touches each activated expert once, in
 * order of first appearance.  order=token: every routed id of the step is a
 * touch where it appears, token by token (prefill included), so the step's
 * experts end up ordered by their last appearance: the llama.cpp-based engine
 * that recorded the route-csv traces does this (issue 16; docs/results.md).
 * Both protect the step's experts for the whole step. */
#include <stdlib.h>
#include <string.h>

#include "policies/lib/expert_list.h"
#include "policies/policy.h"

typedef struct {
    ms_xlist list;
    uint32_t J;
    int token_order;
} lru_state;

static void *lru_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    lru_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->token_order = !strcmp(ms_param_str(p, "order"), "token");
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

static void lru_step_rules(const void *st, ms_step_rules *out)
{
    const lru_state *s = st;
    out->order = s->token_order ? MS_ORDER_TOKEN : MS_ORDER_FIRST;
}

static const ms_param_spec lru_params[] = {
    {"order", MS_PARAM_ENUM, "first", 0, 0, "first|token",
     "first: a step touches each expert once, by first appearance; token: every routed id touches, in token order"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops lru_ops = {
    .create = lru_create, .destroy = lru_destroy, .on_insert = lru_touch,
    .on_access = lru_touch, .on_evict = lru_evict, .victim = lru_victim, .step_rules = lru_step_rules,
};
const ms_policy_desc ms_policy_cache_lru = {
    .name = "lru", .kind = MS_KIND_CACHE, .params = lru_params, .cache = &lru_ops,
    .summary = "least recently used (layer, expert) pair, one cache shared by all layers",
};
