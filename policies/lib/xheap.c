/* The indexed min-heap of policies/lib/xheap.h. */
#include <stdlib.h>

#include "policies/lib/xheap.h"
#include "sim/core/err.h"

void ms_xheap_init(ms_xheap *h, uint32_t nx)
{
    size_t n = nx ? nx : 1;
    h->heap = ms_xcalloc(n, sizeof *h->heap);
    h->pos = ms_xcalloc(n, sizeof *h->pos);
    h->frontier = ms_xcalloc(n, sizeof *h->frontier);
    for (uint32_t x = 0; x < nx; x++)
        h->pos[x] = MS_NIL;
    h->n = 0;
    h->nx = nx;
}

void ms_xheap_free(ms_xheap *h)
{
    free(h->heap);
    free(h->pos);
    free(h->frontier);
}

/* (a, b, x) of p below that of q */
static inline int before(const ms_xheap_entry *p, const ms_xheap_entry *q)
{
    if (p->a != q->a)
        return p->a < q->a;
    if (p->b != q->b)
        return p->b < q->b;
    return p->x < q->x;
}

/* The moves take the heap's arrays and size as locals (restrict: the
 * stores into them would otherwise make the compiler reload h's fields at
 * every level) and the moving entry e by value: it is written once, into
 * the hole where it stops. */

/* e into the hole at i, up while it is below its parent, not above top */
static inline void up_to(ms_xheap_entry *restrict heap, uint32_t *restrict pos, uint32_t top, uint32_t i,
                         ms_xheap_entry e)
{
    while (i > top) {
        uint32_t parent = (i - 1) / 2;
        if (!before(&e, &heap[parent]))
            break;
        heap[i] = heap[parent];
        pos[heap[i].x] = i;
        i = parent;
    }
    heap[i] = e;
    pos[e.x] = i;
}

/* e into the hole at i, up while it is below its parent */
static void up(ms_xheap_entry *restrict heap, uint32_t *restrict pos, uint32_t i, ms_xheap_entry e)
{
    up_to(heap, pos, 0, i, e);
}

/* e into the hole at i of a heap of n, down while a child is below it */
static void down(ms_xheap_entry *restrict heap, uint32_t *restrict pos, uint32_t n, uint32_t i, ms_xheap_entry e)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        c += c + 1 < n && before(&heap[c + 1], &heap[c]);
        if (!before(&heap[c], &e))
            break;
        heap[i] = heap[c];
        pos[heap[i].x] = i;
        i = c;
    }
    heap[i] = e;
    pos[e.x] = i;
}

/* e (a new key of the member at i, or the entry moved there) into the hole
 * at i: up when it is below its parent, else down */
static void settle(ms_xheap *h, uint32_t i, ms_xheap_entry e)
{
    if (i > 0 && before(&e, &h->heap[(i - 1) / 2]))
        up(h->heap, h->pos, i, e);
    else
        down(h->heap, h->pos, h->n, i, e);
}

void ms_xheap_set(ms_xheap *h, uint32_t x, uint64_t a, uint64_t b)
{
    ms_xheap_entry e = {a, b, x};
    uint32_t i = h->pos[x];
    if (i == MS_NIL)
        up(h->heap, h->pos, h->n++, e);
    else
        settle(h, i, e);
}

/* e into the hole at i of a heap of n, where e is not below i's parent:
 * the hole goes down to a leaf along the smaller children (one comparison
 * a level), then e climbs back while it is below its parent, not above i
 * (Floyd's order of the work: the heap's last entry, which a removal moves,
 * usually belongs near the bottom).  down() would give another valid heap;
 * which one does not matter (ms_xheap.h: the order is total). */
static void sink(ms_xheap_entry *restrict heap, uint32_t *restrict pos, uint32_t n, uint32_t i, ms_xheap_entry e)
{
    uint32_t top = i;
    for (uint32_t c; (c = 2 * i + 1) < n; i = c) {
        c += c + 1 < n && before(&heap[c + 1], &heap[c]);
        heap[i] = heap[c];
        pos[heap[i].x] = i;
    }
    up_to(heap, pos, top, i, e);
}

void ms_xheap_remove(ms_xheap *h, uint32_t x)
{
    uint32_t i = h->pos[x];
    if (i == MS_NIL)
        return;
    h->pos[x] = MS_NIL;
    if (i == --h->n)
        return;
    ms_xheap_entry last = h->heap[h->n];
    if (i > 0 && before(&last, &h->heap[(i - 1) / 2]))
        up(h->heap, h->pos, i, last);
    else
        sink(h->heap, h->pos, h->n, i, last);
}

/* ---- the best-first walk: a min-heap of heap positions ---- */

static inline int pos_before(const ms_xheap *h, uint32_t p, uint32_t q) { return before(&h->heap[p], &h->heap[q]); }

static void frontier_push(ms_xheap *h, uint32_t *n, uint32_t p)
{
    uint32_t i = (*n)++;
    while (i > 0 && pos_before(h, p, h->frontier[(i - 1) / 2])) {
        h->frontier[i] = h->frontier[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->frontier[i] = p;
}

static uint32_t frontier_pop(ms_xheap *h, uint32_t *n)
{
    uint32_t top = h->frontier[0], p = h->frontier[--*n], i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && pos_before(h, h->frontier[c + 1], h->frontier[c]))
            c++;
        if (!pos_before(h, h->frontier[c], p))
            break;
        h->frontier[i] = h->frontier[c];
        i = c;
    }
    h->frontier[i] = p;
    return top;
}

/* ms_xheap_first past the smallest member, which did not pass */
static uint32_t first_below_top(ms_xheap *h, int (*accept)(const void *ctx, uint32_t x), const void *ctx)
{
    /* A child is never below its parent, so popping the smallest position
     * and pushing its children visits the members in (a, b, x) order. */
    uint32_t nf = 0;
    if (h->n > 1)
        frontier_push(h, &nf, 1);
    if (h->n > 2)
        frontier_push(h, &nf, 2);
    while (nf > 0) {
        uint32_t p = frontier_pop(h, &nf);
        if (accept(ctx, h->heap[p].x))
            return h->heap[p].x;
        if (2 * p + 1 < h->n)
            frontier_push(h, &nf, 2 * p + 1);
        if (2 * p + 2 < h->n)
            frontier_push(h, &nf, 2 * p + 2);
    }
    return MS_NIL;
}

uint32_t ms_xheap_first(ms_xheap *h, int (*accept)(const void *ctx, uint32_t x), const void *ctx)
{
    if (h->n == 0)
        return MS_NIL;
    if (accept(ctx, h->heap[0].x)) /* the usual case: the smallest passes */
        return h->heap[0].x;
    return first_below_top(h, accept, ctx);
}

typedef struct {
    const ms_view *v;
    uint32_t J;
} evictable_ctx;

static int evictable(const void *ctx, uint32_t x)
{
    const evictable_ctx *c = ctx;
    return ms_view_evictable(c->v, x / c->J, x % c->J);
}

/* ms_xheap_first with the usual case's test written out (no call through
 * the predicate pointer) */
uint32_t ms_xheap_first_evictable(ms_xheap *h, const ms_view *v, uint32_t J)
{
    if (h->n == 0)
        return MS_NIL;
    uint32_t top = h->heap[0].x;
    if (ms_view_evictable(v, top / J, top % J))
        return top;
    evictable_ctx c = {v, J};
    return first_below_top(h, evictable, &c);
}
