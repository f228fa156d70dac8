/* Cache eam's victim order (paper mode): see eam_victims in eam_common.h. */
#include <stdlib.h>
#include <string.h>

#include "policies/lib/eam_common.h"

double eam_victim_key(const eam_tracker *tr, const double *decay, uint32_t x)
{
    uint32_t l = x / tr->J;
    return eam_priority_decayed(tr->cur[x], tr->cur_sum[l], decay[l]); /* Algorithm 2 lines 7-8 */
}

/* The heap's key of x: the bits of its (positive, finite) key. */
static uint64_t key_bits(const eam_victims *q, uint32_t x)
{
    double p = eam_victim_key(q->tr, q->decay, x);
    uint64_t a;
    memcpy(&a, &p, sizeof a);
    return a;
}

void eam_victims_init(eam_victims *q, const eam_tracker *tr)
{
    memset(q, 0, sizeof *q);
    q->tr = tr;
    q->L = tr->L;
    q->J = tr->J;
    ms_xheap_init(&q->order, q->L * q->J);
    q->decay = ms_xcalloc(q->L ? q->L : 1, sizeof *q->decay);
    q->seen = ms_xcalloc(q->L ? q->L : 1, sizeof *q->seen);
    for (uint32_t l = 0; l < q->L; l++) {
        q->decay[l] = eam_layer_decay(l, q->L);
        q->seen[l] = tr->row_gen[l];
    }
}

void eam_victims_free(eam_victims *q)
{
    ms_xheap_free(&q->order);
    free(q->decay);
    free(q->seen);
    memset(q, 0, sizeof *q);
}

void eam_victims_add(eam_victims *q, uint32_t x)
{
    ms_xheap_set(&q->order, x, key_bits(q, x), 0);
}

void eam_victims_remove(eam_victims *q, uint32_t x)
{
    ms_xheap_remove(&q->order, x);
}

/* New keys for the members of every row the tracker recomputed. */
static void refresh(eam_victims *q)
{
    for (uint32_t l = 0; l < q->L; l++) {
        if (q->seen[l] == q->tr->row_gen[l])
            continue;
        q->seen[l] = q->tr->row_gen[l];
        for (uint32_t x = l * q->J; x < (l + 1) * q->J; x++)
            if (ms_xheap_has(&q->order, x))
                ms_xheap_set(&q->order, x, key_bits(q, x), 0);
    }
}

uint32_t eam_victims_first(eam_victims *q, int (*accept)(const void *ctx, uint32_t x), const void *ctx)
{
    refresh(q);
    return ms_xheap_first(&q->order, accept, ctx);
}

uint32_t eam_victims_first_evictable(eam_victims *q, const ms_view *v)
{
    refresh(q);
    return ms_xheap_first_evictable(&q->order, v, q->J);
}
