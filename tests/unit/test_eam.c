/* MoE-Infinity (prefetch `eam`, cache `eam`, policies/lib/eam_common.h): every
 * expected value below is computed by hand in the comment beside it.
 *
 * Engine tests use the platform of test_engine_exact.c: a 1 MB expert copy
 * takes 0.5 ms latency + 1 ms = 1.5 ms, expert compute 0.1 ms, dense work
 * 0.2 ms; layers are 0-based. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "policies/lib/eam_common.h"
#include "sim/engine/engine.h"
#include "traces/import/import.h"
#include "traces/format/trace.h"

#define TOL 1e-12
#define S2 0.70710678118654752 /* 1 / sqrt(2) */

/* ------------------------------------------------------------------ */
/* formulas */

static void test_distance(void)
{
    /* M1 = [[1,1,0],[0,0,0]], M2 = [[1,0,0],[2,1,1]] (L=2, J=3).
     * row 0: [.5,.5,0] . [1,0,0] = .5, norms sqrt(.5) and 1 -> cos = 1/sqrt2;
     * row 1: M1's row is zero -> cos 0.  d = 1 - (1/sqrt2 + 0) / 2 = 0.646446609... */
    const double m1[6] = {1, 1, 0, 0, 0, 0}, m2[6] = {1, 0, 0, 2, 1, 1};
    CHECK_NEAR(eam_row_cosine(m1, m2, 3), S2, TOL);
    CHECK_NEAR(eam_row_cosine(m1 + 3, m2 + 3, 3), 0.0, 0);
    CHECK_NEAR(eam_distance(m1, m2, 2, 3), 1 - S2 / 2, TOL);
    CHECK_NEAR(eam_distance(m2, m1, 2, 3), 1 - S2 / 2, TOL);
    /* a zero row gives 0 even against itself: d(M1, M1) = 1 - (1 + 0) / 2 = 0.5 */
    CHECK_NEAR(eam_distance(m1, m1, 2, 3), 0.5, TOL);
    /* scale-free (requirement (ii)): d(M2, 3 M2) = 0 */
    const double m2x3[6] = {3, 0, 0, 6, 3, 3};
    CHECK_NEAR(eam_distance(m2, m2x3, 2, 3), 0.0, TOL);
    /* [[2,2,0],[0,3,0]] vs [[0,0,5],[0,1,0]]: cos 0 and 1 -> d = 0.5 */
    const double a[6] = {2, 2, 0, 0, 3, 0}, b[6] = {0, 0, 5, 0, 1, 0};
    CHECK_NEAR(eam_distance(a, b, 2, 3), 0.5, TOL);
}

static void test_priorities(void)
{
    /* Algorithm 1 line 26, f = 1 of L = 4: (3/4 + 1e-8)(1 - 1/4) = 0.5625000075 */
    CHECK_NEAR(eam_priority_paper(3, 4, 1, 4), 0.5625000075, 1e-15);
    /* zero activation ratio at f = 2: (0 + 1e-8)(1 - 2/4) = 5e-9 */
    CHECK_NEAR(eam_priority_paper(0, 4, 2, 4), 5e-9, 1e-20);
    /* a zero row (no tokens): p = 0 */
    CHECK_NEAR(eam_priority_paper(0, 0, 0, 4), 1e-8, 1e-20);
    /* layer 0 keeps the full ratio: (1/2 + 1e-8) x 1 */
    CHECK_NEAR(eam_priority_paper(2, 4, 0, 4), 0.50000001, 1e-15);
    /* code: (3 + 1e-8)(1 - (2 - 1)/(4 + 1)) = 2.400000008 */
    CHECK_NEAR(eam_priority_code(3, 2, 1, 4), 2.400000008, 1e-12);
    /* code at l = l_now: (0 + 1e-8) x 1 */
    CHECK_NEAR(eam_priority_code(0, 1, 1, 4), 1e-8, 1e-20);
}

static void test_code_masking_changes_match(void)
{
    /* L = 2, J = 2; cur = [[1,0],[0,1]]; entry A = [[1,0],[1,1]], B = [[0,1],[0,1]].
     * paper: d(A) = 1 - (1 + 1/sqrt2)/2 = 0.1464..., d(B) = 1 - (0 + 1)/2 = 0.5 -> A.
     * code at l_now = 0: row 0 of both entries -> [1e-9, 1e-9] -> [.5,.5], cos with [1,0] = 1/sqrt2;
     * d(A) = 1 - (1/sqrt2 + 1/sqrt2)/2 = 0.2928..., d(B) = 1 - (1/sqrt2 + 1)/2 = 0.1464... -> B. */
    const double cur[4] = {1, 0, 0, 1};
    const double A[4] = {1, 0, 1, 1}, B[4] = {0, 1, 0, 1};
    CHECK_NEAR(eam_distance_code(A, cur, 2, 2, 0), 1 - S2, TOL);
    CHECK_NEAR(eam_distance_code(B, cur, 2, 2, 0), 1 - (S2 + 1) / 2, TOL);
    eam_set c;
    eam_set_init(&c, 2, 2);
    eam_set_push(&c, A);
    eam_set_push(&c, B);
    CHECK_EQ_INT(eam_match(&c, cur, EAM_MODE_PAPER, 0), 0);
    CHECK_EQ_INT(eam_match(&c, cur, EAM_MODE_CODE, 0), 1);
    /* at l_now = 1 every row is masked: all entries tie -> the lowest index */
    CHECK_EQ_INT(eam_match(&c, cur, EAM_MODE_CODE, 1), 0);
    /* ties in paper mode go to the first entry too: cur2 = [[1,1],[0,0]]: row 0 cos = 1/sqrt2 with
     * both A's [1,0] and B's [0,1], row 1 is zero -> both at 1 - (1/sqrt2)/2 */
    const double cur2[4] = {1, 1, 0, 0};
    CHECK_NEAR(eam_distance(A, cur2, 2, 2), eam_distance(B, cur2, 2, 2), TOL);
    CHECK_EQ_INT(eam_match(&c, cur2, EAM_MODE_PAPER, 0), 0);
    eam_set_free(&c);
}

/* ------------------------------------------------------------------ */
/* incremental paper-mode matcher == direct argmin of eam_distance */

#define MT_L 6
#define MT_J 5
#define MT_P 9

/* A random count row: zero with probability 1/4, else counts in [0, 3]. */
static void random_row(gsl_rng *r, double *row)
{
    int zero = gsl_rng_uniform_int(r, 4) == 0;
    for (uint32_t e = 0; e < MT_J; e++)
        row[e] = zero ? 0.0 : (double)gsl_rng_uniform_int(r, 4);
}

/* MT_P random entries; entries 3 and 7 duplicate entries 1 and 2 (exact ties). */
static void random_collection(gsl_rng *r, eam_set *c)
{
    double m[MT_P][MT_L * MT_J];
    eam_set_clear(c);
    for (uint32_t i = 0; i < MT_P; i++) {
        for (uint32_t l = 0; l < MT_L; l++)
            random_row(r, m[i] + l * MT_J);
        if (i == 3 || i == 7)
            memcpy(m[i], m[i == 3 ? 1 : 2], sizeof m[i]);
        eam_set_push(c, m[i]);
    }
}

static uint32_t direct_argmin(const eam_set *c, const double *cur, double *dist)
{
    uint32_t best = UINT32_MAX;
    double bd = INFINITY;
    for (uint32_t i = 0; i < c->n; i++) {
        double d = eam_distance(eam_set_at(c, i), cur, c->L, c->J);
        if (d < bd) {
            bd = d;
            best = i;
        }
    }
    *dist = bd;
    return best;
}

/* portable: the plain vector (or C) dot products even where the CPU has AVX;
 * gens: told which rows were rewritten (eam_matcher_match_gen), as the
 * tracker tells it: a rewritten row's generation moves (sometimes with no
 * change), an untouched one's does not. */
static void test_incremental_matcher(int portable, int gens)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 2024);
    eam_set c;
    eam_set_init(&c, MT_L, MT_J);
    eam_matcher m;
    eam_matcher_init(&m, MT_L, MT_J);
    if (portable)
        m.avx = 0;
    double cur[MT_L * MT_J] = {0}; /* starts all zero: every distance is 1, a tie -> entry 0 */
    double d_inc = 0, d_dir = 0;
    uint64_t gen[MT_L] = {0};
    CHECK_EQ_INT(eam_matcher_match(&m, &c, cur, &d_inc), UINT32_MAX); /* empty collection */
    random_collection(r, &c);
    uint32_t ties = 0, zero_rows = 0, rebuilds = 0, wholes = 0;
    for (int step = 0; step < 4000; step++) {
        uint32_t what = (uint32_t)gsl_rng_uniform_int(r, 100), l = (uint32_t)gsl_rng_uniform_int(r, MT_L);
        if (what < 70) { /* the engine's case: layer l's row grows */
            for (uint32_t e = 0; e < MT_J; e++)
                cur[l * MT_J + e] += (double)gsl_rng_uniform_int(r, 3);
            gen[l]++;
        } else if (what < 80) { /* a row drops to zero */
            memset(cur + l * MT_J, 0, MT_J * sizeof *cur);
            gen[l]++;
            zero_rows++;
        } else if (what < 88) { /* a new batch: every row may change */
            for (uint32_t k = 0; k < MT_L; k++) {
                random_row(r, cur + k * MT_J);
                gen[k]++;
            }
            wholes++;
        } else if (what < 93) { /* the collection is rebuilt (same set, new version) */
            random_collection(r, &c);
            rebuilds++;
        } else if (what < 96) { /* cur becomes a copy of an entry's duplicate: distance 0, tie 1 == 3 */
            memcpy(cur, eam_set_at(&c, 3), sizeof cur);
            for (uint32_t k = 0; k < MT_L; k++)
                gen[k]++;
        } else if (what < 98) { /* every row rewritten, none changed */
            for (uint32_t k = 0; k < MT_L; k++)
                gen[k]++;
        } /* else: nothing changed since the last match */
        uint32_t want = direct_argmin(&c, cur, &d_dir);
        uint32_t got = gens ? eam_matcher_match_gen(&m, &c, cur, gen, &d_inc) : eam_matcher_match(&m, &c, cur, &d_inc);
        CHECK_EQ_INT(got, want);
        CHECK(d_inc == d_dir); /* bit for bit */
        CHECK_EQ_INT(eam_match(&c, cur, EAM_MODE_PAPER, 0), want);
        ties += want == 1 && eam_distance(eam_set_at(&c, 3), cur, MT_L, MT_J) == d_dir;
    }
    /* the sequence really exercised every case */
    CHECK(ties > 0);
    CHECK(zero_rows > 100);
    CHECK(rebuilds > 100);
    CHECK(wholes > 100);
    /* another set with the same version still refreshes the entry stats */
    eam_set c2;
    eam_set_init(&c2, MT_L, MT_J);
    random_collection(r, &c2);
    c2.version = c.version;
    CHECK_EQ_INT(eam_matcher_match(&m, &c2, cur, &d_inc), direct_argmin(&c2, cur, &d_dir));
    CHECK(d_inc == d_dir);
    eam_set_free(&c2);
    eam_matcher_free(&m);
    eam_set_free(&c);
    gsl_rng_free(r);
}

/* Six 1 x 2 EAMs: three near expert 0, three near expert 1. */
static void six_samples(eam_set *s)
{
    static const double x[6][2] = {{10, 0}, {9, 1}, {10, 1}, {0, 10}, {1, 9}, {1, 10}};
    eam_set_init(s, 1, 2);
    for (int i = 0; i < 6; i++)
        eam_set_push(s, x[i]);
}

static void test_kmeans(void)
{
    eam_set s, out;
    six_samples(&s);
    uint32_t assign[6], assign2[6];
    double cent[4], cent2[4];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    eam_kmeans(&s, 2, r, 100, assign, cent);
    /* the known answer: {0,1,2} and {3,4,5} */
    CHECK(assign[0] == assign[1] && assign[1] == assign[2]);
    CHECK(assign[3] == assign[4] && assign[4] == assign[5]);
    CHECK(assign[0] != assign[3]);
    /* centroid of {0,1,2} = mean of normalised rows [1,0], [.9,.1], [10/11,1/11]
     * = [(1 + .9 + 10/11)/3, (0 + .1 + 1/11)/3] = [0.936363..., 0.063636...] */
    uint32_t c0 = assign[0];
    CHECK_NEAR(cent[2 * c0], (1 + 0.9 + 10.0 / 11) / 3, 1e-12);
    CHECK_NEAR(cent[2 * c0 + 1], (0.1 + 1.0 / 11) / 3, 1e-12);
    /* determinism: the same seed gives the same clusters and centroids */
    gsl_rng_set(r, 7);
    eam_kmeans(&s, 2, r, 100, assign2, cent2);
    CHECK(!memcmp(assign, assign2, sizeof assign));
    CHECK(!memcmp(cent, cent2, sizeof cent));
    /* EAMC: per cluster the member nearest its centroid.  Angles from expert 0's axis:
     * centroid atan(.0636/.9364) = 0.0678 rad; members 0, atan(1/9) = 0.1107, atan(1/10) = 0.0997
     * -> sample 2 ([10,1]); by symmetry sample 5 ([1,10]) for the other cluster. */
    eam_set_init(&out, 1, 2);
    gsl_rng_set(r, 7);
    eam_build_collection(&s, 2, r, 100, &out);
    CHECK_EQ_INT(out.n, 2);
    const double *k0 = eam_set_at(&out, c0 == 0 ? 0 : 1), *k1 = eam_set_at(&out, c0 == 0 ? 1 : 0);
    CHECK(k0[0] == 10 && k0[1] == 1);
    CHECK(k1[0] == 1 && k1[1] == 10);
    /* fewer samples than P: all kept, in order */
    eam_build_collection(&s, 300, r, 100, &out);
    CHECK_EQ_INT(out.n, 6);
    CHECK(!memcmp(out.m, s.m, 12 * sizeof(double)));
    gsl_rng_free(r);
    eam_set_free(&s);
    eam_set_free(&out);
}

/* ------------------------------------------------------------------ */
/* hand-built traces */

static ms_platform test_platform(void) { return ms_fixture_exact_platform(); }

#define MAXL 3

/* n_req requests; request q has n_it[q] one-token iterations; route[q][i][l]
 * is the one expert (K = 1) of iteration i at layer l.  J = 4. */
static void write_trace(const char *path, uint32_t L, uint32_t n_req, const uint32_t *n_it,
                        const int route[][4][MAXL])
{
    ms_trace_meta m = ms_fixture_hand_meta("test_eam", L, 4, 1, 1000000, 2000000);
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    for (uint32_t q = 0; q < n_req; q++) {
        ms_request r;
        memset(&r, 0, sizeof r);
        r.id = q;
        r.prompt_len = 1;
        r.output_len = n_it[q] - 1;
        r.n_iters = n_it[q];
        r.n_rows = n_it[q];
        ms_request_alloc(&r, &m);
        for (uint32_t i = 0; i < n_it[q]; i++) {
            r.iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
            for (uint32_t l = 0; l < L; l++) {
                r.topk_ids[ms_topk_index(&m, i, l)] = route[q][i][l];
                r.topk_w[ms_topk_index(&m, i, l)] = 1.0f;
            }
        }
        ms_fixture_writer_add(w, &r);
        ms_request_free(&r);
    }
    ms_fixture_writer_close(w);
    ms_trace_meta_free(&m);
}

static int run_cfg(const char *trace, const ms_platform *p, const char *prefetch, const char *cache, uint32_t cap,
                   double train, double host_bytes, ms_metrics *m, ms_err *err)
{
    ms_run_config cfg = {.trace_path = trace, .platform = p, .prefetch_spec = prefetch, .cache_spec = cache,
                         .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = cap, .distance = 1,
                         .max_batch = 1, .seed = 1, .train_set = train >= 0, .train_frac = train,
                         .host_bytes = host_bytes};
    return ms_run(&cfg, m, err);
}

static ms_metrics run(const char *trace, const ms_platform *p, const char *prefetch, const char *cache,
                      uint32_t cap, double train)
{
    ms_metrics m;
    ms_err err;
    if (run_cfg(trace, p, prefetch, cache, cap, train, 0, &m, &err)) {
        fprintf(stderr, "ms_run %s / %s: %s\n", prefetch, cache, err.msg);
        exit(1);
    }
    return m;
}

/* One request, L = 2, cache of 2 experts, no prefetch; iterations route
 * (l0, l1) = (0,1), (0,2), (3,1), (0,1). */
static void write_cache_trace(void)
{
    static const int route[1][4][MAXL] = {{{0, 1}, {0, 2}, {3, 1}, {0, 1}}};
    static const uint32_t n_it[1] = {4};
    write_trace("eam_cache.h5", 2, 1, n_it, route);
}

static void test_cache_algorithm2(const ms_platform *p)
{
    /* Algorithm 2, victim = argmin (cur[l][e] / sum cur[l] + 1e-8)(1 - l/2):
     * it0: (0,0), (1,1) miss.                           cache {(0,0),(1,1)}
     * it1: (0,0) hit.  (1,2) miss: cur[0] = {0:2}, cur[1] = {1:1, 2:1}:
     *      (0,0) -> 1 x 1 = 1, (1,1) -> .5 x .5 = .25: evict (1,1).    {(0,0),(1,2)}
     * it2: (0,3) miss: cur[0] = {0:2, 3:1}: (0,0) -> 2/3, (1,2) -> .5 x .5 = .25:
     *      evict (1,2) (LRU would evict (0,0)).                       {(0,0),(0,3)}
     *      (1,1) miss: cur[1] = {1:2, 2:1}; (0,0) -> 2/3, (0,3) -> 1/3: evict (0,3).
     * it3: (0,0) hit, (1,1) hit.   hits 3, misses 5. */
    ms_metrics m = run("eam_cache.h5", p, "none", "eam", 2, 0);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 5);
    ms_metrics_free(&m);
    /* LRU on the same trace: it2 evicts (0,0) and (1,2), it3 misses (0,0): hits 2, misses 6 */
    m = run("eam_cache.h5", p, "none", "lru", 2, 0);
    CHECK_EQ_INT(m.total.hits, 2);
    CHECK_EQ_INT(m.total.misses, 6);
    ms_metrics_free(&m);
}

static void test_cache_code_modes(const ms_platform *p)
{
    /* code (2024), no prefetcher so nothing is listed: most visited first (+1 per copy, +1 per
     * hit, reset on eviction; ties in std::sort order over (layer, id), stable for <= 16 residents):
     * it0: (0,0)=1, (1,1)=1.
     * it1: (0,0) hit -> 2.  (1,2) miss: evict the MOST visited (0,0); (1,2)=1.  {(1,1),(1,2)}
     * it2: (0,3) miss: (1,1)=1, (1,2)=1 tie -> first = (1,1).  (1,1) miss: (0,3)=1, (1,2)=1
     *      -> (0,3).                                                           {(1,2),(1,1)}
     * it3: (0,0) miss: tie -> (1,1); (1,1) miss: tie (0,0) before (1,2) -> (0,0).
     * hits 1, misses 7.  (tests/unit/test_code_modes.c: ties past 16 residents, the list,
     * overflow.) */
    ms_metrics m = run("eam_cache.h5", p, "none", "eam:mode=code", 2, 0);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 7);
    ms_metrics_free(&m);
    /* code-head: counts never reset, lowest count first scanned expert-major; the free space
     * (2 experts, one less per activation) is below one from it1 on, so each miss evicts one:
     * it1 evicts (1,1) (count 1 < (0,0)'s 2); it2 evicts (1,2) then (0,3); (1,1) comes back with
     * count 2; it3 hits both: hits 3, misses 5 (here the same as lfu:reset=0) */
    m = run("eam_cache.h5", p, "none", "eam:mode=code-head", 2, 0);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 5);
    ms_metrics_free(&m);
    m = run("eam_cache.h5", p, "none", "lfu:reset=0", 2, 0);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 5);
    ms_metrics_free(&m);
}

/* L = 3.  Training requests A (every layer expert 0) and B (experts 0, 1, 1),
 * two iterations each; replayed request R: one iteration routed (0, 1, 1).
 * --train 0.6 of 3 requests -> ceil(1.8) = 2 training requests; EAMC = {A, B}
 * (2 <= P: both kept, in order). */
static void write_prefetch_trace(void)
{
    static const int route[3][4][MAXL] = {
        {{0, 0, 0}, {0, 0, 0}},
        {{0, 1, 1}, {0, 1, 1}},
        {{0, 1, 1}},
    };
    static const uint32_t n_it[3] = {2, 2, 1};
    write_trace("eam_pf.h5", 3, 3, n_it, route);
}

static void test_prefetch_paper(const ms_platform *p)
{
    /* Cache of all 12 experts, lru (no evictions).  Continuous (refine=1):
     * l0: dense 0-0.2; (0,0) miss, demand 0.2-1.7.  Match: cur = [[1,0,0,0],0,0]: A and B both at
     *     1 - 1/3 -> tie -> A.  Queue: (1,0) (1+1e-8)(2/3), (2,0) (1+1e-8)(1/3), the rest ~1e-8.
     *     Link: (1,0) 1.7-3.2.
     * l1: dense 1.8-2.0; (1,1) miss: demand 3.2-4.7.  Match: A: 1 - (1+0+0)/3 = 2/3,
     *     B: 1 - (1+1+0)/3 = 1/3 -> B: (2,1) gets (1+1e-8)(1/3) and (2,0) drops to 1e-8/3.
     *     Link: (2,1) 4.7-6.2.
     * l2: dense 4.8-5.0; (2,1) in flight: late.   misses 2, late 1, hits 0. */
    ms_metrics m = run("eam_pf.h5", p, "eam", "lru", 12, 0.6);
    CHECK_EQ_INT(m.train_requests, 2);
    CHECK_EQ_INT(m.total.misses, 2);
    CHECK_EQ_INT(m.total.late, 1);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.prefetch_late, 1);
    /* matching cost: 3 matches x 2 entries x L=3 x J=4 x 1e-9 s */
    CHECK_NEAR(m.policy_async_s, 3 * 2 * 3 * 4 * 1e-9, 1e-18);
    ms_metrics_free(&m);

    /* One-shot (refine=0): no re-match after l1, so (2,0) (1/3) is copied 4.7-6.2 instead of (2,1);
     * l2: (2,1) misses, demand behind (2,0): misses 3, late 0; one match charged. */
    m = run("eam_pf.h5", p, "eam:refine=0", "lru", 12, 0.6);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.total.late, 0);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_NEAR(m.policy_async_s, 1 * 2 * 3 * 4 * 1e-9, 1e-18);
    ms_metrics_free(&m);
}

static void test_prefetch_code_differs(const ms_platform *p)
{
    /* code (2024): the collection is empty, so the queue is every expert of the later layers,
     * layer by layer, ids ascending, replaced before each layer's loads (dense 0.2, copy 1.5):
     * l0 (t 0): (1,0..3), (2,0..3) queued (8 issued); (1,0) copies 0-1.5; (0,0) misses at 0.2,
     *     demand 1.5-3.0, compute 3.0-3.1; (1,1) copies 3.0-4.5.
     * l1 (3.1): the queue is replaced: 6 cancelled, (2,0..3) queued (4 issued); (1,1) is in
     *     flight at the gate (3.3): late; compute 4.5-4.6; (2,0) copies 4.5-6.0.
     * l2 (4.6): the queue is cleared (3 cancelled), nothing queued; (2,1) misses.
     * misses 2, late 1, hits 0, 12 issued, 9 cancelled. */
    ms_metrics m = run("eam_pf.h5", p, "eam:mode=code", "lru", 12, 0.6);
    CHECK_EQ_INT(m.total.misses, 2);
    CHECK_EQ_INT(m.total.late, 1);
    CHECK_EQ_INT(m.total.hits, 0);
    CHECK_EQ_INT(m.prefetch_issued, 12);
    CHECK_EQ_INT(m.prefetch_cancelled, 9);
    ms_metrics_free(&m);
    /* code-head never prefetches */
    m = run("eam_pf.h5", p, "eam:mode=code-head", "lru", 12, 0.6);
    CHECK_EQ_INT(m.prefetch_issued, 0);
    CHECK_EQ_INT(m.total.misses, 3);
    ms_metrics_free(&m);
}

/* Two requests, both one iteration routed (0, 1, 1); no training split. */
static void test_online_rebuild(const ms_platform *p)
{
    static const int route[2][4][MAXL] = {{{0, 1, 1}}, {{0, 1, 1}}};
    static const uint32_t n_it[2] = {1, 1};
    write_trace("eam_online.h5", 3, 2, n_it, route);
    /* R1: empty EAMC, no prefetch; 3 misses, hit rate 0 < threshold 1 -> collected; rebuild_after=1
     * -> EAMC = {R1}.  R2 l0: (0,0) hit; match R1; later layers' uncached experts queued:
     * (1,0),(1,2),(1,3),(2,0),(2,2),(2,3) = 6 issued (re-submissions with unchanged priority
     * are skipped); (1,1), (2,1) hit. */
    ms_metrics m = run("eam_online.h5", p, "eam:threshold=1,rebuild_after=1", "lru", 12, 0);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.prefetch_issued, 6);
    ms_metrics_free(&m);
    /* rebuild_after=2: never rebuilt, nothing prefetched */
    m = run("eam_online.h5", p, "eam:threshold=1,rebuild_after=2", "lru", 12, 0);
    CHECK_EQ_INT(m.prefetch_issued, 0);
    CHECK_EQ_INT(m.total.hits, 3);
    ms_metrics_free(&m);
    /* hit rate 0 is not below threshold 0: never collected */
    m = run("eam_online.h5", p, "eam:threshold=0,rebuild_after=1", "lru", 12, 0);
    CHECK_EQ_INT(m.prefetch_issued, 0);
    ms_metrics_free(&m);
    /* no training and online=0: a one-line error naming the trace */
    ms_err err;
    CHECK(run_cfg("eam_online.h5", p, "eam:online=0", "lru", 12, 0, 0, &m, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "eam_online.h5");
    CHECK_STR_CONTAINS(err.msg, "online=0");
}

static void test_tiers(const ms_platform *p)
{
    /* host tier of 4 experts (4 MB) for a 12-expert model: some copies come from SSD */
    ms_metrics m;
    ms_err err;
    int rc = run_cfg("eam_pf.h5", p, "eam", "eam", 4, 0.6, 4e6, &m, &err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(m.ssd_bytes > 0);
        CHECK_NEAR(m.host_bytes, 4e6, 0);
        CHECK_EQ_INT(m.total.hits + m.total.late + m.total.misses, 3);
        ms_metrics_free(&m);
    }
}

static void test_training_windows(void)
{
    /* one request of 4 iterations routing layer 0 to expert i at iteration i, split by
     * iteration at 3, window 2. */
    static const int route[1][4][MAXL] = {{{0}, {1}, {2}, {3}}};
    static const uint32_t n_it[1] = {4};
    write_trace("eam_win.h5", 1, 1, n_it, route);
    ms_err err;
    ms_trace_reader *rd = ms_reader_open("eam_win.h5", &err);
    CHECK(rd != NULL);
    if (!rd)
        return;
    ms_policy_env env;
    memset(&env, 0, sizeof env);
    env.meta = ms_reader_meta(rd);
    env.trace_path = "eam_win.h5";
    env.split = (ms_split){.frac = 0.75, .by_iteration = 1, .train_iters = 3};
    CHECK_EQ_INT(eam_window_for(&env, 2), 2);
    eam_set s;
    eam_set_init(&s, 1, 4);
    CHECK(eam_collect_training(&env, 2, &s, &err) == 0);
    /* training iterations 0, 1, 2 -> windows {0,1} = [1,1,0,0] and {2} = [0,0,1,0] */
    CHECK_EQ_INT(s.n, 2);
    const double w0[4] = {1, 1, 0, 0}, w1[4] = {0, 0, 1, 0};
    CHECK(s.n == 2 && !memcmp(eam_set_at(&s, 0), w0, sizeof w0) && !memcmp(eam_set_at(&s, 1), w1, sizeof w1));
    eam_set_free(&s);
    ms_reader_close(rd);
}

/* The imported gpt-oss trace (one request, split by iteration: EAM windows):
 * every mode replays; the same run twice gives the same counts; paper and
 * code differ. */
static void test_real_trace(const ms_platform *p)
{
    char in[1024];
    snprintf(in, sizeof in, "%s/traces/bigmoeonedge/gptoss.route.csv", MS_TEST_SHARED);
    ms_err err;
    if (ms_import_routecsv(in, "eam_gptoss.h5", NULL, &err)) {
        fprintf(stderr, "import %s: %s\n", in, err.msg);
        ms_check_failures++;
        return;
    }
    static const char *modes[3] = {"paper", "code", "code-head"};
    uint64_t hits[3];
    for (int i = 0; i < 3; i++) {
        char pf[64], ca[64];
        snprintf(pf, sizeof pf, "eam:mode=%s", modes[i]);
        snprintf(ca, sizeof ca, "eam:mode=%s", modes[i]);
        ms_metrics a = run("eam_gptoss.h5", p, pf, ca, 300, -1), b = run("eam_gptoss.h5", p, pf, ca, 300, -1);
        CHECK(a.train_by_iteration == (i == 0)); /* only paper mode learns */
        CHECK(a.total.hits + a.total.late + a.total.misses > 0);
        CHECK(a.total.hits == b.total.hits && a.total.late == b.total.late && a.total.misses == b.total.misses);
        hits[i] = a.total.hits;
        ms_metrics_free(&a);
        ms_metrics_free(&b);
    }
    CHECK(hits[0] != hits[1]);
}

int main(void)
{
    test_distance();
    test_priorities();
    test_code_masking_changes_match();
    test_incremental_matcher(0, 0);
    test_incremental_matcher(1, 0);
    test_incremental_matcher(0, 1);
    test_kmeans();
    test_training_windows();
    ms_platform p = test_platform();
    p.policy_op_s = 1e-9;
    write_cache_trace();
    test_cache_algorithm2(&p);
    test_cache_code_modes(&p);
    write_prefetch_trace();
    test_prefetch_paper(&p);
    test_prefetch_code_differs(&p);
    test_online_rebuild(&p);
    test_tiers(&p);
    test_real_trace(&p);
    CHECK_DONE();
}
