/* An indexed binary min-heap over expert slots x = l * J + e (shared by the
 * cache policies whose victim is the smallest of a key: lfu, belady).
 *
 * Each member x has a key (a, b); the heap orders members by (a, b, x)
 * ascending, a total order, so the smallest member is unique whatever the
 * order of the updates.  A key may go up or down (ms_xheap_set moves x
 * either way); every update is O(log n) and nothing allocates after init.
 *
 * ms_xheap_first() is the victim search: the smallest member for which a
 * predicate holds (ms_view_evictable and the like), found by visiting the
 * heap in key order (best first: a small frontier heap of positions, a
 * popped position's two children join it).  It costs O(k log k) for k
 * members skipped before the answer, and exactly one predicate call per
 * member visited: the answer is the one a full scan taking the smallest
 * (a, b, x) among the members that pass would give. */
#ifndef MS_XHEAP_H
#define MS_XHEAP_H

#include <stdint.h>

#include "policies/lib/expert_list.h"
#include "policies/view.h"

typedef struct {
    uint64_t a, b;
    uint32_t x;
} ms_xheap_entry; /* a member and its key, stored in heap order */

typedef struct {
    ms_xheap_entry *heap; /* [nx] members in heap order */
    uint32_t *pos;        /* [nx] x's index in heap, MS_NIL when not a member */
    uint32_t *frontier;   /* [nx] scratch of ms_xheap_first: heap positions */
    uint32_t n, nx;
} ms_xheap;

void ms_xheap_init(ms_xheap *h, uint32_t nx);
void ms_xheap_free(ms_xheap *h);
/* Inserts x with key (a, b), or moves it to its new key when a member. */
void ms_xheap_set(ms_xheap *h, uint32_t x, uint64_t a, uint64_t b);
/* Removes x; nothing when x is not a member. */
void ms_xheap_remove(ms_xheap *h, uint32_t x);
static inline int ms_xheap_has(const ms_xheap *h, uint32_t x) { return h->pos[x] != MS_NIL; }
/* The smallest member, MS_NIL when empty. */
static inline uint32_t ms_xheap_top(const ms_xheap *h) { return h->n ? h->heap[0].x : MS_NIL; }
/* The smallest member x with accept(ctx, x) != 0; MS_NIL when none. */
uint32_t ms_xheap_first(ms_xheap *h, int (*accept)(const void *ctx, uint32_t x), const void *ctx);
/* The smallest member for which ms_view_evictable(v, x / J, x % J) holds. */
uint32_t ms_xheap_first_evictable(ms_xheap *h, const ms_view *v, uint32_t J);

#endif
