/* Exact timings on hand-built traces: every hit, miss, copy start and finish
 * below was computed by hand from the timing model.
 *
 * Platform: one copy = 0.5 ms latency + bytes / 1 GB/s, so a 1 MB expert
 * takes 1.5 ms; expert compute = max(1e6 B / 10 GB/s, tiny) = 0.1 ms; dense
 * work = 2e6 B / 10 GB/s = 0.2 ms; no launch overheads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

#define MS 1e-3
#define TOL 1e-12

static ms_platform test_platform(void) { return ms_fixture_exact_platform(); }

/* One request: prompt of 1 token, then decodes; routing[iter][layer] is the
 * one expert (K = 1) of that iteration and layer. */
static void write_trace(const char *path, uint32_t L, uint32_t n_iters, const int routing[][3])
{
    ms_trace_meta m = ms_fixture_hand_meta("test_engine_exact", L, 4, 1, 1000000, 2000000);
    ms_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 1;
    r.output_len = n_iters - 1; /* decode iterations (docs/trace-format.md) */
    r.n_iters = n_iters;
    r.n_rows = n_iters;
    ms_request_alloc(&r, &m);
    for (uint32_t i = 0; i < n_iters; i++) {
        r.iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
        for (uint32_t l = 0; l < L; l++) {
            r.topk_ids[ms_topk_index(&m, i, l)] = routing[i][l];
            r.topk_w[ms_topk_index(&m, i, l)] = 1.0f;
        }
    }
    ms_fixture_write_requests(path, &m, &r, 1);
    ms_request_free(&r);
    ms_trace_meta_free(&m);
}

static ms_metrics run(const char *trace, const ms_platform *p, const char *prefetch, const char *cache,
                      uint32_t cap, uint32_t distance, const char *events)
{
    ms_run_config cfg = {.trace_path = trace, .platform = p, .prefetch_spec = prefetch, .cache_spec = cache,
                         .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = cap,
                         .distance = distance, .max_batch = 1, .events_path = events};
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) {
        fprintf(stderr, "ms_run: %s\n", err.msg);
        exit(1);
    }
    return m;
}

/* No prefetch, LRU over 2 experts: hand timeline in the comments. */
static void test_lru_on_demand(const ms_platform *p)
{
    static const int routing[3][3] = {{0, 1}, {0, 2}, {3, 1}};
    write_trace("exact_a.h5", 2, 3, routing);
    ms_metrics m = run("exact_a.h5", p, "none", "lru", 2, 1, "exact_a.csv");
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 5);
    CHECK_EQ_INT(m.total.late, 0);
    CHECK_EQ_INT(m.phase[MS_PHASE_PREFILL].misses, 2);
    CHECK_EQ_INT(m.phase[MS_PHASE_DECODE].hits, 1);
    CHECK_EQ_INT(m.phase[MS_PHASE_DECODE].misses, 3);
    /* iter 0: dense 0-0.2, (0,0) copied 0.2-1.7, computed 1.7-1.8; layer 1 dense 1.8-2.0, (1,1) 2.0-3.5 */
    CHECK_EVENT("exact_a.csv", "copy_demand", 0, 0, 0, 0.2, 1.7);
    CHECK_EVENT("exact_a.csv", "compute_gpu", 0, 0, 0, 1.7, 1.8);
    CHECK_EVENT("exact_a.csv", "copy_demand", 1, 1, 0, 2.0, 3.5);
    /* iter 1: (0,0) hit at 3.8, computed 3.8-3.9; (1,2) evicts (1,1) (LRU), copied 4.1-5.6 */
    CHECK_EVENT("exact_a.csv", "compute_gpu", 0, 0, 1, 3.8, 3.9);
    CHECK_EVENT("exact_a.csv", "evict", 1, 1, 0, 4.1, 4.1);
    CHECK_EVENT("exact_a.csv", "copy_demand", 1, 2, 0, 4.1, 5.6);
    /* iter 2: (0,3) evicts (0,0), copied 5.9-7.4; (1,1) evicts (1,2), copied 7.7-9.2, computed 9.2-9.3 */
    CHECK_EVENT("exact_a.csv", "evict", 0, 0, 0, 5.9, 5.9);
    CHECK_EVENT("exact_a.csv", "copy_demand", 0, 3, 0, 5.9, 7.4);
    CHECK_EVENT("exact_a.csv", "copy_demand", 1, 1, 1, 7.7, 9.2);
    CHECK_NEAR(m.makespan_s, 9.3 * MS, TOL);
    CHECK_NEAR(m.ttft_mean_s, 3.6 * MS, TOL);
    CHECK_NEAR(m.tpot_mean_s, (9.3 - 3.6) / 2 * MS, TOL);
    CHECK_NEAR(m.total.stall_s, 5 * 1.5 * MS, TOL);
    CHECK_NEAR(m.pcie_bytes, 5e6, 0);
    ms_metrics_free(&m);
}

/* Oracle prefetch at distance 1 with room for everything: late experts wait
 * only for the rest of their in-flight copy; queued copies serialise. */
static void test_oracle_late(const ms_platform *p)
{
    static const int routing[3][3] = {{0, 1}, {0, 2}, {3, 1}};
    ms_metrics m = run("exact_a.h5", p, "oracle", "lru", 4, 1, "exact_b.csv");
    CHECK_EQ_INT(m.total.hits, 2);
    CHECK_EQ_INT(m.total.late, 4);
    CHECK_EQ_INT(m.total.misses, 0);
    CHECK_EQ_INT(m.prefetch_issued, 4);
    CHECK_EQ_INT(m.prefetch_useful, 4);
    CHECK_EQ_INT(m.prefetch_late, 4);
    CHECK_EQ_INT(m.demand_copies, 0);
    /* (0,0) issued at 0, copied 0-1.5: gate at 0.2 finds it in flight, compute 1.5-1.6 */
    CHECK_EVENT("exact_b.csv", "copy_prefetch", 0, 0, 0, 0.0, 1.5);
    CHECK_EVENT("exact_b.csv", "compute_gpu", 0, 0, 0, 1.5, 1.6);
    /* (1,1) issued at 0 too, queued behind (0,0): 1.5-3.0, compute 3.0-3.1 */
    CHECK_EVENT("exact_b.csv", "copy_prefetch", 1, 1, 0, 1.5, 3.0);
    CHECK_EVENT("exact_b.csv", "compute_gpu", 1, 1, 0, 3.0, 3.1);
    /* iter 1: (1,2) issued when layer 0 starts at 3.1: 3.1-4.6; (0,0) hit 3.3-3.4; (1,2) compute 4.6-4.7 */
    CHECK_EVENT("exact_b.csv", "copy_prefetch", 1, 2, 0, 3.1, 4.6);
    CHECK_EVENT("exact_b.csv", "compute_gpu", 0, 0, 1, 3.3, 3.4);
    CHECK_EVENT("exact_b.csv", "compute_gpu", 1, 2, 0, 4.6, 4.7);
    /* iter 2: (0,3) issued at 4.7: 4.7-6.2; (1,1) hit, computed 6.5-6.6 */
    CHECK_EVENT("exact_b.csv", "copy_prefetch", 0, 3, 0, 4.7, 6.2);
    CHECK_EVENT("exact_b.csv", "compute_gpu", 1, 1, 1, 6.5, 6.6);
    CHECK_NEAR(m.makespan_s, 6.6 * MS, TOL);
    CHECK_NEAR(m.total.stall_s, (1.3 + 1.2 + 1.0 + 1.3) * MS, TOL);
    (void)routing;
    ms_metrics_free(&m);
}

/* topk-id (k=2, d=1): a demand load waits behind the prefetch copy in
 * flight (in-flight copies finish), and the queued prefetch for the layer
 * that has run is cancelled. */
static void test_demand_behind_inflight(const ms_platform *p)
{
    static const int routing[1][3] = {{3, 2}};
    write_trace("exact_c.h5", 2, 1, routing);
    ms_metrics m = run("exact_c.h5", p, "topk-id:k=2", "lru", 4, 1, "exact_c.csv");
    CHECK_EQ_INT(m.total.misses, 2);
    CHECK_EQ_INT(m.prefetch_issued, 2);
    CHECK_EQ_INT(m.prefetch_copied, 1);
    CHECK_EQ_INT(m.prefetch_cancelled, 1);
    /* (0,3) miss at 0.2: 0.2-1.7; prefetch (1,0) 1.7-3.2; (1,2) miss at 2.0 waits: 3.2-4.7 */
    CHECK_EVENT("exact_c.csv", "copy_demand", 0, 3, 0, 0.2, 1.7);
    CHECK_EVENT("exact_c.csv", "copy_prefetch", 1, 0, 0, 1.7, 3.2);
    CHECK_EVENT("exact_c.csv", "copy_demand", 1, 2, 0, 3.2, 4.7);
    CHECK_NEAR(m.makespan_s, 4.8 * MS, TOL);
    CHECK_NEAR(m.total.stall_s, (1.5 + 2.7) * MS, TOL);
    ms_metrics_free(&m);
}

/* Issue 32.13: Belady counts the running layer's own use as still ahead
 * until the layer ends.  L = 2, routes (0, 0) then (0, 1); oracle at
 * distance 1, a cache of 2.  it0: (0,0) copied 0-1.5, (1,0) 1.5-3.0 (both
 * late).  it1 starts at 3.1: layer 0 starts and oracle issues (1,1), whose
 * copy starts at once and needs room between (0,0), which layer 0 is about
 * to use (step 2), and (1,0), never used again: (1,0) goes.  (0,0) hits at
 * the gate 3.3, computed 3.3-3.4; (1,1) copied 3.1-4.6, late, computed
 * 4.6-4.7.  Counting the running layer's use as past made both "never used
 * again" and the tie evicted (0,0) (the lower x): a miss at 3.3. */
static void test_belady_running_layer(const ms_platform *p)
{
    static const int routing[2][3] = {{0, 0}, {0, 1}};
    write_trace("exact_bel.h5", 2, 2, routing);
    ms_metrics m = run("exact_bel.h5", p, "oracle", "belady", 2, 1, "exact_bel.csv");
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.late, 3);
    CHECK_EQ_INT(m.total.misses, 0);
    CHECK_EVENT("exact_bel.csv", "evict", 1, 0, 0, 3.1, 3.1);
    CHECK_EVENT("exact_bel.csv", "compute_gpu", 0, 0, 1, 3.3, 3.4);
    CHECK_EVENT("exact_bel.csv", "copy_prefetch", 1, 1, 0, 3.1, 4.6);
    CHECK_NEAR(m.makespan_s, 4.7 * MS, TOL);
    ms_metrics_free(&m);
}

/* Three requests (L = 1, expert 0 in both iterations: a prefill row and one
 * decode), batch 1, arriving at 0, 0 and r2_ms.  Request 0: dense 0-0.2, its
 * miss copied 0.2-1.7, computed 1.7-1.8 (first token), decode 1.8-2.1.
 * Request 1 waits for it: prefill 2.1-2.4 (a hit), decode 2.4-2.7.
 * Request 2 starts at max(2.7, its arrival) and takes 0.3 + 0.3. */
static void write_arrivals(const char *path, double r2_ms)
{
    ms_trace_meta m = ms_fixture_hand_meta("test_engine_exact", 1, 4, 1, 1000000, 2000000);
    ms_request r[3];
    for (int k = 0; k < 3; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k].id = (uint64_t)k;
        r[k].arrival_s = k == 2 ? r2_ms * MS : 0;
        r[k].prompt_len = 1;
        r[k].output_len = 1;
        r[k].n_iters = 2;
        r[k].n_rows = 2;
        ms_request_alloc(&r[k], &m);
        for (uint32_t i = 0; i < 2; i++) {
            r[k].iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
            r[k].topk_ids[ms_topk_index(&m, i, 0)] = 0;
            r[k].topk_w[ms_topk_index(&m, i, 0)] = 1.0f;
        }
    }
    ms_fixture_write_requests(path, &m, r, 3);
    for (int k = 0; k < 3; k++)
        ms_request_free(&r[k]);
    ms_trace_meta_free(&m);
}

/* Issue 32.4: queueing apart from service, the offered load, the warning. */
static void test_queueing_and_service(const ms_platform *p)
{
    /* request 2 at 1.0 ms: queued 1.7 ms (starts 2.7), first token 3.0, done 3.3 */
    write_arrivals("exact_q.h5", 1.0);
    ms_metrics m = run("exact_q.h5", p, "none", "lru", 2, 1, NULL);
    CHECK_EQ_INT(m.queue_samples, 3);
    CHECK_NEAR(m.ttft_mean_s, (1.8 + 2.4 + 2.0) / 3 * MS, TOL);          /* from the arrival, as before */
    CHECK_NEAR(m.latency_mean_s, (2.1 + 2.7 + 2.3) / 3 * MS, TOL);
    CHECK_NEAR(m.queue_mean_s, (0 + 2.1 + 1.7) / 3 * MS, TOL);
    CHECK_NEAR(m.queue_p99_s, (1.7 + 0.98 * 0.4) * MS, TOL);              /* gsl: 2 x 0.99 = 1.98 of 0, 1.7, 2.1 */
    CHECK_NEAR(m.ttft_service_mean_s, (1.8 + 0.3 + 0.3) / 3 * MS, TOL);
    CHECK_NEAR(m.ttft_service_p50_s, 0.3 * MS, TOL);
    CHECK_NEAR(m.latency_service_mean_s, (2.1 + 0.6 + 0.6) / 3 * MS, TOL);
    /* 2 gaps in 1.0 ms: 2000/s; 3 requests in 3.3 ms of service: 909.09/s */
    CHECK_NEAR(m.arrival_rate, 2000, 1e-6);
    CHECK_NEAR(m.service_rate, 3 / (3.3 * MS), 1e-6);
    CHECK_NEAR(m.offered_load, 2.2, 1e-9);
    CHECK_EQ_INT(m.n_warnings, 1);
    CHECK_STR_CONTAINS(m.warnings[0], "overloaded: requests arrive at 2e+03/s, the run served 909/s while busy "
                                      "(offered load 2.20); TTFT and latency include 0.00127 s of mean queueing");
    ms_metrics_free(&m);
    /* request 2 at 2.8 ms: the engine idles 2.7-2.8; 2 gaps in 2.8 ms against
     * 3 requests in 3.3 ms: load 0.786, no warning; request 2 not queued */
    write_arrivals("exact_q2.h5", 2.8);
    m = run("exact_q2.h5", p, "none", "lru", 2, 1, NULL);
    CHECK_NEAR(m.queue_mean_s, 2.1 / 3 * MS, TOL);
    CHECK_NEAR(m.offered_load, (2 / 2.8) / (3 / 3.3), 1e-9);
    CHECK_EQ_INT(m.n_warnings, 0);
    ms_metrics_free(&m);
}

/* A cache that cannot hold one layer's experts is refused up front. */
static void test_cache_too_small(const ms_platform *p)
{
    ms_run_config cfg = {.trace_path = "exact_a.h5", .platform = p, .prefetch_spec = "none", .cache_spec = "lru",
                         .sched_spec = "gpu", .cap_kind = MS_CAP_BYTES, .cap_value = 999999,
                         .distance = 1, .max_batch = 1};
    ms_metrics m;
    ms_err err;
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "smaller than one layer's 1 activated experts");
    cfg.cap_kind = MS_CAP_EXPERTS;
    cfg.cap_value = 2;
    cfg.cache_spec = "lru:x=1";
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown parameter 'x'");
    cfg.cache_spec = "lruu";
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown cache policy 'lruu' (known: lru");
}

int main(void)
{
    ms_platform p = test_platform();
    test_lru_on_demand(&p);
    test_oracle_late(&p);
    test_demand_behind_inflight(&p);
    test_cache_too_small(&p);
    test_queueing_and_service(&p);
    test_belady_running_layer(&p);
    CHECK_DONE();
}
