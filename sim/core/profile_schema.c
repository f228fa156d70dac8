/* The profiles' fields as tables (profile_parts.h): for models, platforms
 * and serving frameworks, each key's section, kind, range and the [source]
 * entry that cites it. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


#include "sim/core/digest.h"
#include "sim/core/ini.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"

#include "sim/core/profile_parts.h"

/* ---- models ---- */
/* Structural counts are bounded by what any released MoE has, with wide room
 * (layers 4096, experts 65536, top_k 1024, hidden and expert_ffn 2^20, vocab
 * 2^24): a corrupt count must not ask a run for terabytes. */

static const char *const model_sections[] = {"model", "bytes_per_expert", "routing", "source", NULL};
static const char *const model_statuses[] = {"V", "V2", "D", "U", NULL};

static const field_spec model_fields[] = {
    STR("model", "name", K_NAME, ms_model, name, 1),
    STR("model", "description", K_TEXT, ms_model, description, 1),
    NUM("model", "layers", K_U32, ms_model, layers, 1, 4096, 0, 1, "structure"),
    NUM("model", "moe_layers", K_U32, ms_model, moe_layers, 1, 4096, 0, 1, "structure"),
    NUM("model", "experts", K_U32, ms_model, experts, 1, 65536, 0, 1, "structure"),
    NUM("model", "top_k", K_U32, ms_model, top_k, 1, 1024, 0, 1, "structure"),
    NUM("model", "shared_experts", K_U32, ms_model, shared_experts, 0, 1024, 0, 1, "structure"),
    NUM("model", "encoder_moe_layers", K_U32, ms_model, encoder_moe_layers, 0, 4096, 0, 0, "structure"),
    NUM("model", "hidden", K_U32, ms_model, hidden, 1, 1048576, 0, 1, "structure"),
    NUM("model", "expert_ffn", K_U32, ms_model, expert_ffn, 1, 1048576, 0, 1, "structure"),
    NUM("model", "expert_matrices", K_U32, ms_model, expert_matrices, 2, 3, 0, 1, "structure"),
    NUM("model", "vocab", K_U32, ms_model, vocab, 1, 16777216, 0, 1, "structure"),
    STR("model", "dtype", K_DTYPE, ms_model, dtype, 1),
    NUM("model", "expert_params", K_COUNT_BYTES, ms_model, expert_params, 1, EXACT_MAX_D, 0, 1, "expert_size"),
    NUM("model", "expert_bytes", K_COUNT_BYTES, ms_model, expert_bytes, 1, EXACT_MAX_D, 0, 1, "expert_size"),
    NUM("model", "dense_params", K_COUNT_BYTES, ms_model, dense_params, 0, EXACT_MAX_D, 0, 1, "dense"),
    NUM("model", "dense_bytes", K_COUNT_BYTES, ms_model, dense_bytes, 0, EXACT_MAX_D, 0, 1, "dense"),
    NUM("model", "kv_bytes_per_token", K_BYTES, ms_model, kv_bytes_per_token, 1, 1e9, 0, 0, "structure"),
    NUM("bytes_per_expert", "bf16", K_COUNT_BYTES, ms_model, bytes_bf16, 1, EXACT_MAX_D, 0, 0, "expert_size"),
    NUM("bytes_per_expert", "fp32", K_COUNT_BYTES, ms_model, bytes_fp32, 1, EXACT_MAX_D, 0, 0, "expert_size"),
    NUM("bytes_per_expert", "fp8", K_COUNT_BYTES, ms_model, bytes_fp8, 1, EXACT_MAX_D, 0, 0, "expert_size"),
    NUM("bytes_per_expert", "mxfp4", K_COUNT_BYTES, ms_model, bytes_mxfp4, 1, EXACT_MAX_D, 0, 0, "expert_size"),
};

const profile_schema pf_model_schema = {
    "model", "models", model_sections, model_fields,
    (int)(sizeof model_fields / sizeof model_fields[0]), model_statuses, 0,
};

/* ---- platforms ---- */

/* Ranges are what a real machine could have, with room for a slow host
 * backend under sanitizers and for future hardware (docs/profile-files.md):
 * a 1 B/s link or 1e-30 FLOP/s is a typo or a unit slip, refused with file,
 * key and value. */

static const char *const platform_sections[] = {"platform", "gpu",        "link",         "cpu",    "ssd",
                                                "policy",   "contention", "interconnect", "source", NULL};
static const char *const platform_statuses[] = {"datasheet", "measured", "derived", "estimate", NULL};

/* Every figure is cited under its own key in [source]. */
#define PF(sec, key, kind, lo, hi, lo_open) \
    NUM(sec, #key, kind, ms_platform, key, lo, hi, lo_open, 1, #key)
/* An optional figure: 0 when absent; cited in [source] when given. */
#define PF_OPTIONAL(sec, key, kind, lo, hi) NUM(sec, #key, kind, ms_platform, key, lo, hi, 0, 0, #key)

static const field_spec platform_fields[] = {
    STR("platform", "name", K_NAME, ms_platform, name, 1),
    STR("platform", "description", K_TEXT, ms_platform, description, 1),
    PF("gpu", gpu_mem_bytes, K_BYTES, 1e8, 1e15, 0),
    PF("gpu", hbm_bw, K_BW, 1e8, 1e14, 0),
    PF("gpu", gpu_flops, K_DOUBLE, 1e8, 1e17, 0),
    PF("gpu", launch_s, K_DOUBLE, 0, 0.1, 0),
    PF_OPTIONAL("gpu", gpus, K_U32, 1, 64),
    PF("link", h2d_bw, K_BW, 1e8, 1e13, 0),
    PF("link", h2d_latency_s, K_DOUBLE, 0, 0.1, 0),
    PF("link", d2h_bw, K_BW, 1e8, 1e13, 0),
    PF("link", d2h_latency_s, K_DOUBLE, 0, 0.1, 0),
    PF("link", pageable_bw, K_BW, 1e8, 1e13, 0),
    PF("link", copy_engines, K_U32, 1, 64, 0),
    NUM("link", "host_ceiling_bw", K_BW, ms_platform, host_ceiling_bw, 1e8, 1e14, 0, 0, "host_ceiling_bw"),
    PF("cpu", cpu_cores, K_U32, 1, 65536, 0),
    PF("cpu", dram_bw, K_BW, 1e8, 1e14, 0),
    PF("cpu", cpu_flops_per_core, K_DOUBLE, 1e7, 1e13, 0),
    PF("cpu", cpu_launch_s, K_DOUBLE, 0, 0.1, 0),
    PF("ssd", ssd_bw, K_BW, 1e7, 1e12, 0),
    PF("ssd", ssd_latency_s, K_DOUBLE, 0, 0.1, 0),
    PF("policy", policy_op_s, K_DOUBLE, 0, 1e-3, 0),
    PF_OPTIONAL("contention", copy_contention, K_DOUBLE, 0, 100),
    PF_OPTIONAL("contention", compute_contention, K_DOUBLE, 0, 100),
    NUM("interconnect", "peer_bw", K_BW, ms_platform, peer_bw, 1e8, 1e13, 0, 0, "peer_bw"),
    PF_OPTIONAL("interconnect", peer_latency_s, K_DOUBLE, 0, 0.1),
    STR("platform", "framework", K_NAME, ms_platform, framework, 0),
};

_Static_assert(sizeof model_fields / sizeof model_fields[0] <= MAX_FIELDS, "raise MAX_FIELDS");
_Static_assert(sizeof platform_fields / sizeof platform_fields[0] <= MAX_FIELDS, "raise MAX_FIELDS");
_Static_assert(sizeof platform_fields / sizeof platform_fields[0] <= MAX_GROUPS, "raise MAX_GROUPS");

const profile_schema pf_platform_schema = {
    "platform", "platforms", platform_sections, platform_fields,
    (int)(sizeof platform_fields / sizeof platform_fields[0]), platform_statuses, 1,
};

/* ---- serving frameworks ---- */

static const char *const framework_sections[] = {"framework", "source", NULL};

static const field_spec framework_fields[] = {
    STR("framework", "name", K_NAME, ms_framework, name, 1),
    STR("framework", "description", K_TEXT, ms_framework, description, 1),
    NUM("framework", "layer_s", K_DOUBLE, ms_framework, layer_s, 0, 0.1, 0, 1, "layer_s"),
    NUM("framework", "iteration_s", K_DOUBLE, ms_framework, iteration_s, 0, 1, 0, 1, "iteration_s"),
    /* optional (docs/profiles.md "Frameworks"); cited in [source] when given */
    NUM("framework", "expert_s", K_DOUBLE, ms_framework, expert_s, 0, 0.1, 0, 0, "expert_s"),
    NUM("framework", "copies_per_expert", K_U32, ms_framework, copies_per_expert, 0, 64, 0, 0, "copies_per_expert"),
    NUM("framework", "dequant_bw", K_BW, ms_framework, dequant_bw, 0, 1e15, 0, 0, "dequant_bw"),
    NUM("framework", "cpu_dequant_bw", K_BW, ms_framework, cpu_dequant_bw, 0, 1e15, 0, 0, "cpu_dequant_bw"),
    STR("framework", "copies", K_NAME, ms_framework, copies, 0),
    STR("framework", "host_memory", K_NAME, ms_framework, host_memory, 0),
    NUM("framework", "writeback", K_U32, ms_framework, writeback, 0, 1, 0, 0, "writeback"),
    NUM("framework", "reserve_bytes", K_BYTES, ms_framework, reserve_bytes, 0, 1e15, 0, 0, "reserve_bytes"),
    STR("framework", "surplus", K_NAME, ms_framework, surplus, 0),
};

const profile_schema pf_framework_schema = {
    "framework", "frameworks", framework_sections, framework_fields,
    (int)(sizeof framework_fields / sizeof framework_fields[0]), platform_statuses, 1,
};
