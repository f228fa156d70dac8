/* The victim search of MoE-Infinity 2024 and FineMoE (RemoveCachedSparseNode,
 * MoE-Infinity@350f0dd6 core/prefetch/task_scheduler.cpp:223-296;
 * FineMoE@5c584686 the same file, 246-332): the resident experts, listed in
 * (layer, id) order, are sorted once by a key with libstdc++'s std::sort
 * (ms_introsort: equal keys fall in introsort order), and that one order is
 * scanned for every victim the same make-room needs.
 *
 * Use: ms_sorted_victim_dirty() whenever the resident set or a resident
 * expert's key changes (insert, evict, hit, a new p); ms_sorted_victim_round()
 * when a new make-room begins (the engine asks admit() before every copy);
 * ms_sorted_victim_next() from the cache's victim() hook.  A new round with
 * nothing changed reuses the last order (std::sort is a function of the
 * list and its keys); within a round the order is never re-sorted, as the
 * code scans one sorted list per RemoveCachedSparseNode call. */
#ifndef MS_SORTED_VICTIM_H
#define MS_SORTED_VICTIM_H

#include <stdint.h>

#include "policies/lib/introsort.h"
#include "policies/view.h"

typedef struct {
    uint32_t *order;   /* [NX] experts x = l * J + e in sorted order */
    uint32_t *idx;     /* [NX] scratch: node_index */
    uint64_t *key;     /* [NX] key of node_index i */
    uint32_t n, J, NX;
    int dirty, round;  /* changed since the last sort; a new make-room began */
    /* The last search found nothing for an expert of another layer, at this
     * step and time, with nothing changed since: the next such search is
     * answered at once (a queue of prefetches the code drops one by one). */
    int failed;
    uint64_t fail_step;
    double fail_now;
} ms_sorted_victim;

void ms_sorted_victim_init(ms_sorted_victim *s, uint32_t L, uint32_t J);
void ms_sorted_victim_free(ms_sorted_victim *s);
static inline void ms_sorted_victim_dirty(ms_sorted_victim *s)
{
    s->dirty = 1;
    s->failed = 0;
}
static inline void ms_sorted_victim_round(ms_sorted_victim *s) { s->round = 1; }

/* The first expert of the sorted order for which ms_view_evictable() holds
 * and skip(ctx, x) is 0 (skip may be NULL).  member(ctx, x) says which
 * experts the code lists (its device nodes); key(ctx, x) is the sort key;
 * descending = 1 sorts with key[i] > key[j] (MoE-Infinity 2024), 0 with
 * key[i] < key[j] (FineMoE).  Returns 0 when there is none. */
int ms_sorted_victim_next(ms_sorted_victim *s, const ms_view *v, int descending,
                          int (*member)(const void *ctx, uint32_t x), uint64_t (*key)(const void *ctx, uint32_t x),
                          int (*skip)(const void *ctx, const ms_view *v, uint32_t x), const void *ctx, uint32_t *l,
                          uint32_t *e);

#endif
