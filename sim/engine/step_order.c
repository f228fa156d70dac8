/* The rules of one layer step the cache policy declares (policies/policy.h,
 * ms_step_rules; issue 16): the order of the step's activated experts, the
 * token-order visits (MS_ORDER_TOKEN), and which experts are evictable
 * while the step runs. */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/state.h"

void eng_load_step_rules(ms_view *v)
{
    v->rules = (ms_step_rules){MS_ORDER_FIRST, MS_PROTECT_STEP, 0, 0};
    if (v->cache->cache->step_rules)
        v->cache->cache->step_rules(v->cache_st, &v->rules);
}

/* The request parts the replay reads: what the policies declare, the
 * weights for the gather order (rank_of) and the recording engine's hits
 * (compare_recorded in loop.c).  The gate (MS_PART_GATE) of a full-prob
 * trace is its probabilities alone (policies/lib/gate.c): its top-k weights,
 * a quarter or less of the floats the gate reads, are then not decompressed. */
unsigned eng_replay_parts(const ms_view *v)
{
    unsigned p = v->pf->reads | v->cache->reads | v->sched->reads;
    if (v->meta->probs_kind == MS_PROBS_FULL && (p & MS_PART_GATE) == MS_PART_GATE)
        p &= ~MS_PART_WEIGHTS;
    if (v->rules.order == MS_ORDER_HITS_FIRST_GATHER)
        p |= MS_PART_WEIGHTS;
    if (v->meta->has_recorded_hits)
        p |= MS_PART_HITS;
    return p;
}

/* ---- order ---- */

typedef struct {
    const ms_view *v;
    uint32_t l;
    float low_w; /* one-row gather order: the row's lowest top-k weight; -1 otherwise */
} order_ctx;

/* Rank of an activated expert: group (hits 0, others 1), then, in the
 * gather order, 0 above the lowest weight / 1 at it, then the id. */
static uint64_t rank_of(const order_ctx *c, const ms_act *a)
{
    const ms_view *v = c->v;
    uint64_t group = 0, gather = 0;
    if (v->rules.order == MS_ORDER_HITS_FIRST || v->rules.order == MS_ORDER_HITS_FIRST_GATHER)
        group = v->cached[c->l * v->J + a->expert] ? 0 : 1;
    if (c->low_w >= 0)
        gather = a->weight_sum > c->low_w ? 0 : 1;
    return (group << 40) | (gather << 32) | a->expert;
}

/* Insertion sort by rank (n <= J; ranks are distinct: they end in the id). */
static void sort_acts(const order_ctx *c, ms_act *acts, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        ms_act a = acts[i];
        uint64_t r = rank_of(c, &a);
        uint32_t j = i;
        while (j > 0 && rank_of(c, &acts[j - 1]) > r) {
            acts[j] = acts[j - 1];
            j--;
        }
        acts[j] = a;
    }
}

void eng_order_step(ms_view *v, uint32_t l)
{
    ms_step_order o = v->rules.order;
    if (o == MS_ORDER_FIRST || o == MS_ORDER_TOKEN)
        return; /* eng_build_activated_sets already lists them by first appearance */
    ms_act *acts = v->acts + (size_t)l * v->J;
    uint32_t n = v->n_acts[l];
    order_ctx c = {v, l, -1.0f};
    if (o == MS_ORDER_HITS_FIRST_GATHER && v->batch_rows == 1 && n > 0) {
        c.low_w = acts[0].weight_sum;
        for (uint32_t i = 1; i < n; i++)
            if (acts[i].weight_sum < c.low_w)
                c.low_w = acts[i].weight_sum;
    }
    sort_acts(&c, acts, n);
    for (uint32_t i = 0; i < n; i++)
        v->act_pos[l * v->J + acts[i].expert] = i;
}

/* ---- visits ---- */

/* v->step_visit holds at least cap entries (it grows only when a wider batch
 * needs more: a step allocates nothing in the steady state). */
static uint32_t *visit_buffer(ms_view *v, size_t cap)
{
    if (cap > v->step_visit_cap) {
        free(v->step_visit);
        v->step_visit_cap = cap * 2;
        v->step_visit = ms_xcalloc(v->step_visit_cap, sizeof *v->step_visit);
    }
    return v->step_visit;
}

uint32_t eng_step_visits(ms_view *v, uint32_t l, uint32_t n, const uint32_t **out)
{
    if (v->rules.order != MS_ORDER_TOKEN) {
        *out = v->step_identity; /* n <= J */
        return n;
    }
    const ms_batcher *b = v->batch;
    size_t cap = (size_t)v->batch_rows * v->K + 1, w = 0;
    uint32_t *seq = visit_buffer(v, cap);
    uint8_t *seen = v->step_seen; /* [J] >= n */
    memset(seen, 0, n);
    for (uint32_t i = 0; i < b->n_items; i++) {
        const ms_request *r = &b->slots[b->items[i]].req;
        const ms_iteration *it = ms_batcher_iter(b, b->items[i]);
        for (uint32_t row = it->row0; row < it->row0 + it->n_rows; row++) {
            size_t base = ms_topk_index(v->meta, row, l);
            for (uint32_t k = 0; k < v->K && w < cap; k++) {
                int32_t e = r->topk_ids[base + k];
                if (e < 0)
                    continue;
                uint32_t pos = v->act_pos[l * v->J + (uint32_t)e];
                seq[w++] = pos | (seen[pos] ? ENG_VISIT_REPEAT : 0);
                seen[pos] = 1;
            }
        }
    }
    *out = seq;
    return (uint32_t)w;
}

/* ---- protection ---- */

/* An expert of the running step evicted before its compute: it still
 * computes, and its slot is released after the layer (as a transient one);
 * with rules.lookup_at_turn only when its turn came (one whose turn is
 * ahead is looked up again then: a miss, loaded into a new slot). */
int eng_evict_defers_release(ms_view *v, uint32_t x)
{
    if (!v->step_open || v->protect[x] != v->stamp || (v->rules.lookup_at_turn && eng_turn_ahead(v, x)))
        return 0;
    v->transient[x] = 1;
    return 1;
}
