/* The host backend: the executor contract of sim/engine/exec.h run for real on the
 * host, so that the real-execution path (`moesim validate`, `moesim
 * calibrate`) runs on machines without a GPU.
 *
 * - One thread per stream: compute (the stand-in "GPU": dense stand-in and
 *   GPU experts), copy (memcpy of an expert from the host expert store into
 *   a slot buffer), cpu (CPU experts, from the store).  Each serves a FIFO
 *   of submitted ops in submission order; an op starts once the previous op
 *   of its stream ended, its `after` event completed, and (GPU expert) the
 *   copy that filled its slot completed; a copy into a slot waits for the
 *   last op that read the slot's previous content.
 * - Expert store: L*J experts of ms_backend_expert_bytes(c) bytes (bf16
 *   weights of the scaled FFN, host_ffn.h layout), malloc'd and filled with
 *   fixed data; `slots` slot buffers of the same size are the "device".
 *   A copy carries op->bytes (at most one expert's bytes) and takes the
 *   free slot released longest ago (or the slot the expert already holds);
 *   release() frees it; a copy with no free slot is an error.
 * - Expert FFN (host_ffn.h) over tokens rows (<= max_tokens); MS_OP_DENSE
 *   is the same matmul over the op's layer's dense bf16 buffer, op->params
 *   weights ([hidden][params/hidden]); one buffer per layer (as a model has
 *   them: a layer's dense weights are not still in the CPU caches from the
 *   layer before), each sized to the model's dense_params x expert_scale
 *   (the engine's work_scale shrinks dense ops by the same factor).
 * - Times: clock_gettime(CLOCK_MONOTONIC) around each op's execution,
 *   seconds since begin() (ops that ended before begin() read 0).
 * - Errors (sizes beyond free memory, no free slot, unknown expert or
 *   event, tokens above max_tokens): one line in err, never a crash.
 * - destroy(): pending ops that have not started are dropped, the running
 *   ones finish, threads are joined and everything is freed.
 * - time_copy / time_expert run in the calling thread; call them with no
 *   ops pending.  "Pinned" host memory is mlock'd when mlock succeeds (see
 *   ms_host_backend_pinned_note). */
#ifndef MS_HOST_BACKEND_H
#define MS_HOST_BACKEND_H

#include "sim/engine/exec.h"

int ms_host_backend_create(const ms_backend_config *c, ms_exec *out, ms_err *err);

/* How "pinned" copies were measured on this executor: "mlock'd" or
 * "mlock failed (<reason>): pinned = pageable"; NULL for other executors. */
const char *ms_host_backend_pinned_note(const ms_exec *x);

/* Cold-cache timing for calibration (default off): every compute-stream
 * and CPU-stream op first evicts the CPU caches (reads a buffer of twice
 * the last-level cache, outside the op's timed interval), so that a
 * calibration that repeats one op over the same weights times them out of
 * memory, as a run over many experts reads them; time_expert always does.
 * 0, or -1 when x is not a host executor or the buffer cannot be had. */
int ms_host_backend_set_cold(ms_exec *x, int on);

#endif
