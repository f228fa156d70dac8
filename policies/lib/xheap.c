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

static inline void place(ms_xheap *h, uint32_t i, ms_xheap_entry e)
{
    h->heap[i] = e;
    h->pos[e.x] = i;
}

static void sift_up(ms_xheap *h, uint32_t i)
{
    ms_xheap_entry e = h->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!before(&e, &h->heap[parent]))
            break;
        place(h, i, h->heap[parent]);
        i = parent;
    }
    place(h, i, e);
}

static void sift_down(ms_xheap *h, uint32_t i)
{
    ms_xheap_entry e = h->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->heap[c + 1], &h->heap[c]))
            c++;
        if (!before(&h->heap[c], &e))
            break;
        place(h, i, h->heap[c]);
        i = c;
    }
    place(h, i, e);
}

/* the entry at i has a new key: up when it is now below its parent, else down */
static void restore(ms_xheap *h, uint32_t i)
{
    if (i > 0 && before(&h->heap[i], &h->heap[(i - 1) / 2]))
        sift_up(h, i);
    else
        sift_down(h, i);
}

void ms_xheap_set(ms_xheap *h, uint32_t x, uint64_t a, uint64_t b)
{
    ms_xheap_entry e = {a, b, x};
    uint32_t i = h->pos[x];
    if (i == MS_NIL) {
        place(h, h->n++, e);
        sift_up(h, h->n - 1);
        return;
    }
    h->heap[i] = e;
    restore(h, i);
}

void ms_xheap_remove(ms_xheap *h, uint32_t x)
{
    uint32_t i = h->pos[x];
    if (i == MS_NIL)
        return;
    h->pos[x] = MS_NIL;
    if (i == --h->n)
        return;
    place(h, i, h->heap[h->n]);
    restore(h, i);
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

uint32_t ms_xheap_first(ms_xheap *h, int (*accept)(const void *ctx, uint32_t x), const void *ctx)
{
    if (h->n == 0)
        return MS_NIL;
    if (accept(ctx, h->heap[0].x)) /* the usual case: the smallest passes */
        return h->heap[0].x;
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

typedef struct {
    const ms_view *v;
    uint32_t J;
} evictable_ctx;

static int evictable(const void *ctx, uint32_t x)
{
    const evictable_ctx *c = ctx;
    return ms_view_evictable(c->v, x / c->J, x % c->J);
}

uint32_t ms_xheap_first_evictable(ms_xheap *h, const ms_view *v, uint32_t J)
{
    evictable_ctx c = {v, J};
    return ms_xheap_first(h, evictable, &c);
}
