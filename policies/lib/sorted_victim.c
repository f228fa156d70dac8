/* The sorted victim scan of MoE-Infinity 2024 and FineMoE (sorted_victim.h). */
#include <stdlib.h>

#include "policies/lib/expert_list.h"
#include "policies/lib/sorted_victim.h"
#include "sim/core/err.h"

void ms_sorted_victim_init(ms_sorted_victim *s, uint32_t L, uint32_t J)
{
    s->NX = L * J;
    s->J = J;
    s->n = 0;
    s->order = ms_xcalloc(s->NX ? s->NX : 1, sizeof *s->order);
    s->idx = ms_xcalloc(s->NX ? s->NX : 1, sizeof *s->idx);
    s->key = ms_xcalloc(s->NX ? s->NX : 1, sizeof *s->key);
    s->dirty = 1;
    s->round = 1;
    s->failed = 0;
}

void ms_sorted_victim_free(ms_sorted_victim *s)
{
    free(s->order);
    free(s->idx);
    free(s->key);
}

/* device_nodes in (layer, id) order, node_index = iota, std::sort by key */
static void sort_members(ms_sorted_victim *s, int descending, int (*member)(const void *, uint32_t),
                         uint64_t (*key)(const void *, uint32_t), const void *ctx)
{
    s->n = 0;
    for (uint32_t x = 0; x < s->NX; x++)
        if (member(ctx, x)) {
            s->order[s->n] = x;
            s->key[s->n] = key(ctx, x);
            s->idx[s->n] = s->n;
            s->n++;
        }
    ms_introsort(s->idx, s->n, descending ? ms_introsort_key_greater : ms_introsort_key_less, s->key);
    for (uint32_t i = 0; i < s->n; i++) /* order[i] = device_nodes[node_index[i]] */
        s->idx[i] = s->order[s->idx[i]];
    for (uint32_t i = 0; i < s->n; i++)
        s->order[i] = s->idx[i];
}

int ms_sorted_victim_next(ms_sorted_victim *s, const ms_view *v, int descending,
                          int (*member)(const void *ctx, uint32_t x), uint64_t (*key)(const void *ctx, uint32_t x),
                          int (*skip)(const void *ctx, const ms_view *v, uint32_t x), const void *ctx, uint32_t *l,
                          uint32_t *e)
{
    uint32_t il, ie;
    int other_layer = ms_view_incoming(v, &il, &ie) && il != ms_view_layer(v);
    uint64_t step = ms_view_step(v);
    double now = ms_view_now(v);
    if (other_layer && s->failed && s->fail_step == step && s->fail_now == now) {
        s->round = 0;
        return 0; /* evictability depends on the step, the time and the state: all unchanged */
    }
    if (s->round && s->dirty) {
        sort_members(s, descending, member, key, ctx);
        s->dirty = 0;
    }
    s->round = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t x = s->order[i];
        if (ms_view_evictable(v, x / s->J, x % s->J) && !(skip && skip(ctx, v, x))) {
            *l = x / s->J;
            *e = x % s->J;
            return 1;
        }
    }
    if (other_layer) {
        s->failed = 1;
        s->fail_step = step;
        s->fail_now = now;
    }
    return 0;
}
