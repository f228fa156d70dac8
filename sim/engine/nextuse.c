/* The next-use pre-pass: for policies with needs_future, every expert's
 * activation steps, read once from the trace before the replay. */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/state.h"

int eng_build_future(ms_view *v, ms_trace_reader *rd)
{
    v->use_it = ms_xcalloc(v->NX, sizeof *v->use_it);
    v->use_n = ms_xcalloc(v->NX, sizeof *v->use_n);
    v->use_cap = ms_xcalloc(v->NX, sizeof *v->use_cap);
    v->use_cur = ms_xcalloc(v->NX, sizeof *v->use_cur);
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
    if (rc < 0)
        return -1;
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
