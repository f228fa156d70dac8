/* The copy queue's heap (copyq.c; internal to the engine, which serves it
 * in copyq.c and links.c; tests/unit/test_copyq.c checks it against the
 * lazy-deletion heap it replaced).
 *
 * A binary max-heap of copy requests in qbefore's order: on-demand loads
 * first, then prefetches by priority, then FIFO (seq, unique: a total
 * order).  Indexed by expert: pos[x] is the index of x's entry in the heap
 * that holds it, EQ_NONE when it has none; an expert has at most one entry
 * in all of a run's heaps (they share pos), so the caller takes x's old
 * entry out (eng_q_take(h, pos[x])) before it pushes a new one. */
#ifndef MS_ENGINE_QHEAP_H
#define MS_ENGINE_QHEAP_H

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

typedef struct {
    qentry *a;
    size_t n, cap;
    uint32_t *pos; /* [NX] index of x's entry in the heap that holds it, EQ_NONE if none */
} eng_heap;
#define EQ_NONE UINT32_MAX

/* Adds q; q.x must have no entry in any heap sharing pos. */
void eng_q_push(eng_heap *h, qentry q);
/* Adds q, or replaces x's entry in h by q in place (x must have no entry in
 * another heap sharing pos). */
void eng_q_set(eng_heap *h, qentry q);
/* Removes and returns a[i] (pos of its expert becomes EQ_NONE). */
qentry eng_q_take(eng_heap *h, size_t i);
/* The entry a link starts next and when (h not empty): once the link is
 * free (or, if nothing has been issued by then, at the earliest issue
 * time), the best entry issued by that time.  0 when no issue time is
 * finite. */
int eng_q_next(const eng_heap *h, double link_free, size_t *idx, double *start);

#endif
