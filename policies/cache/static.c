/* static: llama.cpp-style partial offload.  The most used experts of the
 * training split (--train; token-row activations) are resident from the start
 * and never swapped; every other expert is streamed through a transient
 * buffer for the layer that needs it and not kept.  With --train 0 the whole
 * trace is counted: an oracle static placement. */
#include <stdlib.h>

#include "policies/lib/gate.h"

typedef struct {
    uint64_t *count;
    uint32_t nx, J;
} static_state;

typedef struct {
    static_state *s;
    const ms_trace_meta *m;
} count_ctx;

static int count_iteration(void *ctx, uint64_t req_index, const ms_request *r, uint32_t it, ms_err *err)
{
    (void)req_index;
    (void)err;
    static_state *s = ((count_ctx *)ctx)->s;
    const ms_trace_meta *m = ((count_ctx *)ctx)->m;
    const ms_iteration *iter = &r->iters[it];
    for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++)
        for (uint32_t l = 0; l < m->L; l++)
            for (uint32_t k = 0; k < m->K; k++) {
                int32_t e = r->topk_ids[ms_topk_index(m, row, l) + k];
                if (e >= 0)
                    s->count[l * m->J + (uint32_t)e]++;
            }
    return 0;
}

static void *static_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)p;
    static_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->nx = env->meta->L * env->meta->J;
    s->count = ms_xcalloc(s->nx, sizeof *s->count);
    ms_policy_env counted = *env;
    if (env->split.frac == 0) /* no split: count every request */
        counted.split = (ms_split){.frac = 1, .train_requests = env->meta->n_requests};
    count_ctx ctx = {s, env->meta};
    if (ms_train_foreach(&counted, 0, count_iteration, &ctx, err)) {
        free(s->count);
        free(s);
        return NULL;
    }
    return s;
}

static void static_destroy(void *st)
{
    static_state *s = st;
    free(s->count);
    free(s);
}

typedef struct {
    uint64_t count;
    uint32_t x;
} ranked;

static int by_count_desc(const void *a, const void *b)
{
    const ranked *p = a, *q = b;
    if (p->count != q->count)
        return p->count < q->count ? 1 : -1;
    return p->x < q->x ? -1 : 1;
}

/* Every expert, most used first; the engine loads them in order while they fit. */
static uint32_t static_preload(void *st, const ms_view *v, uint32_t cap, uint32_t *ls, uint32_t *es)
{
    (void)v;
    static_state *s = st;
    ranked *order = ms_xcalloc(s->nx, sizeof *order);
    for (uint32_t x = 0; x < s->nx; x++)
        order[x] = (ranked){s->count[x], x};
    qsort(order, s->nx, sizeof *order, by_count_desc);
    uint32_t n = s->nx < cap ? s->nx : cap;
    for (uint32_t i = 0; i < n; i++) {
        ls[i] = order[i].x / s->J;
        es[i] = order[i].x % s->J;
    }
    free(order);
    return n;
}

static int static_admit(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)st;
    (void)v;
    (void)l;
    (void)e;
    return 0;
}

static int static_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    (void)st;
    (void)v;
    (void)l;
    (void)e;
    return 0;
}

static const ms_param_spec static_params[] = {
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops static_ops = {
    .create = static_create, .destroy = static_destroy, .preload = static_preload,
    .admit = static_admit, .victim = static_victim,
};
const ms_policy_desc ms_policy_cache_static = {
    .name = "static", .kind = MS_KIND_CACHE, .params = static_params, .cache = &static_ops,
    .uses_training = 1,
    .summary = "most used experts of the training split pinned from the start, nothing swapped",
};
