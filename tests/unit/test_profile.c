/* Profiles: every shipped model and platform loads with the figures of
 * the reference sheet (docs/sources.md), and malformed profiles fail with one line naming the file,
 * the key and the value. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"

static const char *const shipped_models[] = {
    "bert-moe-4e", "deepseek-v2-lite", "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b", "nllb-moe-128",
    "olmoe-1b-7b", "phi-3.5-moe", "qwen1.5-moe-a2.7b", "qwen2-57b-a14b", "qwen3-30b-a3b", "switch-base-128",
    "switch-large-128",
};
static const char *const shipped_platforms[] = {
    "a100-80gb-pcie", "a100-80gb-sxm", "a5000-pcie4", "fmoe-6x3090", "gh200", "h100-pcie5", "h200", "host-ci",
    "hybrimoe-ktransformers", "l4", "moeinf-6x4v100", "moeinf-8xa5000", "quadro-rtx6000", "rtx-a6000", "rtx2080",
    "rtx3060-12gb", "rtx3080m-16gb", "rtx3090-pcie4", "rtx4090", "t4", "v100-pcie3",
};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The profile folder (sim/core/paths.h); "" after a failed CHECK. */
static const char *profile_dir(void)
{
    static char dir[4096];
    ms_err err = {{0}};
    dir[0] = '\0';
    CHECK(ms_path_profiles(dir, sizeof dir, &err) == 0);
    return dir;
}

/* A small valid model; the bad-profile tests edit one line of it. */
static const char tiny_model[] =
    "; test model\n"
    "[model]\n"
    "name = tiny\n"
    "description = test model\n"
    "layers = 4\n"
    "moe_layers = 2\n"
    "experts = 8\n"
    "top_k = 2\n"
    "shared_experts = 0\n"
    "hidden = 64\n"
    "expert_ffn = 128\n"
    "expert_matrices = 3\n"
    "vocab = 100\n"
    "dtype = bf16\n"
    "expert_params = 24576\n"
    "expert_bytes = 49152\n"
    "dense_params = 1000\n"
    "dense_bytes = 2000\n"
    "[bytes_per_expert]\n"
    "bf16 = 49152\n"
    "[source]\n"
    "structure = U test figures\n"
    "expert_size = D 3*64*128\n"
    "dense = U test figures\n";

static char tmpdir[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strdup(buf);
}

/* base with the first occurrence of `from` replaced by `to` (which must exist). */
static char *edit(const char *base, const char *from, const char *to)
{
    const char *at = strstr(base, from);
    if (!at) {
        fprintf(stderr, "test bug: '%s' not in base profile\n", from);
        exit(1);
    }
    size_t head = (size_t)(at - base), nb = strlen(base), nf = strlen(from), nt = strlen(to);
    char *out = malloc(nb - nf + nt + 1);
    memcpy(out, base, head);
    memcpy(out + head, to, nt);
    memcpy(out + head + nt, at + nf, nb - head - nf + 1);
    return out;
}

static void test_listing(void)
{
    char **names;
    int n;
    ms_err err = {{0}};
    CHECK(ms_profile_list("models", &names, &n, &err) == 0);
    CHECK_EQ_INT(n, COUNT(shipped_models));
    for (int i = 0; i < n && i < COUNT(shipped_models); i++)
        CHECK(!strcmp(names[i], shipped_models[i]));
    ms_profile_list_free(names, n);

    CHECK(ms_profile_list("platforms", &names, &n, &err) == 0);
    CHECK_EQ_INT(n, COUNT(shipped_platforms));
    for (int i = 0; i < n && i < COUNT(shipped_platforms); i++)
        CHECK(!strcmp(names[i], shipped_platforms[i]));
    ms_profile_list_free(names, n);

    /* every shipped framework loads (platforms and models are loaded by test_shipped) */
    CHECK(ms_profile_list("frameworks", &names, &n, &err) == 0);
    CHECK(n >= 3);
    for (int i = 0; i < n; i++) {
        ms_framework fw;
        int rc = ms_framework_load(names[i], &fw, &err);
        CHECK(rc == 0);
        if (rc)
            fprintf(stderr, "%s\n", err.msg);
    }
    ms_profile_list_free(names, n);

    CHECK(ms_profile_list("gpus", &names, &n, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "gpus");
}

/* Bias terms of one expert where the model has them (REFERENCE 1b). */
static uint64_t expert_bias_params(const char *name)
{
    if (!strcmp(name, "nllb-moe-128"))
        return 8192 + 2048; /* fc1 + fc2 bias */
    if (!strcmp(name, "gpt-oss-120b"))
        return 5760 + 2880; /* gate_up + down bias */
    if (!strcmp(name, "bert-moe-4e"))
        return 3072 + 768; /* intermediate.dense + output.dense bias */
    return 0;
}

static void test_shipped_models(void)
{
    for (int i = 0; i < COUNT(shipped_models); i++) {
        ms_model m;
        ms_err err = {{0}};
        int rc = ms_model_load(shipped_models[i], &m, &err);
        if (rc)
            fprintf(stderr, "%s\n", err.msg);
        CHECK(rc == 0);
        if (rc)
            continue;
        CHECK(!strcmp(m.name, shipped_models[i]));
        uint64_t weights = (uint64_t)m.expert_matrices * m.hidden * m.expert_ffn;
        CHECK_EQ_INT(m.expert_params, weights + expert_bias_params(m.name));
        CHECK(m.top_k <= m.experts && m.moe_layers <= m.layers);
        CHECK(m.expert_bytes > 0 && m.dense_bytes > 0);
        CHECK_STR_CONTAINS(m.source, "structure: ");
        CHECK_STR_CONTAINS(m.source, "expert_size: D");
        CHECK_STR_CONTAINS(m.source, "dense: D");
    }
}

static void test_model_figures(void)
{
    ms_model m;
    ms_err err = {{0}};
    CHECK(ms_model_load("mixtral-8x7b", &m, &err) == 0);
    CHECK_EQ_INT(m.expert_bytes, 352321536);
    CHECK_EQ_INT(m.expert_params, 176160768);
    CHECK_EQ_INT(m.layers, 32);
    CHECK_EQ_INT(m.experts, 8);
    CHECK_EQ_INT(m.top_k, 2);
    CHECK(!strcmp(m.dtype, "bf16"));
    CHECK_EQ_INT(m.bytes_fp32, 0); /* not listed */
    /* attention 2*4096*4096 + 2*4096*1024, norms 2*4096, router 4096*8 */
    CHECK_EQ_INT(m.dense_params, 2LL * 4096 * 4096 + 2LL * 4096 * 1024 + 2 * 4096 + 4096 * 8);

    /* seed 002's basic Bert MoE: 2*768*3072 + 3072 + 768 parameters per expert, fp32; per layer
     * attention 4*768*768 + 4*768, two LayerNorms 4*768, router 768*4 */
    CHECK(ms_model_load("bert-moe-4e", &m, &err) == 0);
    CHECK_EQ_INT(m.expert_params, 2LL * 768 * 3072 + 3072 + 768);
    CHECK_EQ_INT(m.expert_bytes, 4 * (2LL * 768 * 3072 + 3072 + 768));
    CHECK_EQ_INT(m.dense_params, 4LL * 768 * 768 + 4 * 768 + 4 * 768 + 768 * 4);
    CHECK_EQ_INT(m.experts, 4);
    CHECK_EQ_INT(m.top_k, 1);

    CHECK(ms_model_load("qwen3-30b-a3b", &m, &err) == 0);
    CHECK_EQ_INT(m.moe_layers, 48);
    CHECK_EQ_INT(m.experts, 128);
    CHECK_EQ_INT(m.top_k, 8);
    CHECK_EQ_INT(m.expert_params, 4718592);
    CHECK_EQ_INT(m.expert_bytes, 9437184);

    CHECK(ms_model_load("gpt-oss-120b", &m, &err) == 0);
    CHECK(!strcmp(m.dtype, "mxfp4"));
    /* blocks 24883200/2 + scales 24883200/32 + 8640 bf16 biases */
    CHECK_EQ_INT(m.bytes_mxfp4, 12441600 + 777600 + 17280);
    CHECK_EQ_INT(m.expert_bytes, 13236480);
    CHECK_EQ_INT(m.bytes_bf16, 2LL * 24891840);

    CHECK(ms_model_load("nllb-moe-128", &m, &err) == 0);
    CHECK(!strcmp(m.dtype, "fp32"));
    CHECK_EQ_INT(m.expert_bytes, 134258688);
    CHECK_EQ_INT(m.moe_layers, 12);

    CHECK(ms_model_load("switch-base-128", &m, &err) == 0);
    CHECK_EQ_INT(m.expert_bytes, 18874368);
    CHECK_EQ_INT(m.expert_matrices, 2);
    CHECK_EQ_INT(m.top_k, 1);

    CHECK(ms_model_load("deepseek-v2-lite", &m, &err) == 0);
    CHECK_EQ_INT(m.layers, 27);
    CHECK_EQ_INT(m.moe_layers, 26);
    CHECK_EQ_INT(m.shared_experts, 2);
}

static void test_shipped_platforms(void)
{
    for (int i = 0; i < COUNT(shipped_platforms); i++) {
        ms_platform p;
        ms_err err = {{0}};
        int rc = ms_platform_load(shipped_platforms[i], &p, &err);
        if (rc)
            fprintf(stderr, "%s\n", err.msg);
        CHECK(rc == 0);
        if (rc)
            continue;
        CHECK(!strcmp(p.name, shipped_platforms[i]));
        /* a GPU's memory outruns its link and pinned copies outrun pageable ones; host-ci's
         * "GPU" is the host backend's compute thread (an FFN slower than memcpy) */
        CHECK(p.h2d_bw > 0 && (!strcmp(p.name, "host-ci") || (p.hbm_bw > p.h2d_bw && p.pageable_bw <= p.h2d_bw)));
        CHECK(p.copy_engines >= 1 && p.cpu_cores >= 1);
        CHECK(strlen(p.source) < sizeof p.source);
        /* every figure keeps its line, even when citations are shortened */
        CHECK_STR_CONTAINS(p.source, "gpu_mem_bytes: ");
        CHECK_STR_CONTAINS(p.source, "\nh2d_bw: ");
        CHECK_STR_CONTAINS(p.source, "\npolicy_op_s: 1e-9 (estimate)");
    }
    ms_platform p;
    ms_err err = {{0}};
    CHECK(ms_platform_load("rtx3090-pcie4", &p, &err) == 0);
    CHECK_NEAR(p.h2d_bw, 32e9, 0);
    CHECK_NEAR(p.gpu_mem_bytes, 24.0 * 1024 * 1024 * 1024, 0);
    CHECK_NEAR(p.hbm_bw, 936e9, 0);
    CHECK_NEAR(p.h2d_latency_s, 6e-6, 0);
    CHECK_NEAR(p.policy_op_s, 1e-9, 0);
    CHECK_STR_CONTAINS(p.source, "h2d_bw: 32GB/s (estimate) fMoE");

    CHECK(ms_platform_load("gh200", &p, &err) == 0);
    CHECK_NEAR(p.h2d_bw, 346e9, 0);
    CHECK_STR_CONTAINS(p.source, "h2d_bw: 346GB/s (measured)");
    CHECK(ms_platform_load("h100-pcie5", &p, &err) == 0);
    CHECK_NEAR(p.hbm_bw, 2.0e12, 0);
    CHECK_NEAR(p.gpu_flops, 756e12, 0);
    CHECK_EQ_INT(p.gpus, 0); /* absent: one GPU */
    /* the seeds' testbeds (issue 15): several GPUs, their links, the interconnect, the framework */
    CHECK(ms_platform_load("fmoe-6x3090", &p, &err) == 0);
    CHECK_EQ_INT(p.gpus, 6);
    CHECK_NEAR(p.h2d_bw, 32e9, 0);
    CHECK_NEAR(p.host_ceiling_bw, 204.8e9, 0);
    CHECK_NEAR(p.peer_bw, 56.25e9, 0);
    CHECK(!strcmp(p.framework, "hf-eager"));
    CHECK_STR_CONTAINS(p.source, "\ngpus: 6 (datasheet) seed 001");
    CHECK_STR_CONTAINS(p.source, "\nhost_ceiling_bw: 204.8GB/s (derived)");
    CHECK(ms_platform_load("moeinf-8xa5000", &p, &err) == 0);
    CHECK_EQ_INT(p.gpus, 8);
    CHECK(ms_platform_load("moeinf-6x4v100", &p, &err) == 0);
    CHECK_EQ_INT(p.gpus, 24);
    CHECK_NEAR(p.host_ceiling_bw, 0, 0);
    CHECK(!strcmp(p.framework, "moe-infinity"));
    CHECK(ms_platform_load("hybrimoe-ktransformers", &p, &err) == 0);
    CHECK_EQ_INT(p.gpus, 0);
    CHECK(!strcmp(p.framework, "ktransformers") && !strcmp(p.framework_profile.name, "ktransformers"));
    CHECK(ms_platform_load("a5000-pcie4", &p, &err) == 0); /* no framework: no costs */
    CHECK(!p.framework[0] && p.framework_profile.layer_s == 0 && p.framework_profile.iteration_s == 0);
    ms_framework fw;
    int have = 0;
    CHECK(ms_framework_resolve(NULL, &fw, &have, &err) == 0 && !have);
    CHECK(ms_platform_load("fmoe-6x3090", &p, &err) == 0); /* its framework's costs come with it */
    CHECK_NEAR(p.framework_profile.layer_s, 4e-4, 0);
    CHECK_NEAR(p.framework_profile.iteration_s, 1e-3, 0);
    CHECK(ms_framework_resolve("hf-eager", &fw, &have, &err) == 0 && have);
    CHECK(!strcmp(fw.name, "hf-eager"));
    CHECK_NEAR(fw.layer_s, 4e-4, 0);
    CHECK(ms_framework_resolve("none", &fw, &have, &err) == 0 && have && fw.layer_s == 0 && !strcmp(fw.name, "none"));
    CHECK(ms_framework_resolve("vllm", &fw, &have, &err) == 0 && have && fw.layer_s == 0);
    CHECK(ms_framework_resolve("nope", &fw, &have, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown framework 'nope' (known: deepspeed, fiddler, hf-accelerate, hf-eager, ktransformers, llama-cpp, mixtral-offloading, moe-infinity, vllm)");
}

static void test_explicit_path(void)
{
    char path[4096];
    ms_model m;
    ms_err err = {{0}};
    snprintf(path, sizeof path, "%s/models/olmoe-1b-7b.ini", profile_dir());
    CHECK(ms_model_load(path, &m, &err) == 0);
    CHECK_EQ_INT(m.experts, 64);
    CHECK_EQ_INT(m.top_k, 8);

    snprintf(path, sizeof path, "%s/tiny-copy.ini", tmpdir);
    write_file(path, tiny_model); /* a path may hold any valid name */
    CHECK(ms_model_load(path, &m, &err) == 0);
    CHECK(!strcmp(m.name, "tiny"));
    CHECK_EQ_INT(m.expert_bytes, 49152);

    CHECK(ms_model_load("/nonexistent/x.ini", &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/x.ini");
    CHECK(ms_model_load(tmpdir, &m, &err) == -1); /* a folder, named by path */
    CHECK_STR_CONTAINS(err.msg, "not a regular file");
    CHECK(ms_model_load("a b", &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "invalid model name 'a b'");
    CHECK(ms_model_load("", &m, &err) == -1);
}

static void test_unknown_name(void)
{
    ms_model m;
    ms_platform p;
    ms_err err = {{0}};
    CHECK(ms_model_load("foo", &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown model 'foo' (known: bert-moe-4e, deepseek-v2-lite, deepseek-v3, gpt-oss-120b,");
    CHECK_STR_CONTAINS(err.msg, "switch-base-128, switch-large-128)");
    CHECK(ms_platform_load("rtx5090", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown platform 'rtx5090' (known: a100-80gb-pcie, a100-80gb-sxm, a5000-pcie4,");
    /* a model name is not a platform */
    CHECK(ms_platform_load("mixtral-8x7b", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown platform 'mixtral-8x7b'");
}

/* Writes `text` (malloc'd, freed here) as tmpdir/NAME.ini, loads it by path
 * and expects a one-line error containing the file name and both fragments. */
static void expect_bad_model(const char *name, char *text, const char *frag1, const char *frag2)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.ini", tmpdir, name);
    write_file(path, text);
    free(text);
    ms_model m;
    ms_err err = {{0}};
    int rc = ms_model_load(path, &m, &err);
    CHECK(rc == -1);
    if (rc == -1) {
        CHECK_STR_CONTAINS(err.msg, path);
        CHECK_STR_CONTAINS(err.msg, frag1);
        if (frag2)
            CHECK_STR_CONTAINS(err.msg, frag2);
        CHECK(!strchr(err.msg, '\n'));
    }
}

static void expect_bad_platform(const char *name, char *text, const char *frag1, const char *frag2)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.ini", tmpdir, name);
    write_file(path, text);
    free(text);
    ms_platform p;
    ms_err err = {{0}};
    int rc = ms_platform_load(path, &p, &err);
    CHECK(rc == -1);
    if (rc == -1) {
        CHECK_STR_CONTAINS(err.msg, path);
        CHECK_STR_CONTAINS(err.msg, frag1);
        if (frag2)
            CHECK_STR_CONTAINS(err.msg, frag2);
        CHECK(!strchr(err.msg, '\n'));
    }
}

static void test_bad_models(void)
{
    const char *t = tiny_model;
    expect_bad_model("unknown-key", edit(t, "vocab = 100\n", "vocab = 100\nfoo = 1\n"),
                     "unknown key 'foo' in [model]", NULL);
    expect_bad_model("missing-key", edit(t, "top_k = 2\n", ""), "missing required key 'top_k' in [model]", NULL);
    expect_bad_model("bad-number", edit(t, "hidden = 64\n", "hidden = 6x4\n"), "hidden", "'6x4'");
    expect_bad_model("negative", edit(t, "layers = 4\n", "layers = -4\n"), "layers", "'-4'");
    expect_bad_model("zero-experts", edit(t, "experts = 8\n", "experts = 0\n"), "experts", "'0'");
    expect_bad_model("many-experts", edit(t, "experts = 8\n", "experts = 100000\n"), "[model] experts = '100000'",
                     "must be in [1, 65536]");
    expect_bad_model("topk", edit(t, "top_k = 2\n", "top_k = 9\n"), "top_k = 9 exceeds experts = 8", NULL);
    expect_bad_model("moe-layers", edit(t, "moe_layers = 2\n", "moe_layers = 5\n"), "moe_layers = 5", "layers = 4");
    expect_bad_model("u32-overflow", edit(t, "vocab = 100\n", "vocab = 4294967296\n"), "vocab", "4294967296");
    expect_bad_model("params", edit(t, "expert_params = 24576\n", "expert_params = 24000\n"), "expert_params",
                     "24000");
    expect_bad_model("bytes", edit(t, "expert_bytes = 49152\n", "expert_bytes = 49000\n"), "expert_bytes",
                     "49000");
    expect_bad_model("zero-bytes", edit(t, "expert_bytes = 49152\n", "expert_bytes = 0\n"), "expert_bytes",
                     "'0'");
    expect_bad_model("bf16-bytes", edit(t, "bf16 = 49152\n", "bf16 = 49153\n"), "bf16", "49153");
    expect_bad_model("native-missing", edit(t, "dtype = bf16\n", "dtype = fp32\n"), "fp32",
                     "[bytes_per_expert]");
    expect_bad_model("dtype", edit(t, "dtype = bf16\n", "dtype = int3\n"), "dtype", "'int3'");
    expect_bad_model("duplicate", edit(t, "top_k = 2\n", "top_k = 2\ntop_k = 2\n"), "duplicate key 'top_k'",
                     NULL);
    expect_bad_model("section", edit(t, "[bytes_per_expert]\n", "[bytes_per_expet]\n"),
                     "unknown section [bytes_per_expet]", NULL);
    expect_bad_model("empty-section", edit(t, "[source]\n", "[extra]\n[source]\n"), "unknown section [extra]",
                     NULL);
    expect_bad_model("source-missing", edit(t, "dense = U test figures\n", ""),
                     "missing required key 'dense' in [source]", NULL);
    expect_bad_model("source-status", edit(t, "dense = U test figures\n", "dense = maybe test\n"), "dense",
                     "'maybe'");
    expect_bad_model("source-key", edit(t, "dense = U test figures\n", "dense = U x\nnotes = U x\n"),
                     "unknown key 'notes' in [source]", NULL);
    expect_bad_model("syntax", edit(t, "vocab = 100\n", "vocab 100\n"), "syntax error", ".ini:13: ");
    expect_bad_model("no-section", edit(t, "[model]\n", ""), "key 'name' outside any [section]", NULL);
    char longline[400];
    memset(longline, 'x', sizeof longline);
    memcpy(longline, "description = ", 14);
    memcpy(longline + sizeof longline - 2, "\n", 2);
    expect_bad_model("long-line", edit(t, "description = test model\n", longline), "longer than", ".ini:4: ");
}

static void test_bad_platforms(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/platforms/rtx3090-pcie4.ini", profile_dir());
    char *base = read_file(path);
    expect_bad_platform("negative-bw", edit(base, "h2d_bw = 32GB/s\n", "h2d_bw = -5GB/s\n"), "h2d_bw",
                        "'-5GB/s'");
    expect_bad_platform("zero-bw", edit(base, "hbm_bw = 936GB/s\n", "hbm_bw = 0\n"), "hbm_bw",
                        "'0': must be in [0.1, 100000] GB/s (the plausible range, docs/profile-files.md)");
    /* issue 32: figures no machine has are refused with file, key and value (they were accepted) */
    expect_bad_platform("one-byte-per-s", edit(base, "h2d_bw = 32GB/s\n", "h2d_bw = 1B/s\n"),
                        "[link] h2d_bw = '1B/s'", "must be in [0.1, 10000] GB/s");
    expect_bad_platform("tiny-flops", edit(base, "gpu_flops = 71e12\n", "gpu_flops = 1e-30\n"),
                        "[gpu] gpu_flops = '1e-30'", "must be in [1e+08, 1e+17]");
    expect_bad_platform("huge-flops", edit(base, "gpu_flops = 71e12\n", "gpu_flops = 1e18\n"), "gpu_flops",
                        "'1e18'");
    expect_bad_platform("slow-launch", edit(base, "launch_s = 5e-6\n", "launch_s = 0.5\n"), "[gpu] launch_s = '0.5'",
                        "must be in [0, 0.1]");
    expect_bad_platform("tiny-gpu-mem", edit(base, "gpu_mem_bytes = 24GiB\n", "gpu_mem_bytes = 1MiB\n"),
                        "gpu_mem_bytes = '1MiB'", "must be in [1e+08, 1e+15]");
    expect_bad_platform("slow-ssd", edit(base, "ssd_bw = 7GB/s\n", "ssd_bw = 1MB/s\n"), "ssd_bw = '1MB/s'",
                        "must be in [0.01, 1000] GB/s");
    expect_bad_platform("policy-op", edit(base, "policy_op_s = 1e-9\n", "policy_op_s = 0.01\n"), "policy_op_s",
                        "'0.01'");
    expect_bad_platform("bad-unit", edit(base, "dram_bw = 150GB/s\n", "dram_bw = 150Gb/s\n"), "dram_bw",
                        "'150Gb/s'");
    expect_bad_platform("negative-latency", edit(base, "h2d_latency_s = 6e-6\n", "h2d_latency_s = -1e-6\n"),
                        "h2d_latency_s", "'-1e-6'");
    expect_bad_platform("engines", edit(base, "copy_engines = 2\n", "copy_engines = 0\n"), "copy_engines", "'0'");
    expect_bad_platform("unknown-key", edit(base, "[ssd]\n", "[ssd]\nssd_iops = 1e6\n"),
                        "unknown key 'ssd_iops' in [ssd]", NULL);
    expect_bad_platform("misplaced-key", edit(base, "policy_op_s = 1e-9\n", "[gpu]\npolicy_op_s = 1e-9\n"),
                        "unknown key 'policy_op_s' in [gpu]", NULL);
    expect_bad_platform("missing-key", edit(base, "pageable_bw = 16GB/s\n", ""),
                        "missing required key 'pageable_bw' in [link]", NULL);
    expect_bad_platform("missing-source", edit(base, "ssd_latency_s = estimate ~80 us NVMe read latency\n", ""),
                        "missing required key 'ssd_latency_s' in [source]", NULL);
    expect_bad_platform("source-status", edit(base, "hbm_bw = datasheet", "hbm_bw = V2"), "hbm_bw", "'V2'");
    /* [contention] is optional, but a figure given must be cited and in range, and a citation needs its figure */
    expect_bad_platform("contention-uncited", edit(base, "[source]\n", "[contention]\ncopy_contention = 0.4\n[source]\n"),
                        "missing required key 'copy_contention' in [source]", NULL);
    expect_bad_platform("contention-negative",
                        edit(base, "[source]\n", "[contention]\ncompute_contention = -0.1\n[source]\n"),
                        "compute_contention", "'-0.1'");
    expect_bad_platform("contention-huge", edit(base, "[source]\n", "[contention]\ncopy_contention = 101\n[source]\n"),
                        "copy_contention", "'101'");
    expect_bad_platform("contention-cited-only",
                        edit(base, "[source]\n", "[source]\ncopy_contention = measured x\n"),
                        "[source] copy_contention cites a figure the profile does not give", NULL);
    free(base);
}

static void test_contention(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/platforms/rtx3090-pcie4.ini", profile_dir());
    char *base = read_file(path);
    ms_platform p;
    ms_err err;
    CHECK(ms_platform_load(path, &p, &err) == 0);
    CHECK(p.copy_contention == 0 && p.compute_contention == 0);
    CHECK(!strstr(p.source, "contention"));
    char *text = edit(base, "[source]\n",
                      "[contention]\ncopy_contention = 0.4\ncompute_contention = 0.25\n[source]\n"
                      "copy_contention = measured test\ncompute_contention = estimate test\n");
    snprintf(path, sizeof path, "%s/contended.ini", tmpdir);
    write_file(path, text);
    free(text);
    free(base);
    CHECK(ms_platform_load(path, &p, &err) == 0);
    CHECK(p.copy_contention == 0.4 && p.compute_contention == 0.25);
    CHECK_STR_CONTAINS(p.source, "copy_contention: 0.4 (measured) test");
    CHECK_STR_CONTAINS(p.source, "compute_contention: 0.25 (estimate) test");
}

static void test_env_override(void)
{
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/profdir", tmpdir);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/models", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/models/tiny.ini", dir);
    write_file(path, tiny_model);
    snprintf(path, sizeof path, "%s/models/renamed.ini", dir);
    write_file(path, tiny_model);
    snprintf(path, sizeof path, "%s/models/.hidden.ini", dir);
    write_file(path, tiny_model);
    snprintf(path, sizeof path, "%s/models/notes.txt", dir);
    write_file(path, "not a profile\n");

    setenv("MOESIM_PROFILE_DIR", dir, 1);
    CHECK(!strcmp(profile_dir(), dir));
    ms_model m;
    ms_err err = {{0}};
    CHECK(ms_model_load("tiny", &m, &err) == 0);
    CHECK_EQ_INT(m.hidden, 64);
    CHECK(ms_model_load("mixtral-8x7b", &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown model 'mixtral-8x7b' (known: renamed, tiny)");
    /* looked up by name, the name key must match the file */
    CHECK(ms_model_load("renamed", &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "renamed.ini");
    CHECK_STR_CONTAINS(err.msg, "name = 'tiny'");
    char **names;
    int n;
    CHECK(ms_profile_list("models", &names, &n, &err) == 0);
    CHECK_EQ_INT(n, 2);
    ms_profile_list_free(names, n);
    /* no platforms/ folder there */
    CHECK(ms_profile_list("platforms", &names, &n, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "platforms");
    ms_platform p;
    CHECK(ms_platform_load("h200", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown platform 'h200'");

    unsetenv("MOESIM_PROFILE_DIR");
    char data[4096], expect[4200];
    CHECK(ms_path_data(data, sizeof data, &err) == 0);
    snprintf(expect, sizeof expect, "%s/profiles", data);
    CHECK(!strcmp(profile_dir(), expect));
    CHECK(ms_model_load("mixtral-8x7b", &m, &err) == 0);
}

int main(void)
{
    unsetenv("MOESIM_PROFILE_DIR");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ms_test_profile_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_listing();
    test_shipped_models();
    test_model_figures();
    test_shipped_platforms();
    test_explicit_path();
    test_unknown_name();
    test_bad_models();
    test_bad_platforms();
    test_contention();
    test_env_override();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    CHECK_DONE();
}
