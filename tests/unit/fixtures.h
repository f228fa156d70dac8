/* Trace fixtures shared by the unit tests: the real route-csv traces of
 * ../shared imported, seeded synthetic traces, and the metadata and writer of
 * hand-built traces.  Each exits on failure. */
#ifndef MS_TEST_FIXTURES_H
#define MS_TEST_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "check.h"
#include "sim/core/profile.h"
#include "sim/engine/engine.h"
#include "traces/synth/gen.h"
#include "traces/import/import.h"
#include "traces/format/trace.h"

/* A hand-built trace's metadata: model "hand", `source` naming the test, L
 * layers of J experts, top-K with renormalised weights, every layer's
 * expert and dense bytes as given.  Set other fields (embed_dim, spec_depth,
 * probs_kind, hidden_size) on the result; free with ms_trace_meta_free. */
static inline ms_trace_meta ms_fixture_hand_meta(const char *source, uint32_t L, uint32_t J, uint32_t K,
                                                 uint64_t expert_bytes, uint64_t dense_bytes)
{
    ms_trace_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.model_name, sizeof m.model_name, "hand");
    snprintf(m.source, sizeof m.source, "%s", source);
    m.L = L;
    m.J = J;
    m.K = K;
    m.probs_kind = MS_PROBS_TOPK_RENORM;
    ms_trace_meta_alloc_layers(&m);
    for (uint32_t l = 0; l < L; l++) {
        m.expert_bytes[l] = expert_bytes;
        m.dense_bytes[l] = dense_bytes;
    }
    return m;
}

/* A trace writer that ends the test with the message on any failure. */
static inline ms_trace_writer *ms_fixture_writer_open(const char *path, const ms_trace_meta *m)
{
    ms_err err;
    ms_trace_writer *w = ms_writer_open(path, m, &err);
    if (!w) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        exit(1);
    }
    return w;
}

static inline void ms_fixture_writer_add(ms_trace_writer *w, const ms_request *r)
{
    ms_err err;
    if (ms_writer_add(w, r, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
}

static inline void ms_fixture_writer_close(ms_trace_writer *w)
{
    ms_err err;
    if (ms_writer_close(w, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
}

/* Writes the n requests to `path` as a trace of metadata m. */
static inline void ms_fixture_write_requests(const char *path, const ms_trace_meta *m, const ms_request *reqs,
                                             size_t n)
{
    ms_trace_writer *w = ms_fixture_writer_open(path, m);
    for (size_t i = 0; i < n; i++)
        ms_fixture_writer_add(w, &reqs[i]);
    ms_fixture_writer_close(w);
}

/* Imports ../shared/traces/bigmoeonedge/<name>.route.csv into `out`. */
/* One request of n_iters iterations: a prefill of prefill_rows token rows
 * (the prompt), then one row per decode; L layers of J experts, 1 MB
 * experts and 2 MB dense work, hidden size 500 (read only by runs with
 * several GPUs: token dispatch); ids[(row * L + l) * K + k] is slot k of
 * token row `row` at layer l, every slot weighted 1 / K.  `source` names
 * the test. */
static inline void ms_fixture_write_prefill_rows(const char *path, const char *source, uint32_t L, uint32_t J,
                                                 uint32_t K, uint32_t prefill_rows, uint32_t n_iters, const int *ids)
{
    ms_trace_meta m = ms_fixture_hand_meta(source, L, J, K, 1000000, 2000000);
    m.hidden_size = 500;
    ms_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = prefill_rows;
    r.output_len = n_iters - 1;
    r.n_iters = n_iters;
    r.n_rows = prefill_rows + n_iters - 1;
    ms_request_alloc(&r, &m);
    r.iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, prefill_rows};
    for (uint32_t i = 1; i < n_iters; i++)
        r.iters[i] = (ms_iteration){MS_PHASE_DECODE, prefill_rows + i - 1, 1};
    for (uint32_t row = 0; row < r.n_rows; row++)
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t k = 0; k < K; k++) {
                r.topk_ids[ms_topk_index(&m, row, l) + k] = ids[((size_t)row * L + l) * K + k];
                r.topk_w[ms_topk_index(&m, row, l) + k] = 1.0f / (float)K;
            }
    ms_fixture_write_requests(path, &m, &r, 1);
    ms_request_free(&r);
    ms_trace_meta_free(&m);
}

/* The same with a one-row prefill: iteration i is token row i. */
static inline void ms_fixture_write_rows(const char *path, const char *source, uint32_t L, uint32_t J, uint32_t K,
                                         uint32_t n_iters, const int *ids)
{
    ms_fixture_write_prefill_rows(path, source, L, J, K, 1, n_iters, ids);
}

/* One offline run at batch 1, distance 1, a cache of cap experts (events to
 * `events` when not NULL): ms_run's result. */
static inline int ms_fixture_run_cfg(const char *trace, const ms_platform *p, const char *prefetch,
                                     const char *cache, const char *sched, uint32_t cap, const char *events,
                                     ms_metrics *m, ms_err *err)
{
    ms_run_config cfg = {.trace_path = trace, .platform = p, .prefetch_spec = prefetch, .cache_spec = cache,
                         .sched_spec = sched, .cap_kind = MS_CAP_EXPERTS, .cap_value = cap,
                         .distance = 1, .max_batch = 1, .events_path = events};
    return ms_run(&cfg, m, err);
}

/* The same run, which must succeed (else the test exits). */
static inline ms_metrics ms_fixture_run(const char *trace, const ms_platform *p, const char *prefetch,
                                        const char *cache, const char *sched, uint32_t cap, const char *events)
{
    ms_metrics m;
    ms_err err;
    if (ms_fixture_run_cfg(trace, p, prefetch, cache, sched, cap, events, &m, &err)) {
        fprintf(stderr, "ms_run: %s\n", err.msg);
        exit(1);
    }
    return m;
}

static inline void ms_fixture_import_real(const char *name, const char *out)
{
    char in[1024];
    snprintf(in, sizeof in, "%s/traces/bigmoeonedge/%s.route.csv", MS_TEST_SHARED, name);
    ms_err err;
    if (ms_import_routecsv(in, out, NULL, &err)) {
        fprintf(stderr, "import %s: %s\n", in, err.msg);
        exit(1);
    }
}

/* A synthetic trace shaped like `model_name` with the generator's defaults. */
static inline void ms_fixture_gen(const char *model_name, const char *out, uint64_t seed, uint64_t requests)
{
    ms_model model;
    ms_gen_params p;
    ms_err err;
    ms_gen_defaults(&p);
    p.seed = seed;
    p.requests = requests;
    if (ms_model_load(model_name, &model, &err) || ms_gen_write(&p, &model, out, NULL, &err)) {
        fprintf(stderr, "gen %s: %s\n", model_name, err.msg);
        exit(1);
    }
}

/* 1 when the next request of a and of b (two readers of the same content,
 * e.g. a cache snapshot and a stream) has the same rows and top-k ids. */
static inline int ms_fixture_next_requests_match(ms_trace_reader *a, ms_trace_reader *b)
{
    ms_request ra = {0}, rb = {0};
    ms_err err;
    int ok = a && b && ms_reader_next(a, &ra, &err) == 1 && ms_reader_next(b, &rb, &err) == 1;
    const ms_trace_meta *m = ok ? ms_reader_meta(b) : NULL;
    ok = ok && ra.n_rows == rb.n_rows &&
         memcmp(ra.topk_ids, rb.topk_ids, (size_t)ra.n_rows * m->L * m->K * sizeof *ra.topk_ids) == 0;
    ms_request_free(&ra);
    ms_request_free(&rb);
    return ok;
}

/* The platform of the exact-timing tests: one copy = 0.5 ms latency +
 * bytes / 1 GB/s (a 1 MB expert: 1.5 ms); HBM and DRAM 10 GB/s; FLOP/s so
 * high that every compute is bandwidth-bound; no launch overheads. */
static inline ms_platform ms_fixture_exact_platform(void)
{
    ms_platform p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "test");
    p.gpu_mem_bytes = 1e12;
    p.hbm_bw = 1e10;
    p.gpu_flops = 1e15;
    p.h2d_bw = 1e9;
    p.h2d_latency_s = 0.5e-3;
    p.d2h_bw = 1e9;
    p.pageable_bw = 1e9;
    p.copy_engines = 1;
    p.cpu_cores = 1;
    p.dram_bw = 1e10;
    p.cpu_flops_per_core = 1e12;
    p.ssd_bw = 1e9;
    return p;
}

/* The n-th event of `kind` (0-based) for expert (l, e) in a --events CSV:
 * its start and end; -1 when absent. */
static inline int ms_fixture_find_event(const char *events, const char *kind, int l, int e, int nth, double *t0, double *t1)
{
    FILE *f = fopen(events, "r");
    char line[512], k[64];
    int it, el, ee;
    double a, b;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) { /* the provenance line ('#') and the header do not parse */
        if (sscanf(line, "%63[^,],%lf,%lf,%d,%d,%d", k, &a, &b, &it, &el, &ee) == 6 && !strcmp(k, kind) &&
            el == l && ee == e && nth-- == 0) {
            *t0 = a;
            *t1 = b;
            fclose(f);
            return 0;
        }
    }
    fclose(f);
    return -1;
}

/* The gpu column (the 10th, written by runs with several GPUs) of the n-th
 * `kind` row of expert (l, e) in a --events CSV; -1 when absent or empty. */
static inline int ms_fixture_event_gpu(const char *events, const char *kind, int l, int e, int nth)
{
    FILE *f = fopen(events, "r");
    char line[512], k[64];
    int it, el, ee, gpu = -1;
    double a, b;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%63[^,],%lf,%lf,%d,%d,%d", k, &a, &b, &it, &el, &ee) == 6 && !strcmp(k, kind) &&
            el == l && ee == e && nth-- == 0) {
            const char *p = line;
            for (int col = 0; col < 9 && p; col++)
                p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
            if (p && *p >= '0' && *p <= '9')
                gpu = atoi(p);
            break;
        }
    if (f)
        fclose(f);
    return gpu;
}

/* Checks an event's start and end, given in milliseconds, to 1e-12 s. */
#define CHECK_EVENT(ev, kind, l, e, nth, start, end)                                                            \
    do {                                                                                                        \
        double _s = -1, _e = -1;                                                                                \
        CHECK(ms_fixture_find_event(ev, kind, l, e, nth, &_s, &_e) == 0);                                       \
        CHECK_NEAR(_s, (start)*1e-3, 1e-12);                                                                    \
        CHECK_NEAR(_e, (end)*1e-3, 1e-12);                                                                      \
    } while (0)

#endif
