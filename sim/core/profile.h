/* Model and platform profiles: INI files shipped in sim/profiles/{models,platforms}/.
 *
 * A profile is looked up by name (the file stem) in the directory given by
 * $MOESIM_PROFILE_DIR, else <data dir>/profiles (ms_path_profiles,
 * sim/core/paths.h), or loaded from an explicit path ending in ".ini".  Every key is validated:
 * unknown keys, missing required keys and out-of-range values are one-line
 * errors naming file, key and value. */
#ifndef MS_PROFILE_H
#define MS_PROFILE_H

#include <stdint.h>

#include "sim/core/err.h"

/* One generator knob of a model's [routing] section (docs/generator.md
 * "Per-model routing"): the profile reader keeps it as text with its line and
 * its [source] routing.KEY citation (status "fitted" or "estimate"); the
 * generator (traces/synth/gen.h, ms_gen_model_defaults) checks the knob and
 * its value, naming this file and line. */
#define MS_ROUTING_MAX 24
typedef struct {
    char key[32];
    char value[48];
    char source[200];
    int line;
} ms_routing_knob;

typedef struct {
    char name[128];
    char description[256];
    uint32_t layers;          /* transformer layers */
    uint32_t moe_layers;      /* L */
    uint32_t experts;         /* J routed experts per MoE layer */
    uint32_t top_k;           /* K */
    uint32_t shared_experts;  /* always-on experts per MoE layer */
    uint32_t encoder_moe_layers; /* the first N MoE layers are an encoder's: prefill only (optional, 0) */
    uint32_t hidden;          /* hidden size */
    uint32_t expert_ffn;      /* expert intermediate size */
    uint32_t expert_matrices; /* 3 for SwiGLU, 2 for ReLU MLPs */
    uint32_t vocab;
    char dtype[16];           /* native dtype of the routed experts: bf16, fp32, mxfp4 ... */
    uint64_t expert_params;   /* parameters of one routed expert */
    uint64_t expert_bytes;    /* bytes of one routed expert in dtype */
    uint64_t dense_bytes;     /* non-expert bytes per MoE layer (attention, norms, gate, shared experts) */
    uint64_t dense_params;    /* parameters behind dense_bytes */
    double kv_bytes_per_token; /* KV cache bytes per token, all layers (optional, 0: the budget estimates it) */
    /* bytes per expert per dtype, from [bytes_per_expert]; 0 when not listed */
    uint64_t bytes_bf16, bytes_fp32, bytes_fp8, bytes_mxfp4;
    char source[512];
    char file[1024];          /* the file it was read from, and its SHA-256 (provenance of results) */
    char sha256[65];
    int n_routing;            /* [routing] knobs, in file order */
    ms_routing_knob routing[MS_ROUTING_MAX];
} ms_model;

/* A serving framework's host costs and how it moves weights
 * (sim/profiles/frameworks/NAME.ini; docs/profiles.md "Frameworks"): host
 * time the GPU waits for before every MoE layer's work, at the start of every
 * iteration and per activated GPU expert; how many H2D calls an expert copy
 * takes; dequantisation throughput; copies overlapped with compute or
 * synchronous; pinned or pageable host memory.  Every key but layer_s and
 * iteration_s is optional; the defaults (ms_framework_defaults) are a
 * framework that adds nothing to the timing model. */
#define MS_COPIES_PER_MATRIX UINT32_MAX
typedef struct {
    char name[64];
    char description[256];
    double layer_s;           /* per MoE layer */
    double iteration_s;       /* per iteration (forward pass) */
    double expert_s;          /* per activated GPU expert per layer step (eager dispatch), default 0 */
    uint32_t copies_per_expert; /* H2D calls per expert copy, each paying h2d_latency_s; default 1
                                 * (0 in a struct not read from a file: 1 too);
                                 * MS_COPIES_PER_MATRIX (the key's value 0): the model's expert_matrices */
    double dequant_bw;        /* bytes of quantised weights the GPU dequantises per second; 0 = free */
    double cpu_dequant_bw;    /* the same on the host CPU per core (CPU expert compute); 0 = free */
    char copies[16];          /* "overlapped" (default) | "sync" */
    char host_memory[16];     /* "pinned" (default) | "pageable" */
    uint32_t writeback;       /* 1: every expert copy is a swap: the evicted expert's weights go back to
                               * host memory in the same stream order first (d2h latency + bytes /
                               * d2h_bw more per copy; Mixtral-Offloading's _swap); default 0 */
    double reserve_bytes;     /* GPU memory the framework keeps for itself (budget.h); default 0 */
    char surplus[16];         /* "fail" (default): a demand load that finds no room in the cache fails the run;
                               * "stream": it goes through a transient buffer (copied, run, released), as
                               * frameworks that run a layer's experts one at a time do */
    char source[1024];
    char file[1024];
    char sha256[65];
} ms_framework;

typedef struct {
    char name[128];
    char description[256];
    /* [gpu] */
    double gpu_mem_bytes;
    double hbm_bw;            /* bytes/s */
    double gpu_flops;         /* dense bf16 FLOP/s */
    double launch_s;          /* kernel launch overhead */
    uint32_t gpus;            /* GPUs of the platform, each with gpu_mem_bytes and its own H2D link
                               * (optional, 0 when absent = 1; docs/engine.md "Several GPUs") */
    /* [link] host -> device copy engine */
    double h2d_bw;            /* pinned, bytes/s */
    double h2d_latency_s;
    double d2h_bw;
    double d2h_latency_s;
    double pageable_bw;
    uint32_t copy_engines;
    double host_ceiling_bw;   /* optional: host-side bandwidth all H2D links share (root complex,
                               * DRAM); 0 = none */
    /* [interconnect] (optional, 0 when absent): GPU-GPU links for token
     * dispatch and combine (NVLink or PCIe peer) */
    double peer_bw;           /* bytes/s, each GPU to the home GPU */
    double peer_latency_s;
    /* [cpu] */
    uint32_t cpu_cores;
    double dram_bw;           /* bytes/s */
    double cpu_flops_per_core;
    double cpu_launch_s;      /* per-expert CPU dispatch overhead */
    /* [ssd] */
    double ssd_bw;
    double ssd_latency_s;
    /* [policy] modelled cost of policy work (e.g. one multiply-add of a map search) */
    double policy_op_s;
    /* [contention] (optional, 0 when absent): copies and compute-stream ops
     * that share one memory (a host backend, unified memory).  While the
     * compute stream runs an op, a copy progresses at 1 / (1 + copy_contention)
     * of its speed; while a copy runs, a memory-bound compute op at
     * 1 / (1 + compute_contention) (sim/engine/exec.h). */
    double copy_contention;
    double compute_contention;
    /* [platform] framework (optional, "" when absent): the serving
     * framework profile runs on this platform use unless told otherwise;
     * ms_platform_load reads it and keeps it here (the defaults of
     * ms_framework_defaults, named "", without one) */
    char framework[64];
    ms_framework framework_profile;
    char source[1024];        /* one line per figure: "key: value (datasheet|measured|estimate) <ref>" */
    char file[1024];          /* the file it was read from, and its SHA-256 (provenance of results) */
    char sha256[65];
} ms_platform;


int ms_model_load(const char *name_or_path, ms_model *out, ms_err *err);
int ms_platform_load(const char *name_or_path, ms_platform *out, ms_err *err);

/* One override of a profile key without copying the file (`--set
 * platform.gpu_mem_bytes=48GiB`): key is the bare key of any section. */
typedef struct {
    const char *key, *value;
    /* where it was given, for messages and the [source] line: NULL for the
     * command line ("--set platform.KEY=VALUE"), else e.g. a sweep spec's
     * "FILE:LINE: platform.KEY = VALUE" */
    const char *where;
} ms_profile_set;
/* The same loads with overrides applied after the file, each validated like
 * the file's own value (type, range, whole-profile checks; errors name
 * "--set KIND.KEY=VALUE", or the set's own `where`); the [source] line of an overridden figure says
 * so.  The name cannot be overridden. */
int ms_model_load_set(const char *name_or_path, const ms_profile_set *sets, int nsets, ms_model *out, ms_err *err);
int ms_platform_load_set(const char *name_or_path, const ms_profile_set *sets, int nsets, ms_platform *out,
                         ms_err *err);
int ms_framework_load(const char *name_or_path, ms_framework *out, ms_err *err);
/* A framework without costs named name: copies_per_expert 1, copies
 * overlapped, host memory pinned, every other figure 0. */
void ms_framework_defaults(ms_framework *f, const char *name);
/* Whether the framework's copies are synchronous / from pageable memory. */
int ms_framework_sync_copies(const ms_framework *f);
int ms_framework_pageable(const ms_framework *f);
/* Whether a demand load without room streams through a transient buffer. */
int ms_framework_surplus_streams(const ms_framework *f);
/* A run's --framework: NULL or "" gives *have = 0 (the run uses the
 * platform's framework, read with the platform); "none" gives a framework
 * named none without costs; else the profile.  0, or -1 with the error. */
int ms_framework_resolve(const char *name, ms_framework *out, int *have, ms_err *err);
/* Names of shipped profiles, sorted; caller frees the array and strings. */
int ms_profile_list(const char *kind /* "models" | "platforms" | "frameworks" */, char ***names, int *n, ms_err *err);
void ms_profile_list_free(char **names, int n);

#endif
