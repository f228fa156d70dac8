/* fMoE (policies/lib/fmoe_store.h, prefetch/fmoe.c, cache/fmoe.c): every
 * formula on hand-built inputs, then exact hit / miss counts through ms_run
 * on hand-built traces. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_rng.h>

#include "check.h"
#include "fixtures.h"
#include "policies/lib/fmoe_store.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

#define TOL 1e-9

static void test_cosine(void)
{
    /* a.b = 1, |a| = |b| = sqrt 2 -> 1 / 2 */
    const float a[3] = {1, 0, 1}, b[3] = {1, 1, 0}, z[3] = {0, 0, 0};
    CHECK_NEAR(fmoe_cosine(a, b, 3), 0.5, TOL);
    CHECK_NEAR(fmoe_cosine(a, a, 3), 1.0, TOL);
    CHECK_NEAR(fmoe_cosine(a, z, 3), 0.0, 0); /* a zero vector scores 0 */
}

static void test_semantic_argmax(void)
{
    fmoe_store s;
    fmoe_store_init(&s, 4, 1, 2, 2, 1);
    const float map[2] = {0.5f, 0.5f};
    const float e0[2] = {1, 0}, e1[2] = {0.6f, 0.8f}, e2[2] = {0, 1};
    double score = -1;
    CHECK_EQ_INT(fmoe_semantic_search(&s, e0, &score), -1); /* empty store */
    fmoe_store_add(&s, e0, map);
    fmoe_store_add(&s, e1, map);
    fmoe_store_add(&s, e2, map);
    /* query (0.8, 0.6), unit: cos = 0.8 (e0), 0.48 + 0.48 = 0.96 (e1), 0.6 (e2) */
    const float q[2] = {0.8f, 0.6f};
    CHECK_EQ_INT(fmoe_semantic_search(&s, q, &score), 1);
    CHECK_NEAR(score, 0.96, 1e-6);
    /* 3 entries x (2 + 1 x 2) floats x 4 bytes */
    CHECK_EQ_INT(fmoe_store_bytes(&s), 48);
    fmoe_store_free(&s);
}

/* Two maps over L = 3, J = 2; the trajectory (0.8,0.2), (0.3,0.7), (0.1,0.9). */
static void test_trajectory_incremental(void)
{
    fmoe_store s;
    fmoe_store_init(&s, 2, 3, 2, 0, 1);
    const float m0[6] = {1, 0, 0.5f, 0.5f, 0, 1}, m1[6] = {0, 1, 1, 0, 0.5f, 0.5f};
    const float traj[6] = {0.8f, 0.2f, 0.3f, 0.7f, 0.1f, 0.9f};
    fmoe_store_add(&s, NULL, m0);
    fmoe_store_add(&s, NULL, m1);
    double score = -1;
    fmoe_traj_reset(&s);
    CHECK_EQ_INT(fmoe_traj_best(&s, &score), -1); /* nothing observed */
    /* hand values: layer 0: 0.8 / sqrt(0.68); layers 0-1: 1.3 / sqrt(1.26 x 1.5);
     * layers 0-2: 2.2 / sqrt(2.08 x 2.5) */
    const double hand[3] = {0.8 / sqrt(0.68), 1.3 / sqrt(1.26 * 1.5), 2.2 / sqrt(2.08 * 2.5)};
    for (uint32_t l = 0; l < 3; l++) {
        fmoe_traj_observe(&s, l, traj + 2 * l);
        size_t n = 2 * (l + 1);
        CHECK_EQ_INT(fmoe_traj_best(&s, &score), 0);
        CHECK_NEAR(score, fmoe_cosine(traj, m0, n), 1e-9); /* incremental == direct */
        CHECK_NEAR(score, hand[l], 1e-6);
        /* entry 1's running cosine equals its direct cosine too */
        double c1 = s.dot[1] / (sqrt(s.traj_norm2) * sqrt(s.norm2[1]));
        CHECK_NEAR(c1, fmoe_cosine(traj, m1, n), 1e-9);
    }
    /* entry 1 after 3 layers: 1.0 / sqrt(2.08 x 2.5) */
    CHECK_NEAR(s.dot[1] / (sqrt(s.traj_norm2) * sqrt(s.norm2[1])), 1.0 / sqrt(5.2), 1e-6);
    fmoe_traj_reset(&s);
    CHECK_EQ_INT(s.observed, 0);
    CHECK_NEAR(s.dot[0], 0, 0);
    fmoe_store_free(&s);
}

static void test_delta_selection(void)
{
    const float P[4] = {0.05f, 0.5f, 0.15f, 0.3f};
    uint32_t order[4];
    fmoe_sort_desc(P, 4, order);
    CHECK_EQ_INT(order[0], 1);
    CHECK_EQ_INT(order[1], 3);
    CHECK_EQ_INT(order[2], 2);
    CHECK_EQ_INT(order[3], 0);
    CHECK_NEAR(fmoe_delta(0.2), 0.8, 1e-12);
    CHECK_NEAR(fmoe_delta(-0.5), 1.0, 0);
    CHECK_NEAR(fmoe_delta(1.0), 0.0, 0);
    /* score 0.2 -> delta 0.8: 0.5 < 0.8, 0.5 + 0.3 >= 0.8 -> 2 experts */
    CHECK_EQ_INT(fmoe_select_paper(P, order, 4, fmoe_delta(0.2), 1), 2);
    /* score 0.9 -> delta 0.1: 0.5 alone suffices, but K = 2 is the floor */
    CHECK_EQ_INT(fmoe_select_paper(P, order, 4, fmoe_delta(0.9), 1), 1);
    CHECK_EQ_INT(fmoe_select_paper(P, order, 4, fmoe_delta(0.9), 2), 2);
    /* score 0.04 -> delta 0.96: 0.5, 0.8, 0.95 < 0.96 -> all 4 */
    CHECK_EQ_INT(fmoe_select_paper(P, order, 4, fmoe_delta(0.04), 1), 4);
    /* code: cumulative sums 0.5, 0.8000000119 (float), 0.95, 1.0; count <= delta */
    CHECK_EQ_INT(fmoe_select_code(P, order, 4, 0.96, 1), 3);  /* 0.5, 0.8, 0.95 */
    CHECK_EQ_INT(fmoe_select_code(P, order, 4, 0.8, 1), 1);   /* 0.8000000119 > 0.8 */
    CHECK_EQ_INT(fmoe_select_code(P, order, 4, 0.8, 2), 2);   /* clamped to K */
    CHECK_EQ_INT(fmoe_select_code(P, order, 4, 0.1, 1), 1);   /* none <= 0.1, clamped to K */
    CHECK_EQ_INT(fmoe_select_code(P, order, 4, 0.99, 1), 3);
    /* the float sum 0.5 + 0.3 + 0.15 + 0.05 is 1.0000000186 > 1: 3 experts even at delta 1 */
    CHECK_EQ_INT(fmoe_select_code(P, order, 4, 1.0, 1), 3);
    /* exact binary fractions: cumulative 0.5, 0.75, 1, 1 <= 1 -> all 4 */
    const float Q[4] = {0.25f, 0.5f, 0, 0.25f};
    uint32_t qo[4];
    fmoe_sort_desc(Q, 4, qo);
    CHECK_EQ_INT(qo[0], 1);
    CHECK_EQ_INT(qo[1], 0); /* tie 0.25: lower id first */
    CHECK_EQ_INT(fmoe_select_code(Q, qo, 4, 1.0, 1), 4);
    CHECK_EQ_INT(fmoe_select_paper(Q, qo, 4, 0.75, 1), 2);
}

static void test_priorities_and_keys(void)
{
    CHECK_NEAR(fmoe_priority_paper(0.6, 5, 2), 0.2, 1e-12);  /* 0.6 / (5 - 2) */
    CHECK_NEAR(fmoe_priority_paper(0.6, 0, -1), 0.6, 1e-12); /* before layer 0 */
    CHECK_NEAR(fmoe_priority_code(0.5, 6, 4, 7), 0.375, 1e-12); /* 0.5 (1 - 2/8) */
    CHECK_NEAR(fmoe_priority_code(0.5, 4, 4, 7), 0.5, 1e-12);
    CHECK_NEAR(fmoe_evict_key_paper(0.3, 4), 1.2, 1e-12);
    CHECK_NEAR(fmoe_evict_key_code(0.3, 4), 1.0, 0); /* trunc(1.2) */
    CHECK_NEAR(fmoe_evict_key_code(0.2, 4), 0.0, 0); /* trunc(0.8) */
    CHECK_NEAR(fmoe_evict_key_code(0.5, 7), 3.0, 0); /* trunc(3.5) */
}

/* Full store, C = 2, L = 2, J = 2, d = 1 (weights 1/2, 1/2).
 * y0: e (1,0), map (1,0),(1,0); y1: e (0,1), map (0,1),(0,1);
 * x:  e (0,1), map (1,0),(0.6,0.8).
 * score_map: y0 (1 + 0.6) / (sqrt2 sqrt2) = 0.8; y1 0.8 / 2 = 0.4.
 * RDY: y0 0.5 x 0 + 0.5 x 0.8 = 0.4; y1 0.5 x 1 + 0.5 x 0.4 = 0.7 -> y1. */
static void test_rdy_replacement(void)
{
    CHECK_NEAR(fmoe_rdy(1, 2, 1.0, 0.4), 0.7, 1e-12);
    CHECK_NEAR(fmoe_rdy(3, 12, 0.4, 0.8), 0.25 * 0.4 + 0.75 * 0.8, 1e-12);
    fmoe_store s;
    fmoe_store_init(&s, 2, 2, 2, 2, 1);
    const float e0[2] = {1, 0}, m0[4] = {1, 0, 1, 0};
    const float e1[2] = {0, 1}, m1[4] = {0, 1, 0, 1};
    const float ex[2] = {0, 1}, mx[4] = {1, 0, 0.6f, 0.8f};
    CHECK_EQ_INT(fmoe_store_add(&s, e0, m0), 0);
    CHECK_EQ_INT(fmoe_store_add(&s, e1, m1), 1);
    CHECK_EQ_INT(fmoe_store_add(&s, ex, mx), 1);
    CHECK_EQ_INT(s.n, 2);
    float got[4];
    fmoe_store_get_map(&s, 1, got);
    CHECK_NEAR(got[3], 0.8, 1e-7);
    fmoe_store_get_map(&s, 0, got);
    CHECK_NEAR(got[0], 1.0, 0); /* y0 kept */
    /* x again: y1 now equals x (RDY 1) -> y1 replaced again */
    CHECK_EQ_INT(fmoe_store_add(&s, ex, mx), 1);
    fmoe_store_free(&s);
}

/* Cached-norm RDY == the direct formula, on a seeded random stream of adds
 * into a full store (zero maps and zero embeddings included), for D > 0 and
 * D = 0; the replaced entry is the direct argmax (ties to the lower index),
 * and the trajectory search's prefix norms (cached per layer) equal the
 * direct sums. */
#define RC_C 6
#define RC_L 4
#define RC_J 5
#define RC_D 3

static void random_vec(gsl_rng *r, float *v, size_t n)
{
    int zero = gsl_rng_uniform_int(r, 8) == 0;
    for (size_t i = 0; i < n; i++)
        v[i] = zero ? 0.0f : (float)gsl_rng_uniform_int(r, 4) / 4.0f;
}

static uint32_t direct_most_redundant(const fmoe_store *s, const float *emb, const float *map)
{
    size_t LJ = (size_t)s->L * s->J;
    uint32_t best = 0;
    double best_rdy = -INFINITY;
    float e_y[RC_D], m_y[RC_L * RC_J];
    for (uint32_t y = 0; y < s->n; y++) {
        fmoe_store_get_emb(s, y, e_y);
        fmoe_store_get_map(s, y, m_y);
        double sem = s->D ? fmoe_cosine(emb, e_y, s->D) : 0.0;
        double direct = fmoe_rdy(s->d, s->L, sem, fmoe_cosine(map, m_y, LJ));
        CHECK_NEAR(fmoe_store_rdy(s, y, emb, map), direct, 1e-12);
        if (direct > best_rdy) {
            best = y;
            best_rdy = direct;
        }
    }
    return best;
}

static void check_prefix_norms(gsl_rng *r, fmoe_store *s)
{
    float P[RC_J];
    fmoe_traj_reset(s);
    for (uint32_t l = 0; l < RC_L; l++) {
        random_vec(r, P, RC_J);
        fmoe_traj_observe(s, l, P);
        for (uint32_t y = 0; y < s->n; y++) {
            float m_y[RC_L * RC_J];
            fmoe_store_get_map(s, y, m_y);
            double nn = 0;
            for (size_t i = 0; i < (size_t)(l + 1) * RC_J; i++)
                nn += (double)m_y[i] * m_y[i];
            CHECK_NEAR(s->norm2[y], nn, 1e-12);
        }
    }
}

static void test_rdy_cached_equals_direct(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    for (uint32_t D = 0; D <= RC_D; D += RC_D) {
        fmoe_store s;
        fmoe_store_init(&s, RC_C, RC_L, RC_J, D, 1);
        float emb[RC_D], map[RC_L * RC_J];
        uint32_t replaced = 0, distinct_victims = 0, seen[RC_C] = {0};
        for (int k = 0; k < 300; k++) {
            random_vec(r, emb, RC_D);
            random_vec(r, map, RC_L * RC_J);
            uint32_t want = s.n < RC_C ? s.n : direct_most_redundant(&s, emb, map);
            uint32_t got = fmoe_store_add(&s, emb, map);
            CHECK_EQ_INT(got, want);
            if (k >= RC_C) {
                replaced++;
                distinct_victims += !seen[got]++;
            }
            if (k % 50 == 0)
                check_prefix_norms(r, &s);
        }
        CHECK_EQ_INT(replaced, 300 - RC_C);
        CHECK(distinct_victims > 1); /* the cached norms of replaced entries were refreshed */
        check_prefix_norms(r, &s);
        fmoe_store_free(&s);
    }
    gsl_rng_free(r);
}

/* ---- engine level ---- */

static ms_platform test_platform(void) { return ms_fixture_exact_platform(); }

/* n_req requests, each one prefill iteration of one token row (K = 1, J = 4,
 * L = 3); routing[r][l] is its expert.  A copy takes 1.5 ms and a layer's
 * dense work 20 ms, so a prefetch issued one layer ahead always lands before
 * its layer (hits, never late).  emb: embed_dim 2 when non-NULL. */
static void write_requests(const char *path, uint32_t n_req, const int routing[][3], const float emb[][2])
{
    ms_trace_meta m = ms_fixture_hand_meta("test_fmoe", 3, 4, 1, 1000000, 200000000);
    m.embed_dim = emb ? 2 : 0;
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    for (uint32_t q = 0; q < n_req; q++) {
        ms_request r;
        memset(&r, 0, sizeof r);
        r.id = q;
        r.prompt_len = 1;
        r.n_iters = 1;
        r.n_rows = 1;
        ms_request_alloc(&r, &m);
        r.iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, 1};
        for (uint32_t l = 0; l < m.L; l++) {
            r.topk_ids[ms_topk_index(&m, 0, l)] = routing[q][l];
            r.topk_w[ms_topk_index(&m, 0, l)] = 1.0f;
        }
        if (emb) {
            r.embedding[0] = emb[q][0];
            r.embedding[1] = emb[q][1];
        }
        ms_fixture_writer_add(w, &r);
        ms_request_free(&r);
    }
    ms_fixture_writer_close(w);
    ms_trace_meta_free(&m);
}

static double g_policy_op_s = 0; /* policy_op_s of the test platform */

static int run(const char *trace, const char *prefetch, const char *cache, uint32_t cap, double train,
               ms_metrics *m, ms_err *err)
{
    ms_platform p = test_platform();
    p.policy_op_s = g_policy_op_s;
    ms_run_config cfg = {.trace_path = trace, .platform = &p, .prefetch_spec = prefetch, .cache_spec = cache,
                         .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = cap, .distance = 1,
                         .max_batch = 1, .offline = 1, .train_set = 1, .train_frac = train};
    return ms_run(&cfg, m, err);
}

static ms_metrics run_ok(const char *trace, const char *prefetch, const char *cache, uint32_t cap, double train)
{
    ms_metrics m;
    ms_err err;
    if (run(trace, prefetch, cache, cap, train, &m, &err)) {
        fprintf(stderr, "ms_run: %s\n", err.msg);
        exit(1);
    }
    return m;
}

/* Training R0 (0,1,2), R1 (3,2,1); replayed R2 (0,1,2), R3 (3,0,1).
 * Cache of 12: nothing is ever evicted.  Embeddings: R0 (1,0), R1 (0,1),
 * R2 (1,0.1), R3 (0.1,1). */
static const int ROUTING[4][3] = {{0, 1, 2}, {3, 2, 1}, {0, 1, 2}, {3, 0, 1}};
static const float EMB[4][2] = {{1, 0}, {0, 1}, {1, 0.1f}, {0.1f, 1}};

/* Trajectory only (no embeddings), paper, d = 1, --train 0.5 (R0, R1 in the store).
 * R2: layer 0 unguided -> miss; after gate 0 the trajectory e0 matches R0
 *     (cos 1, delta 0, K = 1) -> prefetch (1,1) -> hit; after gate 1 -> R0 ->
 *     (2,2) -> hit.
 * R3: (0,3) miss; after gate 0, e3 matches R1 -> (1,2) prefetched but (1,0)
 *     is needed -> miss; after gate 1, (e3,e0) vs R1 (e3,e2): 1/2, vs R0 0 ->
 *     R1, delta 0.5 -> (2,1) -> hit.
 * hits 3, misses 3, 4 prefetches issued, 3 useful.  Without a prefetcher all 6 miss.
 * Code mode: trajectory at layer l guides [l + 1 + d, L) = layer 2 only, with
 * all 4 experts queued; layer 1 is never guided: R2 (1,1) and R3 (1,0) miss,
 * both layer-2 experts hit -> hits 2, misses 4. */
static void test_engine_trajectory(void)
{
    write_requests("fmoe_a.h5", 4, ROUTING, NULL);
    ms_metrics m = run_ok("fmoe_a.h5", "none", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.total.misses, 6);
    ms_metrics_free(&m);

    m = run_ok("fmoe_a.h5", "fmoe", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.train_requests, 2);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.late, 0);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.prefetch_issued, 4);
    CHECK_EQ_INT(m.prefetch_useful, 3);
    ms_metrics_free(&m);

    m = run_ok("fmoe_a.h5", "fmoe:mode=code", "fmoe:mode=code", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 2);
    CHECK_EQ_INT(m.total.late, 0);
    CHECK_EQ_INT(m.total.misses, 4);
    /* R2 gate 0 queues all 4 of layer 2 (copied); R3's are all cached (ignored) */
    CHECK_EQ_INT(m.prefetch_issued, 4);
    ms_metrics_free(&m);

    /* the top-K ablations give the same here (one-hot maps: delta picks K anyway) */
    m = run_ok("fmoe_a.h5", "fmoe:track=traj", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 3);
    ms_metrics_free(&m);
    /* hitcount: one-iteration requests, so each request's count matrix is
     * its one-hot map and R2, R3 start fresh matrices: the same 3 hits */
    m = run_ok("fmoe_a.h5", "fmoe:track=hitcount", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.prefetch_issued, 4);
    ms_metrics_free(&m);
}

/* Matching cost: every on_gate compares C = 2 maps x J = 4 values = 8
 * operations; at 3 ms each that is 24 ms, longer than the 21.6 ms from a gate
 * to the next layer's gate (1.5 ms demand copy + 0.1 ms compute + 20 ms
 * dense).  async=1: the prefetch is issued after that layer's gate, so the 3
 * trajectory hits become misses, compute is not delayed.  async=0: compute
 * waits, the prefetches land: 3 hits.  Charged: 2 requests x 3 gates x 24 ms
 * = 0.144 s either way. */
static void test_engine_async_cost(void)
{
    g_policy_op_s = 3e-3;
    ms_metrics m = run_ok("fmoe_a.h5", "fmoe", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.total.misses, 6);
    CHECK_NEAR(m.policy_async_s, 0.144, 1e-12);
    CHECK_NEAR(m.policy_sync_s, 0, 0);
    double async_makespan = m.makespan_s;
    ms_metrics_free(&m);
    m = run_ok("fmoe_a.h5", "fmoe:async=0", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_NEAR(m.policy_sync_s, 0.144, 1e-12);
    CHECK(m.makespan_s > async_makespan);
    ms_metrics_free(&m);
    g_policy_op_s = 0;
}

/* With embeddings the semantic search also guides layer 0 (d = 1):
 * R2 (1,0.1) matches R0 (cos 1/sqrt(1.01)) -> (0,0) prefetched before layer 0
 * -> hit; R3 matches R1 -> (0,3) -> hit.  hits 5, misses 1 (R3's (1,0)).
 * semantic=off gives the trajectory-only 3 hits. */
static void test_engine_semantic(void)
{
    write_requests("fmoe_b.h5", 4, ROUTING, EMB);
    ms_metrics m = run_ok("fmoe_b.h5", "fmoe", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 5);
    CHECK_EQ_INT(m.total.misses, 1);
    CHECK_EQ_INT(m.prefetch_issued, 6);
    CHECK_EQ_INT(m.prefetch_useful, 5);
    ms_metrics_free(&m);

    m = run_ok("fmoe_b.h5", "fmoe:semantic=off", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 3);
    ms_metrics_free(&m);

    /* traj ablation ignores the embeddings */
    m = run_ok("fmoe_b.h5", "fmoe:track=traj", "fmoe", 12, 0.5);
    CHECK_EQ_INT(m.total.hits, 3);
    ms_metrics_free(&m);
}

/* Online store, no training split, all 3 replayed, LRU over 3 experts (each
 * request's 3 experts push out the previous ones).
 * R0 (0,1,2): store empty -> 3 misses; R0 joins the store.
 * R1 (1,3,3): after gate 0, e1 scores 0 against R0 -> R0 guides (1,1), but
 *   it is cached (ignored); likewise (2,2): 3 misses; R1 joins.
 * R2 (0,1,2): (0,0) misses (evicted by R1); after gate 0, e0 matches R0
 *   (cos 1) -> (1,1) prefetched (evicting R1's (1,3)) -> hit; after gate 1
 *   -> (2,2) -> hit.  hits 2, misses 7, issued 2.
 * Without a prefetcher: 9 misses. */
static void test_engine_online(void)
{
    static const int routing[3][3] = {{0, 1, 2}, {1, 3, 3}, {0, 1, 2}};
    write_requests("fmoe_d.h5", 3, routing, NULL);
    ms_metrics m = run_ok("fmoe_d.h5", "fmoe:store=online", "lru", 3, 0);
    CHECK_EQ_INT(m.total.hits, 2);
    CHECK_EQ_INT(m.total.late, 0);
    CHECK_EQ_INT(m.total.misses, 7);
    CHECK_EQ_INT(m.prefetch_issued, 2);
    CHECK_EQ_INT(m.prefetch_useful, 2);
    ms_metrics_free(&m);
    m = run_ok("fmoe_d.h5", "none", "lru", 3, 0);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.total.misses, 9);
    ms_metrics_free(&m);
}

/* Cache only (no prefetcher: every p is eps / 0), one layer, cap 2, experts
 * 0,0,1,2,0 over five requests.
 * paper: at expert 2, (0,0) has p x freq = 2 eps, (0,1) eps -> evict (0,1);
 *        the last 0 hits: hits 2, misses 3.
 * code:  trunc(0 x count) = 0 for both -> least recent (0,0) evicted; the
 *        last 0 misses: hits 1, misses 4. */
static void test_engine_cache_keys(void)
{
    static const int seq[5][3] = {{0, 0, 0}, {0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {0, 0, 0}};
    write_requests("fmoe_c.h5", 5, seq, NULL);
    /* layers 1, 2 always use expert 0 and stay cached with cap 2 + 2 = 4 */
    ms_metrics m = run_ok("fmoe_c.h5", "none", "fmoe", 4, 0);
    /* layers 1-2: 2 misses then 8 hits */
    CHECK_EQ_INT(m.total.hits, 2 + 8);
    CHECK_EQ_INT(m.total.misses, 3 + 2);
    ms_metrics_free(&m);
    m = run_ok("fmoe_c.h5", "none", "fmoe:mode=code", 4, 0);
    CHECK_EQ_INT(m.total.hits, 1 + 8);
    CHECK_EQ_INT(m.total.misses, 4 + 2);
    ms_metrics_free(&m);
}

static void test_errors(void)
{
    ms_metrics m;
    ms_err err;
    CHECK(run("fmoe_a.h5", "fmoe:semantic=on", "fmoe", 12, 0.5, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "fmoe_a.h5 has no semantic embeddings");
    CHECK(run("fmoe_a.h5", "fmoe", "fmoe", 12, 0, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "needs a training split");
    CHECK(run("fmoe_b.h5", "fmoe:track=traj,semantic=on", "fmoe", 12, 0.5, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "conflicts with track=traj");
    CHECK(run("fmoe_a.h5", "fmoe:capacity=0", "fmoe", 12, 0.5, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "out of range");
}

int main(void)
{
    test_cosine();
    test_semantic_argmax();
    test_trajectory_incremental();
    test_delta_selection();
    test_priorities_and_keys();
    test_rdy_replacement();
    test_rdy_cached_equals_direct();
    test_engine_trajectory();
    test_engine_async_cost();
    test_engine_semantic();
    test_engine_online();
    test_engine_cache_keys();
    test_errors();
    CHECK_DONE();
}
