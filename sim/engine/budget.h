/* The GPU memory left for a run's expert cache (docs/engine.md "Memory
 * budget"): what one GPU holds besides the routed experts.
 *
 *   expert cache = gpu_mem_bytes
 *                - dense: every MoE layer's non-expert weights, as the run
 *                  charges them (the trace's bytes, or dense_params x
 *                  dense_bits / 8)
 *                - embeddings and lm_head: 2 x vocab x hidden x 2 bytes
 *                  (two 16-bit matrices, untied) when a model is given
 *                - KV cache: batch x context tokens x kv_bytes_per_token (the
 *                  model key; else the estimate 2 x layers x hidden x 2
 *                  bytes: K and V of every transformer layer at 16 bit, full
 *                  multi-head attention, an upper bound for GQA/MLA models)
 *                - the framework's reserve_bytes (0 without one)
 *
 * ms_budget_compute fills every term and one line of text saying what it
 * assumed; the result may be negative (nothing fits).  Pure: no I/O. */
#ifndef MS_BUDGET_H
#define MS_BUDGET_H

#include <stdint.h>

#include "sim/core/profile.h"

typedef struct {
    const ms_platform *platform;   /* gpu_mem_bytes (one GPU) */
    const ms_model *model;         /* NULL: no embeddings or KV terms (the text says so) */
    const ms_framework *framework; /* NULL: no reserve */
    double dense_bytes;            /* all MoE layers' dense bytes */
    uint32_t batch;                /* requests resident at once */
    double context_tokens;         /* prompt + output of the longest request */
} ms_budget_in;

typedef struct {
    double gpu_mem, dense, embed, kv, reserve;
    double expert_cache;           /* gpu_mem - the rest */
    char assumed[600];             /* one line */
} ms_budget;

void ms_budget_compute(const ms_budget_in *in, ms_budget *out);

/* The expert-cache bytes a run may ask for on one GPU: expert_cache, plus
 * the KV term when it is only the estimate (an upper bound, not held against
 * the cache; the run's check, sim/engine/setup.c). */
double ms_budget_cache_room(const ms_budget *b, const ms_model *m);

#endif
