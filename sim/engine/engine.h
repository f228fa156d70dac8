/* The discrete-event replay engine (docs/engine.md "Engine semantics").
 *
 * ms_run() streams a trace request by request, forms batches (continuous
 * batching up to max_batch, prefill before decode), and for every iteration
 * and MoE layer runs: non-expert work on the GPU stream; gate reveal (the
 * activated set is the union of top-k over the batch's rows); hit / late /
 * miss classification; on-demand loads ahead of every queued prefetch on a
 * single H2D copy engine (in-flight copies finish); expert compute in order of
 * weight readiness; prefetches served by priority concurrently with compute.
 * The only time is the simulated clock. */
#ifndef MS_ENGINE_H
#define MS_ENGINE_H

#include <stdint.h>
#include <stdio.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"
#include "policies/policy.h"

typedef enum { MS_CAP_EXPERTS = 0, MS_CAP_BYTES = 1 } ms_cap_kind;

typedef struct {
    const char *trace_path;
    const ms_model *model;        /* NULL: dimensions from the trace alone */
    const ms_platform *platform;
    /* --set overrides already applied to *model / *platform, echoed in the
     * JSON config (profile.h ms_profile_set; may be NULL / 0) */
    const ms_profile_set *model_sets, *platform_sets;
    int n_model_sets, n_platform_sets;
    const char *prefetch_spec;    /* "name[:k=v,...]" */
    const char *cache_spec;
    const char *sched_spec;
    ms_cap_kind cap_kind;
    double cap_value;             /* experts, or bytes */
    uint32_t distance;            /* prefetch distance d (layers ahead) */
    uint32_t max_batch;           /* continuous batching limit (requests) */
    double host_bytes;            /* host-memory expert tier; 0 = every expert in host memory */
    int offline;                  /* ignore arrival times: every request arrives at 0 */
    const char *events_path;      /* CSV of every interval, or NULL */
    uint64_t seed;
    int train_set;                /* 0: --train auto (0.7 when a policy learns offline, else 0) */
    double train_frac;            /* --train: training split, not replayed (policies/policy.h ms_split) */
    int topk_fill;                /* --topk-fill: ms_topk_fill */
    /* Optional per-sample CSVs (NULL: none), for figures:
     * iterations_path, one row per replayed iteration:
     *   iteration,phase,hits,late,misses,hit_rate,sem_score,traj_score
     *   (the scores: the mean best similarity of that iteration's searches
     *   by a prefetcher with a `stats` hook; empty when it made none);
     * requests_path, one row per finished request:
     *   request,arrival_s,ttft_s,tpot_s,latency_s,queue_s,ttft_service_s,latency_service_s
     *   (ttft/tpot empty when undefined; ttft_s and latency_s from the arrival, the
     *   service ones from the start of its first replayed iteration). */
    const char *iterations_path;
    const char *requests_path;
    /* The executor every op goes through (sim/engine/exec.h).  NULL: the simulated
     * timeline of `platform`, which the engine makes and frees.  Otherwise
     * the caller's, which must not be shared with another run; its times are
     * the engine's (`moesim validate` passes a tee onto a real backend). */
    struct ms_exec *exec;
    /* 0 or 1: work as profiled.  Otherwise every expert's and every layer's
     * dense bytes and parameters are multiplied by it (validate
     * --expert-scale: real backends run the same shrunken work). */
    double work_scale;
    /* How the engine's messages name a run key (sim/engine/runkeys.h): 0, as
     * the CLI flag ("--batch"); 1, as the key of a sweep spec or golden file
     * ("batch"). */
    int keys_as_ini;
    /* Several GPUs (docs/engine.md "Several GPUs"): gpus 0 = the platform's
     * (1 when it declares none); placement of each (layer, expert) on a GPU:
     * "round-robin" (NULL), "layer", "balanced" or a file (sim/engine/placement.h);
     * cache_per_gpu 0: cap_value is the total over the GPUs, split evenly;
     * 1: every GPU has cap_value. */
    uint32_t gpus;
    const char *placement;
    int cache_per_gpu;
    /* The serving framework's fixed host costs (NULL: the platform's
     * [platform] framework, else none; a framework named none: none;
     * profile.h ms_framework_resolve). */
    const ms_framework *framework;
    /* Bits per weight, quantisation scales included (0: the trace's bytes):
     * every routed expert's bytes become expert_params x expert_bits / 8,
     * every layer's dense bytes dense_params x dense_bits / 8 (the model
     * profile's params; without one the trace's bytes / 2), for copies,
     * the cache capacity in bytes and the compute roofline
     * (docs/engine.md "Bits per weight"). */
    double expert_bits, dense_bits;
} ms_run_config;

#define MS_RUN_MAX_WARNINGS 4

/* One GPU's share of a multi-GPU run (ms_metrics.gpu, only when gpus > 1). */
typedef struct {
    uint64_t experts;          /* (layer, expert) pairs placed on it */
    uint64_t hits, late, misses;
    uint64_t copies, demand_copies;
    double pcie_bytes;
    double link_busy_s;        /* its H2D link copying */
    double compute_busy_s;     /* its expert compute */
    double stall_s;            /* its compute waiting for weights */
    double dispatch_s;         /* token dispatch and combine over the interconnect */
    double cache_capacity;     /* its expert cache, in the run's units (experts or bytes) */
    uint64_t streamed;         /* demand loads through a transient buffer: no room on the GPU */
    double cache_peak_bytes;
} ms_gpu_metrics;

typedef struct {
    uint64_t hits, late, misses, on_cpu;  /* activated experts by outcome */
    uint64_t layer_steps;                 /* (iteration, layer) pairs */
    uint64_t iterations;
    double stall_s;                       /* GPU waiting for expert weights */
    double busy_s;                        /* wall time of these layers */
} ms_counts;

typedef struct {
    ms_counts total, phase[2];            /* phase: MS_PHASE_PREFILL / MS_PHASE_DECODE */
    ms_counts *layer;                     /* [L] */
    uint32_t L;
    uint64_t prefetch_issued, prefetch_copied, prefetch_useful, prefetch_late;
    uint64_t prefetch_wasted, prefetch_cancelled, prefetch_dropped;
    /* prefetched experts evicted unused while their target layer (the next
     * run of their layer) was still ahead, and those whose target layer ran
     * without activating them (docs/engine.md "Outputs of `moesim run`") */
    uint64_t prefetch_evicted_unused, prefetch_target_passed;
    uint64_t demand_copies, pcie_copies;
    double pcie_bytes, pcie_bytes_useful, pcie_bytes_wasted, ssd_bytes;
    double makespan_s;
    uint64_t requests;
    /* NaN when there is no sample (docs/safety.md): TTFT when no
     * replayed request had its prefill replayed, TPOT without decode steps */
    double ttft_mean_s, ttft_p50_s, ttft_p99_s;
    double tpot_mean_s, tpot_p50_s, tpot_p99_s;
    double latency_mean_s, latency_p50_s, latency_p90_s, latency_p99_s;
    uint64_t ttft_samples, tpot_samples, latency_samples;
    /* TTFT and latency above run from the request's arrival and so include
     * its queueing; apart (docs/engine.md "Queueing and service"):
     * queue = arrival to the start of its first replayed iteration,
     * service = from that start to the first token / the last one. */
    double queue_mean_s, queue_p50_s, queue_p99_s;
    double ttft_service_mean_s, ttft_service_p50_s, ttft_service_p99_s;
    double latency_service_mean_s, latency_service_p50_s, latency_service_p99_s;
    uint64_t queue_samples;
    /* Offered load: the replayed requests' arrival rate ((n - 1) / (last
     * arrival - first)) over the rate the run served them while busy (n /
     * seconds with a request in service); NaN offline or with fewer than two
     * arrival times.  Above 1 the run is overloaded (a warning says so). */
    double arrival_rate, service_rate, offered_load;
    double gpu_cache_capacity_bytes, gpu_cache_peak_bytes, host_bytes;
    double policy_sync_s, policy_async_s;
    double policy_state_bytes;            /* the prefetcher's learnt state at the end (map store, EAMC) */
    int has_policy_stats;                 /* the prefetcher has a `stats` hook */
    ms_policy_stats policy_stats;         /* its similarity totals at the end */
    uint64_t recorded_rows, recorded_agree; /* decode (row, layer, slot) cells with recorded residency */
    uint64_t recorded_prefill_rows, recorded_prefill_agree; /* the same on prefill rows */
    int has_future;                       /* a policy asked for the next-use pre-pass */
    int future_exact;                     /* ... and it matched the replay order */
    /* the resolved training split */
    double train_frac;
    int train_by_iteration;
    uint64_t train_requests;
    uint32_t train_iters;
    /* What the run was given but could not use (a distance no policy reads,
     * a training split of 0 for a policy that learns from it), one line each,
     * in the words of the key's source (keys_as_ini); the CLI prints them on
     * stderr and `run --json` lists them. */
    char warnings[MS_RUN_MAX_WARNINGS][256];
    uint32_t n_warnings;
    /* the papers' hit definitions (docs/metrics.md), over all activations:
     * late experts the GPU computed without waiting for their weights;
     * missed experts whose prefetch request was still queued at the gate;
     * ready experts a prefetch request had named since their layer last ran */
    uint64_t late_in_time, queued_at_gate, prefetch_covered;
    uint64_t late_in_time_phase[2], queued_at_gate_phase[2], prefetch_covered_phase[2];
    uint32_t gpus;                        /* GPUs of the run */
    ms_gpu_metrics *gpu;                  /* [gpus] when gpus > 1, else NULL */
    /* The digest naming the trace content the run read, taken when it opened
     * the trace (trace.h ms_reader_trace_digest: hex "" for a v1 trace
     * streamed); set, and kept, also when the run fails after the open. */
    ms_trace_digest trace;
} ms_metrics;

/* Runs one simulation. Returns 0 and fills *out (free with ms_metrics_free),
 * or -1 with a one-line error (bad trace, unknown policy or parameter, cache
 * smaller than a layer's activated experts, ...); out->trace is set from the
 * open of the trace on, failures included. */
int ms_run(const ms_run_config *cfg, ms_metrics *out, ms_err *err);
void ms_metrics_free(ms_metrics *m);

/* A run replays a trace: its routing and sizes (moe_layers, experts, top_k,
 * shared_experts, expert and dense bytes) come from the trace, and some model
 * keys it reads nowhere (layers, vocab, description).  An override of such a
 * key (`--set model.top_k=4`, a sweep's `model.top_k = 4`) would change
 * nothing: refused with one line naming it (the set's `where`, else "--set
 * model.KEY=VALUE") and why.  The keys a run reads: expert_params,
 * dense_params (FLOPs), hidden, dtype (token bytes between GPUs), expert_ffn
 * and expert_matrices (checked against expert_params), encoder_moe_layers
 * (decode iterations skip them).  0, or -1 with err.
 * ms_run checks cfg->model_sets with it; so do the commands that load a model
 * with overrides for runs before any runs. */
int ms_run_check_model_sets(const ms_profile_set *sets, int n, ms_err *err);

#endif
