/* The next-use pre-pass: for policies with needs_future, every expert's
 * activation steps, read once from the trace before the replay (or recalled
 * from the trace cache's memo, when an earlier run of the process read them
 * with the same batch size and split). */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/state.h"

/* Every expert's activation iterations from the trace (the replay's part,
 * batched as the replay batches without time). */
static int count_future(ms_view *v, ms_trace_reader *rd)
{
    ms_batcher b;
    ms_batcher_init(&b, rd, v->cfg->max_batch, 1);
    ms_batcher_skip(&b, v->env.split.train_requests, v->env.split.train_iters);
    ms_batcher *saved = v->batch;
    v->batch = &b;
    double t = 0;
    int rc;
    uint64_t it = 0;
    while ((rc = ms_batcher_next(&b, &t, v->err)) == 1) {
        v->iter = it;
        eng_build_activated_sets(v);
        for (uint32_t l = 0; l < v->L; l++)
            for (uint32_t i = 0; i < v->n_acts[l]; i++) {
                uint32_t x = l * v->J + v->acts[(size_t)l * v->J + i].expert;
                if (v->use_n[x] == v->use_cap[x]) {
                    v->use_cap[x] = v->use_cap[x] ? 2 * v->use_cap[x] : 16;
                    v->use_it[x] = ms_xrealloc(v->use_it[x], v->use_cap[x], sizeof **v->use_it);
                }
                v->use_it[x][v->use_n[x]++] = (uint32_t)it;
            }
        ms_batcher_complete(&b, 0, NULL, NULL);
        it++;
    }
    ms_batcher_free(&b);
    v->batch = saved;
    v->iter = 0;
    memset(v->mark, 0, v->NX * sizeof *v->mark);
    return rc < 0 ? -1 : 0;
}

/* The lists depend on the trace, the batch size and where the replay
 * starts (the split): the key of the trace cache's memo (actsets_memo.c's
 * for the why).  The value: use_n[NX], then the lists one after another. */
static size_t future_key(const ms_view *v, unsigned char *k)
{
    uint32_t batch = v->cfg->max_batch, iters = v->env.split.train_iters;
    uint64_t reqs = v->env.split.train_requests;
    memcpy(k, "nextuse", 8);
    memcpy(k + 8, &batch, 4);
    memcpy(k + 12, &iters, 4);
    memcpy(k + 16, &reqs, 8);
    return 24;
}

static int recall_future(ms_view *v)
{
    unsigned char k[24];
    size_t len, kl = future_key(v, k);
    const unsigned char *p = v->act_memo ? ms_trace_memo_get(v->act_memo, k, kl, &len) : NULL;
    if (!p || !eng_memo_counted_ok(p, len, v->NX, UINT32_MAX, sizeof **v->use_it))
        return 0;
    memcpy(v->use_n, p, v->NX * sizeof *v->use_n);
    p += v->NX * sizeof *v->use_n;
    for (uint32_t x = 0; x < v->NX; x++) {
        uint32_t n = v->use_n[x];
        if (!n)
            continue;
        v->use_cap[x] = n;
        v->use_it[x] = ms_xcalloc(n, sizeof **v->use_it);
        memcpy(v->use_it[x], p, n * sizeof **v->use_it);
        p += n * sizeof **v->use_it;
    }
    return 1;
}

static void remember_future(ms_view *v)
{
    if (!v->act_memo)
        return;
    size_t len = v->NX * sizeof *v->use_n;
    for (uint32_t x = 0; x < v->NX; x++)
        len += v->use_n[x] * sizeof **v->use_it;
    unsigned char k[24], *val = ms_xcalloc(len, 1), *p = val;
    memcpy(p, v->use_n, v->NX * sizeof *v->use_n);
    p += v->NX * sizeof *v->use_n;
    for (uint32_t x = 0; x < v->NX; x++) {
        if (!v->use_n[x])
            continue; /* use_it[x] is NULL */
        memcpy(p, v->use_it[x], v->use_n[x] * sizeof **v->use_it);
        p += v->use_n[x] * sizeof **v->use_it;
    }
    ms_trace_memo_put(v->act_memo, k, future_key(v, k), val, len);
    free(val);
}

int eng_build_future(ms_view *v, ms_trace_reader *rd)
{
    v->use_it = ms_xcalloc(v->NX, sizeof *v->use_it);
    v->use_n = ms_xcalloc(v->NX, sizeof *v->use_n);
    v->use_cap = ms_xcalloc(v->NX, sizeof *v->use_cap);
    v->use_cur = ms_xcalloc(v->NX, sizeof *v->use_cur);
    if (!recall_future(v)) {
        if (count_future(v, rd))
            return -1;
        remember_future(v);
    }
    /* exact when the timed replay admits requests in the same order */
    int same_arrival = 1;
    for (uint64_t i = 1; i < v->meta->n_requests; i++)
        if (v->meta->req_arrival_s[i] != v->meta->req_arrival_s[0])
            same_arrival = 0;
    v->m->has_future = 1;
    v->m->future_exact = v->cfg->max_batch == 1 || v->cfg->offline || same_arrival;
    return 0;
}

/* 1 when the policy a spec names learns from the training split (unknown
 * names are reported later, by eng_load_policy). */
