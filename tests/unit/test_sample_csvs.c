/* The engine's per-sample CSVs (ms_run_config.iterations_path and
 * requests_path) and the prefetch `stats` hook (fMoE's similarity totals):
 * the rows add up to the run's metrics, and fmoe makes exactly one semantic
 * search per replayed iteration and one trajectory search per layer. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"

static ms_run_config cfg_for(const char *trace, const ms_model *model, const ms_platform *plat, const char *pf)
{
    return (ms_run_config){.trace_path = trace, .model = model, .platform = plat, .prefetch_spec = pf,
                           .cache_spec = "fmoe", .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS,
                           .cap_value = 32, .distance = 1, .max_batch = 1, .offline = 1, .seed = 1,
                           .train_set = 1, .train_frac = 0.5};
}

int main(void)
{
    const char *trace = "samples_mix.h5";
    ms_fixture_gen("mixtral-8x7b", trace, 3, 4);
    ms_model model;
    ms_platform plat;
    ms_err err;
    CHECK(ms_model_load("mixtral-8x7b", &model, &err) == 0);
    CHECK(ms_platform_load("rtx3090-pcie4", &plat, &err) == 0);

    ms_run_config cfg = cfg_for(trace, &model, &plat, "fmoe");
    cfg.iterations_path = "samples_iters.csv";
    cfg.requests_path = "samples_reqs.csv";
    ms_metrics m;
    CHECK(ms_run(&cfg, &m, &err) == 0);
    CHECK(m.has_policy_stats == 1);
    CHECK(m.total.iterations > 10);
    CHECK_EQ_INT(m.policy_stats.sem_n, m.total.iterations);
    CHECK_EQ_INT(m.policy_stats.traj_n, m.total.iterations * 32);
    CHECK(m.policy_stats.sem_sum > 0 && m.policy_stats.sem_sum <= (double)m.policy_stats.sem_n + 1e-9);
    CHECK(m.policy_stats.traj_sum > 0 && m.policy_stats.traj_sum <= (double)m.policy_stats.traj_n + 1e-9);

    /* iterations CSV: one row per replayed iteration; the rows add up */
    FILE *f = fopen("samples_iters.csv", "r");
    CHECK(f != NULL);
    char line[512];
    /* provenance first: moesim's version and commit, the trace's stored content digest (format v2) */
    CHECK(f && fgets(line, sizeof line, f) && !strncmp(line, "# moesim ", 9) && strstr(line, "; trace ") &&
          strstr(line, " content_sha256 "));
    CHECK(f && fgets(line, sizeof line, f) && !strcmp(line, "iteration,phase,hits,late,misses,hit_rate,sem_score,traj_score\n"));
    uint64_t rows = 0, hits = 0, late = 0, misses = 0;
    double sem = 0, traj = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long it, h, la, mi;
        char phase[16];
        double hr, s, t;
        CHECK(sscanf(line, "%llu,%15[a-z],%llu,%llu,%llu,%lf,%lf,%lf", &it, phase, &h, &la, &mi, &hr, &s, &t) == 8);
        CHECK_EQ_INT(it, rows);
        rows++;
        hits += h;
        late += la;
        misses += mi;
        sem += s;
        traj += t * 32;
    }
    if (f)
        fclose(f);
    CHECK_EQ_INT(rows, m.total.iterations);
    CHECK_EQ_INT(hits, m.total.hits);
    CHECK_EQ_INT(late, m.total.late);
    CHECK_EQ_INT(misses, m.total.misses);
    CHECK_NEAR(sem, m.policy_stats.sem_sum, 1e-6 * (double)rows);
    CHECK_NEAR(traj, m.policy_stats.traj_sum, 32e-6 * (double)rows);

    /* requests CSV: one row per finished request; each latency column averages to its metric */
    f = fopen("samples_reqs.csv", "r");
    CHECK(f != NULL);
    CHECK(f && fgets(line, sizeof line, f) && !strncmp(line, "# moesim ", 9));
    CHECK(f && fgets(line, sizeof line, f) &&
          !strcmp(line, "request,arrival_s,ttft_s,tpot_s,latency_s,queue_s,ttft_service_s,latency_service_s\n"));
    uint64_t nreq = 0;
    double lat = 0, queue = 0, ttft_svc = 0, lat_svc = 0;
    while (f && fgets(line, sizeof line, f)) {
        double v[8] = {0};
        const char *p = line;
        for (int c = 0; c < 8 && p; c++) {
            v[c] = strtod(p, NULL);
            p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
        }
        lat += v[4];
        queue += v[5];
        ttft_svc += v[6];
        lat_svc += v[7];
        CHECK_NEAR(v[4], v[5] + v[7], 1e-8); /* latency = queueing + service */
        nreq++;
    }
    if (f)
        fclose(f);
    CHECK_EQ_INT(nreq, m.requests);
    CHECK_EQ_INT(nreq, 2); /* 4 requests, the first half trains */
    CHECK_NEAR(lat / (double)nreq, m.latency_mean_s, 1e-6);
    CHECK_NEAR(queue / (double)nreq, m.queue_mean_s, 1e-6);
    CHECK_NEAR(ttft_svc / (double)nreq, m.ttft_service_mean_s, 1e-6);
    CHECK_NEAR(lat_svc / (double)nreq, m.latency_service_mean_s, 1e-6);
    ms_metrics_free(&m);

    /* a prefetcher without the hook reports none */
    cfg = cfg_for(trace, &model, &plat, "none");
    CHECK(ms_run(&cfg, &m, &err) == 0);
    CHECK(m.has_policy_stats == 0 && m.policy_stats.sem_n == 0 && m.policy_stats.traj_n == 0);
    ms_metrics_free(&m);

    /* an unwritable path is a one-line error before any simulation */
    cfg.iterations_path = "/no/such/dir/iters.csv";
    CHECK(ms_run(&cfg, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "iterations CSV /no/such/dir/iters.csv: folder /no/such/dir: No such file or directory");
    CHECK_DONE();
}
