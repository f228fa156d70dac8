/* oracle: the true experts of layers l+1 .. l+d, issued when layer l starts
 * (and those of layers 0 .. d-1 when the iteration starts): an upper bound
 * for any predictor at distance d.  Nearer layers first; within a layer, in
 * activation order. */
#include <stdlib.h>

#include "policies/policy.h"

typedef struct {
    uint32_t d;
} oracle_state;

static void *oracle_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)p;
    if (env->distance < 1) {
        ms_fail(err, "oracle needs --distance >= 1");
        return NULL;
    }
    oracle_state *s = ms_xcalloc(1, sizeof *s);
    s->d = env->distance;
    return s;
}

static void oracle_destroy(void *st)
{
    free(st);
}

static void prefetch_layer(ms_view *v, uint32_t t, double priority)
{
    uint32_t n;
    const ms_act *acts = ms_view_activated(v, t, &n);
    for (uint32_t i = 0; i < n; i++)
        ms_view_prefetch(v, t, acts[i].expert, priority);
}

static void oracle_iteration(void *st, ms_view *v)
{
    oracle_state *s = st;
    for (uint32_t t = 0; t < s->d; t++)
        prefetch_layer(v, t, -(double)(t + 1));
}

static void oracle_layer_start(void *st, ms_view *v, uint32_t l)
{
    oracle_state *s = st;
    for (uint32_t t = l + 1; t <= l + s->d; t++)
        prefetch_layer(v, t, -(double)(t - l));
}

static const ms_param_spec oracle_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const ms_prefetch_ops oracle_ops = {
    .create = oracle_create, .destroy = oracle_destroy,
    .on_iteration = oracle_iteration, .on_layer_start = oracle_layer_start,
};
const ms_policy_desc ms_policy_prefetch_oracle = {
    .name = "oracle", .kind = MS_KIND_PREFETCH, .uses_distance = 1, .params = oracle_params, .prefetch = &oracle_ops,
    .summary = "true experts of layers l+1..l+d issued when layer l starts (upper bound)",
};
