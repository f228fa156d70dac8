/* Issue 16: the rules of a layer step (order, protection) and the code modes
 * that reproduce the public systems' decisions, on hand-built traces.  Each
 * test states the exact sequence of hits (h), misses (m) and victims (e) as
 * the engine reports them (--events: hit / late / miss / evict, in the order
 * they happen), written `<kind><layer>.<expert>`, iterations separated by
 * `|`, and works it out by hand in the comment above.
 *
 * Platform: the exact-timing one (tests/unit/fixtures.h); every expert is
 * 1 MB (a copy 1.5 ms, a compute 0.1 ms), a layer's dense work 2 MB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "policies/lib/fmoe_store.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

#define MAXK 4

/* One token row: its K expert ids at each layer, and their weights. */
typedef struct {
    int ids[8][MAXK];
    float w[8][MAXK];
} hand_row;

/* One request: iteration i has rows[i] token rows (iteration 0 is the
 * prefill), taken in turn from `rows`. */
static void write_hand(const char *path, uint32_t L, uint32_t J, uint32_t K, uint32_t n_it, const uint32_t *rows_per_it,
                       const hand_row *rows)
{
    ms_trace_meta m = ms_fixture_hand_meta("test_code_modes", L, J, K, 1000000, 2000000);
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    ms_request r;
    memset(&r, 0, sizeof r);
    uint32_t n_rows = 0;
    for (uint32_t i = 0; i < n_it; i++)
        n_rows += rows_per_it[i];
    r.prompt_len = rows_per_it[0];
    r.output_len = n_it - 1;
    r.n_iters = n_it;
    r.n_rows = n_rows;
    ms_request_alloc(&r, &m);
    uint32_t row = 0;
    for (uint32_t i = 0; i < n_it; i++) {
        r.iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, row, rows_per_it[i]};
        for (uint32_t k = 0; k < rows_per_it[i]; k++, row++)
            for (uint32_t l = 0; l < L; l++)
                for (uint32_t s = 0; s < K; s++) {
                    r.topk_ids[ms_topk_index(&m, row, l) + s] = rows[row].ids[l][s];
                    r.topk_w[ms_topk_index(&m, row, l) + s] = rows[row].w[l][s] > 0 ? rows[row].w[l][s] : 1.0f / K;
                }
    }
    ms_fixture_writer_add(w, &r);
    ms_fixture_writer_close(w);
    ms_request_free(&r);
    ms_trace_meta_free(&m);
}

static ms_platform g_platform;

/* Replays `trace` (batch 1, offline, no training split) and returns the
 * hit / late / miss / evict sequence from its events. */
static void run_sequence(const char *trace, const char *prefetch, const char *cache, const char *sched, double cap,
                         char *out, size_t cap_out, ms_metrics *m_out)
{
    g_platform = ms_fixture_exact_platform();
    char events[128];
    snprintf(events, sizeof events, "%s.events.csv", trace);
    ms_run_config cfg = {.trace_path = trace, .platform = &g_platform, .prefetch_spec = prefetch,
                         .cache_spec = cache, .sched_spec = sched, .cap_kind = MS_CAP_EXPERTS, .cap_value = cap,
                         .distance = 1, .max_batch = 1, .offline = 1, .train_set = 1, .train_frac = 0,
                         .events_path = events};
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) {
        fprintf(stderr, "ms_run %s %s: %s\n", trace, cache, err.msg);
        exit(1);
    }
    FILE *f = fopen(events, "r");
    char line[512], kind[64];
    int it, l, e, last_it = 0;
    size_t w = 0;
    out[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        double a, b;
        if (sscanf(line, "%63[^,],%lf,%lf,%d,%d,%d", kind, &a, &b, &it, &l, &e) != 6)
            continue;
        char c = !strcmp(kind, "hit") ? 'h' : !strcmp(kind, "late") ? 'l' : !strcmp(kind, "miss") ? 'm'
                 : !strcmp(kind, "evict")                            ? 'e'
                                                                     : 0;
        if (!c)
            continue;
        w += (size_t)snprintf(out + w, cap_out - w, "%s%c%d.%d", w == 0 ? "" : it != last_it ? " | " : " ", c, l, e);
        last_it = it;
    }
    if (f)
        fclose(f);
    if (m_out)
        *m_out = m;
    else
        ms_metrics_free(&m);
}

#define CHECK_SEQ(got, want)                                                                                    \
    do {                                                                                                        \
        if (strcmp(got, want))                                                                                  \
            fprintf(stderr, "  got  %s\n  want %s\n", got, want);                                               \
        CHECK(!strcmp(got, want));                                                                              \
    } while (0)

/* ---- lru: order=first | token ---- */

/* L = 1, J = 4, K = 1, cache of 2.  Prefill rows 0, 1, 0; decode 2; decode 0.
 * first: the prefill touches 0 then 1 (first appearance): 0 is least recent.
 *   it1: 2 misses, evicts 0.  it2: 0 misses, evicts 1 (recency 1 < 2).
 * token: the prefill touches 0, 1, 0: 1 is least recent.
 *   it1: 2 misses, evicts 1.  it2: 0 hits. */
static void test_lru_token_order(void)
{
    static const hand_row rows[5] = {{.ids = {{0}}}, {.ids = {{1}}}, {.ids = {{0}}}, {.ids = {{2}}}, {.ids = {{0}}}};
    static const uint32_t per_it[3] = {3, 1, 1};
    write_hand("cm_lru.h5", 1, 4, 1, 3, per_it, rows);
    char seq[1024];
    run_sequence("cm_lru.h5", "none", "lru", "gpu", 2, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "m0.0 m0.1 | m0.2 e0.0 | m0.0 e0.1");
    run_sequence("cm_lru.h5", "none", "lru:order=first", "gpu", 2, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "m0.0 m0.1 | m0.2 e0.0 | m0.0 e0.1");
    run_sequence("cm_lru.h5", "none", "lru:order=token", "gpu", 2, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "m0.0 m0.1 | m0.2 e0.1 | h0.0");
}

/* ---- lru-slots: mode=code (mixtral-offloading) ---- */

/* L = 1, J = 6, K = 2, slots = 2, cache of 3; preload: experts 4, 5 (4 the
 * least recent).  Prefill rows [3, 5], [1, 3]; decode [4, 5].
 * code: unique() = 1, 3, 5: the hit 5 is marked first (list 4, 5), then the
 *   misses load ascending: 1 evicts the LRU 4 (list 5, 1), 3 evicts the LRU
 *   5, the step's own hit (list 1, 3).  it1: 4 evicts 1, 5 evicts 3.
 * paper: activation order 3, 5, 1, the step's experts protected: 5 is marked
 *   (list 4, 5); 3 evicts 4; 5 hits; 1 finds the layer full of protected
 *   experts and goes over `slots` (the budget of 3 has room): list 5, 3, 1.
 *   it1: 5 is marked (list 1, 3, 5); 4 evicts the least recent 3, and the
 *   layer is still over its slots, so 1 goes too; 5 hits. */
static void test_lru_slots_code(void)
{
    static const hand_row rows[3] = {{.ids = {{3, 5}}}, {.ids = {{1, 3}}}, {.ids = {{4, 5}}}};
    static const uint32_t per_it[2] = {2, 1};
    write_hand("cm_slots.h5", 1, 6, 2, 2, per_it, rows);
    char seq[1024];
    run_sequence("cm_slots.h5", "none", "lru-slots:slots=2,mode=code", "gpu", 3, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "h0.5 m0.1 e0.4 m0.3 e0.5 | m0.4 e0.1 m0.5 e0.3");
    run_sequence("cm_slots.h5", "none", "lru-slots:slots=2", "gpu", 3, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "m0.3 e0.4 h0.5 m0.1 | m0.4 e0.3 e0.1 h0.5");
}

/* ---- std::sort tie order (eam:mode=code, fmoe:mode=code) ---- */

/* L = 1, J = 20, K = 1, cache of 17: iterations route 0, 1, ..., 17, then 0,
 * then 8 (one row each).  18 iterations in all: 0..16 miss and fill the cache.
 * eam:mode=code, no prefetcher (nothing listed): every expert has count 1
 * (its copy).  17 needs room: the 17 residents, listed in (layer, id) order,
 * sorted by count descending with std::sort: all equal and n = 17, so
 * introsort leaves 8 16 15 ... 9 0 7 ... 1 and the victim is expert 8 (the
 * lowest id, 0, under a stable order).  0 then hits (count 2).  8 misses: 0
 * now has the largest count and is first: the victim.
 * fmoe:mode=code, no prefetcher: p = 0, every key trunc(0 x count) = 0; the
 * same introsort order on 17 equal keys evicts 8, then (residents 0..7,
 * 9..17) the 9th of them, expert 9. */
static void test_sort_ties(void)
{
    hand_row rows[20];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 18; i++)
        rows[i].ids[0][0] = i;
    rows[18].ids[0][0] = 0;
    rows[19].ids[0][0] = 8;
    uint32_t per_it[20];
    for (int i = 0; i < 20; i++)
        per_it[i] = 1;
    write_hand("cm_ties.h5", 1, 20, 1, 20, per_it, rows);
    char fill[512] = "", want[1024], seq[2048];
    for (int i = 0; i < 17; i++)
        snprintf(fill + strlen(fill), sizeof fill - strlen(fill), "%sm0.%d", i ? " | " : "", i);
    snprintf(want, sizeof want, "%s | m0.17 e0.8 | h0.0 | m0.8 e0.0", fill);
    run_sequence("cm_ties.h5", "none", "eam:mode=code", "gpu", 17, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, want);
    snprintf(want, sizeof want, "%s | m0.17 e0.8 | h0.0 | m0.8 e0.9", fill);
    run_sequence("cm_ties.h5", "none", "fmoe:mode=code", "gpu", 17, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, want);
    /* FineMoE's key is a float32 product: 0.7f x 10 rounds to 7.0f (6.99999988 in double) */
    CHECK_EQ_INT(fmoe_evict_key_code_f32(0.7f, 10), 7);
    CHECK_EQ_INT((long long)fmoe_evict_key_code(0.7f, 10), 6);
}

/* ---- eam:mode=code (MoE-Infinity 2024): candidate list, overflow ---- */

/* L = 1, J = 4, K = 1, cache of 2; routes 0, 1, 2, 3, 2, 0 (one row each).
 * With prefetch eam:mode=code every expert of layer 0 is listed before the
 * loads (and nothing is queued: no later layer), so listed experts are
 * protected unless overflowed.
 *   it0, it1: 0, 1 miss and fit.
 *   it2: 2 misses; 0 and 1 are protected: no victim: 2 is loaded over the
 *        budget (3 resident) and flagged overflow.
 *   it3: 3 misses; the cache must drop to 1 before 3 fits: sorted [0, 1, 2]
 *        (counts 1, stable for n <= 16): 0, 1 protected, 2 overflowed: evict
 *        2; no second victim: 3 over the budget, flagged.
 *   it4: 2 misses: evict 3 (overflowed), then over the budget again.
 *   it5: 0 hits.
 * Without the prefetcher nothing is listed: the most visited goes first
 * (ties in (layer, id) order): it2 evicts 0, it3 evicts 1, it4: 2 hits
 * (count 2), it5: 0 misses and evicts 2 (count 2 > 3's 1). */
static void test_eam_code_overflow(void)
{
    static const hand_row rows[6] = {{.ids = {{0}}}, {.ids = {{1}}}, {.ids = {{2}}},
                                     {.ids = {{3}}}, {.ids = {{2}}}, {.ids = {{0}}}};
    static const uint32_t per_it[6] = {1, 1, 1, 1, 1, 1};
    write_hand("cm_over.h5", 1, 4, 1, 6, per_it, rows);
    char seq[1024];
    ms_metrics m;
    run_sequence("cm_over.h5", "eam:mode=code", "eam:mode=code", "gpu", 2, seq, sizeof seq, &m);
    CHECK_SEQ(seq, "m0.0 | m0.1 | m0.2 | m0.3 e0.2 | m0.2 e0.3 | h0.0");
    CHECK_NEAR(m.gpu_cache_peak_bytes, 3e6, 0);
    CHECK_EQ_INT(m.train_requests + m.train_iters, 0); /* the 2024 code learns nothing */
    ms_metrics_free(&m);
    run_sequence("cm_over.h5", "none", "eam:mode=code", "gpu", 2, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "m0.0 | m0.1 | m0.2 e0.0 | m0.3 e0.1 | h0.2 | m0.0 e0.2");
}

/* L = 3, J = 2, K = 1, cache of 6 (nothing is evicted); prefill routes
 * (0, 0, 0), decode (1, 1, 1).  prefetch eam:mode=code, cache eam:mode=code.
 * Times in ms: dense 0.2, copy 1.5, compute 0.1, prefetch priorities
 * (0 + 1e-8)(1 - (f - l)/4): the queue is layer-major, id-ascending.
 * it0 l0 (t 0): list layers 0..2; queue (1,0) (1,1) (2,0) (2,1): 4 issued;
 *   (1,0) copies 0-1.5.  Gate 0.2: (0,0) misses, demand 1.5-3.0, compute
 *   3.0-3.1; (1,1) copies 3.0-4.5.
 * l1 (3.1): the queue is replaced: (2,0) (2,1) re-queued (2 issued).  (1,0)
 *   hits.  l2 (3.4): the queue is cleared; (2,0) misses: demand 4.5-6.0.
 * it1 l0 (6.1): queue (2,1) (1 issued), copied 6.1-7.6; (0,1) misses (demand
 *   7.6-9.1).  l1: (1,1) hits; l2: (2,1) hits.  7 prefetches issued. */
static void test_eam_code_queue(void)
{
    static const hand_row rows[2] = {{.ids = {{0}, {0}, {0}}}, {.ids = {{1}, {1}, {1}}}};
    static const uint32_t per_it[2] = {1, 1};
    write_hand("cm_queue.h5", 3, 2, 1, 2, per_it, rows);
    char seq[1024];
    ms_metrics m;
    run_sequence("cm_queue.h5", "eam:mode=code", "eam:mode=code", "gpu", 6, seq, sizeof seq, &m);
    CHECK_SEQ(seq, "m0.0 h1.0 m2.0 | m0.1 h1.1 h2.1");
    CHECK_EQ_INT(m.prefetch_issued, 7);
    ms_metrics_free(&m);
}

/* L = 1, J = 8, K = 2, cache of 3, no prefetcher (nothing listed): rows
 * [2, 5], [5, 6], [1, 5], one an iteration.  The 2024 code acquires a step's
 * experts one at a time by ascending id and skips only listed, queued and
 * locked nodes when it evicts (issue 32.3):
 *   it0: 2, 5 miss (counts 1, 1).  it1: 5 hits (2), 6 misses (1): full.
 *   it2: 1 misses: sorted by count descending [5, 2, 6]: 5 is the victim,
 *        although the step routes it; 5's turn then finds it gone: a miss
 *        (count restarted: 1), and sorted [1, 2, 6] (all 1) evicts 1, whose
 *        turn has passed (it still computes).  5 misses in all.
 * Deciding the step at the gate (before) made 5 a hit of it2: 4 misses. */
static void test_eam_code_turn(void)
{
    static const hand_row rows[3] = {{.ids = {{2, 5}}}, {.ids = {{5, 6}}}, {.ids = {{1, 5}}}};
    static const uint32_t per_it[3] = {1, 1, 1};
    write_hand("cm_turn.h5", 1, 8, 2, 3, per_it, rows);
    char seq[1024];
    ms_metrics m;
    run_sequence("cm_turn.h5", "none", "eam:mode=code", "gpu", 3, seq, sizeof seq, &m);
    CHECK_SEQ(seq, "m0.2 m0.5 | h0.5 m0.6 | m0.1 e0.5 m0.5 e0.1");
    CHECK_EQ_INT(m.total.misses, 5);
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.demand_copies, 5);
    ms_metrics_free(&m);
    /* mixtral-offloading's and HybriMoE's code modes keep lookup_at_turn 0
     * (an evicted step expert still computes); their hits-first orders look
     * every hit up before any load of the step anyway. */
}

/* The code's eviction also skips queued nodes (copies in flight).  L = 2,
 * J = 4, K = 2, cache of 2, prefetch oracle (distance 1: it lists nothing,
 * so nothing is protected by a list); rows: it0 l0 [0, 1], l1 [0, 3]; it1
 * l0 [0, 1], l1 [2, 1].  Every victim below is the first of the residents in
 * (layer, id) order sorted by count descending (all counts 1 here).  In it1
 * layer 1 oracle queued (1,2) then (1,1) (activation order): (1,2)'s copy
 * starts (evicting (0,1)) and is in flight at the gate, (1,1) is still
 * queued: a miss.  Its turn comes first (ascending): the residents sorted
 * are (1,2) then (1,3); (1,2) is a copy in flight whose turn has not come:
 * skipped; (1,3) goes.  (1,2) is then late, not loaded again.  With
 * in-flight step experts evictable (the planted fault), (1,1) evicts (1,2),
 * whose turn then finds it gone: "m1.1 e1.2 m1.2 e1.1". */
static void test_eam_code_inflight(void)
{
    static const hand_row rows[2] = {{.ids = {{0, 1}, {0, 3}}}, {.ids = {{0, 1}, {2, 1}}}};
    static const uint32_t per_it[2] = {1, 1};
    write_hand("cm_inflight.h5", 2, 4, 2, 2, per_it, rows);
    char seq[1024];
    run_sequence("cm_inflight.h5", "oracle", "eam:mode=code", "gpu", 2, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "l0.0 m0.1 e0.0 l1.0 m1.3 e1.0 | e0.1 l0.0 m0.1 e0.0 e0.1 m1.1 e1.3 l1.2");
}

/* ---- eam:mode=code-head (MoE-Infinity HEAD) ---- */

/* L = 2, J = 4, K = 1, cache of 3, no prefetch; routes (l0, l1) = (1, 0),
 * (1, 0), (2, 3), (2, 0).  Counts +1 per activation, never reset; free
 * space 3 experts, one less per activation (hits too), one more per
 * eviction; a miss evicts one expert when the free space is below one.
 *   it0: 1, 0 miss (free 3 -> 2 -> 1).   it1: both hit (free 0, -1).
 *   it2: (0,2) misses with 2 resident of 3, but free < 1: evict one: lowest
 *        count, expert-major: (1,0) (count 2, expert 0) before (0,1) (count
 *        2, expert 1).  (1,3) misses: (0,1) count 2, (0,2) count 1: evict (0,2).
 *   it3: (0,2) (count 2) misses: (0,1) 2, (1,3) 1: evict (1,3).  (1,0) (count
 *        3) misses: (0,1) 2 and (0,2) 2 tie: expert 1 first: evict (0,1).
 * The cache never holds more than 2 of its 3 experts after it1. */
static void test_eam_code_head(void)
{
    static const hand_row rows[4] = {{.ids = {{1}, {0}}}, {.ids = {{1}, {0}}}, {.ids = {{2}, {3}}}, {.ids = {{2}, {0}}}};
    static const uint32_t per_it[4] = {1, 1, 1, 1};
    write_hand("cm_head.h5", 2, 4, 1, 4, per_it, rows);
    char seq[1024];
    run_sequence("cm_head.h5", "none", "eam:mode=code-head", "gpu", 3, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "m0.1 m1.0 | h0.1 h1.0 | m0.2 e1.0 m1.3 e0.2 | m0.2 e1.3 m1.0 e0.1");
    /* lfu:reset=0 (the old code-head) fills the third slot first */
    run_sequence("cm_head.h5", "none", "lfu:reset=0", "gpu", 3, seq, sizeof seq, NULL);
    CHECK(strncmp(seq, "m0.1 m1.0 | h0.1 h1.0 | m0.2 m1.3", 33) == 0);
}

/* ---- mrs:mode=code (HybriMoE on kTransformers) ---- */

/* L = 3, J = 4, K = 2, slots = 2, p = 2, cache of 6: experts 0, 1 of every
 * layer preloaded (0 least recent).  Weights 0.75 / 0.25 (exact in float).
 * S <- 0.5 TopP + 0.5 S from the FIRST row; mrs_bug: the two top ids,
 * ascending, get the two values, descending.
 * Prefill, 2 rows (the prefill path: unique() ascending, hits then misses):
 *   row0: l0 [2, 3], l1 [2, 3], l2 [0, 1];  row1: l0 [0, 2], l1 [1, 3], l2 [2, 3].
 *   l0 (first layer: the buffer is free): 0 hits; 2, 3 miss and stream
 *      through the buffer, no eviction.
 *   l1: S1 = [0, 0, .375, .125].  1 hits (touched).  2: lowest S among the
 *      layer's loaded experts, no protection: 0 and 1 tie at 0, 0 is first
 *      in dict order: evict 0.  3: 1 (0, the step's own hit) vs 2 (.375):
 *      evict 1.
 *   l2 (last layer: buffer): 0, 1 hit; 2, 3 stream through the buffer.
 * Decode, row [l0 3 (.75), 1 (.25)], [l1 0 (.75), 2 (.25)], [l2 3 (.75), 2 (.25)]:
 *   l0: S0 = [0, .375, .1875, .1875] (the bug gives 1 the .75); 1 hits; 3
 *      misses: 0 (S 0) vs 1 (.375): evict 0.
 *   l1: S1 = [.375, 0, .3125, .0625]; 2 hits; 0 misses: 2 (.3125) vs 3
 *      (.0625): evict 3.
 *   l2: S2 = [.1875, .0625, .375, .125]; both miss, in topk(sorted=False)
 *      order: 3 (above the lowest weight) then 2.  3: evict 1 (.0625); 2: 0
 *      (.1875) vs 3 (.125, the step's own load, still in flight): evict 3.
 *      Ascending order (2 first) would evict 1, then 0. */
static void test_mrs_code(void)
{
    static const hand_row rows[3] = {
        {.ids = {{2, 3}, {2, 3}, {0, 1}}, .w = {{.75f, .25f}, {.75f, .25f}, {.75f, .25f}}},
        {.ids = {{0, 2}, {1, 3}, {2, 3}}, .w = {{.75f, .25f}, {.75f, .25f}, {.75f, .25f}}},
        {.ids = {{3, 1}, {0, 2}, {3, 2}}, .w = {{.75f, .25f}, {.75f, .25f}, {.75f, .25f}}},
    };
    static const uint32_t per_it[2] = {2, 1};
    write_hand("cm_mrs.h5", 3, 4, 2, 2, per_it, rows);
    char seq[1024];
    run_sequence("cm_mrs.h5", "none", "mrs:mode=code,slots=2,p=2", "gpu", 6, seq, sizeof seq, NULL);
    CHECK_SEQ(seq, "h0.0 m0.2 m0.3 h1.1 m1.2 e1.0 m1.3 e1.1 h2.0 h2.1 m2.2 m2.3 | "
                   "h0.1 m0.3 e0.0 h1.2 m1.0 e1.3 m2.3 e2.1 m2.2 e2.3");
}

/* ---- hybrid:mode=code + mrs:mode=code: the path by token count, CPU hits ---- */

/* L = 1, J = 6, K = 4, mrs slots = 4 (experts 0..3 preloaded, dict order
 * 0 1 2 3), p = 1, cache of 4.  Weights 0.4, 0.3, 0.2, 0.1.
 * it0 is a ONE-row prefill [0 1 2 3]: the code takes the decode path by
 *   token count, so HSS runs: order = hits in topk(sorted=False) order 0 1 2
 *   (above the lowest weight) then 3; GPU totals 0.5, 1.0, 1.5 stay <= the
 *   CPU's 1 + 0.79, the fourth (2.0 > 1.79) sends the tail, 3, to the CPU.
 *   GPU hits 0 1 2 are touched, the CPU hit 3 is not: dict 3 0 1 2.
 *   S (top-1 of the first row): S0 = .2.
 * it1 [4 5 0 1]: S = [.1, 0, 0, 0, .2, 0].  Order: hits 0 (above the lowest
 *   weight), 1 (at it), then misses 4, 5.  HSS: 0, 1 GPU (1.0), 4 GPU (a
 *   miss: move .418 <= 1.0, so 1.5), 5: 2.0 > 1.79: CPU (not loaded).  0, 1
 *   touched: dict 3 2 0 1.  4 evicts the lowest S, ties 1, 2, 3 at 0 in dict
 *   order: 3 (2 if CPU hits were touched).  On the CPU: 3 (it0), 5 (it1). */
static void test_hybrimoe_path_and_cpu_hits(void)
{
    static const hand_row rows[2] = {
        {.ids = {{0, 1, 2, 3}}, .w = {{.4f, .3f, .2f, .1f}}},
        {.ids = {{4, 5, 0, 1}}, .w = {{.4f, .3f, .2f, .1f}}},
    };
    static const uint32_t per_it[2] = {1, 1};
    write_hand("cm_hss.h5", 1, 6, 4, 2, per_it, rows);
    char seq[1024];
    ms_metrics m;
    run_sequence("cm_hss.h5", "none", "mrs:mode=code,slots=4,p=1", "hybrid:mode=code", 4, seq, sizeof seq, &m);
    CHECK_SEQ(seq, "h0.0 h0.1 h0.2 h0.3 | h0.0 h0.1 m0.4 e0.3 m0.5");
    CHECK_EQ_INT(m.total.on_cpu, 2);
    CHECK_EQ_INT(m.phase[MS_PHASE_PREFILL].on_cpu, 1);
    ms_metrics_free(&m);
}

int main(void)
{
    test_lru_token_order();
    test_lru_slots_code();
    test_sort_ties();
    test_eam_code_overflow();
    test_eam_code_queue();
    test_eam_code_turn();
    test_eam_code_inflight();
    test_eam_code_head();
    test_mrs_code();
    test_hybrimoe_path_and_cpu_hits();
    CHECK_DONE();
}
