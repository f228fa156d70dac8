/* Exact timings of bits per weight (run keys expert_bits, dense_bits) and of
 * the framework keys expert_s, copies_per_expert, dequant_bw, copies and
 * host_memory on a hand-computable trace, and the one-line errors of their
 * bad values.
 *
 * Platform (fixtures.h ms_fixture_exact_platform): copy = 0.5 ms latency +
 * bytes / 1 GB/s; GPU ops = bytes / 10 GB/s (FLOPs negligible); no launch
 * overheads.  Trace: one layer, J = 4, K = 1, experts of 1 MB, dense work
 * 2 MB; one request: prefill on expert 0, one decode on expert 1; LRU of 2
 * experts, no prefetch: every activation is an on-demand miss.  Without a
 * model profile a weight is 2 bytes (params = bytes / 2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "sim/engine/exec.h"
#include "sim/engine/runkeys.h"
#include "traces/format/trace.h"

#define TRACE "fwcost.h5"
#define EVENTS "fwcost.csv"

static void write_trace(void)
{
    ms_trace_meta m = ms_fixture_hand_meta("test_framework_costs", 1, 4, 1, 1000000, 2000000);
    ms_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 1;
    r.output_len = 1;
    r.n_iters = 2;
    r.n_rows = 2;
    ms_request_alloc(&r, &m);
    for (uint32_t i = 0; i < 2; i++) {
        r.iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
        r.topk_ids[ms_topk_index(&m, i, 0)] = (int)i;
        r.topk_w[ms_topk_index(&m, i, 0)] = 1.0f;
    }
    ms_fixture_write_requests(TRACE, &m, &r, 1);
    ms_request_free(&r);
    ms_trace_meta_free(&m);
}

static ms_run_config config(const ms_platform *p, const ms_framework *fw)
{
    return (ms_run_config){.trace_path = TRACE, .platform = p, .prefetch_spec = "none", .cache_spec = "lru",
                           .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = 2, .distance = 1,
                           .max_batch = 1, .events_path = EVENTS, .framework = fw};
}

static ms_metrics run(const ms_run_config *cfg)
{
    ms_metrics m;
    ms_err err;
    if (ms_run(cfg, &m, &err)) {
        fprintf(stderr, "ms_run: %s\n", err.msg);
        exit(1);
    }
    return m;
}

/* Defaults: the framework "none" and no framework time the same as before. */
static void test_defaults(const ms_platform *p)
{
    ms_framework none, zeroed; /* zeroed: a struct not read from a file counts one call per copy */
    ms_framework_defaults(&none, "none");
    memset(&zeroed, 0, sizeof zeroed);
    for (int i = 0; i < 3; i++) {
        ms_run_config cfg = config(p, i == 1 ? &none : i == 2 ? &zeroed : NULL);
        ms_metrics m = run(&cfg);
        /* dense 0-0.2, copy 0.2-1.7, compute 1.7-1.8; dense 1.8-2.0, copy 2.0-3.5, compute 3.5-3.6 */
        CHECK_EVENT(EVENTS, "copy_demand", 0, 0, 0, 0.2, 1.7);
        CHECK_EVENT(EVENTS, "compute_gpu", 0, 1, 0, 3.5, 3.6);
        CHECK_NEAR(m.makespan_s, 3.6e-3, 1e-12);
        CHECK_NEAR(m.pcie_bytes, 2e6, 0);
        ms_metrics_free(&m);
    }
}

/* expert_bits 4: 5e5 params x 4 / 8 = 2.5e5 B (copy 0.75 ms, compute 0.025 ms);
 * dense_bits 8: 1e6 params x 1 B = 1e6 B (dense 0.1 ms). */
static void test_bits(const ms_platform *p)
{
    ms_run_config cfg = config(p, NULL);
    cfg.expert_bits = 4;
    cfg.dense_bits = 8;
    ms_metrics m = run(&cfg);
    /* dense 0-0.1, copy 0.1-0.85, compute 0.85-0.875; dense -0.975, copy -1.725, compute -1.75 */
    CHECK_EVENT(EVENTS, "copy_demand", 0, 0, 0, 0.1, 0.85);
    CHECK_EVENT(EVENTS, "compute_gpu", 0, 0, 0, 0.85, 0.875);
    CHECK_EVENT(EVENTS, "copy_demand", 0, 1, 0, 0.975, 1.725);
    CHECK_NEAR(m.makespan_s, 1.75e-3, 1e-12);
    CHECK_NEAR(m.pcie_bytes, 5e5, 1e-6);
    CHECK_NEAR(m.gpu_cache_capacity_bytes, 5e5, 1e-6);
    ms_metrics_free(&m);
}

/* copies_per_expert 3, expert_s 0.2 ms, dequant_bw 1 GB/s on 4-bit experts:
 * copy 3 x 0.5 + 0.25 = 1.75 ms; expert 0.2 + 0.025 + 2.5e5 / 1e9 = 0.475 ms;
 * dense at 16 bits: no dequantisation (0.2 ms). */
static void test_calls_dispatch_dequant(const ms_platform *p)
{
    ms_framework fw;
    ms_framework_defaults(&fw, "eager");
    fw.copies_per_expert = 3;
    fw.expert_s = 0.2e-3;
    fw.dequant_bw = 1e9;
    ms_run_config cfg = config(p, &fw);
    cfg.expert_bits = 4;
    ms_metrics m = run(&cfg);
    /* dense 0-0.2, copy 0.2-1.95, compute 1.95-2.425; dense -2.625, copy -4.375, compute -4.85 */
    CHECK_EVENT(EVENTS, "copy_demand", 0, 0, 0, 0.2, 1.95);
    CHECK_EVENT(EVENTS, "compute_gpu", 0, 0, 0, 1.95, 2.425);
    CHECK_EVENT(EVENTS, "copy_demand", 0, 1, 0, 2.625, 4.375);
    CHECK_EVENT(EVENTS, "compute_gpu", 0, 1, 0, 4.375, 4.85);
    CHECK_NEAR(m.makespan_s, 4.85e-3, 1e-12);
    ms_metrics_free(&m);
    /* dense_bits 8 with the same rate: dense 0.1 + 1e6 / 1e9 = 1.1 ms */
    cfg.dense_bits = 8;
    m = run(&cfg);
    CHECK_EVENT(EVENTS, "copy_demand", 0, 0, 0, 1.1, 2.85);
    ms_metrics_free(&m);
    /* copies_per_expert 0 (the file's) takes the model's expert_matrices: none here */
    fw.copies_per_expert = MS_COPIES_PER_MATRIX;
    ms_metrics bad;
    ms_err err;
    CHECK(ms_run(&cfg, &bad, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "copies_per_expert = 0");
}

/* host_memory pageable: copies at the platform's pageable_bw (0.5 GB/s):
 * 0.5 + 2 = 2.5 ms. */
static void test_pageable(const ms_platform *p0)
{
    ms_platform p = *p0;
    p.pageable_bw = 0.5e9;
    ms_framework fw;
    ms_framework_defaults(&fw, "pageable");
    snprintf(fw.host_memory, sizeof fw.host_memory, "pageable");
    ms_run_config cfg = config(&p, &fw);
    ms_metrics m = run(&cfg);
    CHECK_EVENT(EVENTS, "copy_demand", 0, 0, 0, 0.2, 2.7);
    CHECK_NEAR(m.makespan_s, 2 * 2.8e-3, 1e-12);
    ms_metrics_free(&m);
}

/* writeback: a copy is a swap, the victim's bytes back first at d2h_bw
 * (0.25 GB/s, latency 0.1 ms): 0.1 + 4 + 0.5 + 1 = 5.6 ms a copy. */
static void test_writeback(const ms_platform *p0)
{
    ms_platform p = *p0;
    p.d2h_bw = 0.25e9;
    p.d2h_latency_s = 1e-4;
    ms_framework fw;
    ms_framework_defaults(&fw, "swap");
    fw.writeback = 1;
    ms_run_config cfg = config(&p, &fw);
    ms_metrics m = run(&cfg);
    CHECK_EVENT(EVENTS, "copy_demand", 0, 0, 0, 0.2, 5.8);
    CHECK_NEAR(m.makespan_s, 2 * 5.9e-3, 1e-12);
    ms_metrics_free(&m);
}

/* surplus = stream: one layer, J = 4, K = 1, an LRU of one expert.  The
 * prefill's two token rows route experts 0 and 1; the decodes 0, then 1.
 * The prefill takes the slot for 0 and finds no victim for 1 (0 is the
 * running step's): with surplus = fail the run fails; with stream, 1 goes
 * through a transient buffer and is not kept: decode 0 hits, decode 1
 * misses: 1 hit, 3 misses, 3 demand copies. */
static void test_surplus_stream(const ms_platform *p)
{
    const int ids[] = {0, 1, 0, 1}; /* token rows: the prefill's two, then one per decode */
    ms_fixture_write_prefill_rows("fwsurplus.h5", "test_framework_costs", 1, 4, 1, 2, 3, ids);
    ms_framework fw;
    ms_framework_defaults(&fw, "stream");
    ms_run_config cfg = {.trace_path = "fwsurplus.h5", .platform = p, .prefetch_spec = "none", .cache_spec = "lru",
                         .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = 1, .distance = 1,
                         .max_batch = 1, .framework = &fw};
    ms_metrics m;
    ms_err err;
    CHECK(ms_run(&cfg, &m, &err) != 0);
    CHECK(strstr(err.msg, "found no victim") != NULL);
    snprintf(fw.surplus, sizeof fw.surplus, "stream");
    m = run(&cfg);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.demand_copies, 3);
    ms_metrics_free(&m);
    /* lru-slots refuses slots below K unless the framework streams the rest */
    int two[] = {0, 1, 2, 3};
    ms_fixture_write_rows("fwsurplus2.h5", "test_framework_costs", 1, 4, 2, 2, two);
    cfg.trace_path = "fwsurplus2.h5";
    cfg.cache_spec = "lru-slots:slots=1";
    cfg.cap_value = 2;
    snprintf(fw.surplus, sizeof fw.surplus, "fail");
    CHECK(ms_run(&cfg, &m, &err) != 0);
    CHECK(strstr(err.msg, "slots=1 is below") && strstr(err.msg, "surplus = stream"));
    snprintf(fw.surplus, sizeof fw.surplus, "stream");
    m = run(&cfg);
    CHECK_EQ_INT(m.total.misses, 4);
    ms_metrics_free(&m);
}

/* copies sync on the executor: a copy waits for the compute stream's previous
 * op and the compute stream waits for the copy. */
static void test_sync_executor(const ms_platform *p)
{
    for (int sync = 0; sync < 2; sync++) {
        ms_framework fw;
        ms_framework_defaults(&fw, "x");
        if (sync)
            snprintf(fw.copies, sizeof fw.copies, "sync");
        ms_sim_timing t = {.platform = p, .framework = &fw, .copy_calls = 1};
        ms_exec x;
        ms_err err;
        CHECK(ms_exec_sim_create_timed(&t, 1, 4, &x, &err) == 0);
        CHECK(ms_exec_begin(&x, &err) == 0);
        ms_op dense = {.kind = MS_OP_DENSE, .expert = UINT32_MAX, .tokens = 1, .bytes = 2e6, .params = 1e6,
                       .after = MS_NO_EVENT};
        ms_op copy = {.kind = MS_OP_COPY, .expert = 1, .bytes = 1e6, .after = MS_NO_EVENT};
        double s0, e0, s1, e1, s2, e2;
        CHECK(ms_exec_run(&x, &dense, &s0, &e0, &err) == 0);
        CHECK(ms_exec_run(&x, &copy, &s1, &e1, &err) == 0);
        CHECK(ms_exec_run(&x, &dense, &s2, &e2, &err) == 0);
        /* overlapped: copy 0-1.5, dense 0.2-0.4; sync: copy 0.2-1.7, dense 1.7-1.9 */
        CHECK_NEAR(s1, sync ? 0.2e-3 : 0, 1e-15);
        CHECK_NEAR(e1, sync ? 1.7e-3 : 1.5e-3, 1e-15);
        CHECK_NEAR(s2, sync ? 1.7e-3 : 0.2e-3, 1e-15);
        CHECK_NEAR(e2, sync ? 1.9e-3 : 0.4e-3, 1e-15);
        ms_exec_destroy(&x);
    }
}

/* A framework file with one bad line: the error names file, key and value. */
static void check_bad_framework(const char *line, const char *want)
{
    const char *path = "fwcost_bad.ini";
    FILE *f = fopen(path, "w");
    fprintf(f, "[framework]\nname = bad\ndescription = d\nlayer_s = 0\niteration_s = 0\n%s\n[source]\n"
               "layer_s = estimate x\niteration_s = estimate x\n",
            line);
    fclose(f);
    ms_framework fw;
    ms_err err;
    CHECK(ms_framework_load(path, &fw, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK(!strchr(err.msg, '\n'));
}

static void test_bad_framework_values(void)
{
    check_bad_framework("copies = maybe", "copies = maybe");
    check_bad_framework("host_memory = locked", "host_memory = locked");
    check_bad_framework("expert_s = -1", "expert_s");
    check_bad_framework("expert_s = 1", "expert_s");
    check_bad_framework("copies_per_expert = 65", "copies_per_expert");
    check_bad_framework("copies_per_expert = 1.5", "copies_per_expert");
    check_bad_framework("dequant_bw = -5", "dequant_bw");
    check_bad_framework("cpu_dequant_bw = fast", "cpu_dequant_bw");
    check_bad_framework("reserve_bytes = -1", "reserve_bytes");
    check_bad_framework("writeback = 2", "writeback");
    check_bad_framework("surplus = maybe", "surplus = maybe");
    /* and a good file reads every key */
    FILE *f = fopen("fwcost_good.ini", "w");
    fprintf(f, "[framework]\nname = good\ndescription = d\nlayer_s = 0\niteration_s = 0\nexpert_s = 1e-4\n"
               "copies_per_expert = 0\ndequant_bw = 100GB/s\ncpu_dequant_bw = 2GB/s\ncopies = sync\n"
               "host_memory = pageable\nreserve_bytes = 1GiB\n[source]\nlayer_s = estimate x\n"
               "iteration_s = estimate x\nexpert_s = estimate x\ncopies_per_expert = estimate x\n"
               "dequant_bw = estimate x\ncpu_dequant_bw = estimate x\nreserve_bytes = estimate x\n");
    fclose(f);
    ms_framework fw;
    ms_err err;
    int rc = ms_framework_load("fwcost_good.ini", &fw, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    CHECK(rc == 0);
    CHECK_NEAR(fw.expert_s, 1e-4, 0);
    CHECK(fw.copies_per_expert == MS_COPIES_PER_MATRIX);
    CHECK_NEAR(fw.dequant_bw, 1e11, 0);
    CHECK_NEAR(fw.cpu_dequant_bw, 2e9, 0);
    CHECK(ms_framework_sync_copies(&fw) && ms_framework_pageable(&fw));
    CHECK_NEAR(fw.reserve_bytes, 1073741824.0, 0);
    /* the shipped hf-eager profile keeps the defaults */
    CHECK(ms_framework_load("hf-eager", &fw, &err) == 0);
    CHECK_EQ_INT(fw.copies_per_expert, 1);
    CHECK(!ms_framework_sync_copies(&fw) && !ms_framework_pageable(&fw) && fw.expert_s == 0 && fw.dequant_bw == 0);
}

/* An encoder-decoder model: with encoder_moe_layers = 1 of 2, the decode
 * step runs layer 1 only.  Prefill: (0,0) then (1,1); decode: (0,2), (1,3). */
static void test_encoder_layers(const ms_platform *p)
{
    ms_trace_meta meta = ms_fixture_hand_meta("test_framework_costs", 2, 4, 1, 1000000, 2000000);
    ms_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 1;
    r.output_len = 1;
    r.n_iters = 2;
    r.n_rows = 2;
    ms_request_alloc(&r, &meta);
    for (uint32_t i = 0; i < 2; i++) {
        r.iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
        for (uint32_t l = 0; l < 2; l++) {
            r.topk_ids[ms_topk_index(&meta, i, l)] = (int)(2 * i + l);
            r.topk_w[ms_topk_index(&meta, i, l)] = 1.0f;
        }
    }
    ms_fixture_write_requests("fwcost_enc.h5", &meta, &r, 1);
    ms_request_free(&r);
    ms_trace_meta_free(&meta);
    ms_model model;
    memset(&model, 0, sizeof model);
    snprintf(model.name, sizeof model.name, "encdec");
    snprintf(model.dtype, sizeof model.dtype, "bf16");
    model.moe_layers = 2;
    model.experts = 4;
    model.top_k = 1;
    model.hidden = 8;
    model.expert_matrices = 2;
    model.expert_params = 500000;
    model.dense_params = 1000000;
    for (uint32_t enc = 0; enc < 2; enc++) {
        model.encoder_moe_layers = enc;
        ms_run_config cfg = config(p, NULL);
        cfg.trace_path = "fwcost_enc.h5";
        cfg.model = &model;
        ms_metrics m = run(&cfg);
        /* prefill: both layers, 0-3.6 ms; decode from 3.6: layer 1 only (dense 3.6-3.8, copy 3.8-5.3,
         * compute 5.3-5.4), or both layers (ending 7.2) */
        CHECK_EQ_INT(m.phase[MS_PHASE_DECODE].layer_steps, enc ? 1 : 2);
        CHECK_EQ_INT(m.total.misses, enc ? 3 : 4);
        CHECK_EVENT(EVENTS, "copy_demand", 1, 3, 0, enc ? 3.8 : 5.6, enc ? 5.3 : 7.1);
        CHECK_NEAR(m.makespan_s, enc ? 5.4e-3 : 7.2e-3, 1e-12);
        ms_metrics_free(&m);
    }
}

/* The shipped encoder-decoder profiles set it; a value that leaves no decoder
 * layer is one line naming the key and value. */
static void test_encoder_profiles(void)
{
    ms_model m;
    ms_err err;
    static const struct {
        const char *name;
        uint32_t enc;
    } shipped[] = {{"switch-base-128", 6}, {"switch-large-128", 12}, {"nllb-moe-128", 6}, {"mixtral-8x7b", 0}};
    for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
        CHECK(ms_model_load(shipped[i].name, &m, &err) == 0);
        CHECK_EQ_INT(m.encoder_moe_layers, shipped[i].enc);
    }
    ms_profile_set set = {"encoder_moe_layers", "12", NULL};
    CHECK(ms_model_load_set("switch-base-128", &set, 1, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "encoder_moe_layers = 12");
    set.value = "-1";
    CHECK(ms_model_load_set("switch-base-128", &set, 1, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "encoder_moe_layers");
}

/* The run keys: range and messages. */
static void test_bits_keys(void)
{
    ms_run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char why[128];
    double x;
    int id = ms_runkey_find_flag("--expert-bits");
    CHECK(id == MS_RK_EXPERT_BITS && ms_runkey_find("dense_bits") == MS_RK_DENSE_BITS);
    CHECK(ms_runkey_apply(&cfg, id, "2.5", &x, why, sizeof why) == 0 && cfg.expert_bits == 2.5);
    CHECK(ms_runkey_apply(&cfg, MS_RK_DENSE_BITS, "64", &x, why, sizeof why) == 0 && cfg.dense_bits == 64);
    CHECK(ms_runkey_apply(&cfg, id, "0", &x, why, sizeof why) == -1);
    CHECK_STR_CONTAINS(why, "expected a positive number");
    CHECK(ms_runkey_apply(&cfg, id, "65", &x, why, sizeof why) == -1);
    CHECK_STR_CONTAINS(why, "up to 64");
    CHECK(ms_runkey_apply(&cfg, MS_RK_DENSE_BITS, "four", &x, why, sizeof why) == -1);
    CHECK_STR_CONTAINS(why, "expected a number");
}

int main(void)
{
    ms_platform p = ms_fixture_exact_platform();
    write_trace();
    test_defaults(&p);
    test_bits(&p);
    test_calls_dispatch_dequant(&p);
    test_pageable(&p);
    test_writeback(&p);
    test_surplus_stream(&p);
    test_sync_executor(&p);
    test_bad_framework_values();
    test_bits_keys();
    test_encoder_layers(&p);
    test_encoder_profiles();
    CHECK_DONE();
}
