/* The CUDA backend: the executor contract (sim/engine/exec.h) on a real GPU.
 *
 *   - Expert weights: L*J experts in pinned host memory (cudaHostAlloc), each
 *     `slot bytes` = max(the bf16 FFN matrices of the scaled expert,
 *     the profile's expert_bytes scaled), rounded up to 256 bytes.  The
 *     scaled FFN size is max(1, round(expert_ffn * expert_scale)).
 *   - The GPU expert cache: one cudaMalloc of slots * slot bytes.  A copy of
 *     (layer, expert) takes the free slot released longest ago (or the slot
 *     the expert already holds) and waits, on the copy stream, for the last
 *     GPU expert op that read the slot; release() frees the slot.  No free
 *     slot: an error.
 *   - MS_OP_COPY: cudaMemcpyAsync of op->bytes (<= slot bytes) on the copy
 *     stream.  from_ssd and demand are not emulated: the engine's submission
 *     order is the priority order.
 *   - MS_OP_EXPERT_GPU, on the compute stream, after its slot's copy:
 *     [tokens x hidden] x gate/up (one cublasGemmEx, bf16 in, fp32
 *     accumulate), SiLU(gate) * up (ReLU(up) for 2-matrix experts) by a
 *     kernel, then x down.
 *   - MS_OP_DENSE, the stand-in for attention: [tokens x hidden] times a
 *     [ceil(op->params / hidden) x hidden] bf16 weight (one buffer shared by
 *     all layers, sized from the model's dense_params).
 *   - MS_OP_EXPERT_CPU: not supported yet (an error saying so).
 *   - Events: every op records a CUDA event before and after it; wait()
 *     synchronizes on the end and gives cudaEventElapsedTime against an
 *     origin event recorded at create and again at begin() (start = origin
 *     -> start event, end = start + start -> end event, so durations keep
 *     the event's 0.5 us resolution on long runs).  The events live in a
 *     growable pool: an event is read once: wait() recycles its CUDA events;
 *     its times stay readable by wait() for the next MS_CUDA_READ_RING reads,
 *     and `after` on a read event is already satisfied.  Events never waited
 *     for stay in the pool until destroy.
 *   - cpu_threads is not used (no CPU experts yet).
 *
 * Every CUDA and cuBLAS failure is a one-line error naming the call and the
 * CUDA message.  Before allocating, create() checks the pinned store against
 * MemAvailable and the device buffers against cudaMemGetInfo and fails with
 * the sizes and a suggested --expert-scale. */
#ifndef MS_CUDA_BACKEND_H
#define MS_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the C headers below declare C functions */
#endif

#include "sim/engine/exec.h"

#define MS_CUDA_READ_RING 4096

/* 1 when a CUDA device is there, else 0 with "no CUDA device (cudaGetDeviceCount: ...)". */
int ms_cuda_available(ms_err *err);
int ms_cuda_backend_create(const ms_backend_config *c, ms_exec *out, ms_err *err);

/* For tests: the pinned host copy of (layer, expert) and its size (NULL when
 * x is not a cuda executor or the expert is out of range); and the first
 * `bytes` of the slot that (layer, expert) holds, copied back to the host
 * after every op submitted so far. */
void *ms_cuda_backend_host_expert(ms_exec *x, uint32_t layer, uint32_t expert, size_t *bytes);
int ms_cuda_backend_read_slot(ms_exec *x, uint32_t layer, uint32_t expert, void *dst, size_t bytes, ms_err *err);

#ifdef __cplusplus
}
#endif

#endif
