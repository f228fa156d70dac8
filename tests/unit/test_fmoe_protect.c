/* Issue 19: fMoE's cache and its own prefetches.  Hand-built traces
 * (hand_trace.h) where the literal eviction key (smallest p x freq,
 * `fmoe:protect=none`) evicts a prefetched expert before its layer runs, and
 * the paper-mode rule (`protect=target`, the default: a prefetched expert is
 * not a victim until its target layer has run) keeps it; a prefetch that
 * finds only protected experts is dropped, a demand load evicts one. */
#include "hand_trace.h"

/* Trace a, R2 routes 3,3,3,3; cache of 3 experts; distance 2.
 *
 * Both runs: at t = 0 the semantic search matches R1 (cos 1, delta 0, K = 1)
 * and guides layers 0 and 1: (0,3) copied 0-1.5 ms, (1,3) 1.5-3.0.  Layer 0:
 * dense 0-20, gate 20: (0,3) hits (freq 2); the trajectory (e3) matches R1
 * and guides layer 2: (2,3) copied 20-21.5 (the cache has room: 3 experts).
 * Layer 1: dense 20.1-40.1, gate 40.1: (1,3) hits; the trajectory guides
 * layer 3: (3,3), issued at 40.1, needs a victim.  Layer 1's (1,3) is
 * running; p = 1 for every cached expert; freq: (0,3) 2, (2,3) 1.
 *
 * protect=none (the literal key): keys (0,3) 2, (2,3) 1 -> victim (2,3), an
 *   unused prefetch whose layer 2 has not run (before_target); (3,3) copied
 *   40.1-41.6.  Layer 2 (gate 60.2): (2,3) misses; its demand load needs a
 *   victim among (0,3) key 2, (1,3) key 2 and the pending (3,3) key 1 ->
 *   (3,3) (before_target again); (2,3) copied 60.2-61.7 (freq 1 + 1 = 2, kept
 *   across its eviction).  Layer 3 (dense 61.8-81.8): (3,3) misses; keys
 *   (0,3), (1,3), (2,3) all 2 -> the least recently visited, (0,3) (used:
 *   "no").  hits 2, misses 2; 4 copied, 2 useful, 2 wasted, both evicted
 *   before their target layer; victims (2,3), (3,3), (0,3).
 * protect=target (paper's default): (2,3) is protected until layer 2 runs ->
 *   victim (0,3) ("no"); layer 2 (gate 60.2) hits (2,3), layer 3 (gate 80.3)
 *   hits (3,3).  hits 4, misses 0; 4 copied, 4 useful, nothing wasted;
 *   victim (0,3) only. */
static void test_literal_key_vs_target(void)
{
    write_trace("fmoe_protect_a.h5", 4, 3, 1, HAND_ROUTING_A, HAND_EMB);

    ms_metrics m = run_ok("fmoe_protect_a.h5", "fmoe:protect=none", 3, "fmoe_protect_none.csv");
    CHECK_EQ_INT(m.train_requests, 2);
    CHECK_EQ_INT(m.total.hits, 2);
    CHECK_EQ_INT(m.total.late, 0);
    CHECK_EQ_INT(m.total.misses, 2);
    CHECK_EQ_INT(m.prefetch_issued, 4);
    CHECK_EQ_INT(m.prefetch_copied, 4);
    CHECK_EQ_INT(m.prefetch_useful, 2);
    CHECK_EQ_INT(m.prefetch_wasted, 2);
    CHECK_EQ_INT(m.prefetch_evicted_unused, 2);
    CHECK_EQ_INT(m.prefetch_target_passed, 0);
    CHECK_EQ_INT(m.prefetch_dropped, 0);
    CHECK_EQ_INT(m.demand_copies, 2);
    CHECK_EVENT("fmoe_protect_none.csv", "copy_prefetch", 2, 3, 0, 20.0, 21.5);
    CHECK_EVENT("fmoe_protect_none.csv", "evict", 2, 3, 0, 40.1, 40.1);
    CHECK_EVENT("fmoe_protect_none.csv", "evict", 3, 3, 0, 60.2, 60.2);
    CHECK_EVENT("fmoe_protect_none.csv", "evict", 0, 3, 0, 81.8, 81.8);
    CHECK_EVENT("fmoe_protect_none.csv", "copy_demand", 2, 3, 0, 60.2, 61.7);
    CHECK_EVICT_TAG("fmoe_protect_none.csv", 2, 3, 0, "before_target");
    CHECK_EVICT_TAG("fmoe_protect_none.csv", 3, 3, 0, "before_target");
    CHECK_EVICT_TAG("fmoe_protect_none.csv", 0, 3, 0, "no");
    ms_metrics_free(&m);

    /* protect=auto is target in paper mode */
    const char *specs[] = {"fmoe", "fmoe:protect=target"};
    for (int i = 0; i < 2; i++) {
        m = run_ok("fmoe_protect_a.h5", specs[i], 3, "fmoe_protect_target.csv");
        CHECK_EQ_INT(m.total.hits, 4);
        CHECK_EQ_INT(m.total.misses, 0);
        CHECK_EQ_INT(m.prefetch_copied, 4);
        CHECK_EQ_INT(m.prefetch_useful, 4);
        CHECK_EQ_INT(m.prefetch_wasted, 0);
        CHECK_EQ_INT(m.prefetch_evicted_unused, 0);
        CHECK_EQ_INT(m.prefetch_target_passed, 0);
        CHECK_EQ_INT(m.demand_copies, 0);
        CHECK_EVENT("fmoe_protect_target.csv", "evict", 0, 3, 0, 40.1, 40.1);
        CHECK_EVICT_TAG("fmoe_protect_target.csv", 0, 3, 0, "no");
        CHECK_EVENT("fmoe_protect_target.csv", "hit", 2, 3, 0, 60.2, 60.2);
        CHECK_EVENT("fmoe_protect_target.csv", "hit", 3, 3, 0, 80.3, 80.3);
        double t0, t1;
        CHECK(ms_fixture_find_event("fmoe_protect_target.csv", "evict", 2, 3, 0, &t0, &t1) == -1);
        ms_metrics_free(&m);
    }
}

/* The same with a cache of 2: (0,3) and (1,3) fill it at t = 0-3.0.
 *
 * protect=target: after gate 0, (2,3) needs a victim: (0,3) is running and
 *   (1,3) is a protected prefetch -> none: (2,3) is dropped.  Layer 1 (gate
 *   40.1) hits (1,3); (3,3) (issued 40.1) evicts (0,3) ("no": key 2; (1,3)
 *   runs) and is copied 40.1-41.6.  Layer 2 (gate 60.2) misses (2,3); victim
 *   (1,3) ("no"; (3,3) is protected until layer 3); (2,3) copied 60.2-61.7.
 *   Layer 3 (dense 61.8-81.8) hits (3,3).
 *   hits 3, misses 1; issued 4, copied 3, dropped 1, useful 3, wasted 0.
 * protect=none: (2,3) evicts the pending (1,3) (key 1 x 1 < (0,3)'s 2;
 *   before_target) and is copied 20-21.5.  Layer 1 (gate 40.1) misses (1,3):
 *   victim the pending (2,3) (key 1 < 2; before_target); (1,3) copied
 *   40.1-41.6 (freq 2), computed 41.6-41.7.  (3,3) (issued 40.1) starts at
 *   41.6 and evicts (0,3) ("no"; (1,3) runs).  Layer 2 (dense 41.7-61.7)
 *   misses (2,3): victim the pending (3,3) (key 1 < (1,3)'s 2;
 *   before_target); (2,3) copied 61.7-63.2 (freq 2).  Layer 3 (dense
 *   63.3-83.3) misses (3,3): (1,3) and (2,3) both key 2, the least recent
 *   (1,3) goes ("no").
 *   hits 1, misses 3; copied 4, useful 1, wasted 3, all evicted before their
 *   target layer. */
static void test_cache_of_two(void)
{
    ms_metrics m = run_ok("fmoe_protect_a.h5", "fmoe", 2, "fmoe_protect_two.csv");
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 1);
    CHECK_EQ_INT(m.prefetch_issued, 4);
    CHECK_EQ_INT(m.prefetch_copied, 3);
    CHECK_EQ_INT(m.prefetch_dropped, 1);
    CHECK_EQ_INT(m.prefetch_useful, 3);
    CHECK_EQ_INT(m.prefetch_wasted, 0);
    CHECK_EQ_INT(m.prefetch_evicted_unused, 0);
    CHECK_EVENT("fmoe_protect_two.csv", "evict", 0, 3, 0, 40.1, 40.1);
    CHECK_EVICT_TAG("fmoe_protect_two.csv", 0, 3, 0, "no");
    CHECK_EVENT("fmoe_protect_two.csv", "evict", 1, 3, 0, 60.2, 60.2);
    CHECK_EVICT_TAG("fmoe_protect_two.csv", 1, 3, 0, "no");
    CHECK_EVENT("fmoe_protect_two.csv", "copy_demand", 2, 3, 0, 60.2, 61.7);
    ms_metrics_free(&m);

    m = run_ok("fmoe_protect_a.h5", "fmoe:protect=none", 2, "fmoe_protect_two.csv");
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 3);
    CHECK_EQ_INT(m.prefetch_copied, 4);
    CHECK_EQ_INT(m.prefetch_dropped, 0);
    CHECK_EQ_INT(m.prefetch_useful, 1);
    CHECK_EQ_INT(m.prefetch_wasted, 3);
    CHECK_EQ_INT(m.prefetch_evicted_unused, 3);
    CHECK_EVENT("fmoe_protect_two.csv", "evict", 1, 3, 0, 20.0, 20.0);
    CHECK_EVICT_TAG("fmoe_protect_two.csv", 1, 3, 0, "before_target");
    CHECK_EVENT("fmoe_protect_two.csv", "evict", 2, 3, 0, 40.1, 40.1);
    CHECK_EVICT_TAG("fmoe_protect_two.csv", 2, 3, 0, "before_target");
    CHECK_EVENT("fmoe_protect_two.csv", "evict", 0, 3, 0, 41.6, 41.6);
    CHECK_EVICT_TAG("fmoe_protect_two.csv", 0, 3, 0, "no");
    CHECK_EVENT("fmoe_protect_two.csv", "evict", 3, 3, 0, 61.7, 61.7);
    CHECK_EVICT_TAG("fmoe_protect_two.csv", 3, 3, 0, "before_target");
    CHECK_EVENT("fmoe_protect_two.csv", "evict", 1, 3, 1, 83.3, 83.3);
    CHECK_EVICT_TAG("fmoe_protect_two.csv", 1, 3, 1, "no");
    CHECK_EVENT("fmoe_protect_two.csv", "copy_prefetch", 3, 3, 0, 41.6, 43.1);
    ms_metrics_free(&m);
}

/* A demand load may evict a protected prefetch when nothing else is
 * evictable.  Trace c: L = 2, training R0 (emb (1,0)) routes 0,1 and R1
 * (emb (0,1)) 3,3; R2 (emb (0,1)) has two token rows: 3,3 and 1,3.
 * Cache of 2, distance 2: the semantic search (R1) guides layers 0 and 1:
 * (0,3) copied 0-1.5, (1,3) 1.5-3.0.  Gate 0 (20 ms) activates 3 and 1:
 * (0,3) hits and runs; (0,1) misses, and the only evictable expert is the
 * protected (1,3) (its layer has not run): evicted (before_target); (0,1)
 * copied 20-21.5, computed 21.5-21.6.  Layer 1 (dense 21.6-41.6) misses
 * (1,3): (0,1) (p 0 on the board: key 0) goes before (0,3) (key 1 x 2)
 * ("no"); (1,3) copied 41.6-43.1.
 * hits 1, misses 2; copied 2, useful 1, wasted 1 evicted before its target. */
static void test_demand_evicts_protected(void)
{
    static const int routing[3 * 2 * 2] = {0, 1, 0, 1, 3, 3, 3, 3, 3, 3, 1, 3};
    /* rows: R0 and R1 repeat their one row, so their maps are the same one-hot rows */
    write_trace("fmoe_protect_c.h5", 2, 3, 2, routing, HAND_EMB);
    ms_metrics m = run_ok("fmoe_protect_c.h5", "fmoe", 2, "fmoe_protect_c.csv");
    CHECK_EQ_INT(m.total.hits, 1);
    CHECK_EQ_INT(m.total.misses, 2);
    CHECK_EQ_INT(m.prefetch_copied, 2);
    CHECK_EQ_INT(m.prefetch_useful, 1);
    CHECK_EQ_INT(m.prefetch_wasted, 1);
    CHECK_EQ_INT(m.prefetch_evicted_unused, 1);
    CHECK_EVENT("fmoe_protect_c.csv", "evict", 1, 3, 0, 20.0, 20.0);
    CHECK_EVICT_TAG("fmoe_protect_c.csv", 1, 3, 0, "before_target");
    CHECK_EVENT("fmoe_protect_c.csv", "copy_demand", 0, 1, 0, 20.0, 21.5);
    CHECK_EVENT("fmoe_protect_c.csv", "evict", 0, 1, 0, 41.6, 41.6);
    CHECK_EVICT_TAG("fmoe_protect_c.csv", 0, 1, 0, "no");
    CHECK_EVENT("fmoe_protect_c.csv", "copy_demand", 1, 3, 0, 41.6, 43.1);
    ms_metrics_free(&m);
}

int main(void)
{
    test_literal_key_vs_target();
    test_cache_of_two();
    test_demand_evicts_protected();
    CHECK_DONE();
}
