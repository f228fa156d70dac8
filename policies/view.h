/* The view: the engine as policies see it.  Policies query the running
 * step and act on the engine only through these functions; the engine
 * (sim/engine/view.c) supplies them as a table of operations, so the
 * policies' library links against nothing above it (docs/layout.md).
 * Every function is valid only inside a hook (policies/policy.h). */
#ifndef MS_VIEW_H
#define MS_VIEW_H

#include <stdint.h>

#include "sim/core/profile.h"
#include "traces/format/trace.h"

/* One activated expert of a layer in the running iteration: the union over
 * the batch's token rows, in order of first appearance (row, then slot). */
typedef struct {
    uint32_t expert;
    uint32_t tokens;   /* token rows that routed to it */
    float weight_sum;  /* summed router weight over those rows */
} ms_act;

typedef struct ms_view ms_view; /* the engine as policies see it */

/* The operations behind the ms_view_* functions below, one per function;
 * an engine's view starts with a pointer to its table. */
typedef struct ms_view_ops {
    const ms_trace_meta *(*meta)(const ms_view *v);
    double (*now)(const ms_view *v);
    uint64_t (*iteration)(const ms_view *v);
    uint32_t (*layer)(const ms_view *v);
    uint64_t (*step)(const ms_view *v);
    ms_phase (*phase)(const ms_view *v);
    uint32_t (*batch_rows)(const ms_view *v);
    const ms_act *(*activated)(const ms_view *v, uint32_t l, uint32_t *n);
    int (*resident)(const ms_view *v, uint32_t l, uint32_t e);
    int (*cached)(const ms_view *v, uint32_t l, uint32_t e);
    int (*evictable)(const ms_view *v, uint32_t l, uint32_t e);
    int (*fits)(const ms_view *v, uint32_t l, uint32_t e);
    double (*capacity_experts)(const ms_view *v, uint32_t l);
    uint64_t (*next_use)(const ms_view *v, uint32_t l, uint32_t e);
    int (*queued)(const ms_view *v, uint32_t l, uint32_t e);
    const uint8_t *(*cached_all)(const ms_view *v);
    const uint8_t *(*queued_all)(const ms_view *v);
    int (*prefetched_unused)(const ms_view *v, uint32_t l, uint32_t e);
    int (*incoming)(const ms_view *v, uint32_t *l, uint32_t *e);
    uint32_t (*items)(const ms_view *v);
    const ms_request *(*item_request)(const ms_view *v, uint32_t i);
    uint64_t (*item_index)(const ms_view *v, uint32_t i);
    uint32_t (*item_iter)(const ms_view *v, uint32_t i);
    void (*gate_mean)(const ms_view *v, uint32_t l, float *out);
    int (*embedding)(const ms_view *v, float *out);
    int (*spec_gate)(const ms_view *v, uint32_t l, uint32_t i, float *out);
    uint32_t (*spec_row)(const ms_view *v, uint32_t l, uint32_t i, const int32_t **ids, const float **w);
    const ms_platform *(*platform)(const ms_view *v);
    double (*expert_bytes)(const ms_view *v, uint32_t l);
    double (*expert_params)(const ms_view *v, uint32_t l);
    double (*link_free)(const ms_view *v);
    void (*set_score)(ms_view *v, uint32_t l, uint32_t e, double score);
    double (*score)(const ms_view *v, uint32_t l, uint32_t e);
    const double *(*scores)(const ms_view *v);
    void (*prefetch)(ms_view *v, uint32_t l, uint32_t e, double priority);
    void (*prefetch_list)(ms_view *v, const uint32_t *xs, uint32_t n, const double *priority);
    void (*clear_prefetches)(ms_view *v);
    void (*charge_sync)(ms_view *v, double seconds);
    void (*charge_async)(ms_view *v, double seconds);
    void (*release)(ms_view *v, uint32_t l, uint32_t e);
} ms_view_ops;

static inline const ms_view_ops *ms_view_ops_of(const ms_view *v) { return *(const ms_view_ops *const *)v; }

/* ---- engine queries (valid inside hooks) ---- */
static inline const ms_trace_meta *ms_view_meta(const ms_view *v) { return ms_view_ops_of(v)->meta(v); }
static inline double ms_view_now(const ms_view *v) { return ms_view_ops_of(v)->now(v); }
/* 0-based, engine order */
static inline uint64_t ms_view_iteration(const ms_view *v) { return ms_view_ops_of(v)->iteration(v); }
/* running layer */
static inline uint32_t ms_view_layer(const ms_view *v) { return ms_view_ops_of(v)->layer(v); }
/* iteration * L + layer */
static inline uint64_t ms_view_step(const ms_view *v) { return ms_view_ops_of(v)->step(v); }
static inline ms_phase ms_view_phase(const ms_view *v) { return ms_view_ops_of(v)->phase(v); }
/* token rows in this iteration */
static inline uint32_t ms_view_batch_rows(const ms_view *v) { return ms_view_ops_of(v)->batch_rows(v); }
/* Activated experts of layer l in the running iteration (any l: the trace
 * knows the future; only `oracle`-style policies may look ahead). */
static inline const ms_act *ms_view_activated(const ms_view *v, uint32_t l, uint32_t *n) { return ms_view_ops_of(v)->activated(v, l, n); }
/* weights on GPU, ready now */
static inline int ms_view_resident(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->resident(v, l, e); }
/* holds a GPU slot (ready or in flight) */
static inline int ms_view_cached(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->cached(v, l, e); }
/* cached, not protected, not in flight */
static inline int ms_view_evictable(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->evictable(v, l, e); }
/* (l, e) fits in the cache without evicting */
static inline int ms_view_fits(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->fits(v, l, e); }
/* the whole cache, in experts of layer l's size */
static inline double ms_view_capacity_experts(const ms_view *v, uint32_t l) { return ms_view_ops_of(v)->capacity_experts(v, l); }
/* Next step (iteration * L + layer) after the running one at which (l, e) is
 * activated, UINT64_MAX if never; the running step itself for an expert the
 * running layer activates and has not served yet (a prefetch copy starting
 * before the layer's loads asks).  Only for policies with needs_future. */
static inline uint64_t ms_view_next_use(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->next_use(v, l, e); }
/* a prefetch request waits in the queue */
static inline int ms_view_queued(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->queued(v, l, e); }
/* ms_view_cached and ms_view_queued of every expert at once: [L * J] flags by
 * x = l * J + e (non-zero = true), read-only and live (they change as the
 * policy's own actions change them), for a policy that asks of many experts. */
static inline const uint8_t *ms_view_cached_all(const ms_view *v) { return ms_view_ops_of(v)->cached_all(v); }
static inline const uint8_t *ms_view_queued_all(const ms_view *v) { return ms_view_ops_of(v)->queued_all(v); }
/* (l, e) holds a slot a prefetch filled, not used yet, and its target layer
 * (the next run of layer l after the copy started) has not run yet. */
static inline int ms_view_prefetched_unused(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->prefetched_unused(v, l, e); }
/* The expert being admitted while the cache makes room (inside victim() and
 * full()); 0 outside. */
static inline int ms_view_incoming(const ms_view *v, uint32_t *l, uint32_t *e) { return ms_view_ops_of(v)->incoming(v, l, e); }

/* The running iteration's batch: item i is one request's iteration. */
static inline uint32_t ms_view_items(const ms_view *v) { return ms_view_ops_of(v)->items(v); }
static inline const ms_request *ms_view_item_request(const ms_view *v, uint32_t i) { return ms_view_ops_of(v)->item_request(v, i); }
/* request index in the trace */
static inline uint64_t ms_view_item_index(const ms_view *v, uint32_t i) { return ms_view_ops_of(v)->item_index(v, i); }
/* iteration index within its request */
static inline uint32_t ms_view_item_iter(const ms_view *v, uint32_t i) { return ms_view_ops_of(v)->item_iter(v, i); }
/* Layer l's gate distribution averaged over the running iteration's token
 * rows, into out[J] (policies/gate.h says how top-k traces are widened). */
static inline void ms_view_gate_mean(const ms_view *v, uint32_t l, float *out) { ms_view_ops_of(v)->gate_mean(v, l, out); }
/* The iteration's semantic embedding (mean over the batch's items) into
 * out[embed_dim]; returns 0 when the trace has none. */
static inline int ms_view_embedding(const ms_view *v, float *out) { return ms_view_ops_of(v)->embedding(v, out); }
/* Speculative gate of layer l + i computed from layer l's hidden state
 * (1 <= i <= spec_depth), averaged over the rows, into out[J]: each row's
 * speculative top-k weights, 0 elsewhere.  Returns 0 when the trace has none
 * or l + i >= L. */
static inline int ms_view_spec_gate(const ms_view *v, uint32_t l, uint32_t i, float *out) { return ms_view_ops_of(v)->spec_gate(v, l, i, out); }
/* When the running iteration is one token row: points ids and w at that
 * row's K speculative top-k cells of layer l + i (the same conditions on
 * i and l as ms_view_spec_gate) and returns K; else 0.  ms_view_spec_gate
 * of such a step is w[k] at ids[k] for the cells with ids[k] >= 0 (the
 * trace's checks refuse a repeated id), 0 elsewhere: a policy that needs
 * only the nonzero entries reads K cells instead of J. */
static inline uint32_t ms_view_spec_row(const ms_view *v, uint32_t l, uint32_t i, const int32_t **ids, const float **w) { return ms_view_ops_of(v)->spec_row(v, l, i, ids, w); }

/* Sizes and the clock of the copy engine, for policies that model time. */
static inline const ms_platform *ms_view_platform(const ms_view *v) { return ms_view_ops_of(v)->platform(v); }
static inline double ms_view_expert_bytes(const ms_view *v, uint32_t l) { return ms_view_ops_of(v)->expert_bytes(v, l); }
static inline double ms_view_expert_params(const ms_view *v, uint32_t l) { return ms_view_ops_of(v)->expert_params(v, l); }
/* when the H2D engine finishes what it has started (>= now) */
static inline double ms_view_link_free(const ms_view *v) { return ms_view_ops_of(v)->link_free(v); }

/* A score board the prefetcher writes and the cache reads (fMoE evicts by
 * the probability its prefetcher last searched).  NAN when never set. */
static inline void ms_view_set_score(ms_view *v, uint32_t l, uint32_t e, double score) { ms_view_ops_of(v)->set_score(v, l, e, score); }
static inline double ms_view_score(const ms_view *v, uint32_t l, uint32_t e) { return ms_view_ops_of(v)->score(v, l, e); }
/* The whole board, [L * J] by x = l * J + e, read-only (for a policy that
 * reads every entry in one step: ms_view_score one call at a time). */
static inline const double *ms_view_scores(const ms_view *v) { return ms_view_ops_of(v)->scores(v); }

/* ---- policy actions ---- */
/* Queue a prefetch of (l, e); higher priority is served first; resubmitting
 * a queued expert replaces its priority.  Ignored when (l, e) is cached.
 * The request expires once layer l next runs. */
static inline void ms_view_prefetch(ms_view *v, uint32_t l, uint32_t e, double priority) { ms_view_ops_of(v)->prefetch(v, l, e, priority); }
/* ms_view_prefetch(v, x / J, x % J, priority[x]) for x = xs[0], ..., xs[n - 1]
 * in that order (x = l * J + e; priority indexed by x, [L * J]): the same
 * requests, for a policy that submits hundreds in one hook. */
static inline void ms_view_prefetch_list(ms_view *v, const uint32_t *xs, uint32_t n, const double *priority) { ms_view_ops_of(v)->prefetch_list(v, xs, n, priority); }
static inline void ms_view_clear_prefetches(ms_view *v) { ms_view_ops_of(v)->clear_prefetches(v); }
/* Modelled decision cost: a synchronous cost delays GPU compute, an
 * asynchronous one delays only the prefetches issued after it in this hook. */
static inline void ms_view_charge_sync(ms_view *v, double seconds) { ms_view_ops_of(v)->charge_sync(v, seconds); }
static inline void ms_view_charge_async(ms_view *v, double seconds) { ms_view_ops_of(v)->charge_async(v, seconds); }
/* Frees (l, e)'s GPU slot now when ms_view_evictable holds (else nothing):
 * weights a framework frees after their layer's forward (a whole-layer
 * fetch's, docs/policies.md "layer-stream").  The cache policy sees an
 * eviction (on_evict); an unused prefetched copy counts as wasted. */
static inline void ms_view_release(ms_view *v, uint32_t l, uint32_t e) { ms_view_ops_of(v)->release(v, l, e); }

#endif
