/* The replay engine's state, shared by its parts (internal: nothing outside
 * sim/engine/ includes this; the contract is sim/engine/engine.h).
 *
 * Expert (l, e) is slot x = l * J + e in every per-expert array.  The GPU
 * compute stream is the engine clock `now`; the H2D copy engine is a
 * priority queue (qset.h: on-demand loads first, then prefetches by priority, FIFO on
 * ties) served one copy at a time from `link_free`.  advance(T) starts every
 * copy whose start time falls before T, so state changes at T see exactly the
 * copies that began earlier.
 *
 * The parts, one job each:
 *   engine.c     ms_run: set-up, replay, results
 *   setup.c: sizes, capacity, the training split, policy loading, state
 *   view.c: the policy-facing view (policies/view.h)
 *   loop.c: one iteration, layer by layer
 *   copyq.c: the H2D copy queue and the copy engine; qset.c: its request set
 *   links.c: several GPUs: a link per GPU, the shared host ceiling
 *   gpus.c: several GPUs: placement, per-GPU caches, a layer on its GPUs
 *   residency.c: executor ops, cache slots (evict, make room, occupy) and the host tier
 *   step_order.c: a layer step's order and protection, as the cache policy declares them
 *   nextuse.c: the next-use pre-pass (policies with needs_future)
 *   outputs.c: the events CSV, per-request and per-iteration CSVs, summary statistics
 */
#ifndef MS_ENGINE_STATE_H
#define MS_ENGINE_STATE_H

#include <stdint.h>
#include <stdio.h>

#include "policies/policy.h"
#include "sim/engine/qset.h"
#include "sim/core/dvec.h"
#include "sim/core/fminmax.h"
#include "sim/core/out.h"
#include "sim/engine/batcher.h"
#include "sim/engine/engine.h"
#include "sim/engine/exec.h"
#include "sim/engine/runkeys.h"
#include "traces/format/trace_cache.h"

enum { OUT_HIT = 1, OUT_LATE = 2, OUT_MISS = 3 };
/* from_prefetch: its target layer (the next run of its layer) is still
 * ahead, or it ran without activating the expert */
enum { PF_AHEAD = 1, PF_PASSED = 2 }; /* loop.c tests PF_AHEAD as bit 0 of 8 flags at once */


/* One GPU's H2D link when the run has several GPUs (links.c): its queue and
 * the copy in flight, whose end is tentative while a shared host ceiling
 * can still slow it down. */
typedef struct {
    eng_qset q;
    double free_t;      /* end of the copy in flight (tentative until final), or of the last one */
    int busy;           /* its copy is in the fluid (links.c), since the last start on any link */
    int final;          /* that copy's end is final (its events row written) */
    qentry cur;
    double cur_start, cur_xfer0, cur_left, cur_cap; /* start, transfer start, bytes left at fluid_t, bytes/s */
    int cur_ssd;
    uint64_t cur_iter;  /* iteration and phase it started in (its events row) */
    ms_phase cur_phase;
} eng_link;


struct ms_view {
    const ms_view_ops *ops; /* first: policies/view.h reads it through the pointer */
    const ms_run_config *cfg;
    const ms_trace_meta *meta;
    uint32_t L, J, K, NX;
    ms_policy_env env;
    const ms_policy_desc *pf, *cache, *sched;
    ms_platform cpu_platform; /* the platform with the scheduler's CPU threads (setup.c timed_platform) */
    void *pf_st, *cache_st, *sched_st;
    /* per-expert state [NX] */
    uint8_t *cached;        /* holds a GPU slot (ready or in flight) */
    uint8_t *transient;     /* loaded for this layer only (cache declined it) */
    uint8_t *from_prefetch; /* slot filled by a prefetch, not used yet: PF_AHEAD or PF_PASSED */
    uint8_t *queued;        /* a prefetch request waits in the copy queue */
    uint8_t *outcome;       /* this layer's OUT_* for activated experts */
    uint32_t *burst_x;      /* [NX] scratch of view_prefetch_list (its fresh requests' experts) and of a layer's expiry */
    uint64_t *burst_seq;    /*      and their seq */
    double *qissue;         /* issue time of the queued prefetch request of x */
    double *ready_t;
    uint64_t *protect;      /* == stamp: activated by the running layer */
    uint64_t *mark;         /* == iteration + 1: activated in the running iteration */
    uint32_t *act_pos;      /* index of x in its layer's activated list */
    uint32_t *act_tok;      /* scratch of eng_build_activated_sets (actsets.h), 0 between builds */
    float *act_wsum;        /* the same, weight sums */
    double *score;          /* the prefetcher -> cache score board (NAN: unset) */
    uint32_t incoming;      /* expert make_room works for, UINT32_MAX outside */
    double *layer_bytes, *layer_params, *dense_bytes, *dense_params;
    double cap_units, used_units, used_bytes;
    /* host tier */
    uint8_t *in_host;
    uint64_t *host_used_at;
    double host_cap, host_used;
    uint64_t host_clock;
    /* copy engine */
    eng_qset q;
    size_t n_queued;        /* experts with queued[x] set */
    uint64_t seq;
    double link_free;
    /* several GPUs (gpus.c, links.c; G == 1 leaves all but gpu_of unused) */
    uint32_t G;
    uint8_t *gpu_of;        /* [NX] the GPU each expert is placed on */
    double *gcap, *gused, *gused_bytes; /* [G] cache capacity and use, in units and bytes */
    eng_link *links;        /* [G] */
    double fluid_t;         /* time the links' bytes left refer to */
    double ceiling;         /* host ceiling, bytes/s (INFINITY: none) */
    double token_bytes;     /* one token's hidden state, dispatched to a remote GPU */
    uint8_t *asked;         /* [NX] a prefetch request named x since its layer last ran */
    /* framework host costs */
    const ms_framework *fw; /* the run's framework: cfg's, else the platform's; NULL: none */
    double fw_layer_s, fw_iteration_s;
    uint32_t enc_layers;    /* the model's encoder_moe_layers: decode iterations skip them */
    uint32_t copy_calls;    /* H2D calls per expert copy (eng_resolve_copies) */
    double copy_bw;         /* host -> GPU bytes/s: h2d_bw, or pageable_bw */
    int surplus_stream;     /* framework surplus = stream: a demand load without room goes transient */
    /* clocks and position */
    double now, clock;
    uint64_t iter, stamp;
    /* the batch's mean gate of each layer, computed once per iteration for
     * every policy that asks (view.c view_gate_mean): valid while
     * gate_mean_at[l] == gate_epoch, which replay() advances before each
     * iteration and leaves 0 (never a stamp) outside one */
    float *gate_mean;       /* [L][J] */
    uint64_t *gate_mean_at; /* [L] */
    uint64_t gate_epoch, gate_epochs;
    uint32_t layer;
    ms_phase phase;
    uint32_t batch_rows;
    ms_batcher *batch;
    /* activated sets of the running iteration, per layer */
    ms_act *acts; /* [L][J] */
    uint32_t *n_acts;
    /* the trace cache's memo of activated sets (actsets_memo.c): NULL when
     * the trace streams; the key and value scratch of the running build */
    ms_trace_snapshot *act_memo;
    unsigned char *act_key, *act_val;
    size_t act_key_cap, act_klen;
    /* one layer step's scratch, sized once per run so that a step allocates
     * nothing: [J] per activated expert, [4 G] GPU lanes, the visit list
     * (grown only when a wider batch needs more) */
    uint8_t *step_cached, *step_on_cpu, *step_seen;
    uint32_t *step_order;
    double *step_ready;
    double *step_lanes;
    uint32_t *step_visit;
    size_t step_visit_cap;
    uint32_t *step_identity; /* [J] 0, 1, ..., J-1: the visits of every order but token */
    /* hook cost accounting */
    double hook_t, sync_delay, async_delay;
    /* next-use pre-pass: sorted iteration indices per expert */
    uint32_t **use_it;
    uint32_t *use_n, *use_cap, *use_cur;
    /* the executor every op goes through (sim/exec.h) */
    ms_exec *exec;
    ms_exec own_exec;       /* the simulated timeline, when cfg->exec is NULL */
    /* results */
    ms_metrics *m;
    ms_dvec ttft, tpot, latency;
    ms_dvec queue, ttft_svc, lat_svc; /* queueing and service apart (outputs.c) */
    double served_s;                  /* seconds with a request in service (the iterations' span) */
    double arrival_first, arrival_last; /* of the finished requests (NAN before the first) */
    FILE *ev;                   /* ms_out_fp(ev_out) */
    struct ms_out *ev_out, *iter_out, *req_out;
    FILE *iter_csv, *req_csv;   /* cfg->iterations_path, requests_path */
    ms_err *err;
    int failed;
    /* the cache policy's rules of a layer step (step_order.c) */
    ms_step_rules rules;
    int step_open;
    uint32_t step_turns;    /* the running step's experts whose turn came: act_pos below it */
    unsigned parts;         /* request parts the replay reads (MS_PART_*): the policies' and the engine's */          /* between a layer's gate and the end of its compute */
};

/* view.c: the policy-facing view (policies/view.h) */
extern const ms_view_ops eng_view_ops;
void eng_begin_hook(ms_view *v, double t);

/* setup.c: sizes, capacity, the training split, policy loading, state */
int eng_resolve_split(ms_view *v);
int eng_load_policy(ms_view *v, ms_policy_kind kind, const char *spec, const ms_policy_desc **desc, void **st);
int eng_setup_layer_sizes(ms_view *v);
int eng_resolve_copies(ms_view *v);
void eng_note_unused(ms_view *v);
/* One line of the run's warnings (ms_metrics.warnings; dropped past MS_RUN_MAX_WARNINGS). */
void eng_warn(ms_view *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int eng_check_capacity(ms_view *v);
int eng_check_model(ms_view *v);
void eng_preload_cache(ms_view *v);
int eng_start_executor(ms_view *v);
int eng_open_executor(ms_view *v);
void eng_init_host_tier(ms_view *v);
void eng_alloc_state(ms_view *v);
void eng_free_state(ms_view *v);

/* loop.c: one iteration, layer by layer */
void eng_build_activated_sets(ms_view *v);
void eng_policy_stats_now(const ms_view *v, ms_policy_stats *st);
int eng_run_iteration(ms_view *v);

/* actsets_memo.c: the activated sets of a batch, kept in the trace cache's
 * memo for the next run of the same trace (a sweep's next point) */
/* 1 when the running batch's sets came from the memo (lists, marks and
 * positions as the build leaves them); 0: build them, then remember them */
int eng_actsets_recall(ms_view *v);
void eng_actsets_remember(ms_view *v);
/* 1 when a memo value p[0..len) is n uint32 counts, each at most max_count,
 * then as many items of item_size bytes as they add up to: the shape the
 * activated sets' and the next-use lists' remember write (a recall checks it
 * first, so a key that one day misses an input is a miss, not a copy past
 * the arrays) */
int eng_memo_counted_ok(const unsigned char *p, size_t len, uint32_t n, uint32_t max_count, size_t item_size);

/* copyq.c: the H2D copy queue (qset.h) and the copy engine */
void eng_queue_request(ms_view *v, qentry q);
/* eng_queue_request of the prefetch requests {x, 0, prio[x], issue_t,
 * seq[i]} for x = xs[i], i < n (distinct; a burst:
 * eng_qset_add_burst). */
void eng_queue_burst(ms_view *v, const uint32_t *xs, const uint64_t *seq, uint32_t n, const double *prio, double issue_t);
void eng_dequeue_prefetch(ms_view *v, uint32_t x);
/* eng_dequeue_prefetch of each x = xs[i], i < n (distinct). */
void eng_dequeue_prefetches(ms_view *v, const uint32_t *xs, uint32_t n);
void eng_advance(ms_view *v, double T);
void eng_start_demands(ms_view *v);
/* Starts x's queued request now (after what the link has started). */
void eng_start_queued(ms_view *v, uint32_t x);
/* A whole-layer prefetcher's layer l (whole_layer.c): starts every request
 * still queued for layer l and raises *t_exp to the end of the layer's last
 * copy; -1 (err set) with several GPUs. */
int eng_whole_layer_wait(ms_view *v, uint32_t l, double *t_exp);

/* residency.c: executor ops, cache slots (evict, make room, occupy) and the host tier */
int eng_exec_failed(ms_view *v);
/* Submits op and waits for it: its start and end on the executor's clock
 * (inline, as eng_expert_op: several per layer step). */
static inline int eng_exec_run(ms_view *v, ms_op *op, double *start, double *end)
{
    op->iteration = v->iter;
    if (ms_exec_run(v->exec, op, start, end, v->err))
        return eng_exec_failed(v);
    return 0;
}
void eng_release_slot(ms_view *v, uint32_t x);
static inline ms_op eng_expert_op(const ms_view *v, ms_op_kind kind, uint32_t x)
{
    uint32_t l = x / v->J;
    return (ms_op){.kind = kind, .layer = l, .expert = x % v->J, .bytes = v->layer_bytes[l],
                   .params = v->layer_params[l], .after = MS_NO_EVENT};
}
void eng_evict(ms_view *v, uint32_t x);
int eng_make_room(ms_view *v, uint32_t x);
void eng_occupy(ms_view *v, uint32_t x);
int eng_cache_admits(ms_view *v, uint32_t x);
void eng_host_touch(ms_view *v, uint32_t x);
int eng_host_fetch(ms_view *v, uint32_t x);

int eng_admit_prefetch(ms_view *v, uint32_t x);

/* gpus.c: several GPUs: placement, per-GPU caches, a layer's experts on
 * their GPUs with dispatch and combine, per-GPU results */
int eng_gpus_setup(ms_view *v);
/* The one-GPU case of the next two is inline (every eviction and every
 * slot taken asks them); the _gpu versions are the several-GPU case. */
int eng_over_capacity_gpu(const ms_view *v, uint32_t x, double need);
void eng_gpu_account_gpu(ms_view *v, uint32_t x, int sign);
static inline int eng_over_capacity(const ms_view *v, uint32_t x, double need)
{
    if (v->G == 1)
        return v->used_units + need > v->cap_units + 1e-9;
    return eng_over_capacity_gpu(v, x, need);
}
static inline void eng_gpu_account(ms_view *v, uint32_t x, int sign)
{
    if (v->G > 1)
        eng_gpu_account_gpu(v, x, sign);
}
int eng_gpu_streams(ms_view *v, uint32_t x);
void eng_count_gate(ms_view *v, const ms_act *acts, uint32_t n);
void eng_count_late_in_time(ms_view *v, uint32_t x);
double eng_gpus_compute_layer(ms_view *v, const ms_act *acts, uint32_t n, const uint8_t *on_cpu, double t_start);
void eng_gpus_free(ms_view *v);

/* links.c: one H2D link per GPU, a shared host ceiling (G > 1) */
void eng_links_advance(ms_view *v, double T);
void eng_links_settle(ms_view *v, const ms_act *acts, uint32_t n, const uint8_t *on_cpu);
void eng_links_finish(ms_view *v);
double eng_links_free(const ms_view *v);

/* step_order.c: the rules of a layer step the cache policy declares (issue 16) */
#define ENG_VISIT_REPEAT 0x80000000u /* eng_step_visits: a further visit of the same expert */
void eng_load_step_rules(ms_view *v);
unsigned eng_replay_parts(const ms_view *v);
void eng_order_step(ms_view *v, uint32_t l);
/* The visit order of layer l's n activated experts, in v->step_visit (owned
 * by the view: valid until the next call). */
uint32_t eng_step_visits(ms_view *v, uint32_t l, uint32_t n, const uint32_t **out);
/* Whether the cache policy may evict x now (resident: its copy has
 * landed).  Inline: policies ask it of every member they consider. */
/* An activated expert of the running step whose turn has not come yet
 * (rules.lookup_at_turn looks it up then). */
static inline int eng_turn_ahead(const ms_view *v, uint32_t x)
{
    return v->step_open && v->protect[x] == v->stamp && v->act_pos[x] >= v->step_turns;
}
static inline int eng_step_evictable(const ms_view *v, uint32_t x, int resident)
{
    if (!v->cached[x])
        return 0;
    int of_step = v->protect[x] == v->stamp;
    if (v->rules.protect == MS_PROTECT_STEP) /* NONE and LIST leave the step's experts evictable (issue 16) */
        return resident && !of_step;
    if (!resident && !(of_step && v->step_open && !(v->rules.lookup_at_turn && eng_turn_ahead(v, x))))
        return 0; /* in flight, and not a load of the running step (lookup_at_turn: one whose turn came) */
    if (v->rules.protect == MS_PROTECT_LIST && v->cache->cache->protects &&
        v->cache->cache->protects(v->cache_st, v, x / v->J, x % v->J))
        return 0;
    return 1;
}
int eng_evict_defers_release(ms_view *v, uint32_t x);

/* nextuse.c: the next-use pre-pass (policies with needs_future) */
int eng_build_future(ms_view *v, ms_trace_reader *rd);

/* outputs.c: the events CSV, per-request and per-iteration CSVs, summary statistics */
/* x's size in the cache's units: bytes (cap_kind bytes) or 1 expert */
static inline double eng_unit_of(const ms_view *v, uint32_t x)
{
    return v->cfg->cap_kind == MS_CAP_BYTES ? v->layer_bytes[x / v->J] : 1.0;
}
/* The rows of the events CSV (v->ev).  The test of v->ev is inline: a run
 * without --events (a sweep) pays neither the call nor its arguments. */
void eng_write_event(ms_view *v, const char *kind, double t0, double t1, uint32_t x, double bytes, const char *unused_prefetch);
void eng_write_event_layer(ms_view *v, const char *kind, double t0, double t1);
void eng_write_event_gpu(ms_view *v, const char *kind, double t0, double t1, uint32_t gpu, double bytes);
static inline void eng_event_tagged(ms_view *v, const char *kind, double t0, double t1, uint32_t x, double bytes,
                                    const char *unused_prefetch)
{
    if (v->ev)
        eng_write_event(v, kind, t0, t1, x, bytes, unused_prefetch);
}
static inline void eng_event(ms_view *v, const char *kind, double t0, double t1, uint32_t x, double bytes)
{
    if (v->ev)
        eng_write_event(v, kind, t0, t1, x, bytes, "");
}
static inline void eng_event_layer(ms_view *v, const char *kind, double t0, double t1)
{
    if (v->ev)
        eng_write_event_layer(v, kind, t0, t1);
}
static inline void eng_event_gpu(ms_view *v, const char *kind, double t0, double t1, uint32_t gpu, double bytes)
{
    if (v->ev)
        eng_write_event_gpu(v, kind, t0, t1, gpu, bytes);
}
void eng_request_done(const ms_rslot *s, void *ctx);
/* Queueing and service statistics, the offered load and its warning (after the replay). */
void eng_summarise_service(ms_view *v);
void eng_summarise(ms_dvec *d, uint64_t *n, double *mean, double *p50, double *p90, double *p99);
int eng_open_outputs(ms_view *v);
int eng_close_outputs(ms_view *v, int rc);
/* -1 with err once a write to a CSV output failed (out.h ms_out_check_writes). */
int eng_check_outputs(ms_view *v);

#endif
