/* The CUDA backend (cuda_backend.h): streams, slots, cuBLAS FFN, CUDA events. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <unistd.h>

#include "kernels/cuda_backend.h"

#ifndef MS_CUDA_ARCHS
#define MS_CUDA_ARCHS "unknown"
#endif

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)
#define SLOT_ALIGN 256
#define NO_SLOT (-1)
#define NO_OWNER UINT32_MAX
#define THREADS 256
/* cuBLAS workspace, the context and the allocator's slack on the device */
#define DEVICE_RESERVE_BYTES (512.0 * MIB)

/* ---------------------------------------------------------------- errors */

static int cuda_fail(ms_err *err, const char *what, cudaError_t rc)
{
    return ms_fail(err, "cuda backend: %s: %s (%s)", what, cudaGetErrorString(rc), cudaGetErrorName(rc));
}

static int blas_fail(ms_err *err, const char *what, cublasStatus_t rc)
{
    return ms_fail(err, "cuda backend: %s: %s", what, cublasGetStatusString(rc));
}

/* Returns -1 from the enclosing function (which has `err`) on a failed call;
 * the rest is the printf-style name of the call. */
#define CU(call, ...)                                                                                                 \
    do {                                                                                                              \
        cudaError_t rc_ = (call);                                                                                     \
        if (rc_ != cudaSuccess) {                                                                                     \
            char what_[384];                                                                                          \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                                               \
            return cuda_fail(err, what_, rc_);                                                                        \
        }                                                                                                             \
    } while (0)

#define BLAS(call, ...)                                                                                               \
    do {                                                                                                              \
        cublasStatus_t rc_ = (call);                                                                                  \
        if (rc_ != CUBLAS_STATUS_SUCCESS) {                                                                           \
            char what_[384];                                                                                          \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                                               \
            return blas_fail(err, what_, rc_);                                                                        \
        }                                                                                                             \
    } while (0)

/* ---------------------------------------------------------------- kernels */

/* Deterministic values in [-amp, amp] (never all zeros: zeros can time faster). */
__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, uint32_t seed, float amp)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)k * 2654435761u ^ seed ^ (uint32_t)(k >> 32) * 40503u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        float u = (float)(h & 0xffffffu) / 16777215.0f; /* [0, 1] */
        p[k] = __float2bfloat16(amp * (2.0f * u - 1.0f));
    }
}

/* h is [tokens x 2F] (gate | up per row); gate <- SiLU(gate) * up. */
__global__ void swiglu_rows(__nv_bfloat16 *h, size_t tokens, size_t ffn)
{
    size_t n = tokens * ffn;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        __nv_bfloat16 *row = h + (k / ffn) * 2 * ffn;
        size_t i = k % ffn;
        float g = __bfloat162float(row[i]), u = __bfloat162float(row[ffn + i]);
        row[i] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
    }
}

/* h is [tokens x F]; h <- ReLU(h). */
__global__ void relu_rows(__nv_bfloat16 *h, size_t n)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        h[k] = __float2bfloat16(fmaxf(__bfloat162float(h[k]), 0.0f));
}

static unsigned grid_for(size_t n)
{
    size_t blocks = (n + THREADS - 1) / THREADS;
    return (unsigned)(blocks < 1 ? 1 : blocks > 65536 ? 65536 : blocks);
}

/* ---------------------------------------------------------------- state */

typedef struct {
    cudaEvent_t t0, t1; /* recorded before and after the op */
    uint32_t gen;       /* the id's high half; bumped when the entry is recycled */
    int live;           /* issued and not yet read */
} ev_entry;

typedef enum { EV_UNKNOWN, EV_LIVE, EV_READ } ev_state;

typedef struct {
    /* shapes */
    uint32_t L, J, slots, max_tokens;
    uint32_t hidden, ffn, matrices; /* ffn: the scaled intermediate size */
    size_t slot_bytes;              /* one expert in the host store and in a slot */
    size_t dense_cols;              /* rows of the dense stand-in's weight */
    char gpu[256];
    /* memory */
    unsigned char *host_store; /* pinned, L*J*slot_bytes */
    unsigned char *dev_slots;  /* slots*slot_bytes */
    __nv_bfloat16 *x, *h, *y;  /* activations: [T x hidden], [T x 2F], [T x hidden] */
    __nv_bfloat16 *dense_w, *dense_y; /* [dense_cols x hidden], [T x dense_cols] */
    cudaStream_t copy, compute;
    cublasHandle_t blas;
    cudaEvent_t origin;        /* time 0 */
    cudaEvent_t probe0, probe1; /* calibration timing */
    /* slots */
    int32_t *slot_of;     /* [L*J] the slot an expert holds, NO_SLOT */
    uint32_t *owner;      /* [slots] expert index, NO_OWNER */
    ms_event *slot_copy;  /* [slots] the copy that filled it */
    ms_event *slot_read;  /* [slots] the latest GPU expert op that reads it */
    uint32_t *free_ring;  /* free slots, released longest ago first */
    uint32_t free_head, free_n;
    /* events */
    ev_entry *ev;
    uint32_t ev_n, ev_cap;
    uint32_t *ev_free;
    uint32_t ev_free_n;
    ms_event ring_id[MS_CUDA_READ_RING];
    double ring_t0[MS_CUDA_READ_RING], ring_t1[MS_CUDA_READ_RING];
    uint64_t reads;
    /* calibration probes, grown on demand */
    void *probe_dev, *probe_pinned, *probe_pageable;
    size_t probe_dev_n, probe_pinned_n, probe_pageable_n;
} cuda_exec;

/* ---------------------------------------------------------------- events */

static ms_event event_id(uint32_t idx, uint32_t gen)
{
    return (ms_event)(((uint64_t)gen << 32) | idx);
}

static ev_state event_state(const cuda_exec *s, ms_event id, uint32_t *idx)
{
    if (id < 0)
        return EV_UNKNOWN;
    uint32_t i = (uint32_t)(id & 0xffffffff), gen = (uint32_t)((uint64_t)id >> 32);
    if (i >= s->ev_n || gen == 0 || gen > s->ev[i].gen)
        return EV_UNKNOWN;
    *idx = i;
    return gen == s->ev[i].gen && s->ev[i].live ? EV_LIVE : gen < s->ev[i].gen ? EV_READ : EV_UNKNOWN;
}

static int grow_events(cuda_exec *s, ms_err *err)
{
    if (s->ev_n == s->ev_cap) {
        uint32_t cap = s->ev_cap ? s->ev_cap * 2 : 256;
        s->ev = (ev_entry *)ms_xrealloc(s->ev, cap, sizeof *s->ev);
        s->ev_free = (uint32_t *)ms_xrealloc(s->ev_free, cap, sizeof *s->ev_free);
        s->ev_cap = cap;
    }
    ev_entry *e = &s->ev[s->ev_n];
    memset(e, 0, sizeof *e);
    CU(cudaEventCreate(&e->t0), "cudaEventCreate (event %u)", s->ev_n);
    cudaError_t rc = cudaEventCreate(&e->t1);
    if (rc != cudaSuccess) {
        cudaEventDestroy(e->t0);
        return cuda_fail(err, "cudaEventCreate", rc);
    }
    e->gen = 1;
    s->ev_free[s->ev_free_n++] = s->ev_n++;
    return 0;
}

/* A free entry, marked live; its id in *id. */
static int acquire_event(cuda_exec *s, uint32_t *idx, ms_event *id, ms_err *err)
{
    if (!s->ev_free_n && grow_events(s, err))
        return -1;
    *idx = s->ev_free[--s->ev_free_n];
    s->ev[*idx].live = 1;
    *id = event_id(*idx, s->ev[*idx].gen);
    return 0;
}

/* The entry is read (or its op failed): a later id of it is a new event. */
static void recycle_event(cuda_exec *s, uint32_t idx)
{
    ev_entry *e = &s->ev[idx];
    e->live = 0;
    e->gen++;
    if (e->gen < INT32_MAX) /* else ids would wrap: the entry retires for good */
        s->ev_free[s->ev_free_n++] = idx;
}

/* Makes `stream` wait for event `id` (nothing when it was already read). */
static int stream_wait(cuda_exec *s, cudaStream_t stream, ms_event id, const char *what, ms_err *err)
{
    uint32_t idx = 0;
    if (id == MS_NO_EVENT)
        return 0;
    switch (event_state(s, id, &idx)) {
    case EV_READ:
        return 0; /* wait() saw it complete */
    case EV_LIVE:
        CU(cudaStreamWaitEvent(stream, s->ev[idx].t1, 0), "cudaStreamWaitEvent (%s, event %lld)", what, (long long)id);
        return 0;
    default:
        return ms_fail(err, "cuda backend: %s: event %lld was never issued by this executor", what, (long long)id);
    }
}

/* ---------------------------------------------------------------- compute */

static const __nv_bfloat16 *slot_weights(const cuda_exec *s, uint32_t slot)
{
    return (const __nv_bfloat16 *)(s->dev_slots + (size_t)slot * s->slot_bytes);
}

/* C[T x m] (row-major, ldc) = B[T x k] (row-major, ldb) . W[m x k]^T (row-major weight): cuBLAS's column-major
 * C^T = op_T(W^T) . B^T. */
static int gemm_rows(cuda_exec *s, const __nv_bfloat16 *w, const __nv_bfloat16 *b, int ldb, __nv_bfloat16 *c,
                     int m, int tokens, int k, const char *what, ms_err *err)
{
    const float one = 1.0f, zero = 0.0f;
    BLAS(cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, tokens, k, &one, w, CUDA_R_16BF, k, b, CUDA_R_16BF, ldb,
                      &zero, c, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
         "cublasGemmEx (%s: %d x %d x %d)", what, tokens, k, m);
    return 0;
}

/* The expert FFN of the weights in `slot` over `tokens` rows of x, on the compute stream. */
static int expert_ffn(cuda_exec *s, uint32_t slot, uint32_t tokens, ms_err *err)
{
    if (!tokens)
        return 0;
    const __nv_bfloat16 *w = slot_weights(s, slot);
    size_t fh = (size_t)s->ffn * s->hidden;
    int up_rows = (int)(s->matrices == 3 ? 2 * s->ffn : s->ffn);
    if (gemm_rows(s, w, s->x, (int)s->hidden, s->h, up_rows, (int)tokens, (int)s->hidden, "gate/up", err))
        return -1;
    (void)cudaGetLastError(); /* clear an earlier, already reported error: the check below is this launch's */
    if (s->matrices == 3)
        swiglu_rows<<<grid_for((size_t)tokens * s->ffn), THREADS, 0, s->compute>>>(s->h, tokens, s->ffn);
    else
        relu_rows<<<grid_for((size_t)tokens * s->ffn), THREADS, 0, s->compute>>>(s->h, (size_t)tokens * s->ffn);
    CU(cudaGetLastError(), "launch of the activation kernel (%u tokens)", tokens);
    const __nv_bfloat16 *down = w + (size_t)(s->matrices - 1) * fh;
    return gemm_rows(s, down, s->h, up_rows, s->y, (int)s->hidden, (int)tokens, (int)s->ffn, "down", err);
}

static int dense_gemm(cuda_exec *s, size_t cols, uint32_t tokens, ms_err *err)
{
    if (!tokens || !cols)
        return 0;
    return gemm_rows(s, s->dense_w, s->x, (int)s->hidden, s->dense_y, (int)cols, (int)tokens, (int)s->hidden, "dense",
                     err);
}

/* ---------------------------------------------------------------- submit */

static int check_expert(const cuda_exec *s, const ms_op *op, ms_err *err)
{
    if (op->layer >= s->L || op->expert >= s->J)
        return ms_fail(err, "cuda backend: expert (%u, %u) outside %u layers x %u experts", op->layer, op->expert,
                       s->L, s->J);
    return 0;
}

static int check_op(const cuda_exec *s, const ms_op *op, ms_err *err)
{
    if ((int)op->kind < 0 || op->kind >= MS_OP_KINDS)
        return ms_fail(err, "cuda backend: unknown op kind %d", (int)op->kind);
    if (op->kind == MS_OP_EXPERT_CPU)
        return ms_fail(err, "cuda backend: CPU experts are not supported by the cuda backend yet (expert (%u, %u) "
                            "on the CPU stream); use the host backend",
                       op->layer, op->expert);
    if (op->kind != MS_OP_DENSE && check_expert(s, op, err))
        return -1;
    if (op->kind != MS_OP_COPY && op->tokens > s->max_tokens)
        return ms_fail(err, "cuda backend: an op of layer %u carries %u token rows, more than max_tokens %u",
                       op->layer, op->tokens, s->max_tokens);
    if (!(op->bytes >= 0 && op->bytes <= 1e15) || !(op->params >= 0 && op->params <= 1e15))
        return ms_fail(err, "cuda backend: an op of layer %u has bytes %g, params %g (expected 0 .. 1e15)", op->layer,
                       op->bytes, op->params);
    return 0;
}

/* The slot a copy of expert x fills: the one it holds, else the free slot released longest ago. */
static int copy_slot(const cuda_exec *s, size_t x, const ms_op *op, uint32_t *slot, ms_err *err)
{
    if (s->slot_of[x] != NO_SLOT) {
        *slot = (uint32_t)s->slot_of[x];
        return 0;
    }
    if (!s->free_n)
        return ms_fail(err, "cuda backend: no free slot for the copy of expert (%u, %u): all %u slots hold experts "
                            "(the engine must release an evicted expert first)",
                       op->layer, op->expert, s->slots);
    *slot = s->free_ring[s->free_head];
    return 0;
}

static int enqueue_copy(cuda_exec *s, const ms_op *op, uint32_t idx, ms_event id, ms_err *err)
{
    size_t x = (size_t)op->layer * s->J + op->expert;
    size_t bytes = (size_t)llround(op->bytes);
    uint32_t slot = 0;
    if (bytes > s->slot_bytes)
        return ms_fail(err, "cuda backend: the copy of expert (%u, %u) carries %zu bytes, more than a slot's %zu "
                            "(the engine's experts must be scaled like the backend's: --expert-scale)",
                       op->layer, op->expert, bytes, s->slot_bytes);
    if (copy_slot(s, x, op, &slot, err) || stream_wait(s, s->copy, op->after, "copy after", err) ||
        stream_wait(s, s->copy, s->slot_read[slot], "copy after the slot's last reader", err))
        return -1;
    CU(cudaEventRecord(s->ev[idx].t0, s->copy), "cudaEventRecord (copy of expert (%u, %u))", op->layer, op->expert);
    if (bytes)
        CU(cudaMemcpyAsync(s->dev_slots + (size_t)slot * s->slot_bytes, s->host_store + x * s->slot_bytes, bytes,
                           cudaMemcpyHostToDevice, s->copy),
           "cudaMemcpyAsync (copy of expert (%u, %u), %zu bytes, into slot %u)", op->layer, op->expert, bytes, slot);
    CU(cudaEventRecord(s->ev[idx].t1, s->copy), "cudaEventRecord (copy of expert (%u, %u))", op->layer, op->expert);
    if (s->slot_of[x] == NO_SLOT) { /* take the slot off the free ring */
        s->free_head = (s->free_head + 1) % s->slots;
        s->free_n--;
        s->slot_of[x] = (int32_t)slot;
        s->owner[slot] = (uint32_t)x;
    }
    s->slot_copy[slot] = id;
    return 0;
}

static int enqueue_expert(cuda_exec *s, const ms_op *op, uint32_t idx, ms_event id, ms_err *err)
{
    size_t x = (size_t)op->layer * s->J + op->expert;
    if (s->slot_of[x] == NO_SLOT)
        return ms_fail(err, "cuda backend: GPU expert (%u, %u) holds no slot (never copied, or released)", op->layer,
                       op->expert);
    uint32_t slot = (uint32_t)s->slot_of[x];
    if (stream_wait(s, s->compute, op->after, "GPU expert after", err) ||
        stream_wait(s, s->compute, s->slot_copy[slot], "GPU expert after its copy", err))
        return -1;
    CU(cudaEventRecord(s->ev[idx].t0, s->compute), "cudaEventRecord (GPU expert (%u, %u))", op->layer, op->expert);
    if (expert_ffn(s, slot, op->tokens, err))
        return ms_fail_prefix(err, "GPU expert (%u, %u), %u tokens", op->layer, op->expert, op->tokens);
    CU(cudaEventRecord(s->ev[idx].t1, s->compute), "cudaEventRecord (GPU expert (%u, %u))", op->layer, op->expert);
    s->slot_read[slot] = id;
    return 0;
}

static int enqueue_dense(cuda_exec *s, const ms_op *op, uint32_t idx, ms_err *err)
{
    size_t cols = (size_t)ceil(op->params / s->hidden);
    if (cols > s->dense_cols)
        return ms_fail(err, "cuda backend: the dense op of layer %u has %.0f params, more than the dense buffer's %zu "
                            "x %u (the model's dense_params)",
                       op->layer, op->params, s->dense_cols, s->hidden);
    if (stream_wait(s, s->compute, op->after, "dense after", err))
        return -1;
    CU(cudaEventRecord(s->ev[idx].t0, s->compute), "cudaEventRecord (dense op of layer %u)", op->layer);
    if (dense_gemm(s, cols, op->tokens, err))
        return ms_fail_prefix(err, "dense op of layer %u, %u tokens", op->layer, op->tokens);
    CU(cudaEventRecord(s->ev[idx].t1, s->compute), "cudaEventRecord (dense op of layer %u)", op->layer);
    return 0;
}

static int cuda_submit(void *st, const ms_op *op, ms_event *out, ms_err *err)
{
    cuda_exec *s = (cuda_exec *)st;
    uint32_t idx;
    ms_event id;
    if (check_op(s, op, err) || acquire_event(s, &idx, &id, err))
        return -1;
    int rc = op->kind == MS_OP_COPY         ? enqueue_copy(s, op, idx, id, err)
             : op->kind == MS_OP_EXPERT_GPU ? enqueue_expert(s, op, idx, id, err)
                                            : enqueue_dense(s, op, idx, err);
    if (rc) {
        recycle_event(s, idx);
        return -1;
    }
    *out = id;
    return 0;
}

/* ---------------------------------------------------------------- wait, release, begin */

static int event_seconds(cuda_exec *s, const ev_entry *e, double *t0, double *t1, ms_err *err)
{
    float start_ms = 0, dur_ms = 0;
    CU(cudaEventSynchronize(e->t1), "cudaEventSynchronize (wait)");
    CU(cudaEventElapsedTime(&start_ms, s->origin, e->t0), "cudaEventElapsedTime (origin -> start)");
    CU(cudaEventElapsedTime(&dur_ms, e->t0, e->t1), "cudaEventElapsedTime (start -> end)");
    *t0 = start_ms * 1e-3;
    *t1 = *t0 + dur_ms * 1e-3;
    return 0;
}

static int read_again(const cuda_exec *s, ms_event id, double *t0, double *t1, ms_err *err)
{
    size_t i = (size_t)(s->reads % MS_CUDA_READ_RING);
    for (size_t n = 0; n < MS_CUDA_READ_RING; n++) {
        i = (i + MS_CUDA_READ_RING - 1) % MS_CUDA_READ_RING; /* newest first */
        if (s->ring_id[i] == id) {
            *t0 = s->ring_t0[i];
            *t1 = s->ring_t1[i];
            return 0;
        }
    }
    return ms_fail(err, "cuda backend: event %lld was read more than %d reads ago (an event is read once; the last "
                        "%d reads are kept)",
                   (long long)id, MS_CUDA_READ_RING, MS_CUDA_READ_RING);
}

static int cuda_wait(void *st, ms_event id, double *start_s, double *end_s, ms_err *err)
{
    cuda_exec *s = (cuda_exec *)st;
    uint32_t idx = 0;
    switch (event_state(s, id, &idx)) {
    case EV_READ:
        return read_again(s, id, start_s, end_s, err);
    case EV_LIVE:
        break;
    default:
        return ms_fail(err, "cuda backend: wait on event %lld, which this executor never issued", (long long)id);
    }
    if (event_seconds(s, &s->ev[idx], start_s, end_s, err))
        return -1;
    size_t r = (size_t)(s->reads++ % MS_CUDA_READ_RING);
    s->ring_id[r] = id;
    s->ring_t0[r] = *start_s;
    s->ring_t1[r] = *end_s;
    recycle_event(s, idx);
    return 0;
}

static int cuda_release(void *st, uint32_t layer, uint32_t expert, ms_err *err)
{
    cuda_exec *s = (cuda_exec *)st;
    if (layer >= s->L || expert >= s->J)
        return ms_fail(err, "cuda backend: release of expert (%u, %u) outside %u layers x %u experts", layer, expert,
                       s->L, s->J);
    size_t x = (size_t)layer * s->J + expert;
    if (s->slot_of[x] == NO_SLOT)
        return ms_fail(err, "cuda backend: release of expert (%u, %u), which holds no slot", layer, expert);
    uint32_t slot = (uint32_t)s->slot_of[x];
    s->slot_of[x] = NO_SLOT;
    s->owner[slot] = NO_OWNER;
    s->free_ring[(s->free_head + s->free_n) % s->slots] = slot;
    s->free_n++;
    return 0;
}

static int cuda_begin(void *st, ms_err *err)
{
    cuda_exec *s = (cuda_exec *)st;
    CU(cudaDeviceSynchronize(), "cudaDeviceSynchronize (begin: the ops before the run)");
    CU(cudaEventRecord(s->origin, s->compute), "cudaEventRecord (begin)");
    CU(cudaEventSynchronize(s->origin), "cudaEventSynchronize (begin)");
    return 0;
}

/* ---------------------------------------------------------------- calibration probes */

/* The median of v[0..n) (sorts v). */
static double median_of(double *v, int n)
{
    gsl_sort(v, 1, (size_t)n);
    return gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
}

static int grow_probes(cuda_exec *s, size_t n, int pageable, ms_err *err)
{
    if (s->probe_dev_n < n) {
        cudaFree(s->probe_dev);
        s->probe_dev = NULL;
        s->probe_dev_n = 0;
        CU(cudaMalloc(&s->probe_dev, n), "cudaMalloc of a %zu-byte copy probe on the GPU", n);
        s->probe_dev_n = n;
    }
    if (!pageable && s->probe_pinned_n < n) {
        cudaFreeHost(s->probe_pinned);
        s->probe_pinned = NULL;
        s->probe_pinned_n = 0;
        CU(cudaHostAlloc(&s->probe_pinned, n, cudaHostAllocDefault), "cudaHostAlloc of a %zu-byte copy probe", n);
        memset(s->probe_pinned, 0x3c, n);
        s->probe_pinned_n = n;
    }
    if (pageable && s->probe_pageable_n < n) {
        free(s->probe_pageable);
        s->probe_pageable = malloc(n);
        s->probe_pageable_n = 0;
        if (!s->probe_pageable)
            return ms_fail(err, "cuda backend: malloc of a %zu-byte pageable copy probe failed", n);
        memset(s->probe_pageable, 0x3c, n); /* touch every page */
        s->probe_pageable_n = n;
    }
    return 0;
}

static int timed_copy(cuda_exec *s, size_t n, int to_device, int pageable, double *seconds, ms_err *err)
{
    void *host = pageable ? s->probe_pageable : s->probe_pinned;
    float ms = 0;
    CU(cudaEventRecord(s->probe0, s->copy), "cudaEventRecord (copy probe)");
    if (to_device)
        CU(cudaMemcpyAsync(s->probe_dev, host, n, cudaMemcpyHostToDevice, s->copy), "cudaMemcpyAsync (%zu-byte H2D probe)",
           n);
    else
        CU(cudaMemcpyAsync(host, s->probe_dev, n, cudaMemcpyDeviceToHost, s->copy), "cudaMemcpyAsync (%zu-byte D2H probe)",
           n);
    CU(cudaEventRecord(s->probe1, s->copy), "cudaEventRecord (copy probe)");
    CU(cudaEventSynchronize(s->probe1), "cudaEventSynchronize (copy probe)");
    CU(cudaEventElapsedTime(&ms, s->probe0, s->probe1), "cudaEventElapsedTime (copy probe)");
    *seconds = ms * 1e-3;
    return 0;
}

static int cuda_time_copy(void *st, double bytes, int to_device, int pageable, int reps, double *seconds, ms_err *err)
{
    cuda_exec *s = (cuda_exec *)st;
    if (!(bytes >= 1 && bytes <= 64.0 * GIB) || reps < 1)
        return ms_fail(err, "cuda backend: time_copy of %g bytes x %d reps (expected 1 byte .. 64 GiB, reps >= 1)",
                       bytes, reps);
    size_t n = (size_t)llround(bytes);
    if (grow_probes(s, n, pageable, err))
        return -1;
    double *t = (double *)ms_xcalloc((size_t)reps, sizeof *t), warm;
    int rc = timed_copy(s, n, to_device, pageable, &warm, err); /* warm-up */
    for (int r = 0; !rc && r < reps; r++)
        rc = timed_copy(s, n, to_device, pageable, &t[r], err);
    if (!rc)
        *seconds = median_of(t, reps);
    free(t);
    return rc;
}

static int timed_expert(cuda_exec *s, uint32_t tokens, double *seconds, ms_err *err)
{
    float ms = 0;
    CU(cudaEventRecord(s->probe0, s->compute), "cudaEventRecord (expert probe)");
    if (expert_ffn(s, 0, tokens, err))
        return ms_fail_prefix(err, "expert probe, %u tokens", tokens);
    CU(cudaEventRecord(s->probe1, s->compute), "cudaEventRecord (expert probe)");
    CU(cudaEventSynchronize(s->probe1), "cudaEventSynchronize (expert probe)");
    CU(cudaEventElapsedTime(&ms, s->probe0, s->probe1), "cudaEventElapsedTime (expert probe)");
    *seconds = ms * 1e-3;
    return 0;
}

static int cuda_time_expert(void *st, uint32_t tokens, int reps, double *seconds, ms_err *err)
{
    cuda_exec *s = (cuda_exec *)st;
    if (tokens < 1 || tokens > s->max_tokens || reps < 1)
        return ms_fail(err, "cuda backend: time_expert over %u tokens x %d reps (expected 1 .. max_tokens %u, reps >= 1)",
                       tokens, reps, s->max_tokens);
    double *t = (double *)ms_xcalloc((size_t)reps, sizeof *t), warm;
    int rc = timed_expert(s, tokens, &warm, err); /* warm-up: cuBLAS picks its kernels */
    for (int r = 0; !rc && r < reps; r++)
        rc = timed_expert(s, tokens, &t[r], err);
    if (!rc)
        *seconds = median_of(t, reps);
    free(t);
    return rc;
}

/* ---------------------------------------------------------------- destroy */

static void cuda_destroy(void *st)
{
    cuda_exec *s = (cuda_exec *)st;
    if (!s)
        return;
    cudaDeviceSynchronize(); /* errors ignored: nothing is left to report them to */
    if (s->blas)
        cublasDestroy(s->blas);
    for (uint32_t i = 0; i < s->ev_n; i++) {
        cudaEventDestroy(s->ev[i].t0);
        cudaEventDestroy(s->ev[i].t1);
    }
    if (s->origin)
        cudaEventDestroy(s->origin);
    if (s->probe0)
        cudaEventDestroy(s->probe0);
    if (s->probe1)
        cudaEventDestroy(s->probe1);
    if (s->copy)
        cudaStreamDestroy(s->copy);
    if (s->compute)
        cudaStreamDestroy(s->compute);
    void *dev[] = {s->dev_slots, s->x, s->h, s->y, s->dense_w, s->dense_y, s->probe_dev};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        if (dev[i])
            cudaFree(dev[i]);
    if (s->host_store)
        cudaFreeHost(s->host_store);
    if (s->probe_pinned)
        cudaFreeHost(s->probe_pinned);
    (void)cudaGetLastError(); /* leave no error of ours behind for the next executor's launch checks */
    free(s->probe_pageable);
    free(s->ev);
    free(s->ev_free);
    free(s->slot_of);
    free(s->owner);
    free(s->slot_copy);
    free(s->slot_read);
    free(s->free_ring);
    free(s);
}

static const ms_exec_ops cuda_ops_table = {
    "cuda", cuda_submit, cuda_wait, cuda_release, cuda_begin, cuda_destroy, cuda_time_copy, cuda_time_expert, NULL,
};

/* ---------------------------------------------------------------- create */

extern "C" int ms_cuda_available(ms_err *err)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        ms_fail(err, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(rc));
        return 0;
    }
    if (n < 1) {
        ms_fail(err, "no CUDA device (cudaGetDeviceCount: 0 devices)");
        return 0;
    }
    return 1;
}

static int check_config(const ms_backend_config *c, ms_err *err)
{
    if (!c || !c->model)
        return ms_fail(err, "cuda backend: no model profile given");
    const ms_model *m = c->model;
    if (!m->hidden || !m->expert_ffn || (m->expert_matrices != 2 && m->expert_matrices != 3))
        return ms_fail(err, "cuda backend: model %s has hidden %u, expert_ffn %u, expert_matrices %u (expected > 0, "
                            "> 0, 2 or 3)",
                       m->name, m->hidden, m->expert_ffn, m->expert_matrices);
    if (!c->layers || !c->experts || !c->slots || !c->max_tokens)
        return ms_fail(err, "cuda backend: layers %u, experts %u, slots %u, max_tokens %u (each must be >= 1)",
                       c->layers, c->experts, c->slots, c->max_tokens);
    if (!(c->expert_scale > 0 && c->expert_scale <= 1))
        return ms_fail(err, "cuda backend: expert_scale %g is out of range (0, 1]", c->expert_scale);
    return 0;
}

/* Shapes from the config: the scaled FFN, the slot size, the dense buffer. */
static void size_from_config(cuda_exec *s, const ms_backend_config *c)
{
    const ms_model *m = c->model;
    s->L = c->layers;
    s->J = c->experts;
    s->slots = c->slots;
    s->max_tokens = c->max_tokens;
    s->hidden = m->hidden;
    s->matrices = m->expert_matrices;
    double f = llround((double)m->expert_ffn * c->expert_scale);
    s->ffn = f < 1 ? 1 : (uint32_t)f;
    double compute = (double)s->matrices * s->hidden * s->ffn * sizeof(__nv_bfloat16);
    double stored = ceil((double)m->expert_bytes * s->ffn / m->expert_ffn);
    double bytes = fmax(compute, stored);
    s->slot_bytes = ((size_t)bytes + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    s->dense_cols = (size_t)ceil((double)m->dense_params / m->hidden);
}

static double activation_bytes(const cuda_exec *s)
{
    double t = s->max_tokens, bf = sizeof(__nv_bfloat16);
    return bf * (t * s->hidden * 2 + t * 2.0 * s->ffn + t * s->dense_cols + (double)s->dense_cols * s->hidden);
}

/* MemAvailable of /proc/meminfo in bytes, else the available physical pages. */
static double host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    if (f)
        fclose(f);
    if (found)
        return (double)kb * 1024.0;
    return (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* A scale that brings `need` under `have` (90 %), 3 significant digits, rounded down. */
static double suggest_scale(double scale, double need, double have)
{
    double s = scale * 0.9 * have / need;
    if (s <= 0)
        return 0;
    double p = pow(10.0, floor(log10(s)) - 2);
    return floor(s / p) * p;
}

static int check_host_memory(const cuda_exec *s, double scale, ms_err *err)
{
    double need = (double)s->L * s->J * s->slot_bytes, have = host_available();
    if (need <= 0.9 * have)
        return 0;
    return ms_fail(err, "cuda backend: the pinned expert store needs %u x %u experts x %.1f MiB = %.2f GiB, more than "
                        "90%% of the host's %.2f GiB available (MemAvailable); shrink the experts with --expert-scale "
                        "%.3g",
                   s->L, s->J, s->slot_bytes / MIB, need / GIB, have / GIB, suggest_scale(scale, need, have));
}

static int check_device_memory(const cuda_exec *s, double scale, ms_err *err)
{
    size_t free_b = 0, total_b = 0;
    CU(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    double pool = (double)s->slots * s->slot_bytes, other = activation_bytes(s) + DEVICE_RESERVE_BYTES;
    if (pool + other <= (double)free_b)
        return 0;
    return ms_fail(err, "cuda backend: %s has %.2f GiB free of %.2f GiB, but the slot pool needs %u slots x %.1f MiB "
                        "= %.2f GiB plus %.2f GiB of activations, dense weights and reserve; use a smaller cache or "
                        "--expert-scale %.3g",
                   s->gpu, free_b / GIB, total_b / GIB, s->slots, s->slot_bytes / MIB, pool / GIB, other / GIB,
                   suggest_scale(scale, pool, fmax((double)free_b - other, 0)));
}

static int open_device(cuda_exec *s, ms_err *err)
{
    if (!ms_cuda_available(err))
        return -1;
    cudaDeviceProp p;
    CU(cudaSetDevice(0), "cudaSetDevice(0)");
    CU(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
    snprintf(s->gpu, sizeof s->gpu, "%.200s (sm_%d%d)", p.name, p.major, p.minor);
    CU(cudaFree(0), "creating the CUDA context on %s", s->gpu);
    cudaFuncAttributes attr;
    cudaError_t rc = cudaFuncGetAttributes(&attr, fill_bf16);
    if (rc != cudaSuccess)
        return ms_fail(err, "cuda backend: the kernels were built for CUDA architectures %s, which cannot run on %s "
                            "(%s); rebuild with -DCMAKE_CUDA_ARCHITECTURES=%d%d",
                       MS_CUDA_ARCHS, s->gpu, cudaGetErrorString(rc), p.major, p.minor);
    return 0;
}

static int fill_device(__nv_bfloat16 *p, size_t n, uint32_t seed, float amp, cudaStream_t st, const char *what,
                       ms_err *err)
{
    if (!n)
        return 0;
    (void)cudaGetLastError(); /* as in expert_ffn */
    fill_bf16<<<grid_for(n), THREADS, 0, st>>>(p, n, seed, amp);
    CU(cudaGetLastError(), "launch of fill_bf16 (%s)", what);
    return 0;
}

static int alloc_device(cuda_exec *s, ms_err *err)
{
    size_t t = s->max_tokens, bf = sizeof(__nv_bfloat16), pool = (size_t)s->slots * s->slot_bytes;
    size_t dense_w = s->dense_cols * s->hidden;
    CU(cudaMalloc((void **)&s->dev_slots, pool), "cudaMalloc of the slot pool (%u slots x %zu bytes)", s->slots,
       s->slot_bytes);
    CU(cudaMalloc((void **)&s->x, t * s->hidden * bf), "cudaMalloc of the activations");
    CU(cudaMalloc((void **)&s->h, t * 2 * s->ffn * bf), "cudaMalloc of the FFN intermediate");
    CU(cudaMalloc((void **)&s->y, t * s->hidden * bf), "cudaMalloc of the FFN output");
    if (dense_w) {
        CU(cudaMalloc((void **)&s->dense_w, dense_w * bf), "cudaMalloc of the dense weights (%zu bytes)", dense_w * bf);
        CU(cudaMalloc((void **)&s->dense_y, t * s->dense_cols * bf), "cudaMalloc of the dense output");
    }
    /* weights of magnitude ~1/sqrt(fan-in) keep the values finite through both GEMMs */
    if (fill_device((__nv_bfloat16 *)s->dev_slots, pool / bf, 11, 1.0f / sqrtf((float)s->hidden), s->compute,
                    "slots", err) ||
        fill_device(s->x, t * s->hidden, 13, 1.0f, s->compute, "activations", err) ||
        fill_device(s->dense_w, dense_w, 17, 1.0f / sqrtf((float)s->hidden), s->compute, "dense weights", err))
        return -1;
    CU(cudaStreamSynchronize(s->compute), "cudaStreamSynchronize (filling the device buffers)");
    return 0;
}

/* The pinned store: one expert of fixed values, copied into every other. */
static int alloc_host_store(cuda_exec *s, ms_err *err)
{
    size_t total = (size_t)s->L * s->J * s->slot_bytes;
    CU(cudaHostAlloc((void **)&s->host_store, total, cudaHostAllocDefault),
       "cudaHostAlloc of the pinned expert store (%u x %u experts x %zu bytes = %.2f GiB)", s->L, s->J, s->slot_bytes,
       total / GIB);
    uint16_t *first = (uint16_t *)s->host_store;
    size_t n = s->slot_bytes / sizeof(uint16_t);
    for (size_t k = 0; k < n; k++) /* bf16 bit patterns of +-(1 .. 2) x 2^-6 */
        first[k] = (uint16_t)(0x3c80u | (k * 37u & 0x7fu) | (k & 1u) << 15);
    for (size_t x = 1; x < (size_t)s->L * s->J; x++)
        memcpy(s->host_store + x * s->slot_bytes, s->host_store, s->slot_bytes);
    return 0;
}

static int init_runtime(cuda_exec *s, ms_err *err)
{
    CU(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking), "cudaStreamCreate (copy stream)");
    CU(cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking), "cudaStreamCreate (compute stream)");
    BLAS(cublasCreate(&s->blas), "cublasCreate");
    BLAS(cublasSetStream(s->blas, s->compute), "cublasSetStream");
    CU(cudaEventCreate(&s->origin), "cudaEventCreate (origin)");
    CU(cudaEventCreate(&s->probe0), "cudaEventCreate (probe)");
    CU(cudaEventCreate(&s->probe1), "cudaEventCreate (probe)");
    return 0;
}

static void init_slots(cuda_exec *s)
{
    size_t lj = (size_t)s->L * s->J;
    s->slot_of = (int32_t *)ms_xcalloc(lj, sizeof *s->slot_of);
    for (size_t x = 0; x < lj; x++)
        s->slot_of[x] = NO_SLOT;
    s->owner = (uint32_t *)ms_xcalloc(s->slots, sizeof *s->owner);
    s->slot_copy = (ms_event *)ms_xcalloc(s->slots, sizeof *s->slot_copy);
    s->slot_read = (ms_event *)ms_xcalloc(s->slots, sizeof *s->slot_read);
    s->free_ring = (uint32_t *)ms_xcalloc(s->slots, sizeof *s->free_ring);
    for (uint32_t i = 0; i < s->slots; i++) {
        s->owner[i] = NO_OWNER;
        s->slot_copy[i] = MS_NO_EVENT;
        s->slot_read[i] = MS_NO_EVENT;
        s->free_ring[i] = i;
    }
    s->free_n = s->slots;
    for (size_t i = 0; i < MS_CUDA_READ_RING; i++)
        s->ring_id[i] = MS_NO_EVENT;
}

/* Runs the expert FFN and the dense GEMM once at 1, 2, 4, .., max_tokens rows
 * so that cuBLAS's kernels for them are loaded (lazy module loading) before
 * the clock starts. */
static int warm_up(cuda_exec *s, ms_err *err)
{
    for (uint32_t t = 1;; t = t >= s->max_tokens / 2 ? s->max_tokens : 2 * t) {
        if (expert_ffn(s, 0, t, err) || dense_gemm(s, s->dense_cols, t, err))
            return ms_fail_prefix(err, "warm-up over %u tokens", t);
        if (t == s->max_tokens)
            break;
    }
    CU(cudaStreamSynchronize(s->compute), "cudaStreamSynchronize (warm-up)");
    return 0;
}

static int build(cuda_exec *s, const ms_backend_config *c, ms_err *err)
{
    size_from_config(s, c);
    if (open_device(s, err) || check_host_memory(s, c->expert_scale, err) ||
        check_device_memory(s, c->expert_scale, err) || init_runtime(s, err) || alloc_device(s, err) ||
        alloc_host_store(s, err) || warm_up(s, err))
        return -1;
    init_slots(s);
    CU(cudaEventRecord(s->origin, s->compute), "cudaEventRecord (origin)");
    CU(cudaEventSynchronize(s->origin), "cudaEventSynchronize (origin)");
    return 0;
}

extern "C" int ms_cuda_backend_create(const ms_backend_config *c, ms_exec *out, ms_err *err)
{
    if (check_config(c, err))
        return -1;
    cuda_exec *s = (cuda_exec *)ms_xcalloc(1, sizeof *s);
    if (build(s, c, err)) {
        cuda_destroy(s);
        return -1;
    }
    out->ops = &cuda_ops_table;
    out->st = s;
    return 0;
}

/* ---------------------------------------------------------------- test hooks */

static cuda_exec *as_cuda(ms_exec *x)
{
    return x && x->ops == &cuda_ops_table ? (cuda_exec *)x->st : NULL;
}

extern "C" void *ms_cuda_backend_host_expert(ms_exec *x, uint32_t layer, uint32_t expert, size_t *bytes)
{
    cuda_exec *s = as_cuda(x);
    if (!s || layer >= s->L || expert >= s->J)
        return NULL;
    *bytes = s->slot_bytes;
    return s->host_store + ((size_t)layer * s->J + expert) * s->slot_bytes;
}

extern "C" int ms_cuda_backend_read_slot(ms_exec *x, uint32_t layer, uint32_t expert, void *dst, size_t bytes,
                                         ms_err *err)
{
    cuda_exec *s = as_cuda(x);
    if (!s)
        return ms_fail(err, "cuda backend: read_slot on an executor that is not the cuda backend");
    if (layer >= s->L || expert >= s->J || s->slot_of[(size_t)layer * s->J + expert] == NO_SLOT || bytes > s->slot_bytes)
        return ms_fail(err, "cuda backend: read_slot of expert (%u, %u), %zu bytes: no such slot or too many bytes",
                       layer, expert, bytes);
    uint32_t slot = (uint32_t)s->slot_of[(size_t)layer * s->J + expert];
    CU(cudaDeviceSynchronize(), "cudaDeviceSynchronize (read_slot)");
    CU(cudaMemcpy(dst, s->dev_slots + (size_t)slot * s->slot_bytes, bytes, cudaMemcpyDeviceToHost),
       "cudaMemcpy (read_slot of expert (%u, %u))", layer, expert);
    return 0;
}
