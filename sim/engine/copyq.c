/* The H2D copy queue (a priority heap: on-demand loads first, then
 * prefetches by priority, FIFO on ties) and the copy engine that serves it
 * one copy at a time.  With several GPUs every GPU's link has its own queue
 * and links.c serves them; the heap primitives here serve both. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/state.h"

/* copy queue: binary max-heap indexed by expert.  Every invalidation of a
 * request (a new request for x, or its prefetch request dequeued) takes the
 * old entry out at once, so the heaps hold exactly the live requests and
 * pop them in qbefore's order, a total order (seq is unique): the order the
 * lazy-deletion heap it replaces popped its valid entries in. */

static int qbefore(const qentry *a, const qentry *b)
{
    if (a->demand != b->demand)
        return a->demand > b->demand;
    if (a->prio != b->prio)
        return a->prio > b->prio;
    return a->seq < b->seq;
}

static void put(eng_heap *h, size_t i, qentry q)
{
    h->a[i] = q;
    h->pos[q.x] = (uint32_t)i;
}

/* Places q at hole i and moves it up to its place. */
static void sift_up(eng_heap *h, size_t i, qentry q)
{
    while (i > 0 && qbefore(&q, &h->a[(i - 1) / 2])) {
        put(h, i, h->a[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    put(h, i, q);
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
        put(h, i, h->a[c]);
        i = c;
    }
    put(h, i, q);
}

/* Adds q; q.x must have no entry in any queue (eng_heap_push sees to it). */
void eng_q_push(eng_heap *h, qentry q)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->a = ms_xrealloc(h->a, h->cap, sizeof *h->a);
    }
    sift_up(h, h->n++, q);
}

/* Removes and returns a[i]. */
qentry eng_q_take(eng_heap *h, size_t i)
{
    qentry out = h->a[i], last = h->a[--h->n];
    h->pos[out.x] = EQ_NONE;
    if (i < h->n) {
        if (i > 0 && qbefore(&last, &h->a[(i - 1) / 2]))
            sift_up(h, i, last);
        else
            sift_down(h, i, last);
    }
    return out;
}

/* The queue that holds x's entry (its GPU's link with several GPUs). */
static eng_heap *queue_of(ms_view *v, uint32_t x)
{
    return v->G > 1 ? &v->links[v->gpu_of[x]].q : &v->q;
}

/* Takes x's entry, if any, out of its queue. */
static void drop_entry(ms_view *v, uint32_t x)
{
    if (v->qpos[x] != EQ_NONE)
        eng_q_take(queue_of(v, x), v->qpos[x]);
}

void eng_q_set(eng_heap *h, qentry q)
{
    size_t i = h->pos[q.x];
    if (i == EQ_NONE)
        eng_q_push(h, q);
    else if (i > 0 && qbefore(&q, &h->a[(i - 1) / 2]))
        sift_up(h, i, q);
    else
        sift_down(h, i, q);
}

/* Queues q, replacing x's earlier request if it has one (x's entries always
 * go to the same queue: its GPU's, fixed by the placement). */
void eng_heap_push(ms_view *v, qentry q)
{
    eng_q_set(queue_of(v, q.x), q);
}

void eng_dequeue_prefetch(ms_view *v, uint32_t x)
{
    if (v->queued[x])
        v->n_queued--;
    v->queued[x] = 0;
    v->qgen[x]++;
    drop_entry(v, x);
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

/* The copy a link starts next and when: once the link is free (or, if
 * nothing has been issued by then, at the earliest issue time), the best
 * entry issued by that time.  A request whose asynchronous decision cost has
 * not elapsed yet never holds back the ones already issued.  The usual case
 * (the best entry is already issued) costs nothing; otherwise a scan.
 * h must not be empty. */
int eng_q_next(const eng_heap *h, double link_free, size_t *idx, double *start)
{
    if (h->a[0].issue_t <= link_free) {
        *idx = 0;
        *start = link_free;
        return 1;
    }
    /* One pass: the earliest issue time, the best entry issued by link_free,
     * and the best of those issued at the earliest time.  If anything is
     * issued by link_free, the copy starts then and the first is the pick;
     * else it starts at the earliest issue time, when exactly the second
     * set is issued. */
    double earliest = INFINITY;
    size_t best_free = SIZE_MAX, best_first = SIZE_MAX;
    for (size_t i = 0; i < h->n; i++) {
        const qentry *q = &h->a[i];
        if (q->issue_t <= link_free && (best_free == SIZE_MAX || qbefore(q, &h->a[best_free])))
            best_free = i;
        if (q->issue_t < earliest) { /* ms_fmin's value: issue times are never NaN or -0 (sums of times >= +0) */
            earliest = q->issue_t;
            best_first = i;
        } else if (q->issue_t == earliest && best_first != SIZE_MAX && qbefore(q, &h->a[best_first])) {
            best_first = i;
        }
    }
    if (!isfinite(earliest))
        return 0;
    *start = ms_fmax(link_free, earliest);
    *idx = earliest <= link_free ? best_free : best_first;
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
        if (!v->q.n || v->failed)
            return;
        size_t i;
        double start;
        if (!eng_q_next(&v->q, v->link_free, &i, &start) || start >= T)
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
        if (!v->q.n || !v->q.a[0].demand || v->failed)
            return;
        qentry q = eng_q_take(&v->q, 0);
        start_copy(v, &q, ms_fmax(v->link_free, q.issue_t));
    }
}
