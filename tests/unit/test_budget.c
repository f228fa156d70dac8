/* The GPU memory budget of the expert cache (sim/engine/budget.h): every
 * term by hand, and `ms_run` refusing a cache the budget does not hold. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/budget.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

static void test_terms(void)
{
    ms_platform p = ms_fixture_exact_platform();
    p.gpu_mem_bytes = 10e9;
    ms_model m;
    memset(&m, 0, sizeof m);
    m.vocab = 1000;
    m.hidden = 1000;
    m.layers = 4;
    ms_framework fw;
    ms_framework_defaults(&fw, "f");
    fw.reserve_bytes = 0.5e9;
    ms_budget_in in = {.platform = &p, .model = &m, .framework = &fw, .dense_bytes = 1e9, .batch = 2,
                       .context_tokens = 100};
    ms_budget b;
    ms_budget_compute(&in, &b);
    /* embeddings 2 x 1000 x 1000 x 2 = 4e6; KV estimate 2 x 4 x 1000 x 2 = 16000 B/token x 2 x 100 = 3.2e6 */
    CHECK_NEAR(b.embed, 4e6, 0);
    CHECK_NEAR(b.kv, 3.2e6, 0);
    CHECK_NEAR(b.reserve, 0.5e9, 0);
    CHECK_NEAR(b.expert_cache, 10e9 - 1e9 - 4e6 - 3.2e6 - 0.5e9, 1e-3);
    CHECK_STR_CONTAINS(b.assumed, "estimated 2 x layers x hidden x 2 B");
    CHECK(!strchr(b.assumed, '\n'));
    m.kv_bytes_per_token = 1000; /* the model's figure */
    ms_budget_compute(&in, &b);
    CHECK_NEAR(b.kv, 2e5, 0);
    CHECK(!strstr(b.assumed, "estimated"));
    in.model = NULL;
    in.framework = NULL;
    ms_budget_compute(&in, &b);
    CHECK_NEAR(b.expert_cache, 9e9, 0);
    CHECK_STR_CONTAINS(b.assumed, "no model profile");
}

/* One layer of 1 MB experts and 2 MB dense work; GPU memory 3.5 MB: 1.5 MB
 * for experts: one expert fits, two do not. */
static void test_run_refuses(void)
{
    ms_trace_meta meta = ms_fixture_hand_meta("test_budget", 1, 4, 1, 1000000, 2000000);
    ms_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 1;
    r.n_iters = 1;
    r.n_rows = 1;
    ms_request_alloc(&r, &meta);
    r.iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, 1};
    r.topk_ids[ms_topk_index(&meta, 0, 0)] = 0;
    r.topk_w[ms_topk_index(&meta, 0, 0)] = 1.0f;
    ms_fixture_write_requests("budget.h5", &meta, &r, 1);
    ms_request_free(&r);
    ms_trace_meta_free(&meta);
    ms_platform p = ms_fixture_exact_platform();
    p.gpu_mem_bytes = 3.5e6;
    ms_run_config cfg = {.trace_path = "budget.h5", .platform = &p, .prefetch_spec = "none", .cache_spec = "lru",
                         .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = 1, .distance = 1,
                         .max_batch = 1};
    ms_metrics m;
    ms_err err;
    CHECK(ms_run(&cfg, &m, &err) == 0);
    ms_metrics_free(&m);
    cfg.cap_value = 2;
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "GPU expert cache of 2000000 bytes exceeds test's GPU memory of 3500000 bytes");
    CHECK_STR_CONTAINS(err.msg, "dense 0.002 GB");
    CHECK(!strchr(err.msg, '\n'));
}

int main(void)
{
    test_terms();
    test_run_refuses();
    CHECK_DONE();
}
