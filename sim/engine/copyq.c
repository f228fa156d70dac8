/* The H2D copy queue (requests by expert, served best first: on-demand
 * loads first, then prefetches by priority, FIFO on ties; sim/engine/qset.h)
 * and the copy engine that serves it one copy at a time.  With several GPUs
 * every GPU's link has its own queue and links.c serves them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/state.h"

/* The queue that holds x's request (its GPU's link with several GPUs: x's
 * requests always go to the same queue, fixed by the placement). */
static eng_qset *queue_of(ms_view *v, uint32_t x)
{
    return v->G > 1 ? &v->links[v->gpu_of[x]].q : &v->q;
}

/* Queues q, replacing x's earlier request if it has one. */
void eng_queue_request(ms_view *v, qentry q)
{
    eng_qset_set(queue_of(v, q.x), q);
}

void eng_queue_burst(ms_view *v, const uint32_t *xs, const uint64_t *seq, uint32_t n, const double *prio, double issue_t)
{
    if (v->G == 1) {
        eng_qset_add_burst(&v->q, xs, seq, n, prio, issue_t);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = xs[i];
        eng_qset_add_burst(queue_of(v, x), &xs[i], &seq[i], 1, prio, issue_t);
    }
}

void eng_dequeue_prefetch(ms_view *v, uint32_t x)
{
    if (v->queued[x])
        v->n_queued--;
    v->queued[x] = 0;
    eng_qset *q = queue_of(v, x);
    if (eng_qset_has(q, x))
        eng_qset_drop(q, x);
}

void eng_dequeue_prefetches(ms_view *v, const uint32_t *xs, uint32_t n)
{
    if (v->G > 1) {
        for (uint32_t i = 0; i < n; i++)
            eng_dequeue_prefetch(v, xs[i]);
        return;
    }
    uint8_t *queued = v->queued;
    size_t was = 0;
    for (uint32_t i = 0; i < n; i++) {
        was += queued[xs[i]];
        queued[xs[i]] = 0;
    }
    v->n_queued -= was;
    eng_qset_drop_list(&v->q, xs, n);
}

/* ------------------------------------------------------------------ */
/* the copy engine */

/* A prefetch about to start takes its request off the queue and a cache
 * slot; 0 when it does (counted as copied), -1 when dropped (the cache
 * declined it or found no room). */
int eng_admit_prefetch(ms_view *v, uint32_t x)
{
    eng_dequeue_prefetch(v, x);
    if (!eng_cache_admits(v, x) || eng_make_room(v, x)) {
        v->m->prefetch_dropped++;
        return -1;
    }
    eng_occupy(v, x);
    v->from_prefetch[x] = PF_AHEAD;
    v->m->prefetch_copied++;
    return 0;
}

static void start_copy(ms_view *v, const qentry *q, double start)
{
    uint32_t x = q->x;
    double bytes = v->layer_bytes[x / v->J];
    v->clock = start;
    if (!q->demand) {
        if (eng_admit_prefetch(v, x)) {
            v->clock = v->now;
            /* No copy can start before `start` any more: it is the link's free
             * time or the earliest issue time of what is left (next_copy), so
             * the next pick is the same, without next_copy's scan (a queue of
             * thousands of droppable prefetches was quadratic). */
            v->link_free = ms_fmax(v->link_free, start);
            return;
        }
    } else {
        v->m->demand_copies++;
    }
    ms_op op = eng_expert_op(v, MS_OP_COPY, x);
    op.from_ssd = eng_host_fetch(v, x);
    op.demand = q->demand;
    op.issue_s = q->issue_t;
    op.not_before_s = start;
    double t0, t1;
    if (eng_exec_run(v, &op, &t0, &t1))
        return;
    if (op.from_ssd)
        v->m->ssd_bytes += bytes;
    v->ready_t[x] = t1;
    v->link_free = t1;
    v->m->pcie_bytes += bytes;
    v->m->pcie_copies++;
    eng_event(v, q->demand ? "copy_demand" : "copy_prefetch", t0, t1, x, bytes);
    v->clock = v->now;
}

/* Starts every queued copy whose start time is before T. */
void eng_advance(ms_view *v, double T)
{
    if (v->G > 1) {
        eng_links_advance(v, T);
        return;
    }
    for (;;) {
        if (!v->q.n || v->failed)
            return;
        uint32_t x;
        double start;
        if (!eng_qset_next(&v->q, v->link_free, &x, &start) || start >= T)
            return;
        qentry q = eng_qset_take(&v->q, x);
        start_copy(v, &q, start);
    }
}

void eng_start_queued(ms_view *v, uint32_t x)
{
    qentry q = eng_qset_take(&v->q, x);
    start_copy(v, &q, ms_fmax(v->link_free, q.issue_t));
}

/* On-demand loads sit at the head of the queue: start them all now.  With
 * several GPUs they start in time order with every link's copies
 * (eng_links_settle before the layer's compute). */
void eng_start_demands(ms_view *v)
{
    if (v->G > 1)
        return;
    for (;;) {
        if (!v->q.n || v->failed)
            return;
        uint32_t x = eng_qset_best(&v->q);
        if (!eng_qset_at(&v->q, x)->demand)
            return;
        qentry q = eng_qset_take(&v->q, x);
        start_copy(v, &q, ms_fmax(v->link_free, q.issue_t));
    }
}
