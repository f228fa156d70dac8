/* The H2D copy queue (a priority heap: on-demand loads first, then
 * prefetches by priority, FIFO on ties) and the copy engine that serves it
 * one copy at a time.  With several GPUs every GPU's link has its own queue
 * and links.c serves them; the heap primitives here serve both. */
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
static void sift_up(eng_heap *h, size_t i, qentry q)
{
    while (i > 0 && qbefore(&q, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = q;
}

void eng_q_push(eng_heap *h, qentry q)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->a = ms_xrealloc(h->a, h->cap, sizeof *h->a);
    }
    sift_up(h, h->n++, q);
}

void eng_heap_push(ms_view *v, qentry q)
{
    if (v->G > 1)
        eng_links_push(v, q);
    else
        eng_q_push(&v->q, q);
}

/* Places q at hole i and moves it down to its place among a[0..n). */
static void sift_down(eng_heap *h, size_t i, qentry q)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && qbefore(&h->a[c + 1], &h->a[c]))
            c++;
        if (!qbefore(&h->a[c], &q))
            break;
        h->a[i] = h->a[c];
        i = c;
    }
    h->a[i] = q;
}

/* Removes and returns a[i]. */
qentry eng_q_take(eng_heap *h, size_t i)
{
    qentry out = h->a[i], last = h->a[--h->n];
    if (i < h->n) {
        if (i > 0 && qbefore(&last, &h->a[(i - 1) / 2]))
            sift_up(h, i, last);
        else
            sift_down(h, i, last);
    }
    return out;
}

int eng_q_valid(const ms_view *v, const qentry *q)
{
    return q->gen == v->qgen[q->x] && (q->demand || v->queued[q->x]);
}

void eng_q_drop_invalid_top(const ms_view *v, eng_heap *h)
{
    while (h->n && !eng_q_valid(v, &h->a[0]))
        eng_q_take(h, 0);
}

/* Drops the stale entries of one heap (see eng_compact_heap). */
static void compact(const ms_view *v, eng_heap *h)
{
    size_t w = 0;
    for (size_t i = 0; i < h->n; i++)
        if (eng_q_valid(v, &h->a[i]))
            h->a[w++] = h->a[i];
    h->n = w;
    for (size_t i = w / 2; i-- > 0;)
        sift_down(h, i, h->a[i]);
}

/* Drops the stale entries (superseded, expired or cancelled requests) that
 * lazy deletion leaves behind once the heap holds over 4x the live entries
 * (at most n_queued prefetches + J demands), so
 * policies that resubmit or clear the queue every layer keep the heap small.
 * Pop order is unchanged: qbefore is a total order (seq is unique). */
void eng_compact_heap(ms_view *v)
{
    if (v->G > 1) {
        for (uint32_t g = 0; g < v->G; g++)
            if (v->links[g].q.n >= 1024 && v->links[g].q.n > 4 * (v->n_queued + v->J))
                compact(v, &v->links[g].q);
        return;
    }
    if (v->q.n < 1024 || v->q.n <= 4 * (v->n_queued + v->J))
        return;
    compact(v, &v->q);
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
            v->link_free = fmax(v->link_free, start);
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

/* The copy a link starts next and when: once the link is free (or, if
 * nothing has been issued by then, at the earliest issue time), the best
 * entry issued by that time.  A request whose asynchronous decision cost has
 * not elapsed yet never holds back the ones already issued.  The usual case
 * (the best entry is already issued) costs nothing; otherwise a scan.
 * The top of h must be valid (eng_q_drop_invalid_top). */
int eng_q_next(const ms_view *v, const eng_heap *h, double link_free, size_t *idx, double *start)
{
    if (h->a[0].issue_t <= link_free) {
        *idx = 0;
        *start = link_free;
        return 1;
    }
    double earliest = INFINITY;
    for (size_t i = 0; i < h->n; i++)
        if (eng_q_valid(v, &h->a[i]))
            earliest = fmin(earliest, h->a[i].issue_t);
    if (!isfinite(earliest))
        return 0;
    double t = fmax(link_free, earliest);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < h->n; i++)
        if (eng_q_valid(v, &h->a[i]) && h->a[i].issue_t <= t &&
            (best == SIZE_MAX || qbefore(&h->a[i], &h->a[best])))
            best = i;
    *idx = best;
    *start = t;
    return 1;
}

/* Starts every queued copy whose start time is before T. */
void eng_advance(ms_view *v, double T)
{
    if (v->G > 1) {
        eng_links_advance(v, T);
        return;
    }
    for (;;) {
        eng_q_drop_invalid_top(v, &v->q);
        if (!v->q.n || v->failed)
            return;
        size_t i;
        double start;
        if (!eng_q_next(v, &v->q, v->link_free, &i, &start) || start >= T)
            return;
        qentry q = eng_q_take(&v->q, i);
        start_copy(v, &q, start);
    }
}

/* On-demand loads sit at the head of the queue: start them all now.  With
 * several GPUs they start in time order with every link's copies
 * (eng_links_settle before the layer's compute). */
void eng_start_demands(ms_view *v)
{
    if (v->G > 1)
        return;
    for (;;) {
        eng_q_drop_invalid_top(v, &v->q);
        if (!v->q.n || !v->q.a[0].demand || v->failed)
            return;
        qentry q = eng_q_take(&v->q, 0);
        start_copy(v, &q, fmax(v->link_free, q.issue_t));
    }
}
