/* The executor contract: everything the replay engine asks of whatever runs
 * its work (docs/engine.md "Engine semantics").  The engine decides; an executor
 * runs.  Three implementations share it:
 *   - the simulated timeline (ms_exec_sim_*, here): op times from the
 *     timing model of a platform profile; what `moesim run` uses;
 *   - the host backend (kernels/host_backend.h): threads, memcpy, a CPU FFN;
 *   - the CUDA backend (kernels/cuda_backend.h): cudaMemcpyAsync on a copy
 *     stream, the expert FFN on a compute stream, CUDA events.
 *
 * An op runs on one stream.  Ops on a stream run one after another in
 * submission order; an op also waits for `after` (an event of another
 * stream) and, on the simulated timeline, never starts before
 * `not_before_s`.  submit() returns the op's completion event at once (real
 * backends enqueue and return); wait() blocks until it completed and gives
 * its start and end in seconds on the executor's clock (0 = ms_exec_begin).
 *
 * Experts live in GPU slots the executor manages: a copy of (layer, expert)
 * takes a free slot; a GPU expert op reads the slot its latest copy filled
 * and waits for that copy (no `after` needed); release()
 * says the engine evicted the expert (its slot is free again once every op
 * already submitted that reads it has finished).  An expert resident before
 * the run (a preloaded cache) is loaded with a copy submitted before
 * ms_exec_begin(); begin() then waits for every op so far and starts the clock.
 *
 * Real backends ignore not_before_s and issue_s (times of the engine's
 * simulated timeline); `moesim validate` (sim/apps/validate.h) turns an op's
 * issue point into an `after` event on the real backend: the latest
 * compute-stream op that ended, on the simulated timeline, by issue_s. */
#ifndef MS_EXEC_H
#define MS_EXEC_H

#include <stdint.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"

typedef int64_t ms_event;
#define MS_NO_EVENT ((ms_event)-1)

typedef enum {
    MS_STREAM_COMPUTE = 0, /* GPU compute: non-expert layer work and GPU experts */
    MS_STREAM_COPY = 1,    /* the host -> GPU copy engine */
    MS_STREAM_CPU = 2,     /* host CPU expert compute (HybriMoE, Fiddler) */
    MS_STREAMS = 3
} ms_stream;

typedef enum {
    MS_OP_DENSE = 0,      /* non-expert work of a layer over `tokens` rows (compute stream) */
    MS_OP_COPY = 1,       /* one expert's weights, host -> GPU slot (copy stream) */
    MS_OP_EXPERT_GPU = 2, /* expert FFN over `tokens` rows from its slot (compute stream) */
    MS_OP_EXPERT_CPU = 3, /* expert FFN over `tokens` rows on the host (cpu stream) */
    MS_OP_KINDS = 4
} ms_op_kind;

typedef struct {
    ms_op_kind kind;
    uint32_t layer;
    uint32_t expert;      /* UINT32_MAX for MS_OP_DENSE */
    uint32_t tokens;      /* token rows (dense, experts); 0 for copies */
    double bytes;         /* weight bytes copied (copy) or read (compute) */
    double params;        /* parameters behind `bytes` (compute ops) */
    int from_ssd;         /* copy: the expert was read from SSD first (host tier miss) */
    int demand;           /* copy: an on-demand load (1) or a prefetch (0) */
    double issue_s;       /* engine time of the decision that issued the op */
    double not_before_s;  /* engine time before which it may not start */
    ms_event after;       /* an event it waits for besides stream order (and, for a GPU
                           * expert, its copy), or MS_NO_EVENT */
    uint64_t iteration;   /* engine iteration it belongs to (UINT64_MAX: before the run) */
    uint32_t gpu;         /* the GPU whose streams run it (several GPUs: simulated timeline only) */
} ms_op;

static inline ms_stream ms_op_stream(ms_op_kind k)
{
    return k == MS_OP_COPY ? MS_STREAM_COPY : k == MS_OP_EXPERT_CPU ? MS_STREAM_CPU : MS_STREAM_COMPUTE;
}

typedef struct ms_exec ms_exec;

/* A backend's operations.  Every function returns 0, or -1 with a one-line
 * error in err (a failed CUDA call, no slot free, ...). */
typedef struct {
    const char *name;  /* "sim", "host", "cuda" */
    int (*submit)(void *st, const ms_op *op, ms_event *out, ms_err *err);
    int (*wait)(void *st, ms_event ev, double *start_s, double *end_s, ms_err *err);
    int (*release)(void *st, uint32_t layer, uint32_t expert, ms_err *err);
    int (*begin)(void *st, ms_err *err);  /* the clock starts: time 0 */
    void (*destroy)(void *st);
    /* Calibration probes of real backends (NULL on the simulated timeline):
     * the median seconds of `reps` copies of `bytes` host -> GPU (to_device)
     * or GPU -> host, from pinned or pageable host memory; the median
     * seconds of one expert FFN over `tokens` rows. */
    int (*time_copy)(void *st, double bytes, int to_device, int pageable, int reps, double *seconds, ms_err *err);
    int (*time_expert)(void *st, uint32_t tokens, int reps, double *seconds, ms_err *err);
    /* Optional, last (backends that list their operations in order leave
     * it NULL): submit(op) and wait() for its event in one call, the same
     * times; the simulated timeline skips looking up the event it just
     * made.  NULL: ms_exec_run calls submit, then wait. */
    int (*run)(void *st, const ms_op *op, double *start_s, double *end_s, ms_err *err);
} ms_exec_ops;

/* What a real backend is built for.  Experts are sized from the model
 * profile and shrunk by expert_scale (0 < scale <= 1: the FFN intermediate
 * size, and so every expert's bytes and params, times scale), and the
 * engine's ops must then carry the scaled bytes (validate scales the model
 * it simulates the same way). */
typedef struct {
    const ms_model *model;   /* hidden, expert_ffn, expert_matrices, expert_bytes, dense_bytes/params */
    uint32_t layers, experts;/* L, J of the trace */
    uint32_t slots;          /* GPU expert slots: the cache capacity plus room for one layer's misses */
    uint32_t max_tokens;     /* most token rows one op carries (a batch's rows) */
    double expert_scale;     /* 1 = full size */
    uint32_t cpu_threads;    /* threads of the CPU expert stream (host backend also its "GPU") */
} ms_backend_config;

struct ms_exec {
    const ms_exec_ops *ops;
    void *st;
};

static inline int ms_exec_submit(ms_exec *x, const ms_op *op, ms_event *out, ms_err *err)
{
    return x->ops->submit(x->st, op, out, err);
}
static inline int ms_exec_wait(ms_exec *x, ms_event ev, double *start_s, double *end_s, ms_err *err)
{
    return x->ops->wait(x->st, ev, start_s, end_s, err);
}
/* Submits op and waits for it. */
static inline int ms_exec_run(ms_exec *x, const ms_op *op, double *start_s, double *end_s, ms_err *err)
{
    if (x->ops->run)
        return x->ops->run(x->st, op, start_s, end_s, err);
    ms_event ev;
    return x->ops->submit(x->st, op, &ev, err) || x->ops->wait(x->st, ev, start_s, end_s, err) ? -1 : 0;
}
static inline int ms_exec_release(ms_exec *x, uint32_t layer, uint32_t expert, ms_err *err)
{
    return x->ops->release(x->st, layer, expert, err);
}
static inline int ms_exec_begin(ms_exec *x, ms_err *err)
{
    return x->ops->begin(x->st, err);
}
static inline void ms_exec_destroy(ms_exec *x)
{
    if (x && x->ops)
        x->ops->destroy(x->st);
}

/* ---- the simulated timeline ----
 * start = max(not_before_s, the stream's previous end, end of `after`);
 * end = start + the timing model's duration (sim/core/timing.h) for the op.
 * With a [contention] profile (copies and compute sharing one memory), a
 * copy runs at 1 / (1 + copy_contention) of its speed while the compute
 * stream is busy, and a memory-bound compute op at 1 / (1 + compute_contention)
 * while the copy stream is busy, against the other stream's ops submitted
 * before it (an op's times never change once submitted: the policies have
 * read them); past the compute stream's last submitted op a copy counts it
 * as busy (the expert ops a copy overlaps are submitted after it: the
 * engine issues a layer's copies first).  CPU-stream ops are not affected.
 * Never blocks; deterministic.  It remembers the last MS_EXEC_SIM_EVENTS
 * events: wait() or `after` on an older one is an error. */
#define MS_EXEC_SIM_EVENTS 4096
/* GPUs the simulated timeline keeps streams for: an op's `gpu` selects its
 * compute and copy streams (the CPU stream is the host's, shared). */
#define MS_EXEC_SIM_GPUS 64
int ms_exec_sim_create(const ms_platform *p, uint32_t layers, uint32_t experts, ms_exec *out, ms_err *err);
/* The duration the timing model gives an op (exposed for tests and backends' reports). */
double ms_exec_sim_duration(const ms_platform *p, const ms_op *op);

/* What the simulated timeline times ops with: the platform, and the serving
 * framework's part of the costs (docs/engine.md "Framework costs").  With
 * framework NULL (ms_exec_sim_create) the platform's timing model alone:
 *   copy       = copy_calls x h2d_latency_s + bytes / (h2d_bw, or the
 *                platform's pageable_bw with host_memory = pageable);
 *                copies = sync: a copy starts only after the compute stream's
 *                previous op ends and the compute stream waits for it;
 *   GPU expert = expert_s + roofline + (bytes / dequant_bw when the op's
 *                weights are quantised: bytes x 8 < 16 x params, and
 *                dequant_bw > 0);
 *   dense      = roofline + the same dequantisation term.
 * copy_calls: the framework's copies_per_expert resolved (0 = the model's
 * expert_matrices; 1 without a framework). */
typedef struct {
    const ms_platform *platform;
    const ms_framework *framework; /* NULL: none */
    uint32_t copy_calls;           /* >= 1 */
} ms_sim_timing;
int ms_exec_sim_create_timed(const ms_sim_timing *t, uint32_t layers, uint32_t experts, ms_exec *out, ms_err *err);
double ms_exec_sim_duration_timed(const ms_sim_timing *t, const ms_op *op);

#endif
