/* The backend registry: real executors of the sim/engine/exec.h contract by name.
 *   "host": kernels/host_backend.h (threads, memcpy, a CPU FFN), always built;
 *   "cuda": kernels/cuda_backend.h, built only when CMake found nvcc
 *           (MS_HAVE_CUDA); otherwise a one-line error.
 * Sizes every real backend uses for a config are here too, so that the
 * engine's ops can carry the same scaled bytes and params. */
#ifndef MS_BACKEND_H
#define MS_BACKEND_H

#include "sim/engine/exec.h"

int ms_backend_create(const char *name /* "host" | "cuda" */, const ms_backend_config *c, ms_exec *out,
                      ms_err *err);
/* 1 when `name` can be created in this build, else 0 with the reason in err. */
int ms_backend_available(const char *name, ms_err *err);

/* expert_ffn * expert_scale rounded, at least 1. */
uint32_t ms_backend_expert_ffn(const ms_backend_config *c);
/* Bytes and params of one scaled expert's weights (bf16, no biases). */
double ms_backend_expert_bytes(const ms_backend_config *c);
double ms_backend_expert_params(const ms_backend_config *c);
/* Checks the config's fields (model present, L, J, slots, max_tokens >= 1,
 * 0 < expert_scale <= 1, cpu_threads >= 1); 0 or -1 with a one-line error. */
int ms_backend_check_config(const char *who, const ms_backend_config *c, ms_err *err);
/* MemAvailable of /proc/meminfo (else sysconf pages) in bytes; 0 if unknown. */
double ms_host_mem_available(void);
double ms_host_mem_total(void);

#endif
