/* Hand-built traces for the prefetch-waste tests (test_prefetch_waste.c,
 * test_fmoe_protect.c): requests of one prefill iteration, K = 1, J = 4,
 * embeddings of dimension 2, replayed with prefetch `fmoe` at distance 2 on
 * the exact-timing platform; and a reader of the --events column
 * `unused_prefetch`.  Each helper exits on failure. */
#ifndef MS_TEST_HAND_TRACE_H
#define MS_TEST_HAND_TRACE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"

#define HAND_J 4

/* n requests of one prefill iteration of `rows` token rows each (K = 1,
 * J = 4, L layers), embedding dimension 2; routing[(r * rows + row) * L + l]
 * is the expert of request r's token row at layer l.  Experts are 1 MB (a
 * copy takes 0.5 + 1 = 1.5 ms on the exact platform, a compute 0.1 ms), a
 * layer's dense work 200 MB (20 ms). */
static inline void write_trace(const char *path, uint32_t L, uint32_t n, uint32_t rows, const int *routing,
                        const float emb[][2])
{
    ms_trace_meta m = ms_fixture_hand_meta("test_fmoe_protect", L, HAND_J, 1, 1000000, 200000000);
    m.embed_dim = 2;
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    for (uint32_t q = 0; q < n; q++) {
        ms_request r;
        memset(&r, 0, sizeof r);
        r.id = q;
        r.prompt_len = rows;
        r.n_iters = 1;
        r.n_rows = rows;
        ms_request_alloc(&r, &m);
        r.iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, rows};
        for (uint32_t row = 0; row < rows; row++)
            for (uint32_t l = 0; l < m.L; l++) {
                r.topk_ids[ms_topk_index(&m, row, l)] = routing[((size_t)q * rows + row) * L + l];
                r.topk_w[ms_topk_index(&m, row, l)] = 1.0f;
            }
        r.embedding[0] = emb[q][0];
        r.embedding[1] = emb[q][1];
        ms_fixture_writer_add(w, &r);
        ms_request_free(&r);
    }
    ms_fixture_writer_close(w);
    ms_trace_meta_free(&m);
}

static ms_platform g_platform;

/* Prefetch `fmoe` (paper) with `cache`, distance 2, batch 1, offline,
 * --train 0.5 (of 3 requests: R0 and R1 train); events to `events` (or NULL). */
static inline ms_run_config config(const char *trace, const char *cache, uint32_t cap, const char *events)
{
    g_platform = ms_fixture_exact_platform();
    return (ms_run_config){.trace_path = trace, .platform = &g_platform, .prefetch_spec = "fmoe",
                           .cache_spec = cache, .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = cap,
                           .distance = 2, .max_batch = 1, .offline = 1, .train_set = 1, .train_frac = 0.5,
                           .events_path = events};
}

static inline ms_metrics run_ok(const char *trace, const char *cache, uint32_t cap, const char *events)
{
    ms_run_config cfg = config(trace, cache, cap, events);
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) {
        fprintf(stderr, "ms_run: %s\n", err.msg);
        exit(1);
    }
    return m;
}

/* The unused_prefetch column (the 9th; runs with several GPUs add a 10th,
 * gpu) of the n-th evict event of expert (l, e) in an --events CSV, into
 * out; -1 when absent. */
static inline int evict_tag(const char *events, int l, int e, int nth, char *out, size_t cap)
{
    FILE *f = fopen(events, "r");
    char line[512];
    int rc = -1;
    if (!f)
        return -1;
    while (rc && fgets(line, sizeof line, f)) {
        int el, ee;
        if (sscanf(line, "evict,%*f,%*f,%*d,%d,%d,", &el, &ee) != 2 || el != l || ee != e || nth-- != 0)
            continue;
        line[strcspn(line, "\r\n")] = 0;
        const char *p = line;
        for (int col = 0; col < 8; col++)
            p = strchr(p, ',') + 1; /* an evict row has every column */
        snprintf(out, cap, "%.*s", (int)strcspn(p, ","), p);
        rc = 0;
    }
    fclose(f);
    return rc;
}

#define CHECK_EVICT_TAG(ev, l, e, nth, want)                                                                     \
    do {                                                                                                        \
        char _tag[64] = "";                                                                                     \
        CHECK(evict_tag(ev, l, e, nth, _tag, sizeof _tag) == 0);                                                \
        CHECK(!strcmp(_tag, want));                                                                             \
    } while (0)

/* Traces a and b: training R0 (emb (1,0)) routes 0,1,2,3 and R1 (emb
 * (0,1)) routes 3,3,3,3 (offline map store; one-hot maps: p is 1 for the
 * routed expert, 0 for the others); R2 (emb (0,1)) is replayed and routes
 * 3,3,3,3 in trace a. */
static const float HAND_EMB[3][2] = {{1, 0}, {0, 1}, {0, 1}};
static const int HAND_ROUTING_A[3 * 4] = {0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3};

#endif
