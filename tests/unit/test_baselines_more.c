/* Baselines speculative, transition (prefetch), lru-slots and neighbor
 * (cache): their pure helpers (policies/lib/base_predict.h) on hand-computed
 * inputs, then exact hit / late / miss counts and eviction orders through
 * ms_run on hand-built traces.
 *
 * Platform as in test_engine_exact.c: a 1 MB expert copies in 1.5 ms, expert
 * compute 0.1 ms, dense work 0.2 ms; one H2D copy engine. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "fixtures.h"
#include "policies/lib/base_predict.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

static ms_platform test_platform(void) { return ms_fixture_exact_platform(); }

static ms_platform platform;

typedef struct {
    uint32_t L, J, K, S; /* S = spec_depth */
    uint32_t n_req, n_iters;
} shape;

/* n_req requests of n_iters one-row iterations each (prefill of 1 token, then
 * decodes), all arriving at 0.  ids[((r * n_iters + it) * L + l) * K + k] is the
 * routing (weights 1/K each); spec (or NULL) gives gate_{l+i}(h_l) as
 * spec[(((r * n_iters + it) * L + l) * S + i - 1) * K + k] with weights
 * spec_w[k] (all K present) or -1 cells. */
static void write_trace(const char *path, shape s, const int *ids, const int *spec, const float *spec_w)
{
    ms_trace_meta m = ms_fixture_hand_meta("test_baselines_more", s.L, s.J, s.K, 1000000, 2000000);
    m.spec_depth = s.S;
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    for (uint32_t q = 0; q < s.n_req; q++) {
        ms_request r;
        memset(&r, 0, sizeof r);
        r.id = q;
        r.prompt_len = 1;
        r.output_len = s.n_iters - 1;
        r.n_iters = s.n_iters;
        r.n_rows = s.n_iters;
        ms_request_alloc(&r, &m);
        for (uint32_t it = 0; it < s.n_iters; it++) {
            r.iters[it] = (ms_iteration){it ? MS_PHASE_DECODE : MS_PHASE_PREFILL, it, 1};
            size_t cell = ((size_t)q * s.n_iters + it) * s.L;
            for (uint32_t l = 0; l < s.L; l++) {
                for (uint32_t k = 0; k < s.K; k++) {
                    r.topk_ids[ms_topk_index(&m, it, l) + k] = ids[(cell + l) * s.K + k];
                    r.topk_w[ms_topk_index(&m, it, l) + k] = 1.0f / (float)s.K;
                }
                for (uint32_t i = 0; spec && i < s.S; i++)
                    for (uint32_t k = 0; k < s.K; k++) {
                        int e = spec[((cell + l) * s.S + i) * s.K + k];
                        r.spec_ids[ms_spec_index(&m, it, l, i) + k] = e;
                        r.spec_w[ms_spec_index(&m, it, l, i) + k] = e >= 0 ? spec_w[k] : 0.0f;
                    }
            }
        }
        ms_fixture_writer_add(w, &r);
        ms_request_free(&r);
    }
    ms_fixture_writer_close(w);
    ms_trace_meta_free(&m);
}

static ms_run_config config(const char *trace, const char *pf, const char *cache, uint32_t cap, uint32_t d)
{
    return (ms_run_config){.trace_path = trace, .platform = &platform, .prefetch_spec = pf, .cache_spec = cache,
                           .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = cap, .distance = d,
                           .max_batch = 1, .offline = 1, .seed = 1, .events_path = "baselines_more.csv"};
}

static ms_metrics run_ok(const ms_run_config *cfg)
{
    ms_metrics m;
    ms_err err;
    if (ms_run(cfg, &m, &err)) {
        fprintf(stderr, "%s %s+%s: %s\n", cfg->trace_path, cfg->prefetch_spec, cfg->cache_spec, err.msg);
        exit(1);
    }
    return m;
}

/* "l,e l,e ..." of the evict events of the last run, in order. */
static const char *evictions(void)
{
    static char out[1024];
    char line[512], kind[64];
    double a, b;
    int it, l, e;
    out[0] = 0;
    FILE *f = fopen("baselines_more.csv", "r");
    if (!f)
        return out;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63[^,],%lf,%lf,%d,%d,%d", kind, &a, &b, &it, &l, &e) == 6 && !strcmp(kind, "evict"))
            snprintf(out + strlen(out), sizeof out - strlen(out), "%s%d,%d", out[0] ? " " : "", l, e);
    fclose(f);
    return out;
}

#define CHECK_COUNTS(m, h, lt, ms)                                                                              \
    do {                                                                                                        \
        CHECK_EQ_INT((m).total.hits, h);                                                                        \
        CHECK_EQ_INT((m).total.late, lt);                                                                       \
        CHECK_EQ_INT((m).total.misses, ms);                                                                     \
    } while (0)

/* ---------------------------------------------------------------- pure */

static void test_top_positive(void)
{
    /* scores 0, .5, .2, .5, 0: best first, ties to the lower id, zeros never */
    const double score[5] = {0, 0.5, 0.2, 0.5, 0};
    uint32_t out[5];
    CHECK_EQ_INT(ms_base_top_positive(score, 5, 2, out), 2);
    CHECK_EQ_INT(out[0], 1);
    CHECK_EQ_INT(out[1], 3);
    CHECK_EQ_INT(ms_base_top_positive(score, 5, 5, out), 3);
    CHECK_EQ_INT(out[2], 2);
    CHECK_EQ_INT(ms_base_top_positive(score, 5, 0, out), 0);
    double z[3] = {0, 0, 0}, v[3] = {1, 3, 0};
    ms_base_normalise(z, 3); /* sum 0 stays 0 */
    CHECK_NEAR(z[1], 0, 0);
    ms_base_normalise(v, 3); /* 1/4, 3/4, 0 */
    CHECK_NEAR(v[0], 0.25, 1e-15);
    CHECK_NEAR(v[1], 0.75, 1e-15);
}

/* L = 2, J = 3, K = 2, d = 1.  Row A: layer 0 {0, 1}, layer 1 {2, 0};
 * row B: layer 0 {1, 2}, layer 1 {2, 1}; row C: layer 0 {0, -1 missing},
 * layer 1 {1, -1}.
 *   T[0][0] = A {0:1, 2:1} + C {1:1}      = {1, 1, 1}
 *   T[0][1] = A {0:1, 2:1} + B {2:1, 1:1} = {1, 1, 2}
 *   T[0][2] = B {2:1, 1:1}                = {0, 1, 1}
 * predict(layer 0 activated {1, 2}) = {1, 2, 3}; normalised {1/6, 2/6, 3/6};
 * top 2 = experts 2 (0.5) and 1 (1/3). */
static void test_coact_counts(void)
{
    const int32_t A[4] = {0, 1, 2, 0}, B[4] = {1, 2, 2, 1}, C[4] = {0, -1, 1, -1};
    ms_coact c;
    ms_coact_init(&c, 2, 3, 2, 1);
    ms_coact_add_row(&c, A);
    ms_coact_add_row(&c, B);
    ms_coact_add_row(&c, C);
    const double want[3][3] = {{1, 1, 1}, {1, 1, 2}, {0, 1, 1}};
    for (int e = 0; e < 3; e++)
        for (int f = 0; f < 3; f++)
            CHECK_NEAR(c.T[e * 3 + f], want[e][f], 0);
    for (int x = 9; x < 18; x++) /* source layer 1 has no layer 2 */
        CHECK_NEAR(c.T[x], 0, 0);
    const uint32_t act[2] = {1, 2};
    double score[3];
    ms_coact_predict(&c, 0, act, 2, score);
    CHECK_NEAR(score[0], 1, 0);
    CHECK_NEAR(score[1], 2, 0);
    CHECK_NEAR(score[2], 3, 0);
    ms_base_normalise(score, 3);
    uint32_t top[3];
    CHECK_EQ_INT(ms_base_top_positive(score, 3, 2, top), 2);
    CHECK_EQ_INT(top[0], 2);
    CHECK_EQ_INT(top[1], 1);
    CHECK_NEAR(score[2], 0.5, 1e-15);
    CHECK_NEAR(score[1], 2.0 / 6.0, 1e-15);
    ms_coact_predict(&c, 1, act, 2, score); /* layer 1 + 1 = L: nothing */
    CHECK_NEAR(score[0] + score[1] + score[2], 0, 0);
    ms_coact_free(&c);
}

static void test_window(void)
{
    /* L = 8, window 3: running 2 -> {2, 3, 4}; running 6 -> {6, 7} (+ {0} with wrap) */
    CHECK(ms_base_in_window(2, 2, 3, 8, 0));
    CHECK(ms_base_in_window(2, 4, 3, 8, 0));
    CHECK(!ms_base_in_window(2, 5, 3, 8, 0));
    CHECK(!ms_base_in_window(2, 1, 3, 8, 0));
    CHECK(ms_base_in_window(6, 7, 3, 8, 0));
    CHECK(!ms_base_in_window(6, 0, 3, 8, 0));
    CHECK(ms_base_in_window(6, 0, 3, 8, 1));
    CHECK(!ms_base_in_window(6, 1, 3, 8, 1));
    CHECK(!ms_base_in_window(6, 5, 3, 8, 1));
}

/* ---------------------------------------------------------------- speculative */

/* L = 3, J = 4, K = 1, spec_depth 2, one request of 2 iterations.
 *   routing   it0: 0 1 2      it1: 3 2 1
 *   gate_{l+1}(h_l): it0 l0 -> 1 (right), l1 -> 2 (right); it1 l0 -> 0 (wrong), l1 -> 1 (right)
 *   gate_{l+2}(h_l): it0 l0 -> 3 (wrong);                  it1 l0 -> 1 (right) */
static const int spec_ids_a[] = {0, 1, 2, 3, 2, 1};
static const int spec_a[] = {
    1, 3, 2, -1, -1, -1, /* it0: l0 (i=1, i=2), l1, l2 */
    0, 1, 1, -1, -1, -1, /* it1 */
};
static const float spec_w1[] = {1.0f};

static void test_speculative(void)
{
    shape s = {.L = 3, .J = 4, .K = 1, .S = 2, .n_req = 1, .n_iters = 2};
    write_trace("spec_a.h5", s, spec_ids_a, spec_a, spec_w1);
    /* d = 1: it0 (0,0) miss; (1,1) prefetched at layer 0's gate, in flight at
     * layer 1's gate (copy 1.7-3.2, gate 2.0): late; (2,2) prefetched at 2.0,
     * copy 3.2-4.7, gate 3.5: late.  it1: (0,3) miss; (1,0) prefetched
     * (wrong); (1,2) miss; (2,1) prefetched, late.  3 late, 3 misses, 4
     * prefetches of which 3 useful. */
    ms_run_config cfg = config("spec_a.h5", "speculative", "lru", 12, 1);
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 0, 3, 3);
    CHECK_EQ_INT(m.prefetch_issued, 4);
    CHECK_EQ_INT(m.prefetch_useful, 3);
    ms_metrics_free(&m);
    /* d = 2, layers=target: only gate_{l+2}(h_0): it0 (2,3) wrong, it1 (2,1)
     * right; every other expert misses: 5 misses, 1 late/hit, 2 issued, 1 useful */
    cfg = config("spec_a.h5", "speculative", "lru", 12, 2);
    m = run_ok(&cfg);
    CHECK_EQ_INT(m.total.misses, 5);
    CHECK_EQ_INT(m.total.hits + m.total.late, 1);
    CHECK_EQ_INT(m.prefetch_issued, 2);
    CHECK_EQ_INT(m.prefetch_useful, 1);
    ms_metrics_free(&m);
    /* d = 2, layers=all: both i = 1 and i = 2: the d = 1 guesses (3 right)
     * plus (2,3) (wrong) and (2,1) (already queued): 3 misses */
    cfg = config("spec_a.h5", "speculative:layers=all", "lru", 12, 2);
    m = run_ok(&cfg);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.total.hits + m.total.late, 3);
    CHECK_EQ_INT(m.prefetch_useful, 3);
    ms_metrics_free(&m);
}

/* K = 2 with speculative weights 0.7 / 0.3: k=1 takes only the heavier one. */
static void test_speculative_k(void)
{
    static const int ids[] = {0, 1, 2, 3};           /* layer 0 {0, 1}, layer 1 {2, 3} */
    static const int spec[] = {3, 1, -1, -1};        /* gate_1(h_0) = {3: 0.7, 1: 0.3} */
    static const float w[] = {0.7f, 0.3f};
    shape s = {.L = 2, .J = 4, .K = 2, .S = 1, .n_req = 1, .n_iters = 1};
    write_trace("spec_b.h5", s, ids, spec, w);
    /* k=1: (1,3) prefetched (copy 3.2-4.7 behind the two demands), late at
     * layer 1's gate 3.5; (1,2) misses: 3 misses, 1 late, 1 issued */
    ms_run_config cfg = config("spec_b.h5", "speculative:k=1", "lru", 8, 1);
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 0, 1, 3);
    CHECK_EQ_INT(m.prefetch_issued, 1);
    ms_metrics_free(&m);
    /* k=0 (= K = 2): (1,1) too, queued behind (1,3), cancelled at layer 1 */
    cfg = config("spec_b.h5", "speculative", "lru", 8, 1);
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 0, 1, 3);
    CHECK_EQ_INT(m.prefetch_issued, 2);
    CHECK_EQ_INT(m.prefetch_useful, 1);
    CHECK_EQ_INT(m.prefetch_cancelled, 1);
    ms_metrics_free(&m);
}

static void test_speculative_errors(void)
{
    static const int ids[] = {0, 1, 2};
    shape s = {.L = 3, .J = 4, .K = 1, .S = 0, .n_req = 1, .n_iters = 1};
    write_trace("spec_none.h5", s, ids, NULL, NULL);
    ms_run_config cfg = config("spec_none.h5", "speculative", "lru", 4, 1);
    ms_metrics m;
    ms_err err;
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "trace spec_none.h5 has no speculative gate outputs");
    cfg = config("spec_a.h5", "speculative", "lru", 4, 3); /* spec_depth 2 < d = 3 */
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "up to 2 layers ahead, --distance 3 needs 3");
    cfg = config("spec_a.h5", "speculative", "lru", 4, 0);
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--distance >= 1");
}

/* ---------------------------------------------------------------- transition */

/* L = 2, J = 4, K = 1, four one-iteration requests: 0->2, 0->2 | 0->2, 0->3.
 * --train 0.5 keeps requests 0 and 1 for training: T[0][0] = {2: 2}.  Replay:
 * r2 (0,0) miss, predicts (1,2) (prefetched behind the demand, late); r3
 * (0,0) hit, (1,2) already cached, (1,3) miss.  2 misses, 1 hit, 1 late. */
static void test_transition_offline(void)
{
    static const int ids[] = {0, 2, 0, 2, 0, 2, 0, 3};
    shape s = {.L = 2, .J = 4, .K = 1, .S = 0, .n_req = 4, .n_iters = 1};
    write_trace("trans_a.h5", s, ids, NULL, NULL);
    ms_run_config cfg = config("trans_a.h5", "transition", "lru", 8, 1);
    cfg.train_set = 1;
    cfg.train_frac = 0.5;
    ms_metrics m = run_ok(&cfg);
    CHECK_EQ_INT(m.train_requests, 2);
    CHECK_COUNTS(m, 1, 1, 2);
    CHECK_EQ_INT(m.prefetch_issued, 1);
    CHECK_EQ_INT(m.prefetch_useful, 1);
    ms_metrics_free(&m);
    /* --train auto is 0.7 for a learning policy: ceil(0.7 * 4) = 3 training requests */
    cfg.train_set = 0;
    m = run_ok(&cfg);
    CHECK_EQ_INT(m.train_requests, 3);
    ms_metrics_free(&m);
    /* online=0 and nothing to train on: one-line error naming the trace */
    cfg.train_set = 1;
    cfg.train_frac = 0;
    ms_err err;
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "trace trans_a.h5: --train 0 leaves no training split");
}

/* online=1, --train 0, cache of 2 experts (LRU), requests 0->2, 1->3, 0->?:
 *   r0: (0,0) miss, (1,2) miss; learns T[0][0][2] = 1
 *   r1: (0,1) miss (evicts (0,0)), T[0][1] empty: no prefetch; (1,3) miss
 *       (evicts (1,2)); learns T[0][1][3] = 1
 *   r2: (0,0) miss (evicts (0,1)); predicts (1,2), which evicts (1,3) and is
 *       late at layer 1: 5 misses, 1 late.  Without online learning nothing
 *       is predicted and (1,2) misses too (6 misses). */
static void test_transition_online(void)
{
    static const int ids[] = {0, 2, 1, 3, 0, 2};
    shape s = {.L = 2, .J = 4, .K = 1, .S = 0, .n_req = 3, .n_iters = 1};
    write_trace("trans_b.h5", s, ids, NULL, NULL);
    ms_run_config cfg = config("trans_b.h5", "transition:online=1", "lru", 2, 1);
    cfg.train_set = 1;
    cfg.train_frac = 0;
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 0, 1, 5);
    CHECK_EQ_INT(m.prefetch_issued, 1);
    CHECK_STR_CONTAINS(evictions(), "0,0 1,2 0,1 1,3");
    ms_metrics_free(&m);
    cfg.prefetch_spec = "none";
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 0, 0, 6);
    ms_metrics_free(&m);
}

/* ---------------------------------------------------------------- lru-slots */

/* L = 2, J = 4, K = 1, slots = 2, one request of 4 iterations:
 *   it0: 0 3   it1: 2 0   it2: 0 1   it3: 3 0
 * preload: experts 2, 3 of both layers (2 least recent).  Per layer (most recent first):
 *   start  L0 [3 2]   L1 [3 2]
 *   it0    (0,0) miss, layer 0 full: evict (0,2) -> L0 [0 3];  (1,3) hit
 *   it1    (0,2) miss: evict (0,3) -> L0 [2 0];  (1,0) miss: evict (1,2) -> L1 [0 3]
 *   it2    (0,0) hit -> L0 [0 2];  (1,1) miss: evict (1,3) -> L1 [1 0]
 *   it3    (0,3) miss: evict (0,2) -> L0 [3 0];  (1,0) hit
 * 3 hits, 5 misses, evictions (0,2) (0,3) (1,2) (1,3) (0,2).  A global LRU
 * over the same 4 experts would evict (0,2) before (1,2) in it1 ... and the
 * same sequence holds with a cache of 8, where only full() forces evictions. */
static const int slots_ids[] = {0, 3, 2, 0, 0, 1, 3, 0};

static void test_lru_slots(void)
{
    shape s = {.L = 2, .J = 4, .K = 1, .S = 0, .n_req = 1, .n_iters = 4};
    write_trace("slots_a.h5", s, slots_ids, NULL, NULL);
    for (uint32_t cap = 4; cap <= 8; cap += 4) {
        ms_run_config cfg = config("slots_a.h5", "none", "lru-slots:slots=2", cap, 1);
        ms_metrics m = run_ok(&cfg);
        CHECK_COUNTS(m, 3, 0, 5);
        CHECK(!strcmp(evictions(), "0,2 0,3 1,2 1,3 0,2"));
        ms_metrics_free(&m);
    }
    /* preload=0, starting empty:
     *   it0 (0,0) (1,3) miss;  it1 (0,2) (1,0) miss (layers now full);
     *   it2 (0,0) hit -> L0 [0 2], (1,1) miss: evict (1,3);
     *   it3 (0,3) miss: evict (0,2); (1,0) hit.   2 hits, 6 misses */
    ms_run_config cfg = config("slots_a.h5", "none", "lru-slots:slots=2,preload=0", 8, 1);
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 2, 0, 6);
    CHECK(!strcmp(evictions(), "1,3 0,2"));
    ms_metrics_free(&m);
    /* slots=3 with a cache of 8: preload {1,2,3} per layer;
     *   it0 (0,0) miss: evict (0,1) -> L0 [0 3 2]; (1,3) hit
     *   it1 (0,2) hit; (1,0) miss: evict (1,1) -> L1 [0 3 2]
     *   it2 (0,0) hit; (1,1) miss: evict (1,2) -> L1 [1 0 3]
     *   it3 (0,3) hit; (1,0) hit.   5 hits, 3 misses */
    cfg = config("slots_a.h5", "none", "lru-slots:slots=3", 8, 1);
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 5, 0, 3);
    CHECK(!strcmp(evictions(), "0,1 1,1 1,2"));
    ms_metrics_free(&m);
}

/* "requested experts marked most-recent before loading": L = 1, J = 4,
 * K = 2, slots = 2, cache 4; it0 {0, 3}, it1 {1, 2}.
 *   preload [3 2] (most recent first)
 *   it0: the gate marks 3 -> [3 2]; (0,0) misses: evict 2, load 0 -> [0 3]
 *        (Mixtral-Offloading: mark_used(3), then swap 0 in, move_to_end(0));
 *        touching hits after the loads instead would give [3 0]
 *   it1: (0,1) misses: evict 3 (least recent) -> [1 0]; (0,2): evict 0
 * 1 hit, 3 misses, evictions (0,2) (0,3) (0,0) (hit-touch order: (0,2) (0,0) (0,3)). */
static void test_lru_slots_gate_marks(void)
{
    static const int ids[] = {0, 3, 1, 2};
    shape s = {.L = 1, .J = 4, .K = 2, .S = 0, .n_req = 1, .n_iters = 2};
    write_trace("slots_b.h5", s, ids, NULL, NULL);
    ms_run_config cfg = config("slots_b.h5", "none", "lru-slots:slots=2", 4, 1);
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 1, 0, 3);
    CHECK(!strcmp(evictions(), "0,2 0,3 0,0"));
    ms_metrics_free(&m);
}

static void test_lru_slots_errors(void)
{
    ms_metrics m;
    ms_err err;
    /* budget 3 < L x slots = 4: the preload fills (0,2) (0,3) (1,2); it0's
     * (1,3) misses into layer 1, which holds 1 < 2 slots with the budget
     * exhausted: the run ends with the engine's cache-size error */
    ms_run_config cfg = config("slots_a.h5", "none", "lru-slots:slots=2", 3, 1);
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "raise the cache size");
    cfg = config("slots_b.h5", "none", "lru-slots:slots=1", 4, 1); /* K = 2 */
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "slots=1 is below trace slots_b.h5's top-k K=2");
    cfg = config("slots_b.h5", "none", "lru-slots:slots=5", 8, 1); /* J = 4 */
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "slots=5 is above trace slots_b.h5's J=4");
}

/* A prefetcher whose copy is still in flight fills a layer's slots: the layer
 * takes one expert over its slots instead of failing (documented deviation).
 * L = 2, J = 4, K = 1, slots = 1, cache 3, preload=0, topk-id:k=2 (d = 1
 * prefetches experts 0 and 1 of layer 1 after layer 0's gate).
 * it0: (0,3) miss 0.2-1.7; prefetch (1,0) 1.7-3.2 (takes layer 1's slot);
 * layer 1 gate at 2.0: (1,0) in flight, (1,2) misses: layer 1 is full but
 * nothing in it is evictable, full() says 0 and the budget (3) has room: (1,2)
 * loads as layer 1's second expert.  2 misses, no failure. */
static void test_lru_slots_pinned_layer(void)
{
    static const int ids[] = {3, 2};
    shape s = {.L = 2, .J = 4, .K = 1, .S = 0, .n_req = 1, .n_iters = 1};
    write_trace("slots_c.h5", s, ids, NULL, NULL);
    ms_run_config cfg = config("slots_c.h5", "topk-id:k=2", "lru-slots:slots=1,preload=0", 3, 1);
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 0, 0, 2);
    CHECK_EQ_INT(m.prefetch_copied, 1);
    CHECK(!strcmp(evictions(), ""));
    ms_metrics_free(&m);
}

/* ---------------------------------------------------------------- neighbor */

/* L = 4, J = 2, K = 1, cache 4, one request: it0 0 0 0 0, it1 1 0 0 0.
 * After it0 the LRU order (oldest first) is (0,0) (1,0) (2,0) (3,0).
 * it1 layer 0: (0,1) misses; window [0, 3) keeps layers 0-2, so the victim
 * is (3,0) (plain LRU: (0,0)).  Layers 1, 2 hit.  Layer 3: (3,0) misses;
 * window [3, 6) holds layer 3 only: victim (0,0), the oldest.
 * neighbor: 2 hits, 6 misses; lru: 3 hits, 5 misses.
 * wrap=1: at layer 3 the window is {3, 0, 1}: the victim is (2,0). */
static void test_neighbor(void)
{
    static const int ids[] = {0, 0, 0, 0, 1, 0, 0, 0};
    shape s = {.L = 4, .J = 2, .K = 1, .S = 0, .n_req = 1, .n_iters = 2};
    write_trace("nb_a.h5", s, ids, NULL, NULL);
    ms_run_config cfg = config("nb_a.h5", "none", "neighbor", 4, 1);
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 2, 0, 6);
    CHECK(!strcmp(evictions(), "3,0 0,0"));
    ms_metrics_free(&m);
    cfg.cache_spec = "neighbor:wrap=1";
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 2, 0, 6);
    CHECK(!strcmp(evictions(), "3,0 2,0"));
    ms_metrics_free(&m);
    /* window=1 keeps the running layer's experts only: it1 layer 0 evicts
     * (1,0) (oldest outside layer 0); layer 1 misses and evicts (0,0), the
     * oldest (order (0,0) (2,0) (3,0) (0,1)); layers 2, 3 hit: 2 hits, 6 misses */
    cfg.cache_spec = "neighbor:window=1";
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 2, 0, 6);
    CHECK(!strcmp(evictions(), "1,0 0,0"));
    ms_metrics_free(&m);
    cfg.cache_spec = "lru";
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 3, 0, 5);
    CHECK(!strcmp(evictions(), "0,0"));
    ms_metrics_free(&m);
}

/* L = 2, J = 3, cache 2, routing it0 0 0, it1 1 0, it2 2 1.
 * At layer 0 the window [0, 3) covers both layers: every evictable expert is
 * a neighbour and the victim is the plain least recent one.  At layer 1 the
 * window [1, 4) leaves layer 0 out (no wrap).
 *   it1: (0,1) evicts (0,0) (fallback); (1,0) hits: order (0,1) (1,0)
 *   it2: (0,2) evicts (0,1) (fallback); (1,1) misses: neighbor evicts (0,2),
 *        outside the window, where lru evicts the older (1,0)
 * 1 hit, 5 misses either way, never a failure.  wrap=1 puts layer 0 in
 * layer 1's window too, so every victim is the fallback: the lru order. */
static void test_neighbor_fallback(void)
{
    static const int ids[] = {0, 0, 1, 0, 2, 1};
    shape s = {.L = 2, .J = 3, .K = 1, .S = 0, .n_req = 1, .n_iters = 3};
    write_trace("nb_b.h5", s, ids, NULL, NULL);
    ms_run_config cfg = config("nb_b.h5", "none", "neighbor", 2, 1);
    ms_metrics m = run_ok(&cfg);
    CHECK_COUNTS(m, 1, 0, 5);
    CHECK(!strcmp(evictions(), "0,0 0,1 0,2"));
    ms_metrics_free(&m);
    cfg.cache_spec = "neighbor:wrap=1";
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 1, 0, 5);
    CHECK(!strcmp(evictions(), "0,0 0,1 1,0"));
    ms_metrics_free(&m);
    cfg.cache_spec = "lru";
    m = run_ok(&cfg);
    CHECK_COUNTS(m, 1, 0, 5);
    CHECK(!strcmp(evictions(), "0,0 0,1 1,0"));
    ms_metrics_free(&m);
}

int main(void)
{
    platform = test_platform();
    test_top_positive();
    test_coact_counts();
    test_window();
    test_speculative();
    test_speculative_k();
    test_speculative_errors();
    test_transition_offline();
    test_transition_online();
    test_lru_slots();
    test_lru_slots_gate_marks();
    test_lru_slots_errors();
    test_lru_slots_pinned_layer();
    test_neighbor();
    test_neighbor_fallback();
    CHECK_DONE();
}
