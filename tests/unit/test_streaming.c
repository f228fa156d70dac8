/* Exact timings of issue 31's streaming and CPU-expert mechanisms on
 * hand-built traces: the CPU expert roofline with threads and
 * dequantisation (ms_t_expert_cpu_on), the schedulers cpu-all and
 * cpu-layers (and their `threads`, through the engine's cpu_threads hook),
 * the whole-layer prefetcher layer-stream (every expert of a layer copied,
 * the layer waiting for all of them, freed when the next layer starts) and
 * the pin-layers cache (vLLM
 * cpu_offload_gb: the first layers streamed, the rest resident).
 * Platform: ms_fixture_exact_platform (copy 1.5 ms per 1 MB expert, GPU
 * expert 0.1 ms, dense 0.2 ms) with 4 CPU cores of 1 GFLOP/s: a one-token
 * CPU expert (params = bytes / 2 = 5e5) costs max(1e6 / 1e10, 2 x 5e5 /
 * (threads x 1e9)) = 0.25 ms on 4 threads, 0.5 on 2, 1.0 on 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/core/timing.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

#define MS 1e-3
#define TOL 1e-12

static ms_platform cpu_platform(void)
{
    ms_platform p = ms_fixture_exact_platform();
    p.cpu_cores = 4;
    p.cpu_flops_per_core = 1e9;
    return p;
}

static void write_trace(const char *path, uint32_t L, uint32_t J, uint32_t K, uint32_t n_iters, const int *ids)
{
    ms_fixture_write_rows(path, "test_streaming", L, J, K, n_iters, ids);
}

/* A run that must fail with a message containing `want`. */
static void run_fails(const char *trace, const ms_platform *p, const char *prefetch, const char *cache,
                      const char *sched, uint32_t cap, const char *want)
{
    ms_metrics m;
    ms_err err;
    int rc = ms_fixture_run_cfg(trace, p, prefetch, cache, sched, cap, NULL, &m, &err);
    CHECK(rc != 0);
    if (rc == 0) {
        ms_metrics_free(&m);
        return;
    }
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK(strchr(err.msg, '\n') == NULL);
}

/* L = 2, J = 4, K = 1: iterations {0, 1}, {0, 2}, {3, 1}. */
static const int route_a[3 * 2] = {0, 1, 0, 2, 3, 1};

/* The roofline by hand: 1 MB, 5e5 params, 100 tokens = 1e8 FLOP; DRAM
 * 0.1 ms.  4 threads (the platform's): 25 ms; 2 threads: 50 ms;
 * dequantisation at 1e8 B/s per thread on 2 threads: + 5 ms; launch 1 ms.
 * One token: 1e6 FLOP, 0.5 ms on 2 threads, 0.25 on 4 (above DRAM's 0.1). */
static void test_roofline(void)
{
    ms_platform p = cpu_platform();
    p.cpu_launch_s = 1e-3;
    CHECK_NEAR(ms_t_expert_cpu(&p, 1e6, 5e5, 100), 26 * MS, TOL);
    CHECK_NEAR(ms_t_expert_cpu_on(&p, 1e6, 5e5, 100, 0, 0.0), 26 * MS, TOL);
    CHECK_NEAR(ms_t_expert_cpu_on(&p, 1e6, 5e5, 100, 2, 0.0), 51 * MS, TOL);
    CHECK_NEAR(ms_t_expert_cpu_on(&p, 1e6, 5e5, 100, 2, 1e8), 56 * MS, TOL);
    CHECK_NEAR(ms_t_expert_cpu_on(&p, 1e6, 5e5, 1, 2, 1e8), (0.5 + 5 + 1) * MS, TOL);
    CHECK_NEAR(ms_t_expert_cpu_on(&p, 1e6, 5e5, 1, 4, 0.0), 1.25 * MS, TOL);
    p.cpu_flops_per_core = 1e12; /* memory-bound: DRAM 0.1 ms */
    CHECK_NEAR(ms_t_expert_cpu_on(&p, 1e6, 5e5, 1, 1, 0.0), 1.1 * MS, TOL);
}

/* cpu-all: every expert on the CPU, nothing copied.  Each layer = dense 0.2
 * + CPU expert: 0.25 (4 threads) -> 6 x 0.45 = 2.7; threads=2 -> 6 x 0.7 =
 * 4.2; threads=1 -> 6 x 1.2 = 7.2 (the engine times the CPU stream with the
 * scheduler's threads).  fiddler:threads=1 (every miss on the CPU) too. */
static void test_cpu_all(void)
{
    write_trace("st_a.h5", 2, 4, 1, 3, route_a);
    ms_platform p = cpu_platform();
    ms_metrics m = ms_fixture_run("st_a.h5", &p, "none", "lru", "cpu-all", 2, "st_all.csv");
    CHECK_EQ_INT(m.total.on_cpu, 6);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.demand_copies, 0);
    CHECK_NEAR(m.pcie_bytes, 0, 0);
    CHECK_EVENT("st_all.csv", "compute_cpu", 1, 1, 0, 0.65, 0.9);
    CHECK_NEAR(m.makespan_s, 2.7 * MS, TOL);
    ms_metrics_free(&m);

    m = ms_fixture_run("st_a.h5", &p, "none", "lru", "cpu-all:threads=2", 2, NULL);
    CHECK_NEAR(m.makespan_s, 4.2 * MS, TOL);
    ms_metrics_free(&m);
    m = ms_fixture_run("st_a.h5", &p, "none", "lru", "cpu-all:threads=1", 2, "st_all1.csv");
    CHECK_EVENT("st_all1.csv", "compute_cpu", 0, 0, 0, 0.2, 1.2);
    CHECK_NEAR(m.makespan_s, 7.2 * MS, TOL);
    ms_metrics_free(&m);
    m = ms_fixture_run("st_a.h5", &p, "none", "lru", "fiddler:threads=1", 2, NULL);
    CHECK_EQ_INT(m.total.on_cpu, 6);
    CHECK_NEAR(m.makespan_s, 7.2 * MS, TOL);
    ms_metrics_free(&m);
    m = ms_fixture_run("st_a.h5", &p, "none", "lru", "hybrid:threads=4", 2, NULL); /* 4 = the platform's: as without */
    ms_metrics m0 = ms_fixture_run("st_a.h5", &p, "none", "lru", "hybrid", 2, NULL);
    CHECK_NEAR(m.makespan_s, m0.makespan_s, 0);
    ms_metrics_free(&m);
    ms_metrics_free(&m0);
}

/* cpu-layers:layers=1 with pin-layers:first=1 and a cache of (L - 1) x J = 4
 * experts: layer 1's four experts are preloaded; layer 0's run on the CPU.
 * Per iteration: layer 0 dense 0.2 + CPU 0.25, layer 1 dense 0.2 + GPU hit
 * 0.1 = 0.75; makespan 2.25; 3 hits, 3 misses on the CPU, no copy.
 * threads=1: layer 0 takes 1.2: 3 x 1.5 = 4.5.  layers=2 = cpu-all. */
static void test_cpu_layers(void)
{
    ms_platform p = cpu_platform();
    ms_metrics m = ms_fixture_run("st_a.h5", &p, "none", "pin-layers:first=1", "cpu-layers:layers=1", 4, "st_cl.csv");
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.total.on_cpu, 3);
    CHECK_EQ_INT(m.demand_copies, 0);
    CHECK_NEAR(m.pcie_bytes, 0, 0);
    CHECK_EVENT("st_cl.csv", "compute_cpu", 0, 0, 1, 0.95, 1.2);
    CHECK_EVENT("st_cl.csv", "compute_gpu", 1, 2, 0, 1.4, 1.5);
    CHECK_NEAR(m.makespan_s, 2.25 * MS, TOL);
    ms_metrics_free(&m);
    m = ms_fixture_run("st_a.h5", &p, "none", "pin-layers:first=1", "cpu-layers:layers=1,threads=1", 4, NULL);
    CHECK_NEAR(m.makespan_s, 4.5 * MS, TOL);
    ms_metrics_free(&m);
    m = ms_fixture_run("st_a.h5", &p, "none", "lru", "cpu-layers:layers=2", 2, NULL);
    CHECK_EQ_INT(m.total.on_cpu, 6);
    CHECK_NEAR(m.makespan_s, 2.7 * MS, TOL);
    ms_metrics_free(&m);
}

/* layer-stream:ahead=0 over an LRU of J = 4 experts (HF Accelerate's
 * whole-layer load, copies overlapped with the dense work only): at each
 * layer's start its 4 experts are queued; the first copy starts with the
 * dense work, the routed expert (if still queued) becomes an on-demand load
 * at the gate, and the layer computes after its 4th copy.  Every layer
 * costs 4 x 1.5 + 0.1 = 6.1 after its first copy starts with the dense
 * work: iteration 0 layer 0: copies 0-1.5 (routed (0,0): late), 1.5-3.0,
 * 3.0-4.5, 4.5-6.0, GPU 6.0-6.1; layer 1: (1,0) 6.1-7.6, (1,1) demand
 * 7.6-9.1, (1,2) 9.1-10.6, (1,3) 10.6-12.1, GPU 12.1-12.2; ... makespan
 * 6 x 6.1 = 36.6.  24 copies (4 demand), 2 late, 4 misses, nothing expires. */
static void test_layer_stream(void)
{
    ms_platform p = cpu_platform();
    ms_metrics m = ms_fixture_run("st_a.h5", &p, "layer-stream:ahead=0", "lru", "gpu", 4, "st_ls.csv");
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.total.late, 2);
    CHECK_EQ_INT(m.total.misses, 4);
    CHECK_EQ_INT(m.demand_copies, 4);
    CHECK_EQ_INT(m.prefetch_copied, 20);
    CHECK_EQ_INT(m.prefetch_cancelled, 0);
    CHECK_EQ_INT(m.prefetch_dropped, 0);
    CHECK_NEAR(m.pcie_bytes, 24e6, 0);
    CHECK_EVENT("st_ls.csv", "copy_prefetch", 0, 3, 0, 4.5, 6.0);
    CHECK_EVENT("st_ls.csv", "compute_gpu", 0, 0, 0, 6.0, 6.1);
    CHECK_EVENT("st_ls.csv", "copy_demand", 1, 1, 0, 7.6, 9.1);
    CHECK_EVENT("st_ls.csv", "copy_prefetch", 1, 3, 0, 10.6, 12.1);
    CHECK_EVENT("st_ls.csv", "compute_gpu", 1, 1, 0, 12.1, 12.2);
    CHECK_NEAR(m.makespan_s, 36.6 * MS, TOL);
    ms_metrics_free(&m);

    /* ahead=1 over 8 slots (the whole model fits, but each layer's experts
     * are freed when the next layer starts, so nothing stays): the copies
     * run back to back from t = 0 (layer 1's from layer 0's end, the next
     * iteration's layer 0 from layer 1's): 24 copies of 1.5 end at 36.0,
     * the last GPU expert 36.0-36.1.  Iteration 1's layer 0: (0,0) 12.0-13.5
     * (queued at 6.1, the wrap), late; (0,3) of iteration 2 is a demand load
     * 25.5-27.0.  One more copy (next iteration's (0,0)) starts at 36.0. */
    m = ms_fixture_run("st_a.h5", &p, "layer-stream", "lru", "gpu", 8, "st_ls1.csv");
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.total.late, 2);
    CHECK_EQ_INT(m.total.misses, 4);
    CHECK_EVENT("st_ls1.csv", "copy_prefetch", 0, 0, 1, 12.0, 13.5);
    CHECK_EVENT("st_ls1.csv", "copy_demand", 0, 3, 0, 25.5, 27.0);
    CHECK_NEAR(m.pcie_bytes, 25e6, 0);
    CHECK_NEAR(m.makespan_s, 36.1 * MS, TOL);
    ms_metrics_free(&m);
}

/* vLLM cpu_offload_gb: L = 3, J = 2, K = 1, iterations {0, 1, 0}, {1, 0, 1}.
 * layer-stream:ahead=0,layers=2 + pin-layers:first=2, cache (3 - 2) x 2 + 2
 * = 4: layer 2's experts preloaded and never evicted; layers 0 and 1 stream
 * through the other 2 slots.  Iteration 0: (0,0) 0-1.5 late, (0,1)
 * 1.5-3.0, GPU 3.0-3.1; layer 1: (1,0) 3.1-4.6, (1,1) demand 4.6-6.1, GPU
 * 6.1-6.2; layer 2: dense 6.2-6.4, hit 6.4-6.5.  Iteration 1: (0,0)
 * 6.5-8.0, (0,1) demand 8.0-9.5, GPU 9.5-9.6; (1,0) 9.6-11.1 late, (1,1)
 * 11.1-12.6, GPU 12.6-12.7; layer 2 12.7-13.0.  8 copies, 2 hits. */
static void test_partial_stream(void)
{
    static const int route[2 * 3] = {0, 1, 0, 1, 0, 1};
    write_trace("st_v.h5", 3, 2, 1, 2, route);
    ms_platform p = cpu_platform();
    ms_metrics m = ms_fixture_run("st_v.h5", &p, "layer-stream:ahead=0,layers=2", "pin-layers:first=2", "gpu", 4, "st_v.csv");
    CHECK_EQ_INT(m.total.hits, 2);
    CHECK_EQ_INT(m.total.late, 2);
    CHECK_EQ_INT(m.total.misses, 2);
    CHECK_EQ_INT(m.demand_copies, 2);
    CHECK_NEAR(m.pcie_bytes, 8e6, 0);
    CHECK_EVENT("st_v.csv", "copy_prefetch", 1, 0, 0, 3.1, 4.6);
    CHECK_EVENT("st_v.csv", "copy_demand", 0, 1, 0, 8.0, 9.5);
    CHECK_EVENT("st_v.csv", "compute_gpu", 2, 1, 0, 12.9, 13.0);
    CHECK_NEAR(m.makespan_s, 13.0 * MS, TOL);
    ms_metrics_free(&m);
}

/* One streamed layer (N = 1): layer-stream:ahead=0,layers=1 + pin-layers:
 * first=1 over 4 + 4 slots on route_a: layer 1 preloaded (3 hits of 0.2 +
 * 0.1), layer 0's four experts copied at every iteration and freed when
 * layer 1 starts.  Iteration 0: layer 0 0-6.1, layer 1 6.1-6.4; iteration
 * 1: (0,0) 6.4-7.9 late, (0,3) ends 12.4, GPU 12.4-12.5, layer 1 -12.8;
 * iteration 2: (0,0) 12.8-14.3, (0,3) demand 14.3-15.8, (0,1), (0,2) to
 * 18.8, GPU 18.8-18.9, layer 1 -19.2.  12 copies. */
static void test_one_streamed_layer(void)
{
    ms_platform p = cpu_platform();
    ms_metrics m = ms_fixture_run("st_a.h5", &p, "layer-stream:ahead=0,layers=1", "pin-layers:first=1", "gpu", 8, "st_v1.csv");
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.late, 2);
    CHECK_EQ_INT(m.total.misses, 1);
    CHECK_NEAR(m.pcie_bytes, 12e6, 0);
    CHECK_EVENT("st_v1.csv", "copy_demand", 0, 3, 0, 14.3, 15.8);
    CHECK_NEAR(m.makespan_s, 19.2 * MS, TOL);
    ms_metrics_free(&m);
}

/* HF Accelerate's device_map="auto" on the same trace (symmetric under
 * layer reversal): layer-stream:ahead=0,from=1 + pin-layers:last=1 keeps
 * layer 0 resident and streams layers 1 and 2.  Iteration 0: layer 0 dense
 * 0-0.2, hit 0.2-0.3; (1,0) 0.3-1.8 late, (1,1) 1.8-3.3, GPU 3.3-3.4; (2,0)
 * 3.4-4.9 late, (2,1) 4.9-6.4, GPU 6.4-6.5.  Iteration 1 the same 6.5 ms
 * later: the mirror of test_partial_stream (2 hits, 8 copies, 13.0 ms). */
static void test_stream_last_layers(void)
{
    ms_platform p = cpu_platform();
    ms_metrics m = ms_fixture_run("st_v.h5", &p, "layer-stream:ahead=0,from=1", "pin-layers:last=1", "gpu", 4, "st_vl.csv");
    CHECK_EQ_INT(m.total.hits, 2);
    CHECK_NEAR(m.pcie_bytes, 8e6, 0);
    CHECK_EVENT("st_vl.csv", "compute_gpu", 0, 0, 0, 0.2, 0.3);
    CHECK_EVENT("st_vl.csv", "compute_gpu", 2, 1, 0, 12.9, 13.0);
    CHECK_NEAR(m.makespan_s, 13.0 * MS, TOL);
    ms_metrics_free(&m);
}

/* Bad parameters: one line naming the parameter and its value. */
static void test_bad_params(void)
{
    ms_platform p = cpu_platform();
    run_fails("st_a.h5", &p, "none", "lru", "cpu-layers", 2, "layers = 0");
    run_fails("st_a.h5", &p, "none", "lru", "cpu-layers:layers=3", 2, "layers = 3: more than the trace's 2 MoE layers");
    run_fails("st_a.h5", &p, "none", "lru", "cpu-all:threads=5", 2, "threads = 5: more than platform test's 4 cpu_cores");
    run_fails("st_a.h5", &p, "none", "lru", "fiddler:threads=9", 2, "threads = 9");
    run_fails("st_a.h5", &p, "none", "lru", "hybrid:threads=9", 2, "threads = 9");
    run_fails("st_a.h5", &p, "none", "lru", "cpu-all:threads=-1", 2, "threads");
    run_fails("st_a.h5", &p, "layer-stream:ahead=2", "lru", "gpu", 8, "ahead = 2");
    run_fails("st_a.h5", &p, "layer-stream:layers=3", "lru", "gpu", 8, "layers = 3");
    run_fails("st_a.h5", &p, "none", "pin-layers:first=3", "gpu", 8, "first = 3");
    run_fails("st_a.h5", &p, "none", "pin-layers:last=3", "gpu", 8, "last = 3: more than the trace's 2 MoE layers");
    run_fails("st_a.h5", &p, "none", "pin-layers:first=2,last=1", "gpu", 8, "last = 1: below first = 2");
    run_fails("st_a.h5", &p, "layer-stream:from=2", "lru", "gpu", 8, "from = 2");
    run_fails("st_a.h5", &p, "layer-stream:from=1,layers=2", "lru", "gpu", 8, "from = 1");
    ms_platform two = p; /* whole-layer fetches run on one GPU */
    two.gpus = 2;
    two.peer_bw = 1e9;
    run_fails("st_a.h5", &two, "layer-stream", "lru", "gpu", 8, "fetches whole layers, which runs on one GPU (this run has 2)");
}

int main(void)
{
    test_roofline();
    test_cpu_all();
    test_cpu_layers();
    test_layer_stream();
    test_partial_stream();
    test_stream_last_layers();
    test_one_streamed_layer();
    test_bad_params();
    CHECK_DONE();
}
