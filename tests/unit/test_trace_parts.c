/* Selective trace reading (issue 18): a reader hands out the parts its
 * selection names and leaves the others NULL, undecoded and unchecked; each
 * request is checked once per process (per file version); the trace cache
 * lends its requests instead of copying them; and ms_run gives the same
 * results whichever parts its policies read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "traces/format/trace.h"
#include "traces/format/trace_cache.h"

static ms_trace_reader *open_or_die(const char *path)
{
    ms_err err;
    ms_trace_reader *rd = ms_reader_open(path, &err);
    if (!rd) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return rd;
}

/* Reads every request of path with `parts`; returns how many were read. */
static uint64_t read_all(const char *path, unsigned parts)
{
    ms_trace_reader *rd = open_or_die(path);
    ms_reader_select(rd, parts);
    ms_request r = {0};
    ms_err err;
    uint64_t n = 0;
    int rc;
    while ((rc = ms_reader_next(rd, &r, &err)) == 1)
        n++;
    if (rc < 0)
        fprintf(stderr, "%s\n", err.msg);
    CHECK(rc == 0);
    ms_request_free(&r);
    ms_reader_close(rd);
    return n;
}

static void check_selected_parts(const char *path)
{
    ms_trace_reader *a = open_or_die(path), *b = open_or_die(path);
    const ms_trace_meta *m = ms_reader_meta(a);
    CHECK(m->probs_kind == MS_PROBS_FULL && m->embed_dim > 0 && m->spec_depth > 0 && m->has_token_ids);
    CHECK_EQ_INT(ms_trace_parts(m), MS_PART_WEIGHTS | MS_PART_PROBS | MS_PART_EMBED | MS_PART_SPEC | MS_PART_PROMPT);
    ms_reader_select(b, 0);
    ms_request ra = {0}, rb = {0};
    ms_err err;
    for (uint64_t i = 0; i < m->n_requests; i++) {
        CHECK(ms_reader_read(a, i, &ra, &err) == 1);
        CHECK(ms_reader_read(b, i, &rb, &err) == 1);
        size_t cells = (size_t)ra.n_rows * m->L * m->K;
        CHECK(ra.topk_w && ra.probs && ra.embedding && ra.spec_ids && ra.token_ids);
        CHECK(!rb.topk_w && !rb.probs && !rb.embedding && !rb.spec_ids && !rb.spec_w && !rb.token_ids && !rb.text);
        CHECK(rb.n_rows == ra.n_rows && rb.n_iters == ra.n_iters && rb.n_tokens == ra.n_tokens);
        CHECK(!memcmp(ra.topk_ids, rb.topk_ids, cells * sizeof *ra.topk_ids));
        CHECK(!memcmp(ra.iters, rb.iters, ra.n_iters * sizeof *ra.iters));
    }
    /* the ids-only check (weights not read) still finds a repeated or
     * out-of-range id, with the full check's words */
    CHECK(ms_reader_read(b, 0, &rb, &err) == 1);
    rb.topk_ids[ms_topk_index(m, 0, 3) + 1] = rb.topk_ids[ms_topk_index(m, 0, 3)];
    CHECK(ms_request_check_parts(m, &rb, 0, "t.h5", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "t.h5: request ");
    CHECK_STR_CONTAINS(err.msg, " row 0 layer 3: topk_ids: duplicate expert ");
    rb.topk_ids[ms_topk_index(m, 0, 3) + 1] = (int32_t)m->J;
    CHECK(ms_request_check_parts(m, &rb, 0, "t.h5", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, " row 0 layer 3: topk_ids[1] = 8 out of range [-1, 8)");
    CHECK(ms_request_check_parts(m, &rb, MS_PART_WEIGHTS, "t.h5", &err) == -1); /* topk_w is NULL */
    CHECK_STR_CONTAINS(err.msg, "topk_w missing although it was read");
    /* the gate alone: weights and probabilities, nothing else */
    ms_reader_select(b, MS_PART_GATE);
    CHECK(ms_reader_read(b, 0, &rb, &err) == 1);
    CHECK(rb.topk_w && rb.probs && !rb.embedding && !rb.spec_ids);
    CHECK(ms_reader_read(a, 0, &ra, &err) == 1);
    CHECK(!memcmp(ra.probs, rb.probs, (size_t)ra.n_rows * m->L * m->J * sizeof *ra.probs));
    /* a content digest needs every part, whatever was selected */
    ms_reader_select(b, 0);
    ms_reader_rewind(b);
    ms_reader_digest_begin(b);
    for (uint64_t i = 0; i < m->n_requests; i++)
        CHECK(ms_reader_read(b, i, &rb, &err) == 1);
    CHECK(rb.topk_w && rb.embedding);
    char hex[MS_DIGEST_HEX];
    CHECK(ms_reader_digest_check(b, hex, &err) == 0);
    ms_request_free(&ra);
    ms_request_free(&rb);
    ms_reader_close(a);
    ms_reader_close(b);
}

/* Whether a fresh reader of path selecting `parts` verifies chunk checksums. */
static int verifies(const char *path, unsigned parts)
{
    ms_trace_reader *r = open_or_die(path);
    ms_reader_select(r, parts);
    int v = ms_reader_chunk_checksums(r);
    ms_reader_close(r);
    return v;
}

/* Checked once per process and file version, part by part; the chunk
 * checksums too, once every request was checked with the parts read. */
static void check_once_per_process(const char *path, const char *other)
{
    CHECK(verifies(path, 0));
    uint64_t n = read_all(path, 0), c0 = ms_trace_checks();
    CHECK(!verifies(path, 0));
    CHECK(verifies(path, MS_PART_GATE)); /* the gate was not read yet */
    CHECK(n > 0);
    CHECK_EQ_INT(read_all(path, 0), n);
    CHECK_EQ_INT(ms_trace_checks(), c0);               /* the same parts again: no check */
    read_all(path, MS_PART_GATE);
    CHECK_EQ_INT(ms_trace_checks(), c0 + n);           /* the gate is new: checked, once */
    CHECK(!verifies(path, MS_PART_GATE) && !verifies(path, MS_PART_WEIGHTS) && verifies(path, MS_PART_ALL));
    read_all(path, MS_PART_WEIGHTS);
    read_all(path, MS_PART_GATE);
    CHECK_EQ_INT(ms_trace_checks(), c0 + n);
    uint64_t m = read_all(other, MS_PART_GATE);       /* another file: its own marks */
    CHECK_EQ_INT(ms_trace_checks(), c0 + n + m);
    /* rewriting the file (a new version: another digest) checks it again */
    read_all(path, MS_PART_ALL);
    CHECK_EQ_INT(ms_trace_checks(), c0 + 2 * n + m); /* every part: checked, once */
    ms_trace_reader *d = open_or_die(path);
    CHECK(!ms_reader_chunk_checksums(d));
    ms_reader_digest_begin(d); /* a content digest verifies every chunk */
    CHECK(ms_reader_chunk_checksums(d));
    ms_reader_close(d);
    ms_fixture_gen("mixtral-8x7b", path, 99, 3);
    CHECK(verifies(path, 0) && verifies(path, MS_PART_GATE));
    uint64_t n2 = read_all(path, MS_PART_GATE);
    CHECK_EQ_INT(ms_trace_checks(), c0 + 2 * n + m + n2);
}

/* The trace cache lends its requests: two readers see the same arrays. */
static void check_cache_lends(const char *path)
{
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    ms_trace_reader *a = open_or_die(path), *b = open_or_die(path);
    ms_reader_select(b, 0);
    ms_request ra = {0}, rb = {0};
    ms_err err;
    CHECK(ms_reader_read(a, 1, &ra, &err) == 1);
    CHECK(ms_reader_read(b, 1, &rb, &err) == 1);
    CHECK(ra.borrowed && rb.borrowed);
    CHECK(ra.topk_ids == rb.topk_ids && ra.iters == rb.iters);
    CHECK(ra.topk_w && !rb.topk_w && ra.embedding && !rb.embedding);
    ms_request_free(&ra);
    ms_request_free(&rb);
    CHECK(!ra.topk_ids && !ra.borrowed);
    ms_reader_close(a);
    ms_reader_close(b);
    ms_trace_cache_enable(0);
}

/* none+lru reads top-k ids only; fmoe the gate and embeddings; hybrimoe the
 * gate and speculative gates: each run with the cache (every part at hand)
 * and streaming (only its parts) gives the same metrics. */
static void check_runs_agree(const char *path)
{
    ms_model model;
    ms_platform plat;
    ms_err err;
    CHECK(ms_model_load("mixtral-8x7b", &model, &err) == 0);
    CHECK(ms_platform_load("h100-pcie5", &plat, &err) == 0); /* 80 GB: room for 160 experts */
    const char *combos[][2] = {{"none", "lru"}, {"fmoe", "fmoe"}, {"hybrimoe", "mrs"}, {"speculative", "lfu"}};
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        ms_metrics m[2];
        for (int cached = 0; cached < 2; cached++) {
            ms_trace_cache_enable(cached ? MS_TRACE_CACHE_DEFAULT_BYTES : 0);
            ms_run_config cfg = {.trace_path = path, .model = &model, .platform = &plat,
                                 .prefetch_spec = combos[i][0], .cache_spec = combos[i][1], .sched_spec = "gpu",
                                 .cap_kind = MS_CAP_EXPERTS, .cap_value = 160, .distance = 1, .max_batch = 2,
                                 .seed = 1, .train_set = 1, .train_frac = 0.5};
            if (ms_run(&cfg, &m[cached], &err)) {
                fprintf(stderr, "%s+%s: %s\n", combos[i][0], combos[i][1], err.msg);
                CHECK(0);
                return;
            }
        }
        CHECK(m[0].total.hits > 0);
        CHECK_EQ_INT(m[0].total.hits, m[1].total.hits);
        CHECK_EQ_INT(m[0].total.misses, m[1].total.misses);
        CHECK_EQ_INT(m[0].prefetch_useful, m[1].prefetch_useful);
        CHECK(m[0].makespan_s == m[1].makespan_s);
        ms_metrics_free(&m[0]);
        ms_metrics_free(&m[1]);
    }
    ms_trace_cache_enable(0);
}

int main(void)
{
    const char *path = "test_trace_parts.h5", *other = "test_trace_parts_b.h5";
    ms_fixture_gen("mixtral-8x7b", path, 5, 4);
    ms_fixture_gen("mixtral-8x7b", other, 6, 2);
    check_once_per_process(path, other); /* first: nothing of either file checked yet */
    check_selected_parts(path);
    check_cache_lends(path);
    check_runs_agree(path);
    remove(path);
    remove(other);
    CHECK_DONE();
}
