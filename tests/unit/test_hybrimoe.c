/* HybriMoE (seed 003): MRS, the paper and code HSS, impact, and engine-level
 * runs of `mrs`, `hybrid`, `fiddler` and `hybrimoe` on hand-built traces.
 * Every expected value is computed by hand in the comments.
 *
 * Test platform (ms): one 1 MB expert copy = 0.5 latency + 1e6 B / 1 GB/s =
 * 1.5; GPU expert = max(1e6 B / 10 GB/s, tiny) = 0.1; dense = 2e6 B / 10 GB/s
 * = 0.2; CPU expert = max(1e6 B / dram_bw, 2 x 5e5 params x tokens / 1e12)
 * + cpu_launch_s (set per test); no GPU launch overhead. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "fixtures.h"
#include "policies/lib/hybrimoe_hss.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

#define MS 1e-3
#define TOL 1e-12

/* ------------------------------------------------------------------ */
/* MRS */

/* The MRS update as its definition reads, for the differential test below:
 * order every expert by score descending, ties to the lower id (a stable
 * insertion sort of the ids), take the first p; with the bug the ids are
 * then put in ascending order while the values keep theirs. */
static void mrs_reference(double *S, float *Sf, const float *s, uint32_t J, uint32_t p, double alpha, int bug)
{
    uint32_t ord[80], top[80];
    float val[80];
    for (uint32_t e = 0; e < J; e++) {
        uint32_t j = e;
        while (j > 0 && s[ord[j - 1]] < s[e]) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = e;
    }
    for (uint32_t i = 0; i < p; i++) {
        top[i] = ord[i];
        val[i] = s[ord[i]];
    }
    for (uint32_t i = 1; bug && i < p; i++)
        for (uint32_t j = i; j > 0 && top[j - 1] > top[j]; j--) {
            uint32_t t = top[j];
            top[j] = top[j - 1];
            top[j - 1] = t;
        }
    uint8_t in[80] = {0};
    float keep = 1.0f - (float)alpha;
    for (uint32_t e = 0; e < J; e++)
        S[e] *= 1.0 - alpha;
    for (uint32_t i = 0; i < p; i++) {
        S[top[i]] += alpha * val[i];
        Sf[top[i]] = (float)alpha * val[i] + keep * Sf[top[i]];
        in[top[i]] = 1;
    }
    for (uint32_t e = 0; e < J; e++)
        if (!in[e])
            Sf[e] = keep * Sf[e];
}

/* ms_mrs_update and ms_mrs_update_f32 against the reference on seeded score
 * vectors, J up to 70, every p from 0 to J + 1 (p > J means J), both
 * orders: the same bits.  The first 3,000 vectors draw from a few values
 * (ties at the p-th place are common); the next 3,000 mostly from 2^16
 * levels (like a gate mean: the top p are found by top_p_bound's filter,
 * the largest often late in id order), a few from the pool. */
static void test_mrs_against_reference(void)
{
    static const float pool[] = {0.0f, -0.0f, 0.5f, 0.25f, 0.125f, 0.1f, 0.3f, 1e-40f}; /* -0 ties +0 */
    uint64_t x = 7, runs = 0, bad = 0;
    for (int t = 0; t < 6000; t++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t J = 1 + (uint32_t)(x >> 33) % 70, p = (uint32_t)(x >> 20) % (J + 2);
        int bug = (int)(x >> 10) & 1;
        double alpha = (x >> 40) % 2 ? 0.5 : 0.3;
        float s[80];
        double S[80], R[80];
        float Sf[80], Rf[80];
        for (uint32_t e = 0; e < J; e++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            s[e] = t < 3000 || (x >> 60) == 0 ? pool[(x >> 33) % 8] : (float)((x >> 44) % 65536) / 65536.0f;
            S[e] = R[e] = (double)((x >> 45) % 5) / 4.0;
            Sf[e] = Rf[e] = (float)S[e];
        }
        ms_mrs_update(S, s, J, p, alpha, bug);
        ms_mrs_update_f32(Sf, s, J, p, (float)alpha, bug);
        mrs_reference(R, Rf, s, J, p > J ? J : p, alpha, bug);
        bad += memcmp(S, R, J * sizeof *S) != 0 || memcmp(Sf, Rf, J * sizeof *Sf) != 0;
        runs++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(runs == 6000);
}

/* J = 4, p = 2, alpha = 0.5, S starts at 0.
 * iter 1: s = [.1 .3 .4 .2]: top-2 = {2: .4, 1: .3}
 *   correct: S = .5 TopP(s) = [0, .15, .2, 0]
 *   bug:     ids in id order [1, 2] get values [.4, .3]: S = [0, .2, .15, 0]
 * iter 2: s = [.25 .1 .15 .5]: top-2 = {3: .5, 0: .25}; .5 S + .5 TopP(s)
 *   correct: [.125, .075, .1, .25]
 *   bug:     .5 x [0, .2, .15, 0] = [0, .1, .075, 0]; ids [0, 3] get [.5, .25]:
 *            [.25, .1, .075, .125]
 * The lowest S (the MRS victim) is expert 1 (.075) correct, expert 2 (.075)
 * with the bug. */
static void test_mrs_update(void)
{
    const float s1[4] = {0.1f, 0.3f, 0.4f, 0.2f}, s2[4] = {0.25f, 0.1f, 0.15f, 0.5f};
    double S[4] = {0}, B[4] = {0};
    ms_mrs_update(S, s1, 4, 2, 0.5, 0);
    ms_mrs_update(B, s1, 4, 2, 0.5, 1);
    const double S1[4] = {0, 0.15, 0.2, 0}, B1[4] = {0, 0.2, 0.15, 0};
    for (int e = 0; e < 4; e++) {
        CHECK_NEAR(S[e], S1[e], 1e-7);
        CHECK_NEAR(B[e], B1[e], 1e-7);
    }
    ms_mrs_update(S, s2, 4, 2, 0.5, 0);
    ms_mrs_update(B, s2, 4, 2, 0.5, 1);
    const double S2[4] = {0.125, 0.075, 0.1, 0.25}, B2[4] = {0.25, 0.1, 0.075, 0.125};
    for (int e = 0; e < 4; e++) {
        CHECK_NEAR(S[e], S2[e], 1e-7);
        CHECK_NEAR(B[e], B2[e], 1e-7);
    }
    /* p = J keeps everything: .5 x [.125 .075 .1 .25] + .5 x [.1 .3 .4 .2] */
    ms_mrs_update(S, s1, 4, 4, 0.5, 0);
    CHECK_NEAR(S[0], 0.1125, 1e-7);
    CHECK_NEAR(S[1], 0.1875, 1e-7);
    CHECK_NEAR(S[2], 0.25, 1e-7);
    CHECK_NEAR(S[3], 0.225, 1e-7);
}

/* ------------------------------------------------------------------ */
/* paper HSS */

/* HybriMoE Fig. 5: GPU time constant (1), CPU time = load, transfer 3.
 * A (load 4) and E (load 1) cached; B (1), C (5), D (2) uncached.
 * GPU queue [A, E]; CPU queue [B, D, C].
 *  t=0 GPU takes A -> 1.  Link (tie before CPU) moves C, the highest load:
 *      on GPU it ends max(1, 0+3) + 1 = 4 < CPU 0+1+2+5 = 8; arrives 3; GPU
 *      queue [C, E].
 *  t=0 CPU takes B -> 1.   t=1 GPU takes C: waits to 3, -> 4.
 *  t=1 CPU takes D -> 3.   t=3 CPU queue empty: steals E, the lowest-load
 *      cached expert: 3+1 = 4 < the GPU's 4+1 = 5.
 * CPU: B, D, E; GPU: A, C; makespan 4 (GPU alone would end 5).  The CPU
 * computes the cached expert E while the GPU computes the uncached C. */
static void test_hss_fig5(void)
{
    ms_hss_expert x[5] = {
        {.load = 4, .cached = 1, .t_gpu = 1, .t_cpu = 4, .t_copy = 3}, /* A */
        {.load = 1, .cached = 0, .t_gpu = 1, .t_cpu = 1, .t_copy = 3}, /* B */
        {.load = 5, .cached = 0, .t_gpu = 1, .t_cpu = 5, .t_copy = 3}, /* C */
        {.load = 2, .cached = 0, .t_gpu = 1, .t_cpu = 2, .t_copy = 3}, /* D */
        {.load = 1, .cached = 1, .t_gpu = 1, .t_cpu = 1, .t_copy = 3}, /* E */
    };
    for (int guard = 0; guard <= 1; guard++) {
        ms_hss_opts o = {.link_free = 0, .cpu_first = 0, .guard = guard};
        uint8_t cpu[5], moved[5];
        double end = ms_hss_paper(x, 5, &o, cpu, moved);
        const uint8_t want_cpu[5] = {0, 1, 0, 1, 1}, want_moved[5] = {0, 0, 1, 0, 0};
        for (int i = 0; i < 5; i++) {
            CHECK_EQ_INT(cpu[i], want_cpu[i]);
            CHECK_EQ_INT(moved[i], want_moved[i]);
        }
        CHECK_NEAR(end, 4, 1e-12);
    }
    /* A slower first CPU expert (+2) changes the plan:
     *  t=0 GPU A -> 1; link: C on GPU 4 < CPU 0+2+1+2+5 = 10: moved, arrives 3.
     *  t=0 CPU B: 0+2+1 = 3.  t=1 GPU C -> 4.  t=3 link (tie before CPU):
     *  D would go ahead of E (load 2 > 1): GPU end max(4, 3+3) + 1 = 7 >=
     *  CPU end 3+2 = 5: declined (the link idles).
     *  t=3 CPU D -> 5.  t=4 GPU E -> 5 (the CPU is busy until 5: no steal).
     *  CPU: B, D; GPU: A, C, E; makespan 5. */
    ms_hss_opts o = {.link_free = 0, .cpu_first = 2, .guard = 1};
    uint8_t cpu[5], moved[5];
    double end = ms_hss_paper(x, 5, &o, cpu, moved);
    const uint8_t want_cpu[5] = {0, 1, 0, 1, 0};
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(cpu[i], want_cpu[i]);
    CHECK_EQ_INT(moved[2], 1);
    CHECK_EQ_INT(moved[3], 0);
    CHECK_NEAR(end, 5, 1e-12);
}

/* The guard: one uncached expert, CPU 0.25 vs copy 1.5 + GPU 0.1: the link
 * declines (1.6 >= 0.25) and the CPU takes it; with guard=0 the link moves
 * it (tie order GPU, link, CPU) and the plan ends at 1.6.  A busy link
 * (free at 10) pushes a load-100 expert to the CPU too: 10+1.5+0.1 >= 5. */
static void test_hss_guard(void)
{
    ms_hss_expert x = {.load = 1, .cached = 0, .t_gpu = 0.1, .t_cpu = 0.25, .t_copy = 1.5};
    uint8_t cpu, moved;
    ms_hss_opts o = {.guard = 1};
    CHECK_NEAR(ms_hss_paper(&x, 1, &o, &cpu, &moved), 0.25, 1e-12);
    CHECK_EQ_INT(cpu, 1);
    o.guard = 0;
    CHECK_NEAR(ms_hss_paper(&x, 1, &o, &cpu, &moved), 1.6, 1e-12);
    CHECK_EQ_INT(cpu, 0);
    CHECK_EQ_INT(moved, 1);
    ms_hss_expert big = {.load = 100, .cached = 0, .t_gpu = 0.1, .t_cpu = 5, .t_copy = 1.5};
    o = (ms_hss_opts){.guard = 1};
    CHECK_NEAR(ms_hss_paper(&big, 1, &o, &cpu, &moved), 1.6, 1e-12);
    CHECK_EQ_INT(cpu, 0);
    o.link_free = 10;
    CHECK_NEAR(ms_hss_paper(&big, 1, &o, &cpu, &moved), 5, 1e-12);
    CHECK_EQ_INT(cpu, 1);
}

/* ------------------------------------------------------------------ */
/* code HSS (costs 0.5 / expert GPU, 1.0 x tokens (+0.79) CPU, move 0.4179) */

/* a cached 3 tokens, b cached 1, c uncached 2, d uncached 1: order a b c d.
 *  a: GPU 0+.5 <= CPU(d) 0+1+.79 = 1.79 -> GPU (1 = .5)
 *  b: .5+.5 = 1.0 <= 1.79 -> GPU
 *  c: uncached, link .4179 <= gpu_total 1.0, no wait: 1.5 <= 1.79 -> GPU
 *  d: 2.0 > 1.79 -> the CPU takes the tail d.  Result max(1.5, 1.79) = 1.79.
 * Three uncached 1-token experts x y z:
 *  x: .5 + (.4179 - 0) = .9179 <= 1.79 -> GPU (gpu .9179, link .4179)
 *  y: link .8358 <= .9179: .5 -> 1.4179 <= 1.79 -> GPU
 *  z: 1.9179 > 1.79 -> CPU.
 * With gpu = 0.1 the link is the bottleneck:
 *  x: .1 + .4179 = .5179;  y: link .8358 > .5179: .1 + .3179 -> .9358;
 *  z: link 1.2537 > .9358: .1 + .3179 -> 1.3537 <= 1.79 -> all on the GPU. */
static void test_hss_code(void)
{
    ms_hss_code_costs c = {.gpu = 0.5, .gpu_first = 0, .cpu = 1.0, .cpu_first = 0.79, .move = 0.4179};
    const uint32_t tok[4] = {2, 1, 3, 1};    /* c, d, a, b (activation order) */
    const uint8_t cached[4] = {0, 0, 1, 1};
    uint8_t cpu[4];
    CHECK_NEAR(ms_hss_code(tok, cached, 4, &c, cpu), 1.79, 1e-12);
    CHECK_EQ_INT(cpu[0], 0);
    CHECK_EQ_INT(cpu[1], 1);
    CHECK_EQ_INT(cpu[2], 0);
    CHECK_EQ_INT(cpu[3], 0);
    const uint32_t ones[3] = {1, 1, 1};
    const uint8_t none[3] = {0, 0, 0};
    CHECK_NEAR(ms_hss_code(ones, none, 3, &c, cpu), 1.79, 1e-12);
    CHECK_EQ_INT(cpu[0] + cpu[1] + cpu[2], 1);
    CHECK_EQ_INT(cpu[2], 1);
    c.gpu = 0.1;
    CHECK_NEAR(ms_hss_code(ones, none, 3, &c, cpu), 0.1 + 0.4179 + 2 * (0.1 + 0.3179), 1e-12);
    CHECK_EQ_INT(cpu[0] + cpu[1] + cpu[2], 0);
}

/* impact = prob x max(0, min(t_cpu, t_copy + t_gpu) - t_gpu):
 * .5 x (min(.25, 1.6) - .1) = .075; .5 x (min(5, 1.6) - .1) = .75; a CPU
 * faster than the GPU saves nothing. */
static void test_impact(void)
{
    CHECK_NEAR(ms_hybrimoe_impact(0.5, 0.25, 1.5, 0.1), 0.075, 1e-12);
    CHECK_NEAR(ms_hybrimoe_impact(0.5, 5.0, 1.5, 0.1), 0.75, 1e-12);
    CHECK_NEAR(ms_hybrimoe_impact(1.0, 0.05, 1.5, 0.1), 0.0, 1e-12);
}

/* ------------------------------------------------------------------ */
/* engine level */

/* The exact-timing platform; a CPU expert costs 0.1 ms + cpu_launch_s. */
static ms_platform test_platform(double cpu_launch_s)
{
    ms_platform p = ms_fixture_exact_platform();
    p.cpu_launch_s = cpu_launch_s;
    return p;
}

/* One request, one row per iteration (iteration 0 = prefill), 1 MB experts.
 * ids[(iter * L + l) * K + k]; probs (J per cell) or NULL for topk_renorm
 * with equal weights 1/K. */
static void write_trace(const char *path, uint32_t L, uint32_t J, uint32_t K, uint32_t n_iters, const int *ids,
                        const float *probs)
{
    ms_trace_meta m = ms_fixture_hand_meta("test_hybrimoe", L, J, K, 1000000, 2000000);
    m.probs_kind = probs ? MS_PROBS_FULL : MS_PROBS_TOPK_RENORM;
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    ms_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 1;
    r.output_len = n_iters - 1;
    r.n_iters = n_iters;
    r.n_rows = n_iters;
    ms_request_alloc(&r, &m);
    for (uint32_t i = 0; i < n_iters; i++) {
        r.iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
        for (uint32_t l = 0; l < L; l++) {
            size_t cell = (size_t)i * L + l;
            for (uint32_t k = 0; k < K; k++) {
                int e = ids[cell * K + k];
                r.topk_ids[ms_topk_index(&m, i, l) + k] = e;
                r.topk_w[ms_topk_index(&m, i, l) + k] = probs ? probs[cell * J + (uint32_t)e] : 1.0f / (float)K;
            }
            if (probs)
                memcpy(r.probs + ms_probs_index(&m, i, l), probs + cell * J, J * sizeof(float));
        }
    }
    ms_fixture_writer_add(w, &r);
    ms_fixture_writer_close(w);
    ms_request_free(&r);
    ms_trace_meta_free(&m);
}

/* L = 2, J = 4, K = 1: iterations {0, 1}, {0, 2}, {3, 1} (as test_engine_exact). */
static const int route_a[3 * 2] = {0, 1, 0, 2, 3, 1};

/* fiddler with CPU experts of 0.1 + 0.15 = 0.25 ms: every miss runs on the
 * CPU and nothing is ever loaded: 6 misses, 6 on the CPU, no PCIe.  Each
 * layer = dense 0.2 + CPU 0.25 = 0.45: layer 0 of iter 0 computes (0,0) on
 * the CPU 0.2-0.45, layer 1 (1,1) 0.65-0.9; iter 1 (0,0) 1.1-1.35; makespan
 * 6 x 0.45 = 2.7; TTFT 0.9; TPOT (2.7 - 0.9) / 2 = 0.9.
 * when=faster: 0.25 < 1.5 + 0.1, the same.  With cpu_launch 2.0 ms (CPU
 * 2.1 > 1.6) when=faster loads every miss: exactly the LRU on-demand run of
 * test_engine_exact (1 hit, 5 misses, makespan 9.3); when=always still uses
 * the CPU: 6 x (0.2 + 2.1) = 13.8. */
static void test_fiddler(void)
{
    write_trace("hyb_a.h5", 2, 4, 1, 3, route_a, NULL);
    ms_platform fast = test_platform(0.15e-3), slow = test_platform(2.0e-3);
    ms_metrics m = ms_fixture_run("hyb_a.h5", &fast, "none", "lru", "fiddler", 2, "hyb_a.csv");
    CHECK_EQ_INT(m.total.misses, 6);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.total.on_cpu, 6);
    CHECK_EQ_INT(m.demand_copies, 0);
    CHECK_NEAR(m.pcie_bytes, 0, 0);
    CHECK_EVENT("hyb_a.csv", "compute_cpu", 0, 0, 0, 0.2, 0.45);
    CHECK_EVENT("hyb_a.csv", "compute_cpu", 1, 1, 0, 0.65, 0.9);
    CHECK_EVENT("hyb_a.csv", "compute_cpu", 0, 0, 1, 1.1, 1.35);
    CHECK_NEAR(m.makespan_s, 2.7 * MS, TOL);
    CHECK_NEAR(m.ttft_mean_s, 0.9 * MS, TOL);
    CHECK_NEAR(m.tpot_mean_s, 0.9 * MS, TOL);
    ms_metrics_free(&m);

    m = ms_fixture_run("hyb_a.h5", &fast, "none", "lru", "fiddler:when=faster", 2, NULL);
    CHECK_EQ_INT(m.total.on_cpu, 6);
    CHECK_NEAR(m.makespan_s, 2.7 * MS, TOL);
    ms_metrics_free(&m);

    m = ms_fixture_run("hyb_a.h5", &slow, "none", "lru", "fiddler:when=faster", 2, NULL);
    CHECK_EQ_INT(m.total.on_cpu, 0);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 5);
    CHECK_NEAR(m.makespan_s, 9.3 * MS, TOL);
    ms_metrics_free(&m);

    m = ms_fixture_run("hyb_a.h5", &slow, "none", "lru", "fiddler", 2, NULL);
    CHECK_EQ_INT(m.total.on_cpu, 6);
    CHECK_NEAR(m.makespan_s, 13.8 * MS, TOL);
    ms_metrics_free(&m);
}

/* L = 1, J = 4, K = 2: iterations {0, 1}, {1, 2}, {1, 2}; CPU expert 0.1 +
 * 1.9 = 2.0 ms; LRU over 2 experts, no prefetch.
 * paper HSS:
 *  iter 0 (prefill): both uncached, CPU queue [0, 1].  t=0 link moves 1:
 *    GPU end 1.5 + 0.1 = 1.6 < CPU 2 + 2 = 4; GPU takes 1; CPU takes 0
 *    (2.0); link: nothing left.  -> 0 on the CPU.  Engine: dense 0-0.2,
 *    (0,1) copied 0.2-1.7, GPU 1.7-1.8; (0,0) CPU 0.2-2.2.  Layer end 2.2.
 *  iter 1: 1 cached (hit), 2 uncached.  GPU takes 1 (0.1); link moves 2:
 *    max(0.1, 1.5) + 0.1 = 1.6 < CPU 2.0.  All GPU.  dense 2.2-2.4, (0,1)
 *    2.4-2.5, (0,2) copied 2.4-3.9, GPU 3.9-4.0.
 *  iter 2: both cached: GPU 0.1, 0.2; the CPU would end 2.0: no steal.
 *    dense 4.0-4.2, GPU 4.2-4.4.  makespan 4.4.
 *  hits 3 (iter 1: 1, iter 2: 2), misses 3, on the CPU 1, demand copies 2.
 * code HSS: prefill all on the GPU; decode iter 1: 1 cached, 2 uncached:
 *  GPU .5 <= CPU 1 + .79; then 1.0 <= 1.79: all GPU.  So it is the LRU
 *  on-demand run: iter 0 copies 0.2-1.7 and 1.7-3.2, GPU to 3.3; iter 1
 *  dense 3.3-3.5, (0,2) evicts (0,0), copied 3.5-5.0, GPU 5.0-5.1; iter 2
 *  5.1-5.5.  on the CPU 0, makespan 5.5.
 * fiddler (every miss on the CPU, serial, nothing loaded: 6 on the CPU):
 *  iter 0 CPU 0.2-4.2; iter 1 both miss: 4.4-8.4; iter 2: 8.6-12.6. */
static void test_hybrid_engine(void)
{
    static const int route[3 * 2] = {0, 1, 1, 2, 1, 2};
    write_trace("hyb_b.h5", 1, 4, 2, 3, route, NULL);
    ms_platform p = test_platform(1.9e-3);
    ms_metrics m = ms_fixture_run("hyb_b.h5", &p, "none", "lru", "hybrid", 2, "hyb_b.csv");
    CHECK_EQ_INT(m.total.on_cpu, 1);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.demand_copies, 2);
    CHECK_EQ_INT(m.phase[MS_PHASE_PREFILL].on_cpu, 1);
    CHECK_EVENT("hyb_b.csv", "compute_cpu", 0, 0, 0, 0.2, 2.2);
    CHECK_EVENT("hyb_b.csv", "copy_demand", 0, 1, 0, 0.2, 1.7);
    CHECK_EVENT("hyb_b.csv", "copy_demand", 0, 2, 0, 2.4, 3.9);
    CHECK_NEAR(m.makespan_s, 4.4 * MS, TOL);
    ms_metrics_free(&m);

    m = ms_fixture_run("hyb_b.h5", &p, "none", "lru", "hybrid:mode=code", 2, NULL);
    CHECK_EQ_INT(m.total.on_cpu, 0);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_NEAR(m.makespan_s, 5.5 * MS, TOL);
    ms_metrics_free(&m);

    m = ms_fixture_run("hyb_b.h5", &p, "none", "lru", "fiddler", 2, NULL);
    CHECK_EQ_INT(m.total.on_cpu, 6);
    CHECK_NEAR(m.makespan_s, 12.6 * MS, TOL);
    ms_metrics_free(&m);
}

/* mrs (paper, p = 2K = 2) vs LRU over 2 slots, L = 1, J = 4, K = 1, full probs
 * (top-2 ties go to the lower id):
 *  iter 0 s = [.1 .1 .7 .1]  top 2  top-2 {2: .7, 0: .1}  S = [.05, 0, .35, 0]
 *  iter 1 s = [.1 .1 .3 .5]  top 3  top-2 {3: .5, 2: .3}  S = [.025, 0, .325, .25]
 *  iter 2 s = [.6 .2 .1 .1]  top 0  top-2 {0: .6, 1: .2}  S = [.3125, .1, .1625, .125]
 *    0 misses with {2, 3} full: MRS evicts 3 (.125 < .1625), LRU evicts 2.
 *  iter 3 s = [.1 .1 .7 .1]  top 2: MRS hit, LRU miss.
 * MRS: 3 misses, 1 hit; LRU: 4 misses.  Times: iter 0 dense 0-0.2, copy
 * 0.2-1.7, GPU -1.8; iter 1 dense -2.0, copy -3.5, GPU -3.6; iter 2 dense
 * -3.8: evict (0,3) at 3.8.
 * mode=code (mrs_bug=1 by default) preloads experts 0, 1 (the budget of 2 is
 * the layer's 2 slots); the top-2 values go to the top-2 ids in id order:
 *  iter 0: ids [0, 2] get [.7, .1]: S = [.35, 0, .05, 0]; 2 misses, the
 *          layer is full: evict 1 (S 0 < .35) at 0.2
 *  iter 1: ids [2, 3] get [.5, .3]: S = [.175, 0, .275, .15]; 3: evict 0
 *          (.175 < .275) at 2.0
 *  iter 2: ids [0, 1] get [.6, .2]: S = [.3875, .1, .1375, .075]; 0: evict 3
 *          (.075 < .1375) at 3.8
 *  iter 3: 2 hits.  3 misses, 1 hit, 3 evictions (paper mode: 1). */
static void test_mrs_engine(void)
{
    static const int route[4] = {2, 3, 0, 2};
    static const float probs[4 * 4] = {0.1f, 0.1f, 0.7f, 0.1f, 0.1f, 0.1f, 0.3f, 0.5f,
                                       0.6f, 0.2f, 0.1f, 0.1f, 0.1f, 0.1f, 0.7f, 0.1f};
    write_trace("hyb_c.h5", 1, 4, 1, 4, route, probs);
    ms_platform p = test_platform(0.15e-3);
    ms_metrics m = ms_fixture_run("hyb_c.h5", &p, "none", "mrs", "gpu", 2, "hyb_c.csv");
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EVENT("hyb_c.csv", "evict", 0, 3, 0, 3.8, 3.8);
    ms_metrics_free(&m);
    m = ms_fixture_run("hyb_c.h5", &p, "none", "lru", "gpu", 2, NULL);
    CHECK_EQ_INT(m.total.misses, 4);
    CHECK_EQ_INT(m.total.hits, 0);
    ms_metrics_free(&m);
    m = ms_fixture_run("hyb_c.h5", &p, "none", "mrs:mode=code", "gpu", 2, "hyb_d.csv");
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EVENT("hyb_d.csv", "evict", 0, 1, 0, 0.2, 0.2);
    CHECK_EVENT("hyb_d.csv", "evict", 0, 0, 0, 2.0, 2.0);
    CHECK_EVENT("hyb_d.csv", "evict", 0, 3, 0, 3.8, 3.8);
    ms_metrics_free(&m);
}

/* predictor=spec on a trace without speculative gates: a one-line error. */
static void test_prefetch_errors(void)
{
    ms_platform p = test_platform(0.15e-3);
    ms_metrics m;
    ms_err err;
    CHECK(ms_fixture_run_cfg("hyb_a.h5", &p, "hybrimoe:predictor=spec", "mrs", "hybrid", 2, NULL, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "predictor=spec needs speculative gate outputs, but hyb_a.h5 has none");
    /* auto falls back to history and runs */
    CHECK(ms_fixture_run_cfg("hyb_a.h5", &p, "hybrimoe", "mrs", "hybrid", 2, NULL, &m, &err) == 0);
    CHECK_EQ_INT(m.total.hits + m.total.late + m.total.misses, 6);
    ms_metrics_free(&m);
}

int main(void)
{
    test_mrs_update();
    test_mrs_against_reference();
    test_hss_fig5();
    test_hss_guard();
    test_hss_code();
    test_impact();
    test_fiddler();
    test_hybrid_engine();
    test_mrs_engine();
    test_prefetch_errors();
    CHECK_DONE();
}
