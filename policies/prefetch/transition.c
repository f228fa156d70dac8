/* transition: a learned layer-to-layer predictor, ProMoE-like (seed 001:
 * "ProMoE [47] trains predictors per MoE layer"; no public code, so docs/policies.md
 * fixes the predictor: "co-activation counts T[(l,e)->(l+d,e')]
 * from the training split; predict layer l+d by summing T over layer l's
 * activated experts").
 *
 * Training (create): every token row of the training split (--train; auto
 * 0.7) adds 1 to T[l][e][e'] for each expert e of its top-k at layer l and e'
 * of its top-k at layer l+d.  Prediction (after layer l's gate, l+d < L):
 * score(e') = sum over layer l's activated experts e (the batch's union) of
 * T[l][e][e']; the k best with a positive score are prefetched with priority =
 * score / sum of scores (the normalised score).  online=1 keeps learning
 * during the replay: once layer l's gate is revealed (l >= d), the batch's
 * rows add their (l-d -> l) pairs, the same counting as training.  online=0
 * with no training split (--train 0) has nothing to learn from: an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/base_predict.h"
#include "policies/lib/gate.h"

typedef struct {
    ms_coact T;
    uint32_t k, d, J, L;
    int online;
    double *score;    /* [J] */
    uint32_t *top;    /* [J] */
    uint32_t *active; /* [J] */
    const ms_trace_meta *meta;
} trans_state;

static void count_iteration_rows(trans_state *s, const ms_request *r, uint32_t it, int one_layer, uint32_t l)
{
    const ms_iteration *iter = &r->iters[it];
    for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++) {
        const int32_t *ids = r->topk_ids + ms_topk_index(s->meta, row, 0);
        if (one_layer)
            ms_coact_add_row_layer(&s->T, ids, l);
        else
            ms_coact_add_row(&s->T, ids);
    }
}

static int count_training_iteration(void *ctx, uint64_t req_index, const ms_request *r, uint32_t it, ms_err *err)
{
    (void)req_index;
    (void)err;
    count_iteration_rows(ctx, r, it, 0, 0);
    return 0;
}

/* T from the training split, or from an earlier run on the same split
 * (ms_train_memo_get: T depends on the split's rows and d only) */
static int train(trans_state *s, const ms_policy_env *env, ms_err *err)
{
    char key[32];
    snprintf(key, sizeof key, "transition.T d=%u", s->d);
    size_t bytes = (size_t)s->L * s->J * s->J * sizeof *s->T.T, len;
    const void *kept = ms_train_memo_get(env, key, &len);
    if (kept && len == bytes) {
        memcpy(s->T.T, kept, bytes);
        return 0;
    }
    if (ms_train_foreach(env, 0, count_training_iteration, s, err))
        return -1;
    ms_train_memo_put(env, key, s->T.T, bytes);
    return 0;
}

static void trans_destroy(void *st)
{
    trans_state *s = st;
    ms_coact_free(&s->T);
    free(s->score);
    free(s->top);
    free(s->active);
    free(s);
}

static void *trans_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    int online = (int)ms_param_num(p, "online");
    if (env->distance < 1) {
        ms_fail(err, "transition needs --distance >= 1");
        return NULL;
    }
    if (env->split.frac == 0 && !online) {
        ms_fail(err, "trace %s: --train 0 leaves no training split to count transitions from; use --train > 0 "
                     "or online=1",
                env->trace_path);
        return NULL;
    }
    trans_state *s = ms_xcalloc(1, sizeof *s);
    s->meta = env->meta;
    s->J = env->meta->J;
    s->L = env->meta->L;
    s->d = env->distance;
    s->k = (uint32_t)ms_param_num(p, "k");
    if (s->k == 0)
        s->k = env->meta->K;
    s->online = online;
    s->score = ms_xcalloc(s->J, sizeof *s->score);
    s->top = ms_xcalloc(s->J, sizeof *s->top);
    s->active = ms_xcalloc(s->J, sizeof *s->active);
    ms_coact_init(&s->T, s->L, s->J, env->meta->K, s->d);
    if (train(s, env, err)) {
        trans_destroy(s);
        return NULL;
    }
    return s;
}

/* The running batch's rows add their (l-d -> l) co-activations. */
static void learn_online(trans_state *s, ms_view *v, uint32_t l)
{
    if (!s->online || l < s->d)
        return;
    for (uint32_t b = 0; b < ms_view_items(v); b++)
        count_iteration_rows(s, ms_view_item_request(v, b), ms_view_item_iter(v, b), 1, l - s->d);
}

static void predict_and_prefetch(trans_state *s, ms_view *v, uint32_t l)
{
    if (l + s->d >= s->L)
        return;
    uint32_t n;
    const ms_act *acts = ms_view_activated(v, l, &n);
    for (uint32_t i = 0; i < n; i++)
        s->active[i] = acts[i].expert;
    ms_coact_predict(&s->T, l, s->active, n, s->score);
    ms_base_normalise(s->score, s->J);
    uint32_t m = ms_base_top_positive(s->score, s->J, s->k, s->top);
    for (uint32_t i = 0; i < m; i++)
        ms_view_prefetch(v, l + s->d, s->top[i], s->score[s->top[i]]);
}

static void trans_gate(void *st, ms_view *v, uint32_t l)
{
    trans_state *s = st;
    learn_online(s, v, l);
    predict_and_prefetch(s, v, l);
}

static const ms_param_spec trans_params[] = {
    {"k", MS_PARAM_INT, "0", 0, 4096, NULL, "experts prefetched per predicted layer (0 = the trace's K)"},
    {"online", MS_PARAM_INT, "0", 0, 1, NULL, "1: keep counting co-activations during the replay"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_prefetch_ops trans_ops = {
    .create = trans_create, .destroy = trans_destroy, .on_gate = trans_gate,
};
const ms_policy_desc ms_policy_prefetch_transition = {
    .name = "transition", .kind = MS_KIND_PREFETCH, .uses_distance = 1, .params = trans_params, .prefetch = &trans_ops,
    .uses_training = 1,
    .summary = "ProMoE-like: layer l -> l+d co-activation counts from the training split predict layer l+d",
};
