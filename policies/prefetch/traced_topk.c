/* traced-topk: BrainStorm-style: after layer l's gate, the k experts of
 * layer l+d activated most often so far in the replay (k = 0 means K). */
#include <stdlib.h>

#include "policies/policy.h"
#include "policies/lib/rank.h"

typedef struct {
    uint32_t k, d, J, L;
    double *count; /* [L][J] activations seen so far */
} traced_state;

static void *traced_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    traced_state *s = ms_xcalloc(1, sizeof *s);
    s->k = (uint32_t)ms_param_num(p, "k");
    if (s->k == 0)
        s->k = env->meta->K;
    s->d = env->distance ? env->distance : 1;
    s->J = env->meta->J;
    s->L = env->meta->L;
    s->count = ms_xcalloc((size_t)s->L * s->J, sizeof *s->count);
    return s;
}

static void traced_destroy(void *st)
{
    traced_state *s = st;
    free(s->count);
    free(s);
}

static void traced_gate(void *st, ms_view *v, uint32_t l)
{
    traced_state *s = st;
    uint32_t n;
    const ms_act *acts = ms_view_activated(v, l, &n);
    for (uint32_t i = 0; i < n; i++)
        s->count[(size_t)l * s->J + acts[i].expert] += acts[i].tokens;
    if (l + s->d < s->L)
        ms_prefetch_top_scored(v, l + s->d, s->count + (size_t)(l + s->d) * s->J, s->J, s->k);
}

static const ms_param_spec traced_params[] = {
    {"k", MS_PARAM_INT, "0", 0, 4096, NULL, "experts prefetched per layer (0 = the trace's K)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_prefetch_ops traced_ops = {
    .create = traced_create, .destroy = traced_destroy, .on_gate = traced_gate,
};
const ms_policy_desc ms_policy_prefetch_traced_topk = {
    .name = "traced-topk", .kind = MS_KIND_PREFETCH, .uses_distance = 1, .params = traced_params, .prefetch = &traced_ops,
    .summary = "BrainStorm: the k most used experts of layer l+d so far",
};
