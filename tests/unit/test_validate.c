/* The tee of `moesim validate` (sim/apps/validate.h), with a second simulated
 * timeline standing in for the real backend:
 *   - the same platform on both sides: every iteration's error is exactly 0,
 *     both columns agree, and the tee's hit / late / miss rule reproduces the
 *     engine's own counts;
 *   - a "real" side with half the link bandwidth: real iterations are slower,
 *     never faster, the errors are positive, and the real side has no more
 *     hits than the simulated one;
 *   - CPU experts (hybrimoe + hybrid) are counted apart and match the engine;
 *   - the tee's times are the engine's: its metrics equal a plain ms_run. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "sim/engine/exec.h"
#include "sim/apps/validate.h"

static const char *trace = "test_validate.h5";

static ms_run_config base_config(const ms_platform *p, const char *prefetch, const char *cache, const char *sched)
{
    return (ms_run_config){.trace_path = trace, .platform = p, .prefetch_spec = prefetch, .cache_spec = cache,
                           .sched_spec = sched, .cap_kind = MS_CAP_EXPERTS, .cap_value = 64, .distance = 1,
                           .max_batch = 2, .seed = 1, .train_set = 1};
}

static uint64_t count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    uint64_t n = 0;
    for (int c; f && (c = fgetc(f)) != EOF;)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

static void run_pair(const ms_run_config *cfg, const ms_platform *real_p, ms_validate_result *r, ms_metrics *m)
{
    ms_err err;
    ms_exec real;
    CHECK(ms_exec_sim_create(real_p, 32, 8, &real, &err) == 0);
    ms_validate_csvs csvs = {"test_validate_iters.csv", "test_validate_layers.csv", "test_validate_ops.csv"};
    if (ms_validate(cfg, &real, &csvs, r, m, &err)) {
        fprintf(stderr, "validate: %s\n", err.msg);
        exit(1);
    }
    ms_exec_destroy(&real);
}

static void same_platform(const ms_platform *p)
{
    ms_run_config cfg = base_config(p, "topk-id", "lru", "gpu");
    cfg.cap_value = 200; /* LRU hits across iterations, prefetches late */
    ms_validate_result r;
    ms_metrics m;
    run_pair(&cfg, p, &r, &m);
    CHECK(r.iterations > 10);
    CHECK(r.err_max == 0.0);
    CHECK(r.sim_total_s == r.real_total_s);
    CHECK_NEAR(r.sim_total_s, m.makespan_s, 0);
    CHECK_EQ_INT(r.sim.hits, m.total.hits);
    CHECK_EQ_INT(r.sim.late, m.total.late);
    CHECK_EQ_INT(r.sim.misses, m.total.misses);
    CHECK_EQ_INT(r.real.hits, r.sim.hits);
    CHECK_EQ_INT(r.real.late, r.sim.late);
    CHECK_EQ_INT(r.real.misses, r.sim.misses);
    CHECK(m.total.late > 0);
    CHECK(m.total.misses > 0);
    CHECK(m.total.hits > 0);
    for (uint32_t l = 0; l < r.L; l++)
        CHECK(r.layer_sim_s[l] == r.layer_real_s[l] && r.layer_sim_s[l] > 0);
    uint64_t n = 0;
    for (int k = 0; k < MS_OP_KINDS; k++) {
        CHECK(r.kind[k].sim_s == r.kind[k].real_s);
        n += r.kind[k].n;
    }
    CHECK_EQ_INT(n, r.ops);
    CHECK_EQ_INT(count_lines("test_validate_ops.csv"), r.ops + 2); /* provenance, header, one row per op */
    CHECK(r.kind[MS_OP_DENSE].n > 0 && r.kind[MS_OP_COPY].n > 0 && r.kind[MS_OP_EXPERT_GPU].n > 0);
    CHECK_EQ_INT(r.kind[MS_OP_EXPERT_CPU].n, 0);
    /* the tee's times are the engine's: the same run without it */
    ms_metrics plain;
    ms_err err;
    CHECK(ms_run(&cfg, &plain, &err) == 0);
    CHECK(plain.makespan_s == m.makespan_s && plain.total.hits == m.total.hits);
    ms_metrics_free(&plain);
    ms_metrics_free(&m);
    ms_validate_result_free(&r);
}

static void slower_link(const ms_platform *p)
{
    ms_platform slow = *p;
    slow.h2d_bw /= 2;
    ms_run_config cfg = base_config(p, "topk-id", "lru", "gpu");
    ms_validate_result r;
    ms_metrics m;
    run_pair(&cfg, &slow, &r, &m);
    CHECK(r.err_median > 0 && r.err_p95 >= r.err_median && r.err_max >= r.err_p95);
    CHECK(r.real_total_s > r.sim_total_s);
    CHECK(r.real.hits <= r.sim.hits);
    CHECK_EQ_INT(r.real.misses, r.sim.misses); /* misses are decisions, not timing */
    CHECK_EQ_INT(r.real.hits + r.real.late, r.sim.hits + r.sim.late);
    /* only copies take longer: h2d_bw halved, latency kept */
    const ms_validate_opsum *c = &r.kind[MS_OP_COPY];
    double lat = (double)c->n * p->h2d_latency_s;
    CHECK_NEAR((c->real_s - lat) / (c->sim_s - lat), 2.0, 1e-9);
    /* (end - start at other absolute times: equal up to rounding) */
    CHECK_NEAR(r.kind[MS_OP_DENSE].real_s / r.kind[MS_OP_DENSE].sim_s, 1.0, 1e-9);
    CHECK_NEAR(r.kind[MS_OP_EXPERT_GPU].real_s / r.kind[MS_OP_EXPERT_GPU].sim_s, 1.0, 1e-9);
    ms_metrics_free(&m);
    ms_validate_result_free(&r);
}

static void cpu_experts(const ms_platform *p)
{
    ms_run_config cfg = base_config(p, "hybrimoe", "mrs", "hybrid");
    cfg.cap_value = 32;
    ms_validate_result r;
    ms_metrics m;
    run_pair(&cfg, p, &r, &m);
    CHECK(m.total.on_cpu > 0);
    CHECK_EQ_INT(r.sim.cpu, m.total.on_cpu);
    CHECK_EQ_INT(r.real.cpu, m.total.on_cpu);
    CHECK(r.err_max == 0.0);
    ms_metrics_free(&m);
    ms_validate_result_free(&r);
}

int main(void)
{
    ms_fixture_gen("mixtral-8x7b", trace, 3, 6);
    ms_platform p;
    ms_err err;
    if (ms_platform_load("h100-pcie5", &p, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    same_platform(&p);
    slower_link(&p);
    cpu_experts(&p);
    CHECK_DONE();
}
