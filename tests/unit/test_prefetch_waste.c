/* Issue 19: the engine counts, for every run, the prefetched experts evicted
 * before their target layer ran (prefetch_evicted_unused) and the prefetched
 * experts whose target layer ran without activating them
 * (prefetch_target_passed); the counts reach the JSON, the sweep CSV and the
 * last column of --events (`unused_prefetch` of an evict row: before_target,
 * after_target or no).  Hand-built traces of hand_trace.h. */
#include <cJSON.h>

#include "hand_trace.h"
#include "sim/engine/report.h"
#include "sim/apps/sweep_csv.h"

/* Trace a (R2 routes 3,3,3,3) with an LRU cache of 2 experts, distance 2.
 * t = 0: the semantic search (R1) guides layers 0 and 1: (0,3) copied
 * 0-1.5 ms, (1,3) 1.5-3.0.  Gate 0 (20): (0,3) hits (LRU order, most recent
 * first: (0,3), (1,3)); the trajectory guides layer 2: (2,3) at 20 evicts the
 * least recent, (1,3), whose layer 1 has not run (before_target); copied
 * 20-21.5.  Gate 1 (40.1): (1,3) misses; its demand load evicts (0,3) ("no")
 * and is copied 40.1-41.6, computed 41.6-41.7; the trajectory guides layer 3:
 * (3,3) starts at 41.6 and evicts (2,3) (before_target), copied 41.6-43.1.
 * Gate 2 (61.7): (2,3) misses, evicts (1,3) ("no"), copied 61.7-63.2.  Gate
 * 3 (83.3): (3,3) hits.
 * hits 2, misses 2; 4 copied, 2 useful, 2 wasted, both evicted before their
 * target layer (evicted_unused 2), target_passed 0. */
static void test_evicted_before_target(void)
{
    write_trace("waste_a.h5", 4, 3, 1, HAND_ROUTING_A, HAND_EMB);
    ms_metrics m = run_ok("waste_a.h5", "lru", 2, "waste_a.csv");
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
    CHECK_EQ_INT(m.demand_copies, 2);
    CHECK_EVENT("waste_a.csv", "evict", 1, 3, 0, 20.0, 20.0);
    CHECK_EVICT_TAG("waste_a.csv", 1, 3, 0, "before_target");
    CHECK_EVENT("waste_a.csv", "evict", 0, 3, 0, 40.1, 40.1);
    CHECK_EVICT_TAG("waste_a.csv", 0, 3, 0, "no");
    CHECK_EVENT("waste_a.csv", "copy_prefetch", 3, 3, 0, 41.6, 43.1);
    CHECK_EVENT("waste_a.csv", "evict", 2, 3, 0, 41.6, 41.6);
    CHECK_EVICT_TAG("waste_a.csv", 2, 3, 0, "before_target");
    CHECK_EVENT("waste_a.csv", "evict", 1, 3, 1, 61.7, 61.7);
    CHECK_EVICT_TAG("waste_a.csv", 1, 3, 1, "no");
    CHECK_EVENT("waste_a.csv", "hit", 3, 3, 0, 83.3, 83.3);

    /* the header gains the column at its end; rows that are not evictions leave it empty */
    FILE *f = fopen("waste_a.csv", "r");
    char line[4096];
    CHECK(f && fgets(line, sizeof line, f) && fgets(line, sizeof line, f));
    CHECK(!strcmp(line, "kind,start_s,end_s,iteration,layer,expert,phase,bytes,unused_prefetch\n"));
    CHECK(fgets(line, sizeof line, f) && !strncmp(line, "dense,", 6));
    CHECK(strlen(line) > 3 && !strcmp(line + strlen(line) - 3, ",,\n")); /* bytes and unused_prefetch empty */
    if (f)
        fclose(f);
    ms_metrics_free(&m);
}

/* Trace b: R2 routes 3,3,0,3; an LRU cache of 5 (never full): the same
 * four prefetches ((0,3), (1,3), then (2,3) after gate 0 and (3,3) after
 * gate 1), but layer 2 activates expert 0: (2,3)'s target layer passes
 * without it (target_passed 1; it stays cached unused, so it is not wasted),
 * (2,0) misses.  hits 3, misses 1; 4 copied, 3 useful.  The counts reach the
 * JSON and the sweep CSV. */
static void test_target_passed(void)
{
    static const int routing[3 * 4] = {0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 0, 3};
    write_trace("waste_b.h5", 4, 3, 1, routing, HAND_EMB);
    ms_metrics m = run_ok("waste_b.h5", "lru", 5, NULL);
    CHECK_EQ_INT(m.total.hits, 3);
    CHECK_EQ_INT(m.total.misses, 1);
    CHECK_EQ_INT(m.prefetch_copied, 4);
    CHECK_EQ_INT(m.prefetch_useful, 3);
    CHECK_EQ_INT(m.prefetch_wasted, 0);
    CHECK_EQ_INT(m.prefetch_evicted_unused, 0);
    CHECK_EQ_INT(m.prefetch_target_passed, 1);

    cJSON *j = ms_report_metrics(&m), *pf = cJSON_GetObjectItem(j, "prefetch");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(pf, "evicted_unused")));
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(pf, "target_passed")));
    CHECK_EQ_INT(cJSON_GetObjectItem(pf, "evicted_unused")->valuedouble, 0);
    CHECK_EQ_INT(cJSON_GetObjectItem(pf, "target_passed")->valuedouble, 1);
    cJSON_Delete(j);

    /* sweep CSV: the two columns follow prefetch_dropped, in the header and in a row */
    CHECK_STR_CONTAINS(ms_sweep_csv_header(),
                       ",prefetch_dropped,prefetch_evicted_unused,prefetch_target_passed,prefetch_precision,");
    ms_sweep_point pt;
    for (int i = 0; i < MS_SW_NPARAM; i++)
        pt.v[i] = "x";
    pt.h2d_override = 0;
    m.prefetch_dropped = 5; /* distinct values to find in the row */
    m.prefetch_evicted_unused = 7;
    char *row = ms_sweep_csv_row(0, &pt, NULL, NULL, &m, NULL);
    CHECK_STR_CONTAINS(row, ",5,7,1,0.75,"); /* dropped, evicted_unused, target_passed, precision 3/4 */
    free(row);
    ms_metrics_free(&m);
}

int main(void)
{
    test_evicted_before_target();
    test_target_passed();
    CHECK_DONE();
}
