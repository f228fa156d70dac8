/* Several GPUs (docs/engine.md "Several GPUs"): exact timings on hand-built
 * traces, every time below worked out by hand from the timing model.
 *
 * Platform (tests/unit/fixtures.h): one copy = 0.5 ms latency + bytes / 1
 * GB/s, so a 1 MB expert takes 1.5 ms; expert compute = 1e6 B / 10 GB/s =
 * 0.1 ms; dense work = 2e6 B / 10 GB/s = 0.2 ms; no launch overheads.  Two
 * GPUs, each with its own link; interconnect 1 GB/s with 0.1 ms latency.
 * The traces carry hidden_size 500, so one token's hidden state is 1000
 * bytes (bf16) and dispatching (or combining) one token to a remote GPU
 * takes 0.1 ms + 1000 B / 1 GB/s = 0.101 ms.  Placement round-robin over
 * x = l * 4 + e: even x on GPU 0, odd x on GPU 1. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "sim/engine/placement.h"
#include "traces/format/trace.h"

#define TOL 1e-12

/* CHECK_EVENT for times that are not whole nanoseconds: the CSV prints 9 decimals. */
#define CHECK_EVENT_NS(ev, kind, l, e, nth, start, end)                                                         \
    do {                                                                                                        \
        double _s = -1, _e = -1;                                                                                \
        CHECK(ms_fixture_find_event(ev, kind, l, e, nth, &_s, &_e) == 0);                                       \
        CHECK_NEAR(_s, (start)*1e-3, 0.6e-9);                                                                   \
        CHECK_NEAR(_e, (end)*1e-3, 0.6e-9);                                                                     \
    } while (0)

static ms_platform two_gpus(double ceiling)
{
    ms_platform p = ms_fixture_exact_platform();
    p.gpus = 2;
    p.peer_bw = 1e9;
    p.peer_latency_s = 0.1e-3;
    p.host_ceiling_bw = ceiling;
    return p;
}

/* One request, iteration 0 prefill and then decodes, one token row each;
 * routing[i * L * K + l * K + k] is slot k of iteration i at layer l. */
static void write_trace(const char *path, uint32_t L, uint32_t K, uint32_t n_iters, const int *routing)
{
    ms_fixture_write_rows(path, "test_multigpu", L, 4, K, n_iters, routing);
}

static ms_run_config config(const char *trace, const ms_platform *p, const char *prefetch, uint32_t cap,
                            const char *events)
{
    return (ms_run_config){.trace_path = trace, .platform = p, .prefetch_spec = prefetch, .cache_spec = "lru",
                           .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = cap, .distance = 1,
                           .max_batch = 1, .events_path = events};
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

#define event_gpu ms_fixture_event_gpu

/* The n-th row of a layer-wide kind (dispatch, combine) at layer l: start, end and gpu. */
static int find_gpu_event(const char *events, const char *kind, int l, int nth, double *t0, double *t1, int *gpu)
{
    FILE *f = fopen(events, "r");
    char line[512], k[64];
    int it, el, rc = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%63[^,],%lf,%lf,%d,%d,", k, t0, t1, &it, &el) == 5 && !strcmp(k, kind) && el == l &&
            nth-- == 0) {
            *gpu = atoi(strrchr(line, ',') + 1);
            rc = 0;
            break;
        }
    if (f)
        fclose(f);
    return rc;
}

/* Layer 0 routes experts 0 (GPU 0) and 1 (GPU 1), both missing:
 *   dense 0 -> 0.2; the two demands start at 0.2 on their own links and
 *   overlap: both 0.2 -> 1.7 (one link would end the second at 3.2).
 *   Dispatch of the token to GPU 1: 0.2 -> 0.301.  GPU 0 computes expert 0
 *   1.7 -> 1.8, GPU 1 expert 1 1.7 -> 1.8; combine 1.8 -> 1.901 = the end. */
static void test_copies_overlap(void)
{
    const int routing[] = {0, 1};
    write_trace("mg_overlap.h5", 1, 2, 1, routing);
    ms_platform p = two_gpus(0);
    ms_run_config cfg = config("mg_overlap.h5", &p, "none", 4, "mg_overlap.csv");
    ms_metrics m = run(&cfg);
    CHECK_EVENT("mg_overlap.csv", "copy_demand", 0, 0, 0, 0.2, 1.7);
    CHECK_EVENT("mg_overlap.csv", "copy_demand", 0, 1, 0, 0.2, 1.7);
    CHECK_EQ_INT(event_gpu("mg_overlap.csv", "copy_demand", 0, 0, 0), 0);
    CHECK_EQ_INT(event_gpu("mg_overlap.csv", "copy_demand", 0, 1, 0), 1);
    CHECK_EVENT("mg_overlap.csv", "compute_gpu", 0, 0, 0, 1.7, 1.8);
    CHECK_EVENT("mg_overlap.csv", "compute_gpu", 0, 1, 0, 1.7, 1.8);
    double t0, t1;
    int gpu;
    CHECK(find_gpu_event("mg_overlap.csv", "dispatch", 0, 0, &t0, &t1, &gpu) == 0);
    CHECK_NEAR(t0, 0.2e-3, TOL);
    CHECK_NEAR(t1, 0.301e-3, TOL);
    CHECK_EQ_INT(gpu, 1);
    CHECK(find_gpu_event("mg_overlap.csv", "combine", 0, 0, &t0, &t1, &gpu) == 0);
    CHECK_NEAR(t0, 1.8e-3, TOL);
    CHECK_NEAR(t1, 1.901e-3, TOL);
    CHECK_NEAR(m.makespan_s, 1.901e-3, TOL);
    CHECK_EQ_INT(m.gpus, 2);
    CHECK(m.gpu != NULL);
    CHECK_EQ_INT(m.gpu[0].copies, 1);
    CHECK_EQ_INT(m.gpu[1].copies, 1);
    CHECK_NEAR(m.gpu[0].link_busy_s, 1.5e-3, TOL);
    CHECK_NEAR(m.gpu[1].link_busy_s, 1.5e-3, TOL);
    CHECK_NEAR(m.gpu[1].dispatch_s, 0.202e-3, TOL);
    CHECK_EQ_INT(m.gpu[0].misses, 1);
    CHECK_EQ_INT(m.gpu[1].misses, 1);
    ms_metrics_free(&m);
    /* the same on one GPU: the second copy waits for the first (0.2 -> 1.7 -> 3.2) */
    ms_platform one = ms_fixture_exact_platform();
    cfg = config("mg_overlap.h5", &one, "none", 4, "mg_one.csv");
    m = run(&cfg);
    CHECK_EVENT("mg_one.csv", "copy_demand", 0, 1, 0, 1.7, 3.2);
    CHECK(m.gpu == NULL);
    ms_metrics_free(&m);
}

/* Iteration 0 as above (ends 1.901); iteration 1 routes expert 0 (a hit on
 * GPU 0) and expert 3 (a miss on GPU 1):
 *   dense 1.901 -> 2.101; GPU 0 computes expert 0 2.101 -> 2.201 and idles;
 *   link 1 copies expert 3 2.101 -> 3.601; dispatch 2.101 -> 2.202; GPU 1
 *   computes 3.601 -> 3.701 (stall 3.601 - 2.202 = 1.399); combine
 *   3.701 -> 3.802: the layer ends with the slower GPU, at 3.802. */
static void test_waits_for_slower_gpu(void)
{
    const int routing[] = {0, 1, 0, 3};
    write_trace("mg_slow.h5", 1, 2, 2, routing);
    ms_platform p = two_gpus(0);
    ms_run_config cfg = config("mg_slow.h5", &p, "none", 4, "mg_slow.csv");
    ms_metrics m = run(&cfg);
    CHECK_EVENT("mg_slow.csv", "compute_gpu", 0, 0, 1, 2.101, 2.201);
    CHECK_EVENT("mg_slow.csv", "copy_demand", 0, 3, 0, 2.101, 3.601);
    CHECK_EVENT("mg_slow.csv", "compute_gpu", 0, 3, 0, 3.601, 3.701);
    CHECK_NEAR(m.makespan_s, 3.802e-3, TOL);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.gpu[0].hits, 1);
    CHECK_NEAR(m.phase[MS_PHASE_DECODE].stall_s, 1.399e-3, TOL);
    CHECK_NEAR(m.gpu[1].stall_s, (1.7 - 0.301 + 1.399) * 1e-3, TOL);
    ms_metrics_free(&m);
}

/* The host ceiling: 1.5 GB/s shared by both links.  Test 1's two demands
 * start at 0.2, move bytes from 0.7 (after the 0.5 ms latency), both at once:
 * each min(1 GB/s, 1.5 / 2) = 0.75 GB/s, so 1 MB takes 4/3 ms: both end at
 * 0.7 + 1.333.. = 2.0333.. ms (1.7 without the ceiling). */
static void test_ceiling_two_copies(void)
{
    const int routing[] = {0, 1};
    write_trace("mg_ceil.h5", 1, 2, 1, routing);
    ms_platform p = two_gpus(1.5e9);
    ms_run_config cfg = config("mg_ceil.h5", &p, "none", 4, "mg_ceil.csv");
    ms_metrics m = run(&cfg);
    double end = 0.7 + 4.0 / 3.0;
    CHECK_EVENT_NS("mg_ceil.csv", "copy_demand", 0, 0, 0, 0.2, end);
    CHECK_EVENT_NS("mg_ceil.csv", "copy_demand", 0, 1, 0, 0.2, end);
    CHECK_EVENT_NS("mg_ceil.csv", "compute_gpu", 0, 1, 0, end, end + 0.1);
    CHECK_NEAR(m.makespan_s, (end + 0.1 + 0.101) * 1e-3, TOL);
    ms_metrics_free(&m);
}

/* The ceiling re-times a copy in flight.  Three layers, one expert each:
 * layer 0 expert 0 (x 0, GPU 0), layer 1 expert 2 (x 6, GPU 0), layer 2
 * expert 1 (x 9, GPU 1); prefetch oracle at distance 1, ceiling 1.5 GB/s.
 *   t 0: x 0 and then x 6 queued on link 0; x 0 copies 0 -> 1.5 alone.
 *   layer 0: dense 0 -> 0.2, x 0 late, computed 1.5 -> 1.6.
 *   x 6 starts at 1.5 on link 0: bytes from 2.0 at 1 GB/s.
 *   layer 1 starts at 1.6 and asks for x 9: link 1 starts it at 1.6, bytes
 *   from 2.1.  From 2.1 both share: 0.75 GB/s each.  x 6 has 0.9 MB left at
 *   2.1 -> ends 2.1 + 1.2 = 3.3 (alone it would end at 3.0).  x 9 moved 0.9
 *   MB by 3.3, the last 0.1 MB alone at 1 GB/s -> 3.4.
 *   layer 1: dense 1.6 -> 1.8, x 6 late, computed 3.3 -> 3.4.
 *   layer 2: dense 3.4 -> 3.6, x 9 a hit (ready 3.4); dispatch 3.6 -> 3.701,
 *   compute 3.701 -> 3.801, combine -> 3.902. */
static void test_ceiling_retimes_in_flight(void)
{
    const int routing[] = {0, 2, 1};
    write_trace("mg_retime.h5", 3, 1, 1, routing);
    ms_platform p = two_gpus(1.5e9);
    ms_run_config cfg = config("mg_retime.h5", &p, "oracle", 4, "mg_retime.csv");
    ms_metrics m = run(&cfg);
    CHECK_EVENT("mg_retime.csv", "copy_prefetch", 0, 0, 0, 0.0, 1.5);
    CHECK_EVENT("mg_retime.csv", "copy_prefetch", 1, 2, 0, 1.5, 3.3);
    CHECK_EVENT("mg_retime.csv", "copy_prefetch", 2, 1, 0, 1.6, 3.4);
    CHECK_EVENT("mg_retime.csv", "compute_gpu", 1, 2, 0, 3.3, 3.4);
    CHECK_EVENT("mg_retime.csv", "compute_gpu", 2, 1, 0, 3.701, 3.801);
    CHECK_NEAR(m.makespan_s, 3.902e-3, TOL);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.late, 2);
    ms_metrics_free(&m);
    /* without the ceiling: x 6 ends at 3.0, x 9 at 3.1 */
    p = two_gpus(0);
    m = run(&cfg);
    CHECK_EVENT("mg_retime.csv", "copy_prefetch", 1, 2, 0, 1.5, 3.0);
    CHECK_EVENT("mg_retime.csv", "copy_prefetch", 2, 1, 0, 1.6, 3.1);
    ms_metrics_free(&m);
}

/* Per-GPU eviction: 2 experts in total, one per GPU, LRU.  Iterations route
 * expert 1 (GPU 1), expert 0 (GPU 0), expert 2 (GPU 0), expert 1.  At the
 * third, GPU 0 needs room: the least recent expert overall is 1, but it is
 * on GPU 1, so the victim is expert 0; expert 1 is still cached at the
 * fourth: a hit. */
static void test_per_gpu_eviction(void)
{
    const int routing[] = {1, 0, 2, 1};
    write_trace("mg_evict.h5", 1, 1, 4, routing);
    ms_platform p = two_gpus(0);
    ms_run_config cfg = config("mg_evict.h5", &p, "none", 2, "mg_evict.csv");
    ms_metrics m = run(&cfg);
    double t0, t1;
    CHECK(ms_fixture_find_event("mg_evict.csv", "evict", 0, 0, 0, &t0, &t1) == 0);
    CHECK_EQ_INT(event_gpu("mg_evict.csv", "evict", 0, 0, 0), 0);
    CHECK(ms_fixture_find_event("mg_evict.csv", "evict", 0, 1, 0, &t0, &t1) == -1);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.gpu[1].hits, 1);
    CHECK_NEAR(m.gpu[0].cache_capacity, 1, 0);
    ms_metrics_free(&m);
    /* one GPU, one cache of 2: LRU evicts expert 1, and the fourth misses */
    ms_platform one = ms_fixture_exact_platform();
    cfg = config("mg_evict.h5", &one, "none", 2, "mg_evict1.csv");
    m = run(&cfg);
    CHECK(ms_fixture_find_event("mg_evict1.csv", "evict", 0, 1, 0, &t0, &t1) == 0);
    CHECK_EQ_INT(m.total.hits, 0);
    ms_metrics_free(&m);
}

static void expect_error(const ms_run_config *cfg, const char *needle)
{
    ms_metrics m;
    ms_err err;
    CHECK(ms_run(cfg, &m, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK(!strchr(err.msg, '\n'));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* Placements and the checks that refuse a run. */
static void test_placements_and_errors(void)
{
    uint8_t g[8];
    ms_placement_fill(MS_PLACE_ROUND_ROBIN, 2, 4, 3, NULL, g);
    const uint8_t rr[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    CHECK(!memcmp(g, rr, 8));
    ms_placement_fill(MS_PLACE_LAYER, 2, 4, 2, NULL, g);
    const uint8_t ly[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    CHECK(!memcmp(g, ly, 8));
    /* balanced, layer 0 loads 9 1 5 5, heaviest first: expert 0 (9) on GPU 0; expert 2 (5) on GPU 1 (0 < 9);
     * expert 3 (5) on GPU 1 (5 < 9); expert 1 (1) on GPU 0 (9 < 10) */
    const uint64_t load[8] = {9, 1, 5, 5, 0, 0, 0, 0};
    ms_placement_fill(MS_PLACE_BALANCED, 2, 4, 2, load, g);
    CHECK_EQ_INT(g[0], 0);
    CHECK_EQ_INT(g[2], 1);
    CHECK_EQ_INT(g[3], 1);
    CHECK_EQ_INT(g[1], 0);
    /* layer 1 (all loads 0): by id, fewer experts first: 0 1 0 1 */
    CHECK_EQ_INT(g[4], 0);
    CHECK_EQ_INT(g[5], 1);

    const int routing[] = {0, 1};
    write_trace("mg_err.h5", 1, 2, 1, routing);
    ms_platform p = two_gpus(0);
    ms_run_config cfg = config("mg_err.h5", &p, "none", 4, NULL);
    write_file("mg_place_bad_gpu.csv", "layer,expert,gpu\n0,0,0\n0,1,2\n0,2,0\n0,3,1\n");
    cfg.placement = "mg_place_bad_gpu.csv";
    expect_error(&cfg, "mg_place_bad_gpu.csv:3: 0,1,2: GPU outside 0..1 (the run has 2 GPUs)");
    write_file("mg_place_missing.csv", "0,0,0\n0,1,1\n0,3,1\n");
    cfg.placement = "mg_place_missing.csv";
    expect_error(&cfg, "mg_place_missing.csv: no GPU for expert (0, 2)");
    /* a file that puts every expert on GPU 0: the run is one GPU's work */
    write_file("mg_place_zero.csv", "0,0,0\n0,1,0\n0,2,0\n0,3,0\n");
    cfg.placement = "mg_place_zero.csv";
    cfg.events_path = "mg_zero.csv";
    ms_metrics m = run(&cfg);
    CHECK_EVENT("mg_zero.csv", "copy_demand", 0, 1, 0, 1.7, 3.2);
    CHECK_NEAR(m.makespan_s, 3.3e-3, TOL);
    ms_metrics_free(&m);
    cfg.events_path = NULL;
    cfg.placement = NULL;
    /* round-robin puts 2 experts of layer 0 on each GPU and K = 2: 3 in total gives GPU 1 one slot */
    cfg.cap_value = 3;
    expect_error(&cfg, "GPU 1's expert cache (1 experts of a total 3) is smaller than the 2 experts layer 0 places");
    cfg.cap_value = 4;
    p.peer_bw = 0;
    expect_error(&cfg, "2 GPUs need an [interconnect] peer_bw");
}

/* A framework's host costs on one GPU (test 1's trace): iteration_s 0.3 ms
 * first (now 0.3), then layer_s 0.1 ms before the dense work: dense
 * 0.4 -> 0.6, demands at 0.6: copy 0 0.6 -> 2.1, copy 1 2.1 -> 3.6; compute
 * 2.1 -> 2.2 and 3.6 -> 3.7 (each 0.4 ms later than without). */
static void test_framework(void)
{
    ms_platform one = ms_fixture_exact_platform();
    ms_framework fw = {.name = "test", .layer_s = 0.1e-3, .iteration_s = 0.3e-3};
    ms_run_config cfg = config("mg_overlap.h5", &one, "none", 4, "mg_fw.csv");
    cfg.framework = &fw;
    ms_metrics m = run(&cfg);
    CHECK_EVENT("mg_fw.csv", "copy_demand", 0, 0, 0, 0.6, 2.1);
    CHECK_EVENT("mg_fw.csv", "compute_gpu", 0, 0, 0, 2.1, 2.2);
    CHECK_EVENT("mg_fw.csv", "copy_demand", 0, 1, 0, 2.1, 3.6);
    CHECK_NEAR(m.makespan_s, 3.7e-3, TOL);
    ms_metrics_free(&m);
}

/* A demand with no room on its GPU is streamed.  Three layers, one expert
 * each: (0,0) x 0, (1,1) x 5, (2,2) x 10, all placed on GPU 0 (a file), one
 * slot per GPU; prefetch oracle at distance 1.
 *   t 0: asks x 0; layer 0 starts and asks x 5.  x 0 copies 0 -> 1.5 into
 *   GPU 0's slot; dense 0 -> 0.2; x 0 late, computed 1.5 -> 1.6.
 *   layer 1 at 1.6: x 5's copy was due at 1.5, but the slot holds x 0 of the
 *   running layer 0 (protected): dropped.  Layer 1 asks x 10: it starts at
 *   1.6, evicts x 0 and copies 1.6 -> 3.1.  Dense 1.6 -> 1.8; x 5 misses and
 *   its GPU's one slot holds x 10 in flight: streamed through a transient
 *   buffer, copied 3.1 -> 4.6, computed 4.6 -> 4.7.
 *   layer 2 at 4.7: dense -> 4.9, x 10 a hit, computed 4.9 -> 5.0.
 * One GPU with one slot stops at layer 1 instead ("has no room"). */
static void test_streamed_demand(void)
{
    const int routing[] = {0, 1, 2};
    write_trace("mg_stream.h5", 3, 1, 1, routing);
    write_file("mg_stream_place.csv", "layer,expert,gpu\n0,0,0\n0,1,0\n0,2,0\n0,3,0\n1,0,0\n1,1,0\n1,2,0\n1,3,0\n"
                                      "2,0,0\n2,1,0\n2,2,0\n2,3,0\n");
    ms_platform p = two_gpus(0);
    ms_run_config cfg = config("mg_stream.h5", &p, "oracle", 2, "mg_stream.csv");
    cfg.placement = "mg_stream_place.csv";
    ms_metrics m = run(&cfg);
    CHECK_EVENT("mg_stream.csv", "copy_prefetch", 2, 2, 0, 1.6, 3.1);
    CHECK_EVENT("mg_stream.csv", "copy_demand", 1, 1, 0, 3.1, 4.6);
    CHECK_EVENT("mg_stream.csv", "compute_gpu", 1, 1, 0, 4.6, 4.7);
    CHECK_NEAR(m.makespan_s, 5.0e-3, TOL);
    CHECK_EQ_INT(m.gpu[0].streamed, 1);
    CHECK_EQ_INT(m.prefetch_dropped, 1);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.late, 1);
    CHECK_EQ_INT(m.total.misses, 1);
    ms_metrics_free(&m);
    ms_platform one = ms_fixture_exact_platform();
    cfg = config("mg_stream.h5", &one, "oracle", 1, NULL);
    expect_error(&cfg, "has no room for layer 1's 1 activated experts");
}

int main(void)
{
    test_copies_overlap();
    test_waits_for_slower_gpu();
    test_ceiling_two_copies();
    test_ceiling_retimes_in_flight();
    test_per_gpu_eviction();
    test_placements_and_errors();
    test_framework();
    test_streamed_demand();
    CHECK_DONE();
}
