/* The copy queue's request set (qset.c; internal to the engine, which
 * serves it in copyq.c and links.c; tests/unit/test_copyq.c checks it
 * against a plain scan and against the lazy-deletion heap of earlier
 * versions).
 *
 * At most one copy request per expert x, ordered by qbefore: on-demand
 * loads first, then prefetches by priority, then FIFO (seq, unique: a total
 * order, so the best request of any subset is unique).  The requests are
 * stored by expert, in blocks of 64 experts with a bit mask of the live
 * ones; each block keeps its best request and its earliest issue time (and
 * the best request issued then), and the set keeps its best request of all.
 * Adding, replacing or taking a request is O(1): it updates those bests
 * when it can and otherwise marks them stale; a query recomputes what is
 * stale, scanning a block's live requests or the blocks' bests.  A prefetcher
 * that resubmits hundreds of experts per layer, and a layer that expires its
 * queued prefetches, cost a few instructions per request instead of a heap's
 * O(log n) sift each, and a query costs O(blocks) plus the stale blocks. */
#ifndef MS_ENGINE_QSET_H
#define MS_ENGINE_QSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t x;
    uint32_t gen;
    uint8_t demand;
    double prio;
    double issue_t;
    uint64_t seq;
} qentry;

#define EQ_NONE UINT32_MAX

typedef struct {
    qentry *e;       /* [nx] x's request, while its bit of live is set */
    uint64_t *live;  /* [nb] bit x % 64 of word x / 64: x has a request */
    uint32_t *best;  /* [nb] the block's best request, EQ_NONE when empty (unless stale) */
    uint32_t *first; /* [nb] its best request among those issued at tmin (unless stale) */
    double *tmin;    /* [nb] its earliest issue time (unless stale) */
    uint8_t *stale;  /* [nb] QS_STALE_BEST: best may be wrong; QS_STALE_TIME: first, tmin may be */
    uint32_t top;    /* the best request of all, when top_ok */
    int top_ok;
    size_t n;        /* live requests */
    uint32_t nx, nb;
} eng_qset;

void eng_qset_init(eng_qset *q, uint32_t nx);
void eng_qset_free(eng_qset *q);
static inline int eng_qset_has(const eng_qset *q, uint32_t x) { return (q->live[x / 64] >> (x % 64)) & 1; }
static inline const qentry *eng_qset_at(const eng_qset *q, uint32_t x) { return &q->e[x]; }
/* Adds r, or replaces x's request by r (x = r.x < nx). */
void eng_qset_set(eng_qset *q, qentry r);
/* Removes and returns x's request (x must have one). */
qentry eng_qset_take(eng_qset *q, uint32_t x);
/* The best request, EQ_NONE when the set is empty. */
uint32_t eng_qset_best(eng_qset *q);
/* The request a link starts next and when (q not empty): once the link is
 * free (or, if nothing has been issued by then, at the earliest issue
 * time), the best request issued by that time.  A request whose decision
 * cost has not elapsed never holds back the ones already issued.  0 when no
 * issue time is finite. */
int eng_qset_next(eng_qset *q, double link_free, uint32_t *x, double *start);

#endif
