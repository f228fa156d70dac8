/* The policy contract: prefetchers, caches and schedulers.
 *
 * A policy is one file defining one `const ms_policy_desc` plus one line in
 * policies/registry.c.  The engine never names a policy: it calls the hooks
 * below and policies act on the engine only through the ms_view functions.
 * State is opaque (`void *`), created from validated `k=v` parameters. */
#ifndef MS_POLICY_H
#define MS_POLICY_H

#include <stdint.h>

#include "sim/core/err.h"
#include "sim/core/params.h"
#include "sim/core/profile.h"
#include "traces/format/trace.h"
#include "policies/view.h"

typedef enum { MS_KIND_PREFETCH = 0, MS_KIND_CACHE = 1, MS_KIND_SCHED = 2 } ms_policy_kind;


/* How top-k-only traces (probs_kind topk_*) are widened to a distribution
 * over all J experts (--topk-fill): the experts outside the top-k get 0, or
 * share the mass the top-k leaves (1 - sum of its weights) evenly.  Full-prob
 * traces are never changed. */
typedef enum { MS_FILL_ZERO = 0, MS_FILL_EVEN = 1 } ms_topk_fill;

/* The training split (--train): the part of the trace that policies may learn
 * from offline and that the engine does not replay.  By request when the trace
 * has two or more requests; inside request 0, by iteration, when it has one. */
typedef struct {
    double frac;             /* 0: no split, everything is replayed */
    int by_iteration;
    uint64_t train_requests; /* requests [0, train_requests) are training */
    uint32_t train_iters;    /* by_iteration: iterations [0, train_iters) of request 0 */
} ms_split;

/* What a policy may know when it is created. */
typedef struct {
    const ms_trace_meta *meta;
    const char *trace_path;
    /* The run's reader of the trace (NULL outside ms_run): the training
     * split and its memo are read from the content it reads (gate.h
     * ms_train_foreach), not from whatever file is at trace_path now. */
    const ms_trace_reader *reader;
    const ms_platform *platform;
    const ms_model *model;        /* NULL when the run names no model */
    uint32_t distance;            /* --distance */
    uint64_t seed;
    ms_topk_fill topk_fill;
    ms_split split;
    /* 1 when the run's framework streams a demand load that finds no room
     * through a transient buffer (framework surplus = stream): a cache may
     * then be smaller than one step's activated experts. */
    int surplus_streams;
} ms_policy_env;

/* Running totals of a prefetcher's similarity searches (fMoE Fig. 8 and
 * 14a): for each search that found a map, its best score is added to the sum
 * of its kind (semantic: embedding cosine; trajectory: expert-probability
 * cosine).  Filled by the optional `stats` hook; the engine takes differences
 * between iterations for per-iteration means (ms_run_config.iterations_path). */
typedef struct {
    uint64_t sem_n, traj_n;
    double sem_sum, traj_sum;
} ms_policy_stats;

/* ---- rules of one layer step (issue 16) ----
 * The order in which a layer step's activated experts are looked up and
 * loaded, and which experts the engine keeps from eviction during the step,
 * are the cache policy's to declare (ms_cache_ops.step_rules); without the
 * hook a policy gets the defaults, the engine's behaviour before issue 16.
 * docs/policies.md ("Within a layer step") says which public system does
 * what. */
typedef enum {
    MS_ORDER_FIRST = 0,         /* first appearance over the batch's rows (row, then slot) */
    MS_ORDER_TOKEN,             /* FIRST, and every further routed (row, slot) id, in token order,
                                   touches its expert again (on_access) where it appears */
    MS_ORDER_ASCENDING,         /* ascending expert id */
    MS_ORDER_HITS_FIRST,        /* cached experts, then the others; each group by ascending id */
    MS_ORDER_HITS_FIRST_GATHER, /* HITS_FIRST; in a one-row step each group in the order of
                                   PyTorch's CUDA topk(sorted=False): the experts above the row's
                                   lowest top-k weight by ascending id, then those at it */
} ms_step_order;

typedef enum {
    MS_PROTECT_STEP = 0, /* every activated expert of the running layer, for the whole step */
    MS_PROTECT_LIST,     /* only experts the cache's `protects` hook names (its candidate list);
                            the step's own experts may be evicted, as with NONE */
    MS_PROTECT_NONE,     /* nothing: the step's hits and its own loads (even in flight) may be
                            evicted; an evicted step expert still computes (its slot is freed
                            after the layer), unless lookup_at_turn */
} ms_step_protect;

typedef struct {
    ms_step_order order;
    ms_step_protect protect;
    int cpu_hits_untouched; /* 1: on_access is not called for hits the scheduler runs on the CPU */
    /* 1 (with LIST or NONE): each activated expert is looked up when its turn
     * in the order comes, not at the gate, as a code that acquires a step's
     * experts one at a time does (MoE-Infinity 2024): an expert resident at
     * the gate that an earlier load of the same step evicted is a miss at its
     * turn and is loaded again; a step expert whose copy is in flight and
     * whose turn has not come is not evictable.  0: hit or miss is decided
     * for the whole step at the gate and an evicted step expert still
     * computes. */
    int lookup_at_turn;
} ms_step_rules;

/* ---- hooks ---- */
typedef struct {
    void *(*create)(const ms_params *p, const ms_policy_env *env, ms_err *err);
    void (*destroy)(void *st);
    void (*on_iteration)(void *st, ms_view *v);            /* batch formed, before layer 0 */
    void (*on_layer_start)(void *st, ms_view *v, uint32_t l);
    void (*on_gate)(void *st, ms_view *v, uint32_t l);     /* layer l's activated set revealed */
    /* Layer l's gate revealed, BEFORE its demand loads (after the cache's
     * on_gate): for code that lists its candidates before a layer's experts
     * load (FineMoE).  Optional. */
    void (*before_loads)(void *st, ms_view *v, uint32_t l);
    void (*on_iteration_end)(void *st, ms_view *v);
    /* Bytes of the policy's learnt state (fMoE's map store, MoE-Infinity's
     * EAM collection), reported as metrics policy_state_bytes. Optional. */
    double (*state_bytes)(const void *st);
    /* The running similarity totals (ms_policy_stats). Optional. */
    void (*stats)(const void *st, ms_policy_stats *out);
} ms_prefetch_ops;

typedef struct {
    void *(*create)(const ms_params *p, const ms_policy_env *env, ms_err *err);
    void (*destroy)(void *st);
    /* Experts resident before the first iteration (free, like model load);
     * returns how many were written to ls/es (capacity cap). Optional. */
    uint32_t (*preload)(void *st, const ms_view *v, uint32_t cap, uint32_t *ls, uint32_t *es);
    /* 0: load the expert through a transient buffer without caching it.
     * Asked once per copy the engine is about to make: every demand miss
     * that runs on the GPU, and every prefetch when its copy starts (before
     * room is made; a prefetch that then finds no room is dropped).
     * Optional (NULL = always admit). */
    int (*admit)(void *st, const ms_view *v, uint32_t l, uint32_t e);
    void (*on_insert)(void *st, const ms_view *v, uint32_t l, uint32_t e); /* slot taken */
    void (*on_access)(void *st, const ms_view *v, uint32_t l, uint32_t e); /* activated while cached */
    void (*on_evict)(void *st, const ms_view *v, uint32_t l, uint32_t e);
    /* Layer l's gate revealed, before its experts are classified. Optional. */
    void (*on_gate)(void *st, const ms_view *v, uint32_t l);
    /* Choose a victim among experts for which ms_view_evictable() holds;
     * returns 0 when there is none.  ms_view_incoming() names the expert
     * that needs the room. */
    int (*victim)(void *st, const ms_view *v, uint32_t *l, uint32_t *e);
    /* 1 when the policy's own structure is full for incoming (l, e) although
     * the byte/expert budget has room (per-layer slots): the engine then asks
     * victim() until it returns 0 here.  Optional. */
    int (*full)(void *st, const ms_view *v, uint32_t l, uint32_t e);
    /* The rules of a layer step (ms_step_rules), asked once after create.
     * Optional: NULL = all defaults (first appearance, whole step protected). */
    void (*step_rules)(const void *st, ms_step_rules *out);
    /* MS_PROTECT_LIST: 1 when (l, e) is on the policy's protected list. */
    int (*protects)(void *st, const ms_view *v, uint32_t l, uint32_t e);
    /* A demand load of (l, e) found no victim: 1 = load it over the budget
     * anyway (later loads then evict until the cache fits again); 0 or NULL
     * = the run fails with the engine's "found no victim" error. */
    int (*overflow)(void *st, const ms_view *v, uint32_t l, uint32_t e);
} ms_cache_ops;

typedef struct {
    void *(*create)(const ms_params *p, const ms_policy_env *env, ms_err *err);
    void (*destroy)(void *st);
    /* Sets on_cpu[i] = 1 to run acts[i] on the CPU instead of the GPU;
     * cached[i] says whether its weights hold a GPU slot. */
    void (*place)(void *st, ms_view *v, uint32_t l, uint32_t n, const ms_act *acts,
                  const uint8_t *cached, uint8_t *on_cpu);
    /* Threads of the host's CPU expert stream in this run: the engine times
     * every CPU expert with them in place of the platform's cpu_cores
     * (ms_t_expert_cpu_on).  Optional; NULL or 0 = the platform's cpu_cores. */
    uint32_t (*cpu_threads)(const void *st);
} ms_sched_ops;

typedef struct {
    const char *name;
    ms_policy_kind kind;
    const char *summary;           /* one line for `moesim list` */
    const ms_param_spec *params;   /* terminated by {NULL}; may be a lone {NULL} */
    int needs_future;              /* asks the engine for the next-use pre-pass */
    int needs_weights;             /* reads router weights (ms_view_gate_mean, ms_gate_row): refused on a trace
                                    * that has none (probs_kind topk_ids) */
    unsigned reads;                /* the request parts (traces/format/trace.h MS_PART_*) it reads during the
                                    * replay besides the top-k ids: MS_PART_GATE for ms_view_gate_mean /
                                    * ms_gate_row, MS_PART_EMBED for ms_view_embedding, MS_PART_SPEC for
                                    * ms_view_spec_gate.  The engine reads only what its policies declare
                                    * (MS_PART_GATE on a full-prob trace: the probabilities, not topk_w). */
    int uses_distance;             /* reads the prefetch distance (--distance); a run that sets
                                    * another distance than 1 for a prefetcher without one is warned */
    int uses_training;             /* learns from the training split: --train auto becomes 0.7 */
    int whole_layer;               /* a prefetcher whose requests are whole-layer fetches (DeepSpeed ZeRO-3,
                                    * HF Accelerate, vLLM cpu_offload_gb): its queued requests for layer l
                                    * never expire; at layer l's gate every one still queued starts at once
                                    * and l's expert compute waits for all of them (sim/engine/whole_layer.c;
                                    * docs/policies.md "layer-stream").  One GPU only. */
    int (*learns)(const ms_params *p); /* optional: decides uses_training from the parameters */
    const ms_prefetch_ops *prefetch;
    const ms_cache_ops *cache;
    const ms_sched_ops *sched;
} ms_policy_desc;

/* The one registry (policies/registry.c), NULL-terminated. */
extern const ms_policy_desc *const ms_policy_registry[];
const ms_policy_desc *ms_policy_find(ms_policy_kind kind, const char *name);
/* Policies outside the registry (a policy written in Python, docs/python.md):
 * the process hosting the engine may install one finder, which
 * ms_policy_find asks for a name the registry does not hold (NULL: none,
 * the default).  The registry's names always win. */
typedef const ms_policy_desc *(*ms_policy_finder)(ms_policy_kind kind, const char *name);
void ms_policy_set_finder(ms_policy_finder finder);
/* The policy of a spec "name[:k=v,...]": splits it (ms_spec_split: name
 * into name, the k=v text into *kv) and finds the name (ms_policy_find); for
 * "plugin:path=FILE[,k=v...]" loads FILE (policies/plugin.h), writes the
 * plugin's own name into name and leaves *kv at the k=v after the path.
 * NULL with err set on a malformed spec or a plugin that cannot be used;
 * NULL with err->msg empty when the name is simply unknown (the caller
 * words that, with the known names). */
const ms_policy_desc *ms_policy_lookup(ms_policy_kind kind, const char *spec, char *name, size_t cap,
                                       const char **kv, ms_err *err);
/* Loads (once per process) the plugin at path and checks its ABI version
 * and kind; NULL with one line in err. */
const ms_policy_desc *ms_plugin_load(ms_policy_kind kind, const char *path, ms_err *err);
const char *ms_policy_kind_name(ms_policy_kind kind);

#endif
