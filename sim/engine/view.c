/* The policy-facing view (policies/view.h): the engine state as policies
 * query it, their actions, and the table of operations behind ms_view_*. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "policies/lib/gate.h"
#include "sim/engine/state.h"

/* policy-facing view */

static const ms_trace_meta *view_meta(const ms_view *v) { return v->meta; }
static double view_now(const ms_view *v) { return v->clock; }
static uint64_t view_iteration(const ms_view *v) { return v->iter; }
static uint32_t view_layer(const ms_view *v) { return v->layer; }
static uint64_t view_step(const ms_view *v) { return v->iter * v->L + v->layer; }
static ms_phase view_phase(const ms_view *v) { return v->phase; }
static uint32_t view_batch_rows(const ms_view *v) { return v->batch_rows; }

static const ms_act *view_activated(const ms_view *v, uint32_t l, uint32_t *n)
{
    if (l >= v->L) {
        *n = 0;
        return NULL;
    }
    *n = v->n_acts[l];
    return v->acts + (size_t)l * v->J;
}

static int view_cached(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && v->cached[l * v->J + e];
}

static int view_resident(const ms_view *v, uint32_t l, uint32_t e)
{
    return view_cached(v, l, e) && v->ready_t[l * v->J + e] <= v->clock;
}

/* With several GPUs, making room for an expert evicts on its GPU only. */
static int view_evictable(const ms_view *v, uint32_t l, uint32_t e)
{
    if (l >= v->L || e >= v->J)
        return 0;
    uint32_t x = l * v->J + e; /* resident = cached (eng_step_evictable's first test) and landed */
    return eng_step_evictable(v, x, v->ready_t[x] <= v->clock) &&
           (v->G == 1 || v->incoming == UINT32_MAX || v->gpu_of[x] == v->gpu_of[v->incoming]);
}

static int view_fits(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && !eng_over_capacity(v, l * v->J + e, eng_unit_of(v, l * v->J + e));
}

static double view_capacity_experts(const ms_view *v, uint32_t l)
{
    return l < v->L ? v->cap_units / eng_unit_of(v, l * v->J) : 0;
}

static uint64_t view_next_use(const ms_view *v, uint32_t l, uint32_t e)
{
    if (!v->use_it || l >= v->L || e >= v->J)
        return UINT64_MAX;
    uint32_t x = l * v->J + e;
    uint64_t step = v->iter * v->L + v->layer;
    if (l == v->layer && v->mark[x] == v->iter + 1 && v->protect[x] != v->stamp)
        return step; /* the running layer uses it and has not served it yet (a prefetch at its start asks) */
    while (v->use_cur[x] < v->use_n[x] && (uint64_t)v->use_it[x][v->use_cur[x]] * v->L + l <= step)
        v->use_cur[x]++;
    if (v->use_cur[x] == v->use_n[x])
        return UINT64_MAX;
    return (uint64_t)v->use_it[x][v->use_cur[x]] * v->L + l;
}

static int view_queued(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && v->queued[l * v->J + e];
}

static const uint8_t *view_cached_all(const ms_view *v) { return v->cached; }
static const uint8_t *view_queued_all(const ms_view *v) { return v->queued; }

static int view_prefetched_unused(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && v->from_prefetch[l * v->J + e] == PF_AHEAD;
}

static int view_incoming(const ms_view *v, uint32_t *l, uint32_t *e)
{
    if (v->incoming == UINT32_MAX)
        return 0;
    *l = v->incoming / v->J;
    *e = v->incoming % v->J;
    return 1;
}

static uint32_t view_items(const ms_view *v) { return v->batch ? v->batch->n_items : 0; }

static const ms_request *view_item_request(const ms_view *v, uint32_t i)
{
    return i < view_items(v) ? &v->batch->slots[v->batch->items[i]].req : NULL;
}

static uint64_t view_item_index(const ms_view *v, uint32_t i)
{
    return i < view_items(v) ? v->batch->slots[v->batch->items[i]].index : UINT64_MAX;
}

static uint32_t view_item_iter(const ms_view *v, uint32_t i)
{
    return i < view_items(v) ? v->batch->slots[v->batch->items[i]].next_iter : UINT32_MAX;
}

static void gate_mean_of_batch(const ms_view *v, uint32_t l, float *out)
{
    memset(out, 0, v->J * sizeof *out);
    uint32_t rows = 0;
    for (uint32_t i = 0; i < view_items(v) && l < v->L; i++)
        rows += ms_gate_add_iteration(v->meta, view_item_request(v, i), view_item_iter(v, i), l,
                                      v->env.topk_fill, out);
    for (uint32_t e = 0; rows > 1 && e < v->J; e++) /* x / 1 is x */
        out[e] /= (float)rows;
}

/* Within an iteration the batch is fixed, so a layer's mean is computed
 * once and copied to every later caller (a prefetcher and a cache both ask
 * for it at each gate). */
static void view_gate_mean(const ms_view *v, uint32_t l, float *out)
{
    unsigned gate = v->meta->probs_kind == MS_PROBS_FULL ? MS_PART_PROBS : MS_PART_WEIGHTS; /* eng_replay_parts */
    if (!(v->parts & gate))
        ms_request_part_missing("ms_view_gate_mean", "the gate (MS_PART_GATE)");
    if (v->gate_epoch == 0 || l >= v->L) {
        gate_mean_of_batch(v, l, out);
        return;
    }
    float *memo = v->gate_mean + (size_t)l * v->J;
    if (v->gate_mean_at[l] != v->gate_epoch) {
        gate_mean_of_batch(v, l, memo);
        v->gate_mean_at[l] = v->gate_epoch;
    }
    memcpy(out, memo, v->J * sizeof *out);
}

static int view_embedding(const ms_view *v, float *out)
{
    uint32_t D = v->meta->embed_dim, n = view_items(v);
    if (D == 0 || n == 0)
        return 0;
    if (!(v->parts & MS_PART_EMBED))
        ms_request_part_missing("ms_view_embedding", "the embedding (MS_PART_EMBED)");
    memset(out, 0, D * sizeof *out);
    for (uint32_t i = 0; i < n; i++) {
        const float *e = view_item_request(v, i)->embedding + (size_t)view_item_iter(v, i) * D;
        for (uint32_t d = 0; d < D; d++)
            out[d] += e[d] / (float)n;
    }
    return 1;
}

/* out[id] += weight over n rows of speculative top-k cells, `stride` cells
 * apart (one row); a missing cell (id -1) adds nothing.  restrict: the
 * caller's scratch is not the trace's arrays, so the row loop keeps its
 * pointers in registers. */
static inline __attribute__((always_inline)) void spec_add_rows_k(float *restrict out, const int32_t *restrict ids,
                                                                   const float *restrict w, uint32_t n, uint32_t K,
                                                                   size_t stride)
{
    for (uint32_t row = 0; row < n; row++) {
        const int32_t *id = ids + row * stride;
        const float *wt = w + row * stride;
        for (uint32_t k = 0; k < K; k++)
            if (id[k] >= 0)
                out[id[k]] += wt[k];
    }
}

/* The usual K as constants: the cell loop unrolled (prefill steps add
 * hundreds of rows per layer and depth); the same additions in the same
 * order. */
static void spec_add_rows(float *restrict out, const int32_t *restrict ids, const float *restrict w, uint32_t n,
                          uint32_t K, size_t stride)
{
    switch (K) {
    case 2:
        spec_add_rows_k(out, ids, w, n, 2, stride);
        break;
    case 4:
        spec_add_rows_k(out, ids, w, n, 4, stride);
        break;
    case 8:
        spec_add_rows_k(out, ids, w, n, 8, stride);
        break;
    default:
        spec_add_rows_k(out, ids, w, n, K, stride);
    }
}

static int view_spec_gate(const ms_view *v, uint32_t l, uint32_t i, float *out)
{
    const ms_trace_meta *m = v->meta;
    if (i < 1 || i > m->spec_depth || l + i >= v->L || view_items(v) == 0)
        return 0;
    if (!(v->parts & MS_PART_SPEC))
        ms_request_part_missing("ms_view_spec_gate", "the speculative gates (MS_PART_SPEC)");
    memset(out, 0, v->J * sizeof *out);
    uint32_t rows = 0;
    size_t stride = ms_spec_index(m, 1, 0, 0); /* cells per row */
    for (uint32_t b = 0; b < view_items(v); b++) {
        const ms_request *r = view_item_request(v, b);
        const ms_iteration *it = &r->iters[view_item_iter(v, b)];
        size_t base = ms_spec_index(m, it->row0, l, i - 1);
        spec_add_rows(out, r->spec_ids + base, r->spec_w + base, it->n_rows, v->K, stride);
        rows += it->n_rows;
    }
    for (uint32_t e = 0; rows > 1 && e < v->J; e++) /* x / 1 is x: a one-row step divides nothing */
        out[e] /= (float)rows;
    return 1;
}

static uint32_t view_spec_row(const ms_view *v, uint32_t l, uint32_t i, const int32_t **ids, const float **w)
{
    const ms_trace_meta *m = v->meta;
    if (i < 1 || i > m->spec_depth || l + i >= v->L || view_items(v) != 1)
        return 0;
    if (!(v->parts & MS_PART_SPEC))
        ms_request_part_missing("ms_view_spec_row", "the speculative gates (MS_PART_SPEC)");
    const ms_request *r = view_item_request(v, 0);
    const ms_iteration *it = &r->iters[view_item_iter(v, 0)];
    if (it->n_rows != 1)
        return 0;
    size_t base = ms_spec_index(m, it->row0, l, i - 1);
    *ids = r->spec_ids + base;
    *w = r->spec_w + base;
    return v->K;
}

static const ms_platform *view_platform(const ms_view *v) { return v->cfg->platform; }
static double view_expert_bytes(const ms_view *v, uint32_t l) { return l < v->L ? v->layer_bytes[l] : 0; }
static double view_expert_params(const ms_view *v, uint32_t l) { return l < v->L ? v->layer_params[l] : 0; }
static double view_link_free(const ms_view *v) { return v->G > 1 ? eng_links_free(v) : ms_fmax(v->link_free, v->clock); }

static void view_set_score(ms_view *v, uint32_t l, uint32_t e, double score)
{
    if (l < v->L && e < v->J)
        v->score[l * v->J + e] = score;
}

static double view_score(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J ? v->score[l * v->J + e] : NAN;
}

static const double *view_scores(const ms_view *v)
{
    return v->score;
}

static void view_prefetch(ms_view *v, uint32_t l, uint32_t e, double priority)
{
    if (l >= v->L || e >= v->J || !isfinite(priority))
        return;
    uint32_t x = l * v->J + e;
    v->asked[x] = 1; /* covered, for prefetch_recall_moeinf (docs/metrics.md) */
    if (v->cached[x])
        return;
    /* the decision exists once this hook's charged work is done; a request
     * that was already queued keeps its earlier issue time (a new priority
     * does not make it wait again) */
    double issue_t = v->hook_t + v->sync_delay + v->async_delay;
    if (!v->queued[x]) {
        v->queued[x] = 1;
        v->n_queued++;
        v->m->prefetch_issued++;
        v->qissue[x] = issue_t;
    }
    issue_t = ms_fmin(issue_t, v->qissue[x]);
    qentry q = {.x = x, .demand = 0, .prio = priority, .issue_t = issue_t, .seq = v->seq++};
    eng_queue_request(v, q);
}

/* view_prefetch of each listed expert, in order (the hook's issue time is
 * the same for all: a submission charges nothing).  A queued expert's new
 * request replaces its old one at once; the fresh requests, each with the
 * seq it would have had, are added together afterwards (eng_queue_burst):
 * the same set of requests, the order of adding them to it being of no
 * consequence. */
static void view_prefetch_list(ms_view *v, const uint32_t *xs, uint32_t n, const double *priority)
{
    double issue_t = v->hook_t + v->sync_delay + v->async_delay;
    uint8_t *asked = v->asked, *queued = v->queued; /* locals: the byte stores would make the compiler reload v's fields */
    const uint8_t *cached = v->cached;
    uint32_t *fx = v->burst_x, nx = v->NX, fresh = 0;
    uint64_t *fseq = v->burst_seq;
    double *qissue = v->qissue;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = xs[i];
        if (x >= nx || !isfinite(priority[x]))
            continue;
        asked[x] = 1;
        if (cached[x])
            continue;
        if (queued[x]) { /* a new priority: as view_prefetch */
            eng_queue_request(v, (qentry){.x = x, .demand = 0, .prio = priority[x],
                                          .issue_t = ms_fmin(issue_t, qissue[x]), .seq = v->seq++});
            continue;
        }
        queued[x] = 1;
        qissue[x] = issue_t;
        fx[fresh] = x;
        fseq[fresh++] = v->seq++;
    }
    eng_queue_burst(v, fx, fseq, fresh, priority, issue_t);
    v->n_queued += fresh;
    v->m->prefetch_issued += fresh;
}

static void view_clear_prefetches(ms_view *v)
{
    for (uint32_t x = 0; x < v->NX; x++)
        if (v->queued[x]) {
            eng_dequeue_prefetch(v, x);
            v->m->prefetch_cancelled++;
        }
}

static void view_charge_sync(ms_view *v, double seconds)
{
    if (seconds > 0) {
        v->sync_delay += seconds;
        v->m->policy_sync_s += seconds;
    }
}

static void view_charge_async(ms_view *v, double seconds)
{
    if (seconds > 0) {
        v->async_delay += seconds;
        v->m->policy_async_s += seconds;
    }
}

static void view_release(ms_view *v, uint32_t l, uint32_t e)
{
    if (view_evictable(v, l, e))
        eng_evict(v, l * v->J + e);
}

void eng_begin_hook(ms_view *v, double t)
{
    v->hook_t = t;
    v->sync_delay = 0;
    v->async_delay = 0;
}


/* the table behind policies/view.h */
const ms_view_ops eng_view_ops = {
    .meta = view_meta,
    .now = view_now,
    .iteration = view_iteration,
    .layer = view_layer,
    .step = view_step,
    .phase = view_phase,
    .batch_rows = view_batch_rows,
    .activated = view_activated,
    .resident = view_resident,
    .cached = view_cached,
    .evictable = view_evictable,
    .fits = view_fits,
    .capacity_experts = view_capacity_experts,
    .next_use = view_next_use,
    .queued = view_queued,
    .cached_all = view_cached_all,
    .queued_all = view_queued_all,
    .prefetched_unused = view_prefetched_unused,
    .incoming = view_incoming,
    .items = view_items,
    .item_request = view_item_request,
    .item_index = view_item_index,
    .item_iter = view_item_iter,
    .gate_mean = view_gate_mean,
    .embedding = view_embedding,
    .spec_gate = view_spec_gate,
    .spec_row = view_spec_row,
    .platform = view_platform,
    .expert_bytes = view_expert_bytes,
    .expert_params = view_expert_params,
    .link_free = view_link_free,
    .set_score = view_set_score,
    .score = view_score,
    .scores = view_scores,
    .prefetch = view_prefetch,
    .prefetch_list = view_prefetch_list,
    .clear_prefetches = view_clear_prefetches,
    .charge_sync = view_charge_sync,
    .charge_async = view_charge_async,
    .release = view_release,
};
