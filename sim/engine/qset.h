/* The copy queue's request set (qset.c; internal to the engine, which
 * serves it in copyq.c and links.c; tests/unit/test_copyq.c checks it
 * against a plain scan and against the lazy-deletion heap of earlier
 * versions).
 *
 * At most one copy request per expert x, ordered by qbefore: on-demand
 * loads first, then prefetches by priority, then FIFO (seq, unique: a total
 * order, so the best request of any subset is unique).  The requests are
 * stored by expert, in blocks of QS_BLOCK experts; each block keeps its best
 * request and its earliest issue time (and the best request issued then); a
 * tournament tree over the blocks' bests (a node holds the better of its two
 * children) gives the best of all, and the set keeps that best too.
 * Adding, replacing or taking a request is O(1): it updates those bests
 * when it can and otherwise marks them stale, and a block whose best moved
 * is listed as dirty.  A query recomputes what is stale: a dirty block's
 * best from its QS_BLOCK entries, then its path to the root (or every node,
 * when many blocks are dirty); the issue-time summaries only when the best
 * request is not issued yet (rare); with at most QS_SCAN_MAX requests in the
 * set, a scan of them instead of the tree.  Taking the best, at every copy start,
 * so costs about QS_BLOCK + log2(blocks) comparisons, and a prefetcher that
 * resubmits hundreds of experts per layer, or a layer that expires its
 * queued prefetches, a few instructions per request. */
#ifndef MS_ENGINE_QSET_H
#define MS_ENGINE_QSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t x;
    uint8_t demand;
    double prio;
    double issue_t;
    uint64_t seq;
} qentry;

/* The queue's order: a before b (on-demand loads first, then higher
 * priority, then earlier seq; a total order, seq being unique). */
static inline int eng_qbefore(const qentry *a, const qentry *b)
{
    if (a->demand != b->demand)
        return a->demand > b->demand;
    if (a->prio != b->prio)
        return a->prio > b->prio;
    return a->seq < b->seq;
}

#define EQ_NONE UINT32_MAX
/* Experts per block (divides 64): a rescan reads this many entries, and a
 * smaller block means a deeper tree; 16 measured best on Mixtral-8x7B (256
 * experts) and Qwen1.5-MoE (1,440) in bench_replay (docs/performance.md). */
#define QS_BLOCK 16
/* Up to this many live requests, the best is found by a scan of the live
 * bits instead of the tree (qset.c, scan_best). */
#define QS_SCAN_MAX 8

typedef struct {
    qentry *e;       /* [nx] x's request, while its bit of live is set */
    uint64_t *live;  /* [nx / 64] bit x % 64 of word x / 64: x has a request */
    uint32_t *best;  /* [nb] the block's best request, EQ_NONE when empty (unless stale) */
    uint32_t *first; /* [nb] its best request among those issued at tmin (unless stale) */
    double *tmin;    /* [nb] its earliest issue time (unless stale) */
    uint8_t *stale;  /* [nb] QS_STALE_BEST: best may be wrong; QS_STALE_TIME: first, tmin may be;
                        QS_DIRTY: listed in dirty (the tree above the block may be wrong) */
    uint32_t *win;   /* [2 P] tournament: win[P + b] = best[b], win[i] the better of win[2i], win[2i+1] */
    uint32_t *dirty; /* [nb] the blocks whose best moved since the tree was last brought up to date */
    uint32_t n_dirty;
    uint32_t top;    /* the best request of all, when top_ok */
    int top_ok;
    size_t n;        /* live requests */
    uint32_t nx, nb, P; /* P: the tree's leaves, a power of two >= nb */
} eng_qset;

void eng_qset_init(eng_qset *q, uint32_t nx);
void eng_qset_free(eng_qset *q);
static inline int eng_qset_has(const eng_qset *q, uint32_t x) { return (q->live[x / 64] >> (x % 64)) & 1; }
static inline const qentry *eng_qset_at(const eng_qset *q, uint32_t x) { return &q->e[x]; }
/* Adds r, or replaces x's request by r (x = r.x < nx). */
void eng_qset_set(eng_qset *q, qentry r);
/* eng_qset_set of the prefetch requests {x, 0, prio[x], issue_t, seq[i]}
 * for x = xs[i], i < n (x < nx, distinct; seq ascending, as the
 * engine numbers requests): the same set, cheaper for a long list (an eam
 * refill adds a thousand requests in one hook).  The requests of experts
 * without one (all but rare on-demand loads) are added in runs of
 * consecutive list entries in one block: the run's best, found by its
 * priorities alone (one issue time, seqs ascending), is the only one
 * compared with the block's and the set's kept bests. */
void eng_qset_add_burst(eng_qset *q, const uint32_t *xs, const uint64_t *seq, uint32_t n, const double *prio,
                        double issue_t);
/* Removes and returns x's request (x must have one). */
qentry eng_qset_take(eng_qset *q, uint32_t x);
/* Removes x's request (x must have one): eng_qset_take without the copy. */
void eng_qset_drop(eng_qset *q, uint32_t x);
/* eng_qset_drop of each x = xs[i], i < n, that has a request (a layer's
 * expired prefetches). */
void eng_qset_drop_list(eng_qset *q, const uint32_t *xs, uint32_t n);
/* The best request, EQ_NONE when the set is empty. */
uint32_t eng_qset_best(eng_qset *q);
/* The request a link starts next and when (q not empty): once the link is
 * free (or, if nothing has been issued by then, at the earliest issue
 * time), the best request issued by that time.  A request whose decision
 * cost has not elapsed never holds back the ones already issued.  0 when no
 * issue time is finite. */
int eng_qset_next(eng_qset *q, double link_free, uint32_t *x, double *start);

#endif
