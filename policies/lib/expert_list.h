/* Intrusive containers over expert slots x = l * J + e, shared by the cache
 * policies: a recency list (LRU / FIFO order) and an unordered member set.
 * Both are O(1) per update and allocate once. */
#ifndef MS_EXPERT_LIST_H
#define MS_EXPERT_LIST_H

#include <stdint.h>

#define MS_NIL UINT32_MAX

/* Doubly linked list; head = most recent, tail = least recent. */
typedef struct {
    uint32_t *prev, *next;
    uint8_t *in;
    uint32_t head, tail, n;
} ms_xlist;

void ms_xlist_init(ms_xlist *q, uint32_t nx);
void ms_xlist_free(ms_xlist *q);
void ms_xlist_push_front(ms_xlist *q, uint32_t x); /* moves x when present */
void ms_xlist_remove(ms_xlist *q, uint32_t x);
/* The least recent x for which ms_view_evictable() holds; 0 when none. */
struct ms_view;
int ms_xlist_oldest_evictable(const ms_xlist *q, const struct ms_view *v, uint32_t J, uint32_t *l, uint32_t *e);

/* Unordered set with O(1) insert / remove and dense iteration over items[0..n). */
typedef struct {
    uint32_t *items, *pos;
    uint32_t n;
} ms_xset;

void ms_xset_init(ms_xset *s, uint32_t nx);
void ms_xset_free(ms_xset *s);
void ms_xset_add(ms_xset *s, uint32_t x);
void ms_xset_remove(ms_xset *s, uint32_t x);

#endif
