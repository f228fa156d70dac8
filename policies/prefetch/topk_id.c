/* topk-id: ZeRO-Infinity's TOPK prefetch: after layer l's gate, the k
 * lowest-id experts of layer l+d (k = 0 means the trace's top-k K). */
#include <stdlib.h>

#include "policies/policy.h"
#include "policies/lib/rank.h"

typedef struct {
    uint32_t k, d, J, L;
    double *score;
} topk_id_state;

static void *topk_id_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    topk_id_state *s = ms_xcalloc(1, sizeof *s);
    s->k = (uint32_t)ms_param_num(p, "k");
    if (s->k == 0)
        s->k = env->meta->K;
    s->d = env->distance ? env->distance : 1;
    s->J = env->meta->J;
    s->L = env->meta->L;
    s->score = ms_xcalloc(s->J, sizeof *s->score);
    for (uint32_t e = 0; e < s->J; e++)
        s->score[e] = -(double)e;
    return s;
}

static void topk_id_destroy(void *st)
{
    topk_id_state *s = st;
    free(s->score);
    free(s);
}

static void topk_id_gate(void *st, ms_view *v, uint32_t l)
{
    topk_id_state *s = st;
    if (l + s->d < s->L)
        ms_prefetch_top_scored(v, l + s->d, s->score, s->J, s->k);
}

static const ms_param_spec topk_id_params[] = {
    {"k", MS_PARAM_INT, "0", 0, 4096, NULL, "experts prefetched per layer (0 = the trace's K)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_prefetch_ops topk_id_ops = {
    .create = topk_id_create, .destroy = topk_id_destroy, .on_gate = topk_id_gate,
};
const ms_policy_desc ms_policy_prefetch_topk_id = {
    .name = "topk-id", .kind = MS_KIND_PREFETCH, .uses_distance = 1, .params = topk_id_params, .prefetch = &topk_id_ops,
    .summary = "ZeRO-Infinity TOPK: the k lowest-id experts of layer l+d",
};
