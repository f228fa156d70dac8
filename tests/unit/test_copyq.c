/* The engine's copy queue (sim/engine/qset.h, copyq.c) holds at most one
 * request per expert: a new request for x replaces x's, a dequeue takes it
 * out at once.  It must serve the same requests in the same order as
 *  - the heap with lazy deletion of main d602774 (entries stayed until
 *    popped and were skipped when their generation or queued flag said they
 *    were stale), kept here as a reference: seeded random sequences of
 *    requests (demands and prefetches, priorities drawn from a few values so
 *    ties are common, replacements of queued experts, dequeues) and serves
 *    (eng_qset_next's pick at a link-free time, issue times in the future
 *    too), compared step by step;
 *  - a plain scan over the live requests (the one-pass eng_q_next of the
 *    indexed heap that followed it): seeded splitmix sequences over sets of
 *    1..300 experts, and every fourth one over 1..2000 (one block of
 *    QS_BLOCK or many, a partial last one, tournament trees up to 7 levels
 *    deep, brought up to date path by path or all at once), with a layer's
 *    requests expired at once, bursts of resubmissions, infinite issue
 *    times, and both queries (eng_qset_best, eng_qset_next); a second pass
 *    (seeds 401..800) adds half the resubmission runs in one
 *    eng_qset_add_burst (the fresh requests' bests marked stale, experts
 *    with a request replaced), takes a quarter by eng_qset_drop and expires
 *    half the layers by one eng_qset_drop_list. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "check.h"
#include "splitmix.h"
#include "sim/engine/qset.h"

#define NX 48

/* ---- the reference: lazy deletion ---- */

/* A request as the reference keeps it: with the generation of x's requests
 * it belongs to (a newer request or a dequeue makes it stale). */
typedef struct {
    qentry q;
    uint32_t gen;
} lazy_entry;

typedef struct {
    lazy_entry a[1 << 16];
    size_t n;
    uint32_t qgen[NX];
    uint8_t queued[NX];
} lazy_q;

/* the order under test is the queue's own (qset.h); the references differ in how they find its best */
#define qbefore eng_qbefore

static void lazy_sift_up(lazy_q *h, size_t i, lazy_entry q)
{
    while (i > 0 && qbefore(&q.q, &h->a[(i - 1) / 2].q)) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = q;
}

static void lazy_sift_down(lazy_q *h, size_t i, lazy_entry q)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && qbefore(&h->a[c + 1].q, &h->a[c].q))
            c++;
        if (!qbefore(&h->a[c].q, &q.q))
            break;
        h->a[i] = h->a[c];
        i = c;
    }
    h->a[i] = q;
}

static qentry lazy_take(lazy_q *h, size_t i)
{
    lazy_entry out = h->a[i], last = h->a[--h->n];
    if (i < h->n) {
        if (i > 0 && qbefore(&last.q, &h->a[(i - 1) / 2].q))
            lazy_sift_up(h, i, last);
        else
            lazy_sift_down(h, i, last);
    }
    return out.q;
}

static int lazy_valid(const lazy_q *h, const lazy_entry *e)
{
    return e->gen == h->qgen[e->q.x] && (e->q.demand || h->queued[e->q.x]);
}

static void lazy_drop_invalid_top(lazy_q *h)
{
    while (h->n && !lazy_valid(h, &h->a[0]))
        lazy_take(h, 0);
}

static int lazy_next(const lazy_q *h, double link_free, size_t *idx, double *start)
{
    if (h->a[0].q.issue_t <= link_free) {
        *idx = 0;
        *start = link_free;
        return 1;
    }
    double earliest = INFINITY;
    for (size_t i = 0; i < h->n; i++)
        if (lazy_valid(h, &h->a[i]))
            earliest = fmin(earliest, h->a[i].q.issue_t);
    if (!isfinite(earliest))
        return 0;
    double t = fmax(link_free, earliest);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < h->n; i++)
        if (lazy_valid(h, &h->a[i]) && h->a[i].q.issue_t <= t &&
            (best == SIZE_MAX || qbefore(&h->a[i].q, &h->a[best].q)))
            best = i;
    *idx = best;
    *start = t;
    return 1;
}

/* ---- the two side by side ---- */

typedef struct {
    lazy_q *ref;
    eng_qset h;
    uint64_t seq;
} pair;

static void request(pair *p, uint32_t x, int demand, double prio, double issue_t)
{
    p->ref->qgen[x]++;
    if (!demand)
        p->ref->queued[x] = 1;
    qentry q = {.x = x, .demand = (uint8_t)demand, .prio = prio, .issue_t = issue_t, .seq = p->seq++};
    lazy_sift_up(p->ref, p->ref->n++, (lazy_entry){q, p->ref->qgen[x]});
    eng_qset_set(&p->h, q); /* x's old request, if any, replaced */
}

static void dequeue(pair *p, uint32_t x)
{
    p->ref->queued[x] = 0;
    p->ref->qgen[x]++;
    if (eng_qset_has(&p->h, x))
        eng_qset_take(&p->h, x);
}

static uint64_t n_deferred; /* serves where the top was not issued by t */

/* Serves one request at link-free time t from both; 1 when both served one
 * and it was the same, 0 when both had none, -1 on a difference. */
static int serve(pair *p, double t)
{
    lazy_drop_invalid_top(p->ref);
    if (!p->ref->n || !p->h.n)
        return p->ref->n || p->h.n ? -1 : 0;
    size_t i;
    uint32_t j;
    double s1, s2;
    int r1 = lazy_next(p->ref, t, &i, &s1), r2 = eng_qset_next(&p->h, t, &j, &s2);
    if (r1 != r2)
        return -1;
    if (!r1)
        return 0;
    n_deferred += i != 0 || s1 != t;
    qentry a = lazy_take(p->ref, i), b = eng_qset_take(&p->h, j);
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
        pair p = {&ref, {0}, 0};
        eng_qset_init(&p.h, NX);
        double now = 0;
        for (int op = 0; op < 400 && !bad; op++) {
            uint32_t what = (uint32_t)gsl_rng_uniform_int(r, 100), x = (uint32_t)gsl_rng_uniform_int(r, NX);
            if (what < 55) { /* a prefetch request (or a new priority for a queued one) */
                replaced += eng_qset_has(&p.h, x);
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
        eng_qset_free(&p.h);
    }
    CHECK(!bad);
    CHECK(served > 30000);
    CHECK(replaced > 20000); /* resubmissions of queued experts */
    CHECK(n_deferred > 1000);/* serves where the top was not issued yet */
    gsl_rng_free(r);
}


/* ---- the plain scan ---- */

#define SX 2000

typedef struct {
    qentry e[SX];
    uint8_t live[SX];
    uint32_t nx, n;
} scan_q;

/* The best live request, EQ_NONE when none. */
static uint32_t scan_best(const scan_q *s)
{
    uint32_t best = EQ_NONE;
    for (uint32_t x = 0; x < s->nx; x++)
        if (s->live[x] && (best == EQ_NONE || qbefore(&s->e[x], &s->e[best])))
            best = x;
    return best;
}

/* The one-pass pick of the indexed heap's eng_q_next, over the live requests. */
static int scan_next(const scan_q *s, double link_free, uint32_t *pick, double *start)
{
    uint32_t top = scan_best(s);
    if (s->e[top].issue_t <= link_free) {
        *pick = top;
        *start = link_free;
        return 1;
    }
    double earliest = INFINITY;
    uint32_t best_free = EQ_NONE, best_first = EQ_NONE;
    for (uint32_t x = 0; x < s->nx; x++) {
        if (!s->live[x])
            continue;
        const qentry *q = &s->e[x];
        if (q->issue_t <= link_free && (best_free == EQ_NONE || qbefore(q, &s->e[best_free])))
            best_free = x;
        if (q->issue_t < earliest) {
            earliest = q->issue_t;
            best_first = x;
        } else if (q->issue_t == earliest && best_first != EQ_NONE && qbefore(q, &s->e[best_first])) {
            best_first = x;
        }
    }
    if (!isfinite(earliest))
        return 0;
    *start = fmax(link_free, earliest);
    *pick = earliest <= link_free ? best_free : best_first;
    return 1;
}

static struct {
    uint64_t bests, nexts, deferred, none_finite, expired, replaced, burst_added, burst_replaced, dropped, listed_expired;
} scan_seen;
static int scan_bursts; /* the second pass: bursts (eng_qset_add_burst) and eng_qset_drop as well */

/* A request for x in both: priorities and issue times from a few values
 * (ties common; now and then an issue time not finite). */
static void scan_request(scan_q *s, eng_qset *q, uint32_t x, uint64_t *seq, double now)
{
    static const double prios[] = {1, 2, 3, 0.5, 2, 1e-8};
    static const double later[] = {0, 0, 0.1, 0.25, 0.5, INFINITY};
    qentry r = {.x = x, .demand = (uint8_t)(below(8) == 0), .prio = 0.0, .issue_t = now + later[below(6)], .seq = (*seq)++};
    if (!r.demand)
        r.prio = prios[below(6)];
    if (s->live[x] && below(2)) /* view_prefetch: a resubmission keeps its earlier issue time */
        r.issue_t = fmin(r.issue_t, s->e[x].issue_t);
    scan_seen.replaced += s->live[x];
    s->n += !s->live[x];
    s->e[x] = r;
    s->live[x] = 1;
    eng_qset_set(q, r);
}

/* view_prefetch_list's burst (eng_qset_add_burst) of prefetches for the
 * experts of [x0, x0 + n) in order: one issue time, priorities by expert
 * from a few values, consecutive seqs; an expert with a request (now and
 * then an on-demand load) has it replaced. */
static void scan_burst(scan_q *s, eng_qset *q, uint32_t x0, uint32_t n, uint64_t *seq, double now)
{
    static const double prios[] = {1, 2, 3, 0.5, 2, 1e-8};
    static const double later[] = {0, 0, 0.1, 0.25, 0.5, INFINITY};
    static uint32_t xs[SX];
    static uint64_t seqs[SX];
    static double prio[SX];
    double issue_t = now + later[below(6)];
    uint32_t k = 0;
    for (uint32_t y = x0; y < s->nx && y < x0 + n; y++) {
        xs[k] = y;
        seqs[k] = (*seq)++;
        prio[y] = prios[below(6)];
        scan_seen.burst_replaced += s->live[y];
        scan_seen.burst_added += !s->live[y];
        s->n += !s->live[y];
        s->e[y] = (qentry){.x = y, .demand = 0, .prio = prio[y], .issue_t = issue_t, .seq = seqs[k]};
        s->live[y] = 1;
        k++;
    }
    eng_qset_add_burst(q, xs, seqs, k, prio, issue_t);
}

/* Takes x from both when live (now and then by eng_qset_drop); 0 when the
 * two disagree on whether it is. */
static int scan_take(scan_q *s, eng_qset *q, uint32_t x)
{
    if (s->live[x] != eng_qset_has(q, x))
        return 0;
    if (!s->live[x])
        return 1;
    s->live[x] = 0;
    s->n--;
    if (scan_bursts && below(4) == 0) {
        scan_seen.dropped++;
        eng_qset_drop(q, x);
        return !eng_qset_has(q, x);
    }
    qentry a = eng_qset_take(q, x);
    return a.seq == s->e[x].seq;
}

/* One query of both; 0 on a difference. */
static int scan_serve(scan_q *s, eng_qset *q, double now)
{
    if (q->n == 0)
        return scan_best(s) == EQ_NONE && eng_qset_best(q) == EQ_NONE;
    if (below(3) == 0) { /* eng_start_demands' query */
        scan_seen.bests++;
        uint32_t a = scan_best(s), b = eng_qset_best(q);
        return a == b && (!s->e[a].demand || scan_take(s, q, a));
    }
    uint32_t a, b;
    double sa, sb;
    int ra = scan_next(s, now, &a, &sa), rb = eng_qset_next(q, now, &b, &sb);
    if (ra != rb)
        return 0;
    scan_seen.nexts++;
    if (!ra) {
        scan_seen.none_finite++;
        return 1;
    }
    scan_seen.deferred += s->e[scan_best(s)].issue_t > now; /* the slow path */
    return a == b && sa == sb && scan_take(s, q, a);
}

/* bursts: the second pass, seeds 401..800, where half the runs of
 * resubmissions are one burst (now and then of every expert), a quarter of
 * the takes are drops and half the layers expire by one drop list. */
static void test_same_as_scan(int bursts)
{
    static scan_q s;
    int bad = 0;
    memset(&scan_seen, 0, sizeof scan_seen);
    scan_bursts = bursts;
    for (uint64_t seed = bursts ? 401 : 1; seed <= (bursts ? 800u : 400u) && !bad; seed++) {
        rng_state = seed;
        memset(&s, 0, sizeof s);
        s.nx = 1 + below(seed % 4 ? 300 : SX);
        uint32_t J = 1 + below(s.nx < 64 ? s.nx : 64); /* a "layer": J consecutive experts */
        eng_qset q;
        eng_qset_init(&q, s.nx);
        uint64_t seq = 0;
        double now = 0;
        for (int op = 0; op < 600 && !bad; op++) {
            uint32_t what = below(100), x = below(s.nx);
            if (what < 40) {
                scan_request(&s, &q, x, &seq, now);
            } else if (what < 45) { /* a prefetcher resubmits a run of experts, one by one or in a burst */
                if (scan_bursts && below(2))
                    scan_burst(&s, &q, x, below(16) ? 3 * J : s.nx, &seq, now);
                else
                    for (uint32_t y = x; y < s.nx && y < x + 3 * J; y++)
                        scan_request(&s, &q, y, &seq, now);
            } else if (what < 55) {
                bad |= !scan_take(&s, &q, x);
            } else if (what < 60) { /* a layer runs: its queued requests expire */
                uint32_t l0 = x / J * J;
                if (bursts && below(2)) { /* all at once (eng_qset_drop_list), the ones without a request too */
                    static uint32_t xs[SX];
                    uint32_t k = 0;
                    for (uint32_t y = l0; y < s.nx && y < l0 + J; y++) {
                        scan_seen.listed_expired += s.live[y];
                        s.n -= s.live[y];
                        s.live[y] = 0;
                        xs[k++] = y;
                    }
                    eng_qset_drop_list(&q, xs, k);
                    for (uint32_t i = 0; i < k; i++)
                        bad |= eng_qset_has(&q, xs[i]);
                } else {
                    for (uint32_t y = l0; y < s.nx && y < l0 + J; y++) {
                        scan_seen.expired += s.live[y];
                        bad |= !scan_take(&s, &q, y);
                    }
                }
            } else {
                now += below(4) * 0.05;
                bad |= !scan_serve(&s, &q, now - below(3) * 0.2); /* an idle link: free since earlier */
            }
            bad |= q.n != s.n;
        }
        while (!bad && q.n) { /* drain, until only infinite issue times are left */
            uint64_t none = scan_seen.none_finite;
            bad |= !scan_serve(&s, &q, now += 1.0);
            if (scan_seen.none_finite != none)
                break;
        }
        for (uint32_t y = 0; y < s.nx && !bad; y++)
            bad |= !scan_take(&s, &q, y);
        bad |= q.n != 0 || eng_qset_best(&q) != EQ_NONE;
        eng_qset_free(&q);
    }
    CHECK(!bad);
    if (bursts) { /* the sequences exercised the burst and the drop */
        CHECK(scan_seen.burst_added > 100000);   /* experts without a request */
        CHECK(scan_seen.burst_replaced > 100000); /* experts with one */
        CHECK(scan_seen.dropped > 50000);
        CHECK(scan_seen.listed_expired > 50000);
        CHECK(scan_seen.deferred > 50000);
        CHECK(scan_seen.expired > 50000);
        return;
    }
    CHECK(scan_seen.nexts > 80000);
    CHECK(scan_seen.bests > 40000);
    CHECK(scan_seen.deferred > 50000);   /* picks where the best was not issued yet */
    CHECK(scan_seen.none_finite > 1000); /* only infinite issue times left */
    CHECK(scan_seen.expired > 100000);
    CHECK(scan_seen.replaced > 300000);
}

/* By hand: prefetches x=1 prio 2, x=2 prio 3, x=3 prio 3, a demand x=4, then
 * x=2 resubmitted at prio 1.  Served: 4 (demand), 3 (prio 3), 1 (prio 2),
 * 2 (prio 1).  x=70 (a second block) prio 2.5 issued at 1: at link-free time
 * 0 it waits for 1 (nothing issued by then); at 2 it is served before 1. */
static void test_by_hand(void)
{
    eng_qset q;
    eng_qset_init(&q, 100);
    uint64_t seq = 0;
    eng_qset_set(&q, (qentry){.x = 1, .prio = 2.0, .issue_t = 0.0, .seq = seq++});
    eng_qset_set(&q, (qentry){.x = 2, .prio = 3.0, .issue_t = 0.0, .seq = seq++});
    eng_qset_set(&q, (qentry){.x = 3, .prio = 3.0, .issue_t = 0.0, .seq = seq++});
    eng_qset_set(&q, (qentry){.x = 4, .demand = 1, .prio = 0.0, .issue_t = 0.0, .seq = seq++});
    eng_qset_set(&q, (qentry){.x = 2, .demand = 0, .prio = 1.0, .issue_t = 0.0, .seq = seq++});
    CHECK_EQ_INT(q.n, 4);
    static const uint32_t want[4] = {4, 3, 1, 2};
    for (int i = 0; i < 4; i++) {
        uint32_t x = eng_qset_best(&q);
        CHECK_EQ_INT(x, want[i]);
        CHECK_EQ_INT(eng_qset_take(&q, x).x, want[i]);
        CHECK(!eng_qset_has(&q, want[i]));
    }
    CHECK_EQ_INT(eng_qset_best(&q), EQ_NONE);
    eng_qset_set(&q, (qentry){.x = 1, .demand = 0, .prio = 2.0, .issue_t = 1.0, .seq = seq++});
    eng_qset_set(&q, (qentry){.x = 70, .demand = 0, .prio = 2.5, .issue_t = 1.0, .seq = seq++});
    uint32_t x;
    double start;
    CHECK(eng_qset_next(&q, 0.0, &x, &start));
    CHECK_EQ_INT(x, 70);
    CHECK(start == 1.0);
    eng_qset_set(&q, (qentry){.x = 70, .demand = 0, .prio = 1.5, .issue_t = 1.0, .seq = seq++}); /* now below x=1 */
    CHECK(eng_qset_next(&q, 2.0, &x, &start));
    CHECK_EQ_INT(x, 1);
    CHECK(start == 2.0);
    eng_qset_free(&q);
}

int main(void)
{
    test_by_hand();
    test_same_serves();
    test_same_as_scan(0);
    test_same_as_scan(1);
    CHECK_DONE();
}
