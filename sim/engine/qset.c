/* The copy queue's request set (sim/engine/qset.h): requests stored by
 * expert in blocks of QS_BLOCK, each block's best and earliest request kept
 * or marked stale, a tournament tree over the blocks' bests brought up to
 * date at a query, the set's best kept or marked stale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/err.h"
#include "sim/core/fminmax.h"
#include "sim/engine/qset.h"

enum { QS_STALE_BEST = 1, QS_STALE_TIME = 2, QS_DIRTY = 4 };
#define QS_PER_WORD (64 / QS_BLOCK)

#define qbefore eng_qbefore

/* eng_qbefore(a, b) by the same comparisons, without short cuts: the
 * compiler can select the better request without a branch (a rescan's
 * comparisons go either way at random).  Equal to eng_qbefore for every
 * pair, NaN priorities too (then neither > nor == holds, as != does). */
static inline int before_flat(const qentry *a, const qentry *b)
{
    return (a->demand > b->demand) |
           ((a->demand == b->demand) & ((a->prio > b->prio) | ((a->prio == b->prio) & (a->seq < b->seq))));
}

/* best (not EQ_NONE) or x, whichever request is better (selected by a
 * mask: as a ?: the compiler kept the best's fields in registers and
 * branched to update them). */
static inline uint32_t pick(const eng_qset *q, uint32_t best, uint32_t x)
{
    uint32_t m = 0u - (uint32_t)before_flat(&q->e[x], &q->e[best]);
    return (x & m) | (best & ~m);
}

/* b, the best request so far (EQ_NONE: none), or x if x's is better. */
static uint32_t better_of(const eng_qset *q, uint32_t b, uint32_t x)
{
    return b == EQ_NONE || qbefore(&q->e[x], &q->e[b]) ? x : b;
}

/* The better of two requests, either of them EQ_NONE (none). */
static uint32_t winner(const eng_qset *q, uint32_t a, uint32_t b)
{
    if (b == EQ_NONE)
        return a;
    if (a == EQ_NONE)
        return b;
    return pick(q, a, b);
}

/* Block b's live requests: bit i for expert b QS_BLOCK + i. */
static uint64_t block_live(const eng_qset *q, uint32_t b)
{
    return (q->live[b / QS_PER_WORD] >> (b % QS_PER_WORD * QS_BLOCK)) & (~0ull >> (64 - QS_BLOCK));
}

void eng_qset_init(eng_qset *q, uint32_t nx)
{
    memset(q, 0, sizeof *q);
    q->nx = nx;
    q->nb = (nx + QS_BLOCK - 1) / QS_BLOCK;
    q->P = 1;
    while (q->P < q->nb)
        q->P *= 2;
    size_t nb = q->nb ? q->nb : 1;
    q->e = ms_xcalloc(nx ? nx : 1, sizeof *q->e);
    q->live = ms_xcalloc((nx + 63) / 64 + 1, sizeof *q->live);
    q->best = ms_xcalloc(nb, sizeof *q->best);
    q->first = ms_xcalloc(nb, sizeof *q->first);
    q->tmin = ms_xcalloc(nb, sizeof *q->tmin);
    q->stale = ms_xcalloc(nb, sizeof *q->stale);
    q->dirty = ms_xcalloc(nb, sizeof *q->dirty);
    q->win = ms_xcalloc(2 * (size_t)q->P, sizeof *q->win);
    for (uint32_t b = 0; b < q->nb; b++) {
        q->best[b] = q->first[b] = EQ_NONE;
        q->tmin[b] = INFINITY;
    }
    for (size_t i = 0; i < 2 * (size_t)q->P; i++)
        q->win[i] = EQ_NONE;
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
    free(q->dirty);
    free(q->win);
    memset(q, 0, sizeof *q);
}

/* Block b's best moved (another request, or the same one with a new
 * priority): the tree above it is recomputed at the next query. */
static void mark_dirty(eng_qset *q, uint32_t b)
{
    if (q->stale[b] & QS_DIRTY)
        return;
    q->stale[b] |= QS_DIRTY;
    q->dirty[q->n_dirty++] = b;
}

/* Block b's best may be wrong: recomputed at the next query. */
static void mark_stale_best(eng_qset *q, uint32_t b)
{
    q->stale[b] |= QS_STALE_BEST;
    mark_dirty(q, b);
}

/* x's request (now in e[x]) joins block b's and the set's bests where they
 * are known; where x already was the best, it stays (the caller marked it
 * stale if its new request is worse). */
static void note_added(eng_qset *q, uint32_t b, uint32_t x)
{
    if (!(q->stale[b] & QS_STALE_BEST)) {
        q->best[b] = better_of(q, q->best[b], x);
        if (q->best[b] == x) /* a new best, or the best with a better request */
            mark_dirty(q, b);
    }
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
    uint32_t x = r.x, b = x / QS_BLOCK;
    if (eng_qset_has(q, x)) {
        /* x stays the best (earliest) it was only if its request got better
         * (earlier, or as early and better); taking the request out of a
         * block leaves an earlier time than its own as it was */
        const qentry *old = &q->e[x];
        int better = qbefore(&r, old);
        if (q->best[b] == x && !better)
            mark_stale_best(q, b);
        if (q->first[b] == x && !(r.issue_t < old->issue_t || (r.issue_t == old->issue_t && better)))
            q->stale[b] |= QS_STALE_TIME;
        if (q->top == x && !better)
            q->top_ok = 0;
    } else {
        q->live[x / 64] |= 1ull << (x % 64);
        q->n++;
    }
    q->e[x] = r;
    note_added(q, b, x);
}

void eng_qset_add_burst(eng_qset *q, const uint32_t *xs, const uint64_t *seq, uint32_t n, const double *prio,
                        double issue_t)
{
    qentry *e = q->e; /* locals: the compiler would reload q's fields after each store */
    uint64_t *live = q->live;
    uint32_t added = 0, run_b = UINT32_MAX, run_best = EQ_NONE;
    double run_prio = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = xs[i], b = x / QS_BLOCK;
        qentry r = {.x = x, .demand = 0, .prio = prio[x], .issue_t = issue_t, .seq = seq[i]};
        if ((live[x / 64] >> (x % 64)) & 1) { /* x has a request after all (an on-demand load): replaced */
            eng_qset_set(q, r);
            continue;
        }
        live[x / 64] |= 1ull << (x % 64);
        e[x] = r;
        added++;
        if (b == run_b) {
            /* the run's best so far has an earlier seq: x is before it iff
             * its priority is higher (eng_qbefore; NaN never is) */
            int better = r.prio > run_prio;
            run_best = better ? x : run_best;
            run_prio = better ? r.prio : run_prio;
            continue;
        }
        if (run_best != EQ_NONE)
            note_added(q, run_b, run_best);
        run_b = b;
        run_best = x;
        run_prio = r.prio;
    }
    if (run_best != EQ_NONE)
        note_added(q, run_b, run_best);
    q->n += added;
}

qentry eng_qset_take(eng_qset *q, uint32_t x)
{
    eng_qset_drop(q, x);
    return q->e[x];
}

void eng_qset_drop(eng_qset *q, uint32_t x)
{
    uint32_t b = x / QS_BLOCK;
    q->live[x / 64] &= ~(1ull << (x % 64));
    q->n--;
    if (q->best[b] == x)
        mark_stale_best(q, b);
    if (q->first[b] == x) /* any other request at tmin keeps it the earliest time */
        q->stale[b] |= QS_STALE_TIME;
    if (q->top == x)
        q->top_ok = 0;
}

void eng_qset_drop_list(eng_qset *q, const uint32_t *xs, uint32_t n)
{
    uint64_t *live = q->live; /* locals: the byte stores would make the compiler reload q's fields */
    const uint32_t *best = q->best, *first = q->first;
    uint8_t *stale = q->stale;
    uint32_t top = q->top, dropped = 0;
    int top_gone = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = xs[i], b = x / QS_BLOCK;
        uint64_t bit = 1ull << (x % 64);
        if (!(live[x / 64] & bit))
            continue;
        live[x / 64] &= ~bit;
        dropped++;
        if (best[b] == x)
            mark_stale_best(q, b);
        if (first[b] == x)
            stale[b] |= QS_STALE_TIME;
        top_gone |= top == x;
    }
    q->n -= dropped;
    if (top_gone)
        q->top_ok = 0;
}

/* Block b's best request from its live ones. */
static void rescan_best(eng_qset *q, uint32_t b)
{
    uint32_t best = EQ_NONE;
    uint64_t w = block_live(q, b);
    if (w) {
        best = b * QS_BLOCK + (uint32_t)__builtin_ctzll(w);
        for (w &= w - 1; w; w &= w - 1)
            best = pick(q, best, b * QS_BLOCK + (uint32_t)__builtin_ctzll(w));
    }
    q->best[b] = best;
    q->stale[b] &= (uint8_t)~QS_STALE_BEST;
}

/* Block b's earliest issue time and its best request issued then. */
static void rescan_time(eng_qset *q, uint32_t b)
{
    uint32_t first = EQ_NONE;
    double tmin = INFINITY;
    for (uint64_t w = block_live(q, b); w; w &= w - 1) {
        uint32_t x = b * QS_BLOCK + (uint32_t)__builtin_ctzll(w);
        double t = q->e[x].issue_t;
        if (first == EQ_NONE || t < tmin || (t == tmin && qbefore(&q->e[x], &q->e[first]))) {
            tmin = t;
            first = x;
        }
    }
    q->first[b] = first;
    q->tmin[b] = tmin;
    q->stale[b] &= (uint8_t)~QS_STALE_TIME;
}

/* Recomputes the nodes above leaf b, up to the root. */
static void replay_path(eng_qset *q, uint32_t b)
{
    for (size_t i = ((size_t)q->P + b) / 2; i >= 1; i /= 2)
        q->win[i] = winner(q, q->win[2 * i], q->win[2 * i + 1]);
}

/* The dirty blocks' bests into their leaves, then the nodes above them:
 * path by path, or every node when that is cheaper.  Each node then holds
 * the best of its subtree, which is unique (qbefore is a total order), so
 * the root does not depend on how it was recomputed. */
static void update_tree(eng_qset *q)
{
    uint32_t depth = (uint32_t)__builtin_ctz(q->P);
    int all = (size_t)q->n_dirty * depth > q->P;
    for (uint32_t k = 0; k < q->n_dirty; k++) {
        uint32_t b = q->dirty[k];
        if (q->stale[b] & QS_STALE_BEST)
            rescan_best(q, b);
        q->stale[b] &= (uint8_t)~QS_DIRTY;
        q->win[q->P + b] = q->best[b];
        if (!all)
            replay_path(q, b);
    }
    for (uint32_t i = all ? q->P - 1 : 0; i >= 1; i--)
        q->win[i] = winner(q, q->win[2 * i], q->win[2 * i + 1]);
    q->n_dirty = 0;
}

/* The best of a handful of live requests, by a scan of the live words.
 * Without a prefetcher (or between its bursts) the set holds a layer's few
 * on-demand loads, and bringing the tree up to date at every copy start
 * (a block rescan and a root path) cost a sweep 10 % more instructions than
 * the heap it replaced; the dirty list keeps what the tree must recompute
 * when the set grows.  The best is unique (qbefore is a total order), so it
 * does not depend on which way it was found. */
static uint32_t scan_best(const eng_qset *q)
{
    uint32_t best = EQ_NONE;
    size_t left = q->n;
    for (size_t w = 0; left; w++)
        for (uint64_t m = q->live[w]; m; m &= m - 1, left--)
            best = better_of(q, best, (uint32_t)(w * 64 + (uint32_t)__builtin_ctzll(m)));
    return best;
}

uint32_t eng_qset_best(eng_qset *q)
{
    if (q->top_ok)
        return q->top;
    if (q->n <= QS_SCAN_MAX) {
        q->top = scan_best(q);
    } else {
        update_tree(q);
        q->top = q->win[1];
    }
    q->top_ok = 1;
    return q->top;
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
    for (uint64_t w = block_live(q, b); w; w &= w - 1) {
        uint32_t x = b * QS_BLOCK + (uint32_t)__builtin_ctzll(w);
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
        if (!block_live(q, b))
            continue;
        if (q->stale[b] & QS_STALE_BEST) /* the block stays dirty: its leaf is set at the next update */
            rescan_best(q, b);
        if (q->stale[b] & QS_STALE_TIME)
            rescan_time(q, b);
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
