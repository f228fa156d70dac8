/* The H2D copy queue (a priority heap: on-demand loads first, then
 * prefetches by priority, FIFO on ties) and the copy engine that serves it
 * one copy at a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/state.h"

/* copy queue: binary max-heap with lazy deletion (entry valid while its gen
 * matches qgen[x] and the expert is still queued) */

static int qbefore(const qentry *a, const qentry *b)
{
    if (a->demand != b->demand)
        return a->demand > b->demand;
    if (a->prio != b->prio)
        return a->prio > b->prio;
    return a->seq < b->seq;
}

/* Places q at hole i and moves it up to its place. */
static void sift_up(ms_view *v, size_t i, qentry q)
{
    while (i > 0 && qbefore(&q, &v->heap[(i - 1) / 2])) {
        v->heap[i] = v->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    v->heap[i] = q;
}

void eng_heap_push(ms_view *v, qentry q)
{
    if (v->hn == v->hcap) {
        v->hcap = v->hcap ? 2 * v->hcap : 256;
        v->heap = ms_xrealloc(v->heap, v->hcap, sizeof *v->heap);
    }
    sift_up(v, v->hn++, q);
}

/* Places q at hole i and moves it down to its place among heap[0..hn). */
static void sift_down(ms_view *v, size_t i, qentry q)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= v->hn)
            break;
        if (c + 1 < v->hn && qbefore(&v->heap[c + 1], &v->heap[c]))
            c++;
        if (!qbefore(&v->heap[c], &q))
            break;
        v->heap[i] = v->heap[c];
        i = c;
    }
    v->heap[i] = q;
}

/* Removes and returns heap[i]. */
static qentry heap_take(ms_view *v, size_t i)
{
    qentry out = v->heap[i], last = v->heap[--v->hn];
    if (i < v->hn) {
        if (i > 0 && qbefore(&last, &v->heap[(i - 1) / 2]))
            sift_up(v, i, last);
        else
            sift_down(v, i, last);
    }
    return out;
}

static qentry heap_pop(ms_view *v)
{
    return heap_take(v, 0);
}

static int entry_valid(const ms_view *v, const qentry *q)
{
    return q->gen == v->qgen[q->x] && (q->demand || v->queued[q->x]);
}

static void drop_invalid_top(ms_view *v)
{
    while (v->hn && !entry_valid(v, &v->heap[0]))
        heap_pop(v);
}

/* Drops the stale entries (superseded, expired or cancelled requests) that
 * lazy deletion leaves behind once the heap holds over 4x the live entries
 * (at most n_queued prefetches + J demands), so
 * policies that resubmit or clear the queue every layer keep the heap small.
 * Pop order is unchanged: qbefore is a total order (seq is unique). */
void eng_compact_heap(ms_view *v)
{
    if (v->hn < 1024 || v->hn <= 4 * (v->n_queued + v->J))
        return;
    size_t w = 0;
    for (size_t i = 0; i < v->hn; i++)
        if (entry_valid(v, &v->heap[i]))
            v->heap[w++] = v->heap[i];
    v->hn = w;
    for (size_t i = w / 2; i-- > 0;)
        sift_down(v, i, v->heap[i]);
}

void eng_dequeue_prefetch(ms_view *v, uint32_t x)
{
    if (v->queued[x])
        v->n_queued--;
    v->queued[x] = 0;
    v->qgen[x]++;
}

/* ------------------------------------------------------------------ */
/* the copy engine */

static void start_copy(ms_view *v, const qentry *q, double start)
{
    uint32_t x = q->x;
    double bytes = v->layer_bytes[x / v->J];
    v->clock = start;
    if (!q->demand) {
        eng_dequeue_prefetch(v, x);
        if (!eng_cache_admits(v, x) || eng_make_room(v, x)) {
            v->m->prefetch_dropped++;
            v->clock = v->now;
            /* No copy can start before `start` any more: it is the link's free
             * time or the earliest issue time of what is left (next_copy), so
             * the next pick is the same, without next_copy's scan (a queue of
             * thousands of droppable prefetches was quadratic). */
            v->link_free = fmax(v->link_free, start);
            return;
        }
        eng_occupy(v, x);
        v->from_prefetch[x] = PF_AHEAD;
        v->m->prefetch_copied++;
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
/* The copy the engine starts next and when: once the link is free (or, if
 * nothing has been issued by then, at the earliest issue time), the best
 * entry issued by that time.  A request whose asynchronous decision cost has
 * not elapsed yet never holds back the ones already issued.  The usual case
 * (the best entry is already issued) costs nothing; otherwise a scan. */
static int next_copy(const ms_view *v, size_t *idx, double *start)
{
    if (v->heap[0].issue_t <= v->link_free) {
        *idx = 0;
        *start = v->link_free;
        return 1;
    }
    double earliest = INFINITY;
    for (size_t i = 0; i < v->hn; i++)
        if (entry_valid(v, &v->heap[i]))
            earliest = fmin(earliest, v->heap[i].issue_t);
    if (!isfinite(earliest))
        return 0;
    double t = fmax(v->link_free, earliest);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < v->hn; i++)
        if (entry_valid(v, &v->heap[i]) && v->heap[i].issue_t <= t &&
            (best == SIZE_MAX || qbefore(&v->heap[i], &v->heap[best])))
            best = i;
    *idx = best;
    *start = t;
    return 1;
}

void eng_advance(ms_view *v, double T)
{
    for (;;) {
        drop_invalid_top(v);
        if (!v->hn || v->failed)
            return;
        size_t i;
        double start;
        if (!next_copy(v, &i, &start) || start >= T)
            return;
        qentry q = heap_take(v, i);
        start_copy(v, &q, start);
    }
}

/* On-demand loads sit at the head of the queue: start them all now. */
void eng_start_demands(ms_view *v)
{
    for (;;) {
        drop_invalid_top(v);
        if (!v->hn || !v->heap[0].demand || v->failed)
            return;
        qentry q = heap_pop(v);
        start_copy(v, &q, fmax(v->link_free, q.issue_t));
    }
}
