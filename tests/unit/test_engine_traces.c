/* The engine on real and synthetic traces:
 *  - Belady never misses more than any other cold-start cache (on-demand
 *    loading) on every test trace at several sizes;
 *  - identical inputs give identical JSON;
 *  - golden hit / late / miss counts of every baseline on the two imported
 *    real traces at three cache sizes (tests/data/golden_baselines.csv;
 *    MOESIM_GOLDEN_UPDATE=1 rewrites it);
 *  - the recorded residency of the route-csv traces (a real engine's LRU
 *    over a byte budget) is reproduced on >= 99.9 % of decode cells. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sim/engine/engine.h"
#include "sim/engine/report.h"
#include "fixtures.h"

static ms_platform platform;

static ms_run_config config(const char *trace, const char *pf, const char *cache, ms_cap_kind kind, double cap)
{
    return (ms_run_config){.trace_path = trace, .platform = &platform, .prefetch_spec = pf, .cache_spec = cache,
                           .sched_spec = "gpu", .cap_kind = kind, .cap_value = cap, .distance = 1,
                           .max_batch = 1, .seed = 1};
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

static void check_belady_bound(const char *trace, const double *sizes, int n_sizes, uint32_t batch)
{
    /* cold-start caches only: `static` preloads its pinned set for free at
     * t = 0, so it may miss less than any cold cache, Belady included */
    static const char *caches[] = {"lru", "lfu", "lfu:reset=0", "fifo"};
    for (int s = 0; s < n_sizes; s++) {
        ms_run_config cfg = config(trace, "none", "belady", MS_CAP_EXPERTS, sizes[s]);
        cfg.max_batch = batch;
        cfg.offline = 1;
        ms_metrics b = run_ok(&cfg);
        CHECK(b.future_exact);
        for (size_t c = 0; c < sizeof caches / sizeof caches[0]; c++) {
            cfg.cache_spec = caches[c];
            ms_metrics m = run_ok(&cfg);
            if (b.total.misses > m.total.misses)
                fprintf(stderr, "%s at %g experts: belady %llu misses > %s %llu\n", trace, sizes[s],
                        (unsigned long long)b.total.misses, caches[c], (unsigned long long)m.total.misses);
            CHECK(b.total.misses <= m.total.misses);
            CHECK_EQ_INT(ms_metrics_activations(&b.total), ms_metrics_activations(&m.total));
            ms_metrics_free(&m);
        }
        ms_metrics_free(&b);
    }
}

static char *json_of(const ms_run_config *cfg)
{
    ms_metrics m = run_ok(cfg);
    cJSON *j = ms_report_json(cfg, &m);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    ms_metrics_free(&m);
    return s;
}

static void check_deterministic(const char *trace)
{
    ms_run_config cfg = config(trace, "oracle", "lfu", MS_CAP_EXPERTS, 40);
    cfg.max_batch = 4;
    char *a = json_of(&cfg), *b = json_of(&cfg);
    CHECK(!strcmp(a, b));
    free(a);
    free(b);
}

/* Every baseline: each cache on demand loading, each prefetcher over LRU. */
static const char *golden_combos[][2] = {
    {"none", "lru"},     {"none", "lfu"},        {"none", "fifo"},    {"none", "belady"},
    {"none", "static"},  {"oracle", "lru"},      {"topk-id", "lru"},  {"traced-topk", "lru"},
};

static void check_golden(const char *const traces[2], const char *const names[2])
{
    static const double sizes[] = {256, 1024, 2048};
    char path[1024];
    snprintf(path, sizeof path, "%s/golden_baselines.csv", MS_TEST_DATA);
    int update = getenv("MOESIM_GOLDEN_UPDATE") != NULL;
    FILE *f = fopen(path, update ? "w" : "r");
    CHECK(f != NULL);
    if (!f)
        return;
    char line[512];
    if (update)
        fputs("trace,prefetch,cache,cache_experts,hits,late,misses\n", f);
    else
        CHECK(fgets(line, sizeof line, f) != NULL);
    int rows = 0;
    for (int t = 0; t < 2; t++)
        for (size_t c = 0; c < sizeof golden_combos / sizeof golden_combos[0]; c++)
            for (int s = 0; s < 3; s++) {
                ms_run_config cfg = config(traces[t], golden_combos[c][0], golden_combos[c][1], MS_CAP_EXPERTS,
                                           sizes[s]);
                ms_metrics m = run_ok(&cfg);
                char got[256];
                snprintf(got, sizeof got, "%s,%s,%s,%g,%llu,%llu,%llu\n", names[t], golden_combos[c][0],
                         golden_combos[c][1], sizes[s], (unsigned long long)m.total.hits,
                         (unsigned long long)m.total.late, (unsigned long long)m.total.misses);
                if (update) {
                    fputs(got, f);
                } else {
                    CHECK(fgets(line, sizeof line, f) != NULL);
                    if (strcmp(line, got))
                        fprintf(stderr, "golden mismatch:\n  expected %s  got      %s", line, got);
                    CHECK(!strcmp(line, got));
                }
                rows++;
                ms_metrics_free(&m);
            }
    CHECK_EQ_INT(rows, 48);
    fclose(f);
}

/* The route-csv engine: one LRU over (layer, expert) pairs, byte budget,
 * charged with each layer's expert size, never evicting the load in
 * progress, no prefetch, cold start. */
static void check_recorded_residency(const char *trace, double budget_mib)
{
    ms_run_config cfg = config(trace, "none", "lru", MS_CAP_BYTES, budget_mib * 1048576.0);
    ms_metrics m = run_ok(&cfg);
    CHECK(m.recorded_rows > 0);
    double agree = (double)m.recorded_agree / (double)m.recorded_rows;
    printf("%s: recorded residency agrees on %llu of %llu decode cells (%.4f %%)\n", trace,
           (unsigned long long)m.recorded_agree, (unsigned long long)m.recorded_rows, 100 * agree);
    CHECK(agree >= 0.999);
    ms_metrics_free(&m);
}

/* Issue 16: the recording engine promotes every routed id as it appears,
 * token by token (lru:order=token); then every decode and prefill cell
 * agrees (qwen: 36864 decode + 7902 prefill cells with a recorded flag,
 * gptoss: 4608 + 5952). */
static void check_recorded_residency_token(const char *trace, double budget_mib, uint64_t decode, uint64_t prefill)
{
    ms_run_config cfg = config(trace, "none", "lru:order=token", MS_CAP_BYTES, budget_mib * 1048576.0);
    ms_metrics m = run_ok(&cfg);
    printf("%s lru:order=token: %llu/%llu decode, %llu/%llu prefill cells agree\n", trace,
           (unsigned long long)m.recorded_agree, (unsigned long long)m.recorded_rows,
           (unsigned long long)m.recorded_prefill_agree, (unsigned long long)m.recorded_prefill_rows);
    CHECK_EQ_INT(m.recorded_rows, decode);
    CHECK_EQ_INT(m.recorded_agree, decode);
    CHECK_EQ_INT(m.recorded_prefill_rows, prefill);
    CHECK_EQ_INT(m.recorded_prefill_agree, prefill);
    ms_metrics_free(&m);
}

int main(void)
{
    ms_err err;
    if (ms_platform_load("rtx3090-pcie4", &platform, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    platform.gpu_mem_bytes = 1e15; /* capacity sweeps beyond one card's memory */
    const char *qwen = "real_qwen.h5", *gptoss = "real_gptoss.h5";
    ms_fixture_import_real("qwen", qwen);
    ms_fixture_import_real("gptoss", gptoss);
    ms_fixture_gen("mixtral-8x7b", "syn_mixtral.h5", 11, 12);
    ms_fixture_gen("qwen1.5-moe-a2.7b", "syn_qwen15.h5", 12, 6);

    check_recorded_residency(qwen, 4000);
    check_recorded_residency(gptoss, 3000);
    check_recorded_residency_token(qwen, 4000, 36864, 7902);
    check_recorded_residency_token(gptoss, 3000, 4608, 5952);

    static const double real_sizes[] = {128, 512, 2048}; /* qwen prefill activates 70 experts in one layer */
    static const double mix_sizes[] = {8, 16, 64, 200}; /* batched prefill activates 7 per layer */
    static const double q15_sizes[] = {64, 200, 800}; /* prefill activates up to 60 per layer */
    check_belady_bound(qwen, real_sizes, 3, 1);
    check_belady_bound(gptoss, real_sizes, 3, 1);
    check_belady_bound("syn_mixtral.h5", mix_sizes, 4, 1);
    check_belady_bound("syn_mixtral.h5", mix_sizes, 2, 4);
    check_belady_bound("syn_qwen15.h5", q15_sizes, 3, 1);

    check_deterministic("syn_mixtral.h5");

    const char *const traces[2] = {qwen, gptoss}, *const names[2] = {"qwen", "gptoss"};
    check_golden(traces, names);
    CHECK_DONE();
}
