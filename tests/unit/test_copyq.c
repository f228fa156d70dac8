/* The engine's copy queue (sim/engine/qheap.h, copyq.c) is a heap indexed by
 * expert: a new request for x, or x's dequeue, takes x's old entry out at
 * once.  It replaced a heap with lazy deletion (entries stayed until popped
 * and were skipped when their generation or queued flag said they were
 * stale).  Both must serve the same requests in the same order: seeded
 * random sequences of requests (demands and prefetches, priorities drawn from
 * a few values so ties are common, replacements of queued experts, dequeues)
 * and serves (the top, or eng_q_next's pick at a link-free time, issue times
 * in the future too), compared step by step with the old heap kept here as
 * the reference (copied from copyq.c of main d602774). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "check.h"
#include "sim/engine/qheap.h"

#define NX 48

/* ---- the reference: lazy deletion ---- */

typedef struct {
    qentry a[1 << 16];
    size_t n;
    uint32_t qgen[NX];
    uint8_t queued[NX];
} lazy_q;

static int qbefore(const qentry *a, const qentry *b)
{
    if (a->demand != b->demand)
        return a->demand > b->demand;
    if (a->prio != b->prio)
        return a->prio > b->prio;
    return a->seq < b->seq;
}

static void lazy_sift_up(lazy_q *h, size_t i, qentry q)
{
    while (i > 0 && qbefore(&q, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = q;
}

static void lazy_sift_down(lazy_q *h, size_t i, qentry q)
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

static qentry lazy_take(lazy_q *h, size_t i)
{
    qentry out = h->a[i], last = h->a[--h->n];
    if (i < h->n) {
        if (i > 0 && qbefore(&last, &h->a[(i - 1) / 2]))
            lazy_sift_up(h, i, last);
        else
            lazy_sift_down(h, i, last);
    }
    return out;
}

static int lazy_valid(const lazy_q *h, const qentry *q)
{
    return q->gen == h->qgen[q->x] && (q->demand || h->queued[q->x]);
}

static void lazy_drop_invalid_top(lazy_q *h)
{
    while (h->n && !lazy_valid(h, &h->a[0]))
        lazy_take(h, 0);
}

static int lazy_next(const lazy_q *h, double link_free, size_t *idx, double *start)
{
    if (h->a[0].issue_t <= link_free) {
        *idx = 0;
        *start = link_free;
        return 1;
    }
    double earliest = INFINITY;
    for (size_t i = 0; i < h->n; i++)
        if (lazy_valid(h, &h->a[i]))
            earliest = fmin(earliest, h->a[i].issue_t);
    if (!isfinite(earliest))
        return 0;
    double t = fmax(link_free, earliest);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < h->n; i++)
        if (lazy_valid(h, &h->a[i]) && h->a[i].issue_t <= t && (best == SIZE_MAX || qbefore(&h->a[i], &h->a[best])))
            best = i;
    *idx = best;
    *start = t;
    return 1;
}

/* ---- the two side by side ---- */

typedef struct {
    lazy_q *ref;
    eng_heap h;
    uint32_t pos[NX];
    uint64_t seq;
} pair;

static void request(pair *p, uint32_t x, int demand, double prio, double issue_t)
{
    p->ref->qgen[x]++;
    if (!demand)
        p->ref->queued[x] = 1;
    qentry q = {x, p->ref->qgen[x], (uint8_t)demand, prio, issue_t, p->seq++};
    lazy_sift_up(p->ref, p->ref->n++, q);
    eng_q_set(&p->h, q); /* x's old entry, if any, replaced in place */
}

static void dequeue(pair *p, uint32_t x)
{
    p->ref->queued[x] = 0;
    p->ref->qgen[x]++;
    if (p->pos[x] != EQ_NONE)
        eng_q_take(&p->h, p->pos[x]);
}

static uint64_t n_deferred; /* serves where the top was not issued by t */

/* Serves one request at link-free time t from both; 1 when both served one
 * and it was the same, 0 when both had none, -1 on a difference. */
static int serve(pair *p, double t)
{
    lazy_drop_invalid_top(p->ref);
    if (!p->ref->n || !p->h.n)
        return p->ref->n || p->h.n ? -1 : 0;
    size_t i, j;
    double s1, s2;
    int r1 = lazy_next(p->ref, t, &i, &s1), r2 = eng_q_next(&p->h, t, &j, &s2);
    if (r1 != r2)
        return -1;
    if (!r1)
        return 0;
    n_deferred += i != 0 || s1 != t;
    qentry a = lazy_take(p->ref, i), b = eng_q_take(&p->h, j);
    if (!a.demand) /* the engine dequeues a prefetch it starts */
        dequeue(p, a.x);
    return a.x == b.x && a.seq == b.seq && s1 == s2 ? 1 : -1;
}

static void test_same_serves(void)
{
    static lazy_q ref;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 18);
    static const double prios[] = {1, 2, 3, 0.5, 2};
    uint64_t served = 0, replaced = 0;
    int bad = 0;
    for (int round = 0; round < 300 && !bad; round++) {
        memset(&ref, 0, sizeof ref);
        pair p = {&ref, {0}, {0}, 0};
        for (uint32_t x = 0; x < NX; x++)
            p.pos[x] = EQ_NONE;
        p.h.pos = p.pos;
        double now = 0;
        for (int op = 0; op < 400 && !bad; op++) {
            uint32_t what = (uint32_t)gsl_rng_uniform_int(r, 100), x = (uint32_t)gsl_rng_uniform_int(r, NX);
            if (what < 55) { /* a prefetch request (or a new priority for a queued one) */
                replaced += p.pos[x] != EQ_NONE;
                double issue = now + (gsl_rng_uniform_int(r, 4) == 0 ? gsl_rng_uniform(r) : 0.0);
                request(&p, x, 0, prios[gsl_rng_uniform_int(r, 5)], issue);
            } else if (what < 65) { /* a demand load */
                request(&p, x, 1, 0.0, now);
            } else if (what < 75) { /* a prefetch cancelled or dropped */
                if (ref.queued[x])
                    dequeue(&p, x);
            } else { /* the link serves one, possibly before the best is issued */
                now += gsl_rng_uniform(r) * 0.3;
                int s = serve(&p, now);
                bad |= s < 0;
                served += s > 0;
            }
        }
        while (!bad) { /* drain */
            int s = serve(&p, now += 1.0);
            bad |= s < 0;
            if (s <= 0)
                break;
            served++;
        }
        free(p.h.a);
    }
    CHECK(!bad);
    CHECK(served > 30000);
    CHECK(replaced > 20000); /* resubmissions of queued experts */
    CHECK(n_deferred > 1000);/* serves where the top was not issued yet */
    gsl_rng_free(r);
}

/* By hand: prefetches x=1 prio 2, x=2 prio 3, x=3 prio 3, a demand x=4, then
 * x=2 resubmitted at prio 1.  Served: 4 (demand), 3 (prio 3), 1 (prio 2),
 * 2 (prio 1). */
static void test_by_hand(void)
{
    uint32_t pos[8];
    for (int i = 0; i < 8; i++)
        pos[i] = EQ_NONE;
    eng_heap h = {.pos = pos};
    uint64_t seq = 0;
    eng_q_push(&h, (qentry){1, 1, 0, 2.0, 0.0, seq++});
    eng_q_push(&h, (qentry){2, 1, 0, 3.0, 0.0, seq++});
    eng_q_push(&h, (qentry){3, 1, 0, 3.0, 0.0, seq++});
    eng_q_push(&h, (qentry){4, 1, 1, 0.0, 0.0, seq++});
    eng_q_take(&h, pos[2]);
    eng_q_push(&h, (qentry){2, 2, 0, 1.0, 0.0, seq++});
    CHECK_EQ_INT(h.n, 4);
    static const uint32_t want[4] = {4, 3, 1, 2};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(eng_q_take(&h, 0).x, want[i]);
        CHECK_EQ_INT(pos[want[i]], EQ_NONE);
    }
    free(h.a);
}

int main(void)
{
    test_by_hand();
    test_same_serves();
    CHECK_DONE();
}
