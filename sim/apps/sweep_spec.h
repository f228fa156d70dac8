/* Sweep specifications (`moesim sweep SPEC`): an INI file naming the values
 * of every run parameter, expanded into an ordered list of points.
 *
 *   [sweep]
 *   output = results.csv        ; relative paths are relative to the spec's folder
 *   mode = product              ; product (default) or list
 *   trace_cache = 2GiB          ; per-process in-memory trace cache (0 = off)
 *   trace = a.h5, b.h5          ; axes: comma lists; numbers also start:stop:step
 *   cache_experts = 16:64:16    ; (inclusive: 16, 32, 48, 64)
 *   prefetch = none, oracle, fmoe:capacity=100,mode=code
 *   [point]                     ; mode = list: each [point] adds the product of
 *   prefetch = oracle           ; its own keys, the rest taken from [sweep]
 *
 * Axes (one CSV parameter column each, in this order, which is also the
 * nesting order of the product, trace outermost): trace, model, platform,
 * prefetch, cache, sched, cache_experts | cache_bytes | cache_gb (exactly one
 * capacity key; cache_gb is reported as cache_bytes), distance, batch,
 * host_bytes, h2d_gbps (overrides the platform's H2D bandwidth), train,
 * topk_fill, offline, seed, gpus (the platform's unless given), placement
 * (round-robin, layer, balanced or a file), cache_per_gpu (0 or 1), framework
 * (a name, .ini path or none; the platform's unless given).  Policy lists split at commas, except that an
 * item holding '=' but no ':' continues the previous spec's parameters.
 *
 * ms_sweep_load validates everything before anything runs: unknown sections
 * and keys, repeated keys, empty lists and ranges, malformed or out-of-range
 * numbers, unknown policies and parameters (ms_params_parse against the
 * registry), unknown or invalid models and platforms, missing or unreadable
 * traces.  Errors are one line "SPEC:LINE: ...". */
#ifndef MS_SWEEP_SPEC_H
#define MS_SWEEP_SPEC_H

#include <stdint.h>

#include "sim/engine/engine.h"
#include "sim/core/err.h"
#include "sim/core/profile.h"

typedef enum {
    MS_SW_TRACE, MS_SW_MODEL, MS_SW_PLATFORM, MS_SW_PREFETCH, MS_SW_CACHE, MS_SW_SCHED,
    MS_SW_CACHE_EXPERTS, MS_SW_CACHE_BYTES, MS_SW_DISTANCE, MS_SW_BATCH, MS_SW_HOST_BYTES,
    MS_SW_H2D_GBPS, MS_SW_TRAIN, MS_SW_TOPK_FILL, MS_SW_OFFLINE, MS_SW_SEED,
    MS_SW_GPUS, MS_SW_PLACEMENT, MS_SW_CACHE_PER_GPU, MS_SW_FRAMEWORK,
    MS_SW_NPARAM
} ms_sweep_param;

/* Column name of each parameter. */
extern const char *const ms_sweep_param_names[MS_SW_NPARAM];

/* One point: the text of every parameter ("" for the capacity key it does
 * not use; h2d_gbps, gpus and framework are the platform's own unless
 * given). */
typedef struct {
    const char *v[MS_SW_NPARAM];
    int h2d_override; /* h2d_gbps was given: it replaces the platform's h2d_bw */
    int gpus_override, fw_override; /* gpus, framework were given */
} ms_sweep_point;

typedef struct ms_sweep_spec ms_sweep_spec;

ms_sweep_spec *ms_sweep_load(const char *path, ms_err *err);
void ms_sweep_free(ms_sweep_spec *s);

const char *ms_sweep_output(const ms_sweep_spec *s);  /* resolved output path */
uint64_t ms_sweep_trace_cache(const ms_sweep_spec *s); /* bytes; 0 = off */
uint64_t ms_sweep_npoints(const ms_sweep_spec *s);
const ms_sweep_point *ms_sweep_get(const ms_sweep_spec *s, uint64_t i);

/* The run configuration of a point: cfg's pointers refer to *plat (a copy
 * of the platform with h2d_gbps applied), to the spec's loaded model, and to
 * trace_buf (the resolved trace path).  Cannot fail on a loaded spec. */
void ms_sweep_config(const ms_sweep_spec *s, const ms_sweep_point *p, ms_run_config *cfg, ms_platform *plat,
                     char *trace_buf, size_t trace_cap);

#endif
