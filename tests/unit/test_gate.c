/* Gate widening (--topk-fill), the training split (--train) and how the
 * engine replays only what follows it.  Expected values are worked out in
 * the comments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "policies/lib/gate.h"
#include "sim/engine/engine.h"

static ms_trace_meta tiny_meta(ms_probs_kind kind, uint32_t J, uint32_t K)
{
    ms_trace_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.model_name, sizeof m.model_name, "gate");
    snprintf(m.source, sizeof m.source, "test_gate");
    m.L = 2;
    m.J = J;
    m.K = K;
    m.probs_kind = kind;
    ms_trace_meta_alloc_layers(&m);
    for (uint32_t l = 0; l < m.L; l++) {
        m.expert_bytes[l] = 1000000;
        m.dense_bytes[l] = 1000000;
    }
    return m;
}

/* One request, n_iters iterations of one row each; layer l of iteration i
 * routes to expert (i + l) % J with weight 1. */
static void fill_request(ms_request *r, const ms_trace_meta *m, uint32_t n_iters)
{
    memset(r, 0, sizeof *r);
    r->prompt_len = 1;
    r->output_len = n_iters - 1;
    r->n_iters = n_iters;
    r->n_rows = n_iters;
    ms_request_alloc(r, m);
    for (uint32_t i = 0; i < n_iters; i++) {
        r->iters[i] = (ms_iteration){i ? MS_PHASE_DECODE : MS_PHASE_PREFILL, i, 1};
        for (uint32_t l = 0; l < m->L; l++) {
            r->topk_ids[ms_topk_index(m, i, l)] = (int32_t)((i + l) % m->J);
            r->topk_w[ms_topk_index(m, i, l)] = 1.0f;
        }
    }
}

static void write_requests(const char *path, uint32_t n_requests, uint32_t n_iters)
{
    ms_trace_meta m = tiny_meta(MS_PROBS_TOPK_RENORM, 4, 1);
    ms_trace_writer *w = ms_fixture_writer_open(path, &m);
    for (uint32_t q = 0; q < n_requests; q++) {
        ms_request r;
        fill_request(&r, &m, n_iters);
        r.id = q;
        ms_fixture_writer_add(w, &r);
        ms_request_free(&r);
    }
    ms_fixture_writer_close(w);
    ms_trace_meta_free(&m);
}

/* top-k raw weights 0.5 (expert 2) and 0.2 (expert 0) of J = 4: zero fill
 * leaves 0 elsewhere; even fill shares 1 - 0.7 = 0.3 over the other 2. */
static void test_gate_row_fill(void)
{
    ms_trace_meta m = tiny_meta(MS_PROBS_TOPK_RAW, 4, 2);
    ms_request r;
    fill_request(&r, &m, 1);
    size_t b = ms_topk_index(&m, 0, 1);
    r.topk_ids[b] = 2;
    r.topk_w[b] = 0.5f;
    r.topk_ids[b + 1] = 0;
    r.topk_w[b + 1] = 0.2f;
    float p[4];
    ms_gate_row(&m, &r, 0, 1, MS_FILL_ZERO, p);
    CHECK_NEAR(p[0], 0.2, 1e-7);
    CHECK_NEAR(p[1], 0.0, 0);
    CHECK_NEAR(p[2], 0.5, 1e-7);
    CHECK_NEAR(p[3], 0.0, 0);
    ms_gate_row(&m, &r, 0, 1, MS_FILL_EVEN, p);
    CHECK_NEAR(p[1], 0.15, 1e-7);
    CHECK_NEAR(p[3], 0.15, 1e-7);
    CHECK_NEAR(p[2], 0.5, 1e-7);
    /* a missing cell (-1) contributes nothing: only expert 2, 0.8 shared by 3 */
    r.topk_ids[b + 1] = -1;
    r.topk_w[b + 1] = 0;
    ms_gate_row(&m, &r, 0, 1, MS_FILL_EVEN, p);
    CHECK_NEAR(p[0], 0.5 / 3, 1e-7);
    CHECK_NEAR(p[2], 0.5, 1e-7);
    ms_request_free(&r);
    ms_trace_meta_free(&m);
}

static void test_split_resolve(void)
{
    ms_trace_meta m;
    memset(&m, 0, sizeof m);
    uint32_t iters[1] = {10};
    m.req_n_iters = iters;
    ms_split s;
    ms_err err;
    m.n_requests = 10;
    CHECK(ms_split_resolve(&m, -1, 1, "--train", &s, &err) == 0);
    CHECK_NEAR(s.frac, 0.7, 0);
    CHECK_EQ_INT(s.train_requests, 7); /* ceil(0.7 x 10) */
    CHECK_EQ_INT(s.by_iteration, 0);
    CHECK(ms_split_resolve(&m, -1, 0, "--train", &s, &err) == 0);
    CHECK_NEAR(s.frac, 0, 0);
    CHECK_EQ_INT(s.train_requests, 0);
    CHECK(ms_split_resolve(&m, 0.25, 0, "--train", &s, &err) == 0);
    CHECK_EQ_INT(s.train_requests, 3); /* ceil(2.5) */
    CHECK(ms_split_resolve(&m, 0.95, 0, "--train", &s, &err) == -1); /* ceil(9.5) = 10: nothing left */
    CHECK_STR_CONTAINS(err.msg, "leaves none to replay");
    CHECK(ms_split_resolve(&m, 1.0, 0, "--train", &s, &err) == -1);
    m.n_requests = 1;
    CHECK(ms_split_resolve(&m, 0.7, 0, "--train", &s, &err) == 0);
    CHECK_EQ_INT(s.by_iteration, 1);
    CHECK_EQ_INT(s.train_iters, 7);
}

static ms_metrics run_split(const char *trace, const char *cache, int train_set, double frac, ms_err *err, int *rc)
{
    static ms_platform p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "test");
    p.hbm_bw = p.h2d_bw = p.dram_bw = 1e10;
    p.gpu_flops = 1e15;
    p.cpu_flops_per_core = 1e12;
    p.cpu_cores = 1;
    ms_run_config cfg = {.trace_path = trace, .platform = &p, .prefetch_spec = "none", .cache_spec = cache,
                         .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = 8, .distance = 1,
                         .max_batch = 1, .train_set = train_set, .train_frac = frac};
    ms_metrics m;
    *rc = ms_run(&cfg, &m, err);
    return m;
}

/* 4 requests of 3 iterations x 2 layers: --train 0.5 replays requests 2 and
 * 3 only (2 x 3 iterations x 2 layers = 12 activations); static learns
 * (auto 0.7 = 3 requests, 1 replayed); lru does not (auto 0 = all 4). */
static void test_engine_skips_training(void)
{
    write_requests("gate_multi.h5", 4, 3);
    ms_err err;
    int rc;
    ms_metrics m = run_split("gate_multi.h5", "lru", 1, 0.5, &err, &rc);
    CHECK(rc == 0);
    CHECK_EQ_INT(m.requests, 2);
    CHECK_EQ_INT(m.train_requests, 2);
    CHECK_EQ_INT(m.total.hits + m.total.misses, 12);
    ms_metrics_free(&m);
    m = run_split("gate_multi.h5", "lru", 0, 0, &err, &rc);
    CHECK(rc == 0);
    CHECK_EQ_INT(m.requests, 4);
    CHECK_NEAR(m.train_frac, 0, 0);
    ms_metrics_free(&m);
    m = run_split("gate_multi.h5", "static", 0, 0, &err, &rc);
    CHECK(rc == 0);
    CHECK_EQ_INT(m.requests, 1);
    CHECK_EQ_INT(m.train_requests, 3);
    /* static pins the 8 experts (all of them) the training saw: all hits */
    CHECK_EQ_INT(m.total.hits, 6);
    ms_metrics_free(&m);
    m = run_split("gate_multi.h5", "lru", 1, 1.0, &err, &rc);
    CHECK(rc == -1);
    CHECK_STR_CONTAINS(err.msg, "--train must be in [0, 1)");
}

/* One request of 10 iterations: --train 0.7 starts the replay at iteration
 * 7 (decode), so 3 iterations x 2 layers = 6 activations and no TTFT. */
static void test_engine_split_by_iteration(void)
{
    write_requests("gate_single.h5", 1, 10);
    ms_err err;
    int rc;
    ms_metrics m = run_split("gate_single.h5", "lru", 1, 0.7, &err, &rc);
    CHECK(rc == 0);
    CHECK_EQ_INT(m.train_by_iteration, 1);
    CHECK_EQ_INT(m.train_iters, 7);
    CHECK_EQ_INT(m.total.iterations, 3);
    CHECK_EQ_INT(m.phase[MS_PHASE_PREFILL].iterations, 0);
    CHECK_EQ_INT(m.total.hits + m.total.misses, 6);
    CHECK_EQ_INT(m.requests, 1);
    /* no prefill replayed: no TTFT sample, so TTFT is undefined (NaN), not 0 */
    CHECK(isnan(m.ttft_mean_s) && isnan(m.ttft_p50_s) && isnan(m.ttft_p99_s));
    CHECK_EQ_INT(m.ttft_samples, 0);
    CHECK(m.tpot_mean_s > 0);
    CHECK_EQ_INT(m.tpot_samples, 1);
    ms_metrics_free(&m);
}

/* ms_gate_add_iteration adds a full trace's probabilities in place; it must
 * give the bits of the straightforward sum it replaced (ms_gate_row's copy
 * of each row, then out[e] += row[e], row by row).  Seeded random rows of
 * several J, iterations of 1..40 rows, a non-zero starting out[]. */
static void test_add_iteration_in_place(void)
{
    srand(18);
    int compared = 0;
    for (int trial = 0; trial < 200; trial++) {
        uint32_t J = 1 + (uint32_t)(rand() % 70);
        ms_trace_meta m = tiny_meta(MS_PROBS_FULL, J, 1);
        ms_request r;
        memset(&r, 0, sizeof r);
        r.n_rows = 1 + (uint32_t)(rand() % 40);
        r.prompt_len = r.n_rows;
        r.n_iters = 1;
        ms_request_alloc(&r, &m);
        r.iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, r.n_rows};
        for (size_t i = 0; i < (size_t)r.n_rows * m.L * J; i++)
            r.probs[i] = (float)rand() / (float)RAND_MAX * (rand() % 3 ? 1e-3f : 1.0f);
        for (uint32_t l = 0; l < m.L; l++) {
            float got[70], want[70], row[70];
            for (uint32_t e = 0; e < J; e++)
                got[e] = want[e] = (float)(e % 5) * 0.1f;
            CHECK_EQ_INT(ms_gate_add_iteration(&m, &r, 0, l, MS_FILL_ZERO, got), r.n_rows);
            for (uint32_t q = 0; q < r.n_rows; q++) {
                ms_gate_row(&m, &r, q, l, MS_FILL_ZERO, row);
                for (uint32_t e = 0; e < J; e++)
                    want[e] += row[e];
            }
            CHECK(!memcmp(got, want, J * sizeof *got));
            compared++;
        }
        ms_request_free(&r);
        ms_trace_meta_free(&m);
    }
    CHECK_EQ_INT(compared, 400);
}

/* ms_spec_row_positive against its definition: the positive entries of the
 * dense one-row speculative gate (out[J] = 0, then out[id] += w for each
 * cell with id >= 0, as ms_view_spec_gate adds a row), ranked.  Seeded rows,
 * J 1..70, K 1..8, missing cells, weights 0, -0, subnormal and equal ones,
 * repeated ids (then UINT32_MAX, and only then). */
static void test_spec_row_positive(void)
{
    static const float pool[] = {0.0f, -0.0f, 1e-40f, 0.125f, 0.25f, 0.25f, 0.5f, 0.3f};
    srand(1805);
    int compared = 0, repeats = 0, bad = 0;
    for (int trial = 0; trial < 20000; trial++) {
        uint32_t J = 1 + (uint32_t)(rand() % 70), K = 1 + (uint32_t)(rand() % 8);
        int32_t ids[8];
        float w[8], dense[70] = {0};
        int repeat = 0;
        for (uint32_t k = 0; k < K; k++) {
            ids[k] = rand() % 6 == 0 ? -1 : (int32_t)(rand() % (int)J);
            w[k] = ids[k] < 0 ? 0.0f : rand() % 2 ? pool[rand() % 8] : (float)rand() / (float)RAND_MAX;
            for (uint32_t j = 0; j < k; j++)
                repeat |= ids[k] >= 0 && ids[j] == ids[k];
            if (ids[k] >= 0)
                dense[ids[k]] += w[k];
        }
        ms_scored got[8], want[70];
        uint32_t n = ms_spec_row_positive(ids, w, K, got), m = 0;
        if (repeat) {
            bad += n != UINT32_MAX;
            repeats++;
            continue;
        }
        for (uint32_t e = 0; e < J; e++)
            if (dense[e] > 0)
                want[m++] = (ms_scored){dense[e], e};
        if (n != m) {
            bad++;
            continue;
        }
        ms_rank_first(got, n, n);
        ms_rank_first(want, m, m);
        for (uint32_t i = 0; i < n; i++)
            bad += memcmp(&got[i].score, &want[i].score, sizeof got[i].score) != 0 || got[i].e != want[i].e;
        compared++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(compared > 10000 && repeats > 2000);
}

int main(void)
{
    test_spec_row_positive();
    test_add_iteration_in_place();
    test_gate_row_fill();
    test_split_resolve();
    test_engine_skips_training();
    test_engine_split_by_iteration();
    CHECK_DONE();
}
