/* The process trace cache (traces/format/trace_cache.h) gives ms_run the results
 * of streaming, for policies that read the trace more than once (belady's
 * next-use pre-pass, static's and fmoe's training split) too, and decodes a
 * trace once per process; the memo kept beside the cached trace (the
 * activated sets of every batch met) gives them again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "sim/engine/report.h"
#include "traces/format/trace_cache.h"

static char *run_json_with(const char *trace, const ms_model *model, const ms_platform *plat, const char *pf,
                           const char *cache, uint32_t batch, double train_frac, uint32_t distance)
{
    ms_run_config cfg = {.trace_path = trace, .model = model, .platform = plat, .prefetch_spec = pf,
                         .cache_spec = cache, .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = 24,
                         .distance = distance, .max_batch = batch, .seed = 1, .train_set = 1, .train_frac = train_frac};
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return ms_xstrdup("error");
    }
    cJSON *j = ms_report_json(&cfg, &m);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    ms_metrics_free(&m);
    return s;
}

static char *run_json(const char *trace, const ms_model *model, const ms_platform *plat, const char *pf,
                      const char *cache)
{
    return run_json_with(trace, model, plat, pf, cache, 2, 0.5, 1);
}

static char *run_json_batch(const char *trace, const ms_model *model, const ms_platform *plat, const char *pf,
                            const char *cache, uint32_t batch)
{
    return run_json_with(trace, model, plat, pf, cache, batch, 0.5, 1);
}

/* transition keeps what it learned from the split (ms_train_memo_put) under
 * its distance and the split: runs on other splits or distances before the
 * one compared must not lend it theirs. */
static void check_training_kept(const char *trace, const ms_model *model, const ms_platform *plat)
{
    char *streamed = run_json_with(trace, model, plat, "transition", "lru", 2, 0.3, 2);
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    free(run_json_with(trace, model, plat, "transition", "lru", 2, 0.75, 2));
    free(run_json_with(trace, model, plat, "transition", "lru", 2, 0.3, 1));
    for (int pass = 0; pass < 2; pass++) {
        char *cached = run_json_with(trace, model, plat, "transition", "lru", 2, 0.3, 2);
        CHECK(strcmp(cached, streamed) == 0);
        free(cached);
    }
    ms_trace_cache_enable(0);
    free(streamed);
}

/* One request at a time (the same batches in every run): none+lru reads no
 * weights, none+mrs:mode=code does (its gather order), so the sets mrs
 * recalls must not be those lru remembered, whose weight sums are 0: mrs's
 * run adds its own to the memo, a second lru run adds nothing, and results
 * stay. */
static void check_weights_apart(const char *trace, const ms_model *model, const ms_platform *plat)
{
    char *streamed = run_json_batch(trace, model, plat, "none", "mrs:mode=code", 1);
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    char *lru = run_json_batch(trace, model, plat, "none", "lru", 1);
    uint64_t after_lru = ms_trace_cache_memo_bytes();
    free(run_json_batch(trace, model, plat, "none", "lru", 1));
    CHECK_EQ_INT(ms_trace_cache_memo_bytes(), after_lru);
    char *cached = run_json_batch(trace, model, plat, "none", "mrs:mode=code", 1);
    CHECK(ms_trace_cache_memo_bytes() > after_lru);
    CHECK(strcmp(cached, streamed) == 0);
    ms_trace_cache_enable(0);
    free(streamed);
    free(lru);
    free(cached);
}

/* belady's next-use lists (the pre-pass) are kept under the batch size and
 * the split: runs with other ones before the compared one must not lend
 * them theirs. */
static void check_future_kept(const char *trace, const ms_model *model, const ms_platform *plat)
{
    char *streamed = run_json_with(trace, model, plat, "oracle", "belady", 2, 0.5, 1);
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    free(run_json_with(trace, model, plat, "oracle", "belady", 1, 0.5, 1));
    free(run_json_with(trace, model, plat, "oracle", "belady", 2, 0.25, 1));
    for (int pass = 0; pass < 2; pass++) {
        char *cached = run_json_with(trace, model, plat, "oracle", "belady", 2, 0.5, 1);
        CHECK(strcmp(cached, streamed) == 0);
        free(cached);
    }
    ms_trace_cache_enable(0);
    free(streamed);
}

/* A value under the next-use key that is not of the pre-pass's shape (as a
 * key that missed an input could find) is a miss: the run makes its own
 * lists and gives the streamed results. */
static void check_future_bad_value(const char *trace, const ms_model *model, const ms_platform *plat)
{
    char *streamed = run_json_with(trace, model, plat, "oracle", "belady", 1, 0, 1);
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    ms_err err;
    ms_trace_reader *rd = ms_reader_open(trace, &err);
    ms_trace_snapshot *s = rd ? ms_reader_snapshot(rd) : NULL;
    unsigned char key[24] = "nextuse", bogus[8] = {255, 255, 255, 255, 1, 2, 3, 4};
    uint32_t batch = 1;
    memcpy(key + 8, &batch, sizeof batch); /* no split: 0 iterations, 0 requests */
    CHECK(s && ms_trace_memo_put(s, key, sizeof key, bogus, sizeof bogus) == 1);
    ms_reader_close(rd);
    char *cached = run_json_with(trace, model, plat, "oracle", "belady", 1, 0, 1);
    CHECK(strcmp(cached, streamed) == 0);
    ms_trace_cache_enable(0);
    free(cached);
    free(streamed);
}

int main(void)
{
    const char *trace = "test_sweep_mix.h5";
    ms_fixture_gen("mixtral-8x7b", trace, 5, 4);
    ms_model model;
    ms_platform plat;
    ms_err err;
    CHECK(ms_model_load("mixtral-8x7b", &model, &err) == 0);
    CHECK(ms_platform_load("rtx3090-pcie4", &plat, &err) == 0);
    /* lru:order=token visits the experts by their place in the recalled lists */
    const char *combos[][2] = {{"none", "lru:order=token"}, {"none", "mrs"}, {"oracle", "belady"},
                               {"fmoe:capacity=20", "fmoe"}, {"none", "static"}, {"speculative", "lru"},
                               {"transition", "lru"}};
    enum { N = sizeof combos / sizeof combos[0] };
    char *streamed[N];
    for (int i = 0; i < N; i++)
        streamed[i] = run_json(trace, &model, &plat, combos[i][0], combos[i][1]);
    CHECK_EQ_INT(ms_trace_cache_loads(), 0);

    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    /* twice: the second pass finds every batch's activated sets (and what
     * policies keep) in the trace's memo */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i++) {
            char *cached = run_json(trace, &model, &plat, combos[i][0], combos[i][1]);
            CHECK(strcmp(cached, "error") != 0);
            if (strcmp(cached, streamed[i]))
                fprintf(stderr, "%s+%s differs with the trace cache (pass %d)\n", combos[i][0], combos[i][1], pass);
            CHECK(strcmp(cached, streamed[i]) == 0);
            free(cached);
        }
    CHECK_EQ_INT(ms_trace_cache_loads(), 1); /* decoded once for all runs and all their reads */
    CHECK(ms_trace_cache_memo_bytes() > 0);
    CHECK(ms_trace_cache_bytes() > 0);

    /* a limit smaller than the trace: not cached, streamed, same results */
    ms_trace_cache_enable(0);
    CHECK_EQ_INT(ms_trace_cache_bytes(), 0);
    ms_trace_cache_enable(1000);
    char *small = run_json(trace, &model, &plat, combos[2][0], combos[2][1]);
    CHECK(strcmp(small, streamed[2]) == 0);
    CHECK_EQ_INT(ms_trace_cache_loads(), 2);
    CHECK_EQ_INT(ms_trace_cache_bytes(), 0);
    free(small);
    ms_trace_cache_enable(0);
    for (int i = 0; i < N; i++)
        free(streamed[i]);
    check_weights_apart(trace, &model, &plat);
    check_training_kept(trace, &model, &plat);
    check_future_kept(trace, &model, &plat);
    check_future_bad_value(trace, &model, &plat);
    CHECK_DONE();
}
