/* The copy queue's request set (sim/engine/qset.h): requests stored by
 * expert in blocks of 64, each block's best and earliest request kept or
 * marked stale, the set's best kept or marked stale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/err.h"
#include "sim/core/fminmax.h"
#include "sim/engine/qset.h"

enum { QS_STALE_BEST = 1, QS_STALE_TIME = 2 };

static int qbefore(const qentry *a, const qentry *b)
{
    if (a->demand != b->demand)
        return a->demand > b->demand;
    if (a->prio != b->prio)
        return a->prio > b->prio;
    return a->seq < b->seq;
}

/* b, the best request so far (EQ_NONE: none), or x if x's is better. */
static uint32_t better_of(const eng_qset *q, uint32_t b, uint32_t x)
{
    return b == EQ_NONE || qbefore(&q->e[x], &q->e[b]) ? x : b;
}

void eng_qset_init(eng_qset *q, uint32_t nx)
{
    memset(q, 0, sizeof *q);
    q->nx = nx;
    q->nb = (nx + 63) / 64;
    size_t nb = q->nb ? q->nb : 1;
    q->e = ms_xcalloc(nx ? nx : 1, sizeof *q->e);
    q->live = ms_xcalloc(nb, sizeof *q->live);
    q->best = ms_xcalloc(nb, sizeof *q->best);
    q->first = ms_xcalloc(nb, sizeof *q->first);
    q->tmin = ms_xcalloc(nb, sizeof *q->tmin);
    q->stale = ms_xcalloc(nb, sizeof *q->stale);
    for (uint32_t b = 0; b < q->nb; b++) {
        q->best[b] = q->first[b] = EQ_NONE;
        q->tmin[b] = INFINITY;
    }
    q->top = EQ_NONE;
    q->top_ok = 1;
}

void eng_qset_free(eng_qset *q)
{
    free(q->e);
    free(q->live);
    free(q->best);
    free(q->first);
    free(q->tmin);
    free(q->stale);
    memset(q, 0, sizeof *q);
}

/* x's request (now in e[x]) joins block b's and the set's bests where they
 * are known; where x already was the best, it stays (the caller marked it
 * stale if its new request is worse). */
static void note_added(eng_qset *q, uint32_t b, uint32_t x)
{
    if (!(q->stale[b] & QS_STALE_BEST))
        q->best[b] = better_of(q, q->best[b], x);
    if (!(q->stale[b] & QS_STALE_TIME)) {
        double t = q->e[x].issue_t;
        if (q->first[b] == EQ_NONE || t < q->tmin[b] || (t == q->tmin[b] && qbefore(&q->e[x], &q->e[q->first[b]]))) {
            q->tmin[b] = t;
            q->first[b] = x;
        }
    }
    if (q->top_ok)
        q->top = better_of(q, q->top, x);
}

void eng_qset_set(eng_qset *q, qentry r)
{
    uint32_t x = r.x, b = x / 64;
    if (eng_qset_has(q, x)) {
        /* x stays the best (earliest) it was only if its request got better
         * (earlier, or as early and better); taking the request out of a
         * block leaves an earlier time than its own as it was */
        const qentry *old = &q->e[x];
        int better = qbefore(&r, old);
        if (q->best[b] == x && !better)
            q->stale[b] |= QS_STALE_BEST;
        if (q->first[b] == x && !(r.issue_t < old->issue_t || (r.issue_t == old->issue_t && better)))
            q->stale[b] |= QS_STALE_TIME;
        if (q->top == x && !better)
            q->top_ok = 0;
    } else {
        q->live[b] |= 1ull << (x % 64);
        q->n++;
    }
    q->e[x] = r;
    note_added(q, b, x);
}

qentry eng_qset_take(eng_qset *q, uint32_t x)
{
    uint32_t b = x / 64;
    q->live[b] &= ~(1ull << (x % 64));
    q->n--;
    if (q->best[b] == x)
        q->stale[b] |= QS_STALE_BEST;
    if (q->first[b] == x) /* any other request at tmin keeps it the earliest time */
        q->stale[b] |= QS_STALE_TIME;
    if (q->top == x)
        q->top_ok = 0;
    return q->e[x];
}

/* Block b's best and earliest requests from its live ones. */
static void rescan_block(eng_qset *q, uint32_t b)
{
    uint32_t best = EQ_NONE, first = EQ_NONE;
    double tmin = INFINITY;
    for (uint64_t w = q->live[b]; w; w &= w - 1) {
        uint32_t x = b * 64 + (uint32_t)__builtin_ctzll(w);
        double t = q->e[x].issue_t;
        best = better_of(q, best, x);
        if (first == EQ_NONE || t < tmin || (t == tmin && qbefore(&q->e[x], &q->e[first]))) {
            tmin = t;
            first = x;
        }
    }
    q->best[b] = best;
    q->first[b] = first;
    q->tmin[b] = tmin;
    q->stale[b] = 0;
}

uint32_t eng_qset_best(eng_qset *q)
{
    if (q->top_ok)
        return q->top;
    uint32_t top = EQ_NONE;
    for (uint32_t b = 0; b < q->nb; b++) {
        if (!q->live[b])
            continue;
        if (q->stale[b] & QS_STALE_BEST)
            rescan_block(q, b);
        top = better_of(q, top, q->best[b]);
    }
    q->top = top;
    q->top_ok = 1;
    return top;
}

/* Block b's best request issued by t (EQ_NONE when none): its best when
 * that is issued, else a scan. */
static uint32_t block_best_issued(const eng_qset *q, uint32_t b, double t)
{
    if (q->tmin[b] > t)
        return EQ_NONE;
    if (q->e[q->best[b]].issue_t <= t)
        return q->best[b];
    uint32_t best = EQ_NONE;
    for (uint64_t w = q->live[b]; w; w &= w - 1) {
        uint32_t x = b * 64 + (uint32_t)__builtin_ctzll(w);
        if (q->e[x].issue_t <= t)
            best = better_of(q, best, x);
    }
    return best;
}

int eng_qset_next(eng_qset *q, double link_free, uint32_t *x, double *start)
{
    uint32_t top = eng_qset_best(q);
    if (q->e[top].issue_t <= link_free) { /* the usual case: the best is issued */
        *x = top;
        *start = link_free;
        return 1;
    }
    /* The earliest issue time, the best request issued by link_free, and
     * the best of those issued at the earliest time.  If anything is issued
     * by link_free, the copy starts then and the first is the pick; else it
     * starts at the earliest issue time, when exactly the second set is
     * issued. */
    double earliest = INFINITY;
    uint32_t best_free = EQ_NONE, best_first = EQ_NONE;
    for (uint32_t b = 0; b < q->nb; b++) {
        if (!q->live[b])
            continue;
        if (q->stale[b])
            rescan_block(q, b);
        uint32_t f = block_best_issued(q, b, link_free);
        if (f != EQ_NONE)
            best_free = better_of(q, best_free, f);
        if (q->tmin[b] < earliest) { /* ms_fmin's value: issue times are never NaN or -0 (sums of times >= +0) */
            earliest = q->tmin[b];
            best_first = q->first[b];
        } else if (q->tmin[b] == earliest && best_first != EQ_NONE) {
            best_first = better_of(q, best_first, q->first[b]);
        }
    }
    if (!isfinite(earliest))
        return 0;
    *start = ms_fmax(link_free, earliest);
    *x = earliest <= link_free ? best_free : best_first;
    return 1;
}
