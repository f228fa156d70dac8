/* static: llama.cpp-style partial offload.  The most used experts of the
 * training split (token-row activations) are resident from the start and
 * never swapped; every other expert is streamed through a transient buffer
 * for the layer that needs it and not kept.  train = fraction of requests
 * counted (of iterations when the trace has a single request); 1.0 counts
 * the whole trace (an oracle static placement). */
#include <math.h>
#include <stdlib.h>

#include "../policy.h"

typedef struct {
    uint64_t *count;
    uint32_t nx, J;
} static_state;

static void count_request(static_state *s, const ms_trace_meta *m, const ms_request *r, uint32_t n_iters)
{
    for (uint32_t i = 0; i < n_iters; i++) {
        const ms_iteration *it = &r->iters[i];
        for (uint32_t row = it->row0; row < it->row0 + it->n_rows; row++)
            for (uint32_t l = 0; l < m->L; l++)
                for (uint32_t k = 0; k < m->K; k++) {
                    int32_t e = r->topk_ids[ms_topk_index(m, row, l) + k];
                    if (e >= 0)
                        s->count[l * m->J + (uint32_t)e]++;
                }
    }
}

static int count_training_split(static_state *s, const ms_policy_env *env, double train, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(env->trace_path, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    int single = m->n_requests == 1;
    uint64_t n_req = single ? 1 : (uint64_t)ceil(train * (double)m->n_requests);
    ms_request r = {0};
    int rc = 0;
    for (uint64_t i = 0; i < n_req && rc == 0; i++) {
        if (ms_reader_read(rd, i, &r, err) != 1) {
            rc = -1;
            break;
        }
        uint32_t n_iters = single ? (uint32_t)ceil(train * r.n_iters) : r.n_iters;
        count_request(s, m, &r, n_iters);
    }
    ms_request_free(&r);
    ms_reader_close(rd);
    return rc;
}

static void *static_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    static_state *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->nx = env->meta->L * env->meta->J;
    s->count = ms_xcalloc(s->nx, sizeof *s->count);
    if (count_training_split(s, env, ms_param_num(p, "train"), err)) {
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
    {"train", MS_PARAM_DOUBLE, "1.0", 0.01, 1.0, NULL,
     "fraction of requests (iterations for a one-request trace) whose counts pick the pinned set"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops static_ops = {
    .create = static_create, .destroy = static_destroy, .preload = static_preload,
    .admit = static_admit, .victim = static_victim,
};
const ms_policy_desc ms_policy_cache_static = {
    .name = "static", .kind = MS_KIND_CACHE, .params = static_params, .cache = &static_ops,
    .summary = "most used experts of the training split pinned from the start, nothing swapped",
};
