/* The papers' hit definitions (docs/metrics.md) on a hand-built trace, every
 * count worked out by hand from the timing model.
 *
 * Platform (tests/unit/fixtures.h): one copy = 0.5 ms latency + 1 MB / 1
 * GB/s = 1.5 ms; expert compute 0.1 ms; dense work 14.5 MB / 10 GB/s =
 * 1.45 ms.  One layer, K = 2 of J = 4, cache 4 experts, LRU, prefetch
 * oracle at distance 1 (at each iteration's start it asks for that
 * iteration's layer-0 experts).
 *
 * Iteration 0 (prefill) routes experts 0 and 1:
 *   t 0: the oracle asks for 0 and 1; link: 0 copies 0 -> 1.5, 1 waits.
 *   dense 0 -> 1.45; gate 1.45: 0 in flight (late), 1 still queued (a miss,
 *   queued at the gate); 1 on demand 1.5 -> 3.0.  GPU: 0 at 1.5 (it waited
 *   from 1.45: not in time) -> 1.6, 1 3.0 -> 3.1.
 * Iteration 1 (decode) at 3.1 routes experts 0 and 2:
 *   the oracle asks for 0 (cached: asked, nothing queued) and 2: 2 copies
 *   3.1 -> 4.6.  dense 3.1 -> 4.55; gate 4.55: 0 ready (a hit a request
 *   covered), 2 in flight (late).  GPU: 0 4.55 -> 4.65, then 2 at 4.65:
 *   its copy ended at 4.6, so the GPU did not wait (late, in time).
 * Totals over 4 activations: hits 1, late 2 (1 in time), misses 1 (1
 * queued), covered 1:
 *   resident 1/4, in_time 2/4, cached 3/4, issued 4/4, recall 1/4. */
#include <stdio.h>
#include <stdlib.h>

#include <cJSON.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "sim/engine/report.h"
#include "traces/format/trace.h"

static void write_trace(const char *path)
{
    const int routing[2][2] = {{0, 1}, {0, 2}};
    ms_trace_meta m = ms_fixture_hand_meta("test_hit_definitions", 1, 4, 2, 1000000, 14500000);
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    ms_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 1;
    r.output_len = 1;
    r.n_iters = 2;
    r.n_rows = 2;
    ms_request_alloc(&r, &m);
    for (uint32_t i = 0; i < 2; i++) {
        r.iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
        for (uint32_t k = 0; k < 2; k++) {
            r.topk_ids[ms_topk_index(&m, i, 0) + k] = routing[i][k];
            r.topk_w[ms_topk_index(&m, i, 0) + k] = 0.5f;
        }
    }
    ms_fixture_writer_add(w, &r);
    ms_fixture_writer_close(w);
    ms_request_free(&r);
    ms_trace_meta_free(&m);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

int main(void)
{
    write_trace("hitdef.h5");
    ms_platform p = ms_fixture_exact_platform();
    ms_run_config cfg = {.trace_path = "hitdef.h5", .platform = &p, .prefetch_spec = "oracle", .cache_spec = "lru",
                         .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = 4, .distance = 1,
                         .max_batch = 1, .events_path = "hitdef.csv"};
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) {
        fprintf(stderr, "ms_run: %s\n", err.msg);
        return 1;
    }
    CHECK_EVENT("hitdef.csv", "copy_prefetch", 0, 0, 0, 0.0, 1.5);
    CHECK_EVENT("hitdef.csv", "copy_demand", 0, 1, 0, 1.5, 3.0);
    CHECK_EVENT("hitdef.csv", "copy_prefetch", 0, 2, 0, 3.1, 4.6);
    CHECK_EVENT("hitdef.csv", "compute_gpu", 0, 2, 0, 4.65, 4.75);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.late, 2);
    CHECK_EQ_INT(m.total.misses, 1);
    CHECK_EQ_INT(m.late_in_time, 1);
    CHECK_EQ_INT(m.late_in_time_phase[MS_PHASE_DECODE], 1);
    CHECK_EQ_INT(m.queued_at_gate, 1);
    CHECK_EQ_INT(m.queued_at_gate_phase[MS_PHASE_PREFILL], 1);
    CHECK_EQ_INT(m.prefetch_covered, 1);
    cJSON *j = ms_report_metrics(&m);
    CHECK_NEAR(num(j, "hit_rate"), 0.25, 0); /* the old name, the old value */
    CHECK_NEAR(num(j, "hit_rate_resident"), 0.25, 0);
    CHECK_NEAR(num(j, "hit_rate_in_time"), 0.5, 0);
    CHECK_NEAR(num(j, "hit_rate_cached"), 0.75, 0);
    CHECK_NEAR(num(j, "hit_rate_issued"), 1.0, 0);
    CHECK_NEAR(num(j, "prefetch_recall_moeinf"), 0.25, 0);
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(j, "hit_definitions_by_phase");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(ph, "prefill"), *dec = cJSON_GetObjectItemCaseSensitive(ph, "decode");
    CHECK_NEAR(num(pre, "hit_rate_resident"), 0, 0);
    CHECK_NEAR(num(pre, "hit_rate_cached"), 0.5, 0);
    CHECK_NEAR(num(pre, "hit_rate_issued"), 1.0, 0);
    CHECK_NEAR(num(dec, "hit_rate_resident"), 0.5, 0);
    CHECK_NEAR(num(dec, "hit_rate_in_time"), 1.0, 0);
    CHECK_NEAR(num(dec, "prefetch_recall_moeinf"), 0.5, 0);
    cJSON_Delete(j);
    /* the same from C (what `moesim claims` reads) */
    CHECK_NEAR(ms_metrics_hit_def(&m, MS_HIT_IN_TIME, -1), 0.5, 0);
    CHECK_NEAR(ms_metrics_hit_def(&m, MS_HIT_ISSUED, MS_PHASE_PREFILL), 1.0, 0);
    CHECK(!strcmp(ms_hit_def_names[MS_HIT_RECALL_MOEINF], "prefetch_recall_moeinf"));
    ms_metrics_free(&m);
    CHECK_DONE();
}
