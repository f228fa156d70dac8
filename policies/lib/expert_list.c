#include <stdlib.h>

#include "sim/core/err.h"
#include "policies/lib/expert_list.h"
#include "policies/policy.h"

void ms_xlist_init(ms_xlist *q, uint32_t nx)
{
    q->prev = ms_xcalloc(nx, sizeof *q->prev);
    q->next = ms_xcalloc(nx, sizeof *q->next);
    q->in = ms_xcalloc(nx, 1);
    q->head = q->tail = MS_NIL;
    q->n = 0;
}

void ms_xlist_free(ms_xlist *q)
{
    free(q->prev);
    free(q->next);
    free(q->in);
}

void ms_xlist_remove(ms_xlist *q, uint32_t x)
{
    if (!q->in[x])
        return;
    if (q->prev[x] != MS_NIL)
        q->next[q->prev[x]] = q->next[x];
    else
        q->head = q->next[x];
    if (q->next[x] != MS_NIL)
        q->prev[q->next[x]] = q->prev[x];
    else
        q->tail = q->prev[x];
    q->in[x] = 0;
    q->n--;
}

void ms_xlist_push_front(ms_xlist *q, uint32_t x)
{
    ms_xlist_remove(q, x);
    q->prev[x] = MS_NIL;
    q->next[x] = q->head;
    if (q->head != MS_NIL)
        q->prev[q->head] = x;
    q->head = x;
    if (q->tail == MS_NIL)
        q->tail = x;
    q->in[x] = 1;
    q->n++;
}

void ms_xset_init(ms_xset *s, uint32_t nx)
{
    s->items = ms_xcalloc(nx, sizeof *s->items);
    s->pos = ms_xcalloc(nx, sizeof *s->pos);
    for (uint32_t x = 0; x < nx; x++)
        s->pos[x] = MS_NIL;
    s->n = 0;
}

void ms_xset_free(ms_xset *s)
{
    free(s->items);
    free(s->pos);
}

void ms_xset_add(ms_xset *s, uint32_t x)
{
    if (s->pos[x] != MS_NIL)
        return;
    s->pos[x] = s->n;
    s->items[s->n++] = x;
}

void ms_xset_remove(ms_xset *s, uint32_t x)
{
    uint32_t p = s->pos[x];
    if (p == MS_NIL)
        return;
    uint32_t last = s->items[--s->n];
    s->items[p] = last;
    s->pos[last] = p;
    s->pos[x] = MS_NIL;
}

int ms_xlist_oldest_evictable(const ms_xlist *q, const ms_view *v, uint32_t J, uint32_t *l, uint32_t *e)
{
    for (uint32_t x = q->tail; x != MS_NIL; x = q->prev[x])
        if (ms_view_evictable(v, x / J, x % J)) {
            *l = x / J;
            *e = x % J;
            return 1;
        }
    return 0;
}
