/* `moesim validate`: a trace's policies on the simulated timeline and on a
 * real backend at once (sim/apps/validate.h), with the error between them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/core/timing.h"
#include "sim/apps/validate.h"

static const char validate_usage[] =
    "usage: moesim validate --backend host|cuda --trace FILE --model M --platform CALIBRATED.ini\n"
    "                       --cache-experts N [run options] [validate options]\n"
    "\n"
    "Runs the trace's policies once: every copy, dense and expert op goes to the simulated\n"
    "timeline of the platform profile (which makes the decisions) and, in the same order, to\n"
    "the real backend; then compares per-iteration latency, hit / late / miss counts and\n"
    "per-layer times.  Exits 1 when the median or p95 per-iteration error is past tolerance.\n"
    "\n"
    "  --backend host|cuda   host: threads, memcpy and a CPU FFN; cuda: the GPU (CUDA builds)\n"
    "  --platform INI        the backend's calibrated profile (moesim calibrate --out)\n"
    "  --model NAME|INI      model profile: expert and dense dimensions the backend runs\n"
    "  --expert-scale F      shrink every expert and the dense stand-in by F in (0, 1]\n"
    "                        (the FFN intermediate size is rounded; the report states it)\n"
    "  --tolerance T         largest median relative per-iteration error (default 0.05)\n"
    "  --p95-tolerance T     largest p95 error (default 2 x --tolerance)\n"
    "  --iterations-csv F    one row per iteration: sim and real latency, error, counts\n"
    "  --layers-csv F        one row per layer: mean sim and real layer time\n"
    "  --ops-csv F           one row per op: kind, tokens, sim and real start and end\n"
    "  run options: --prefetch --cache --sched --distance --batch --offline --seed --train\n"
    "               --topk-fill --events, as for moesim run (--cache-experts only; no --host-bytes)\n";

typedef struct {
    const char *backend;
    double scale, tolerance, p95_tolerance;
    ms_validate_csvs csv;
} validate_flags;

static int positive_number(const char *flag, const char *val, double max, double *out)
{
    if (ms_parse_double(val, out) || !(*out > 0) || *out > max)
        return ms_cli_usage("validate: %s %s: expected a number in (0, %g]", flag, val, max);
    return 1;
}

static int validate_flag(void *ctx, const char *flag, const char *val)
{
    validate_flags *v = ctx;
    if (!strcmp(flag, "--backend")) {
        if (strcmp(val, "host") && strcmp(val, "cuda"))
            return ms_cli_usage("validate: --backend %s: expected host or cuda", val);
        v->backend = val;
        return 1;
    }
    if (!strcmp(flag, "--expert-scale"))
        return positive_number(flag, val, 1, &v->scale);
    if (!strcmp(flag, "--tolerance"))
        return positive_number(flag, val, 100, &v->tolerance);
    if (!strcmp(flag, "--p95-tolerance"))
        return positive_number(flag, val, 100, &v->p95_tolerance);
    if (!strcmp(flag, "--host-bytes"))
        return ms_cli_usage("validate: --host-bytes is not supported: the real backends hold every expert in host "
                            "memory, so SSD reads would be simulated but never run");
    const char **csv = !strcmp(flag, "--iterations-csv") ? &v->csv.iterations
                       : !strcmp(flag, "--layers-csv")   ? &v->csv.layers
                       : !strcmp(flag, "--ops-csv")      ? &v->csv.ops
                                                         : NULL;
    if (csv) {
        *csv = val;
        return 1;
    }
    return 0;
}

/* The trace's L and J, and the most token rows one op can carry: max_batch
 * prompts in one prefill. */
static int trace_shape(const char *path, uint32_t max_batch, uint32_t *L, uint32_t *J, uint32_t *out, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(path, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    *L = m->L;
    *J = m->J;
    uint64_t most = 1;
    for (uint64_t i = 0; i < m->n_requests; i++)
        if (m->req_prompt_len[i] > most)
            most = m->req_prompt_len[i];
    ms_reader_close(rd);
    uint64_t t = most * max_batch;
    if (t > UINT32_MAX)
        return ms_fail(err, "validate: %s: %llu token rows in one batch is too many", path, (unsigned long long)t);
    *out = (uint32_t)t;
    return 0;
}

/* The scale the backend really runs: the FFN size rounds to whole rows. */
static double effective_scale(const ms_backend_config *c)
{
    return c->model->expert_ffn ? (double)ms_backend_expert_ffn(c) / c->model->expert_ffn : c->expert_scale;
}

static void print_counts(const ms_validate_result *r)
{
    printf("  %-10s %12s %12s\n", "", "simulated", "real");
    printf("  %-10s %12llu %12llu\n", "hits", (unsigned long long)r->sim.hits, (unsigned long long)r->real.hits);
    printf("  %-10s %12llu %12llu\n", "late", (unsigned long long)r->sim.late, (unsigned long long)r->real.late);
    printf("  %-10s %12llu %12llu\n", "misses", (unsigned long long)r->sim.misses, (unsigned long long)r->real.misses);
    printf("  %-10s %12llu %12llu\n", "on CPU", (unsigned long long)r->sim.cpu, (unsigned long long)r->real.cpu);
}

/* Mean duration of each op kind on both timelines: which op the profile gets wrong. */
static void print_kinds(const ms_validate_result *r)
{
    printf("  %-10s %8s %12s %12s %9s\n", "op", "count", "sim mean ms", "real mean ms", "diff");
    for (int k = 0; k < MS_OP_KINDS; k++) {
        const ms_validate_opsum *o = &r->kind[k];
        if (!o->n)
            continue;
        double s = o->sim_s / (double)o->n, q = o->real_s / (double)o->n;
        printf("  %-10s %8llu %12.4f %12.4f %8.1f%%\n", ms_op_kind_name((ms_op_kind)k), (unsigned long long)o->n,
               s * 1e3, q * 1e3, q > 0 ? 100 * (s - q) / q : 0.0);
    }
}

/* Every layer when there are few, else the five furthest apart. */
static void print_layers(const ms_validate_result *r)
{
    uint32_t L = r->L, shown = L <= 8 ? L : 5;
    uint8_t *done = calloc(L ? L : 1, 1);
    printf("  %-6s %12s %12s %9s%s\n", "layer", "sim ms", "real ms", "diff", L <= 8 ? "" : "   (5 furthest apart)");
    for (uint32_t n = 0; n < shown && done; n++) {
        uint32_t best = UINT32_MAX;
        double best_d = -1;
        for (uint32_t l = 0; l < L; l++) {
            double d = r->layer_real_s[l] > 0 ? fabs(r->layer_sim_s[l] - r->layer_real_s[l]) / r->layer_real_s[l] : 0;
            if (!done[l] && (L <= 8 ? best == UINT32_MAX : d > best_d)) {
                best = l;
                best_d = d;
            }
        }
        done[best] = 1;
        double s = r->layer_sim_s[best], q = r->layer_real_s[best];
        printf("  %-6u %12.4f %12.4f %8.1f%%\n", best, s * 1e3, q * 1e3, q > 0 ? 100 * (s - q) / q : 0.0);
    }
    free(done);
}

static void print_report(const ms_run_config *cfg, const ms_model *model, const validate_flags *v, double scale,
                         const ms_validate_result *r)
{
    printf("validate: %s on backend %s against platform %s\n", cfg->trace_path, v->backend, cfg->platform->name);
    printf("  policies %s + %s + %s, GPU cache %g experts, batch %u\n", cfg->prefetch_spec, cfg->cache_spec,
           cfg->sched_spec, cfg->cap_value, cfg->max_batch);
    printf("  model %s, expert scale %.4g (FFN %u -> %.0f): %.2f MB per expert as run\n", model->name, scale,
           model->expert_ffn, fmax(1.0, round(model->expert_ffn * scale)), model->expert_bytes * scale / 1e6);
    printf("  %llu iterations, %llu ops; total simulated %.4f s, real %.4f s\n", (unsigned long long)r->iterations,
           (unsigned long long)r->ops, r->sim_total_s, r->real_total_s);
    printf("  per-iteration latency error: median %.2f %%, p95 %.2f %%, max %.2f %% (tolerance %.2f %% / %.2f %%)\n",
           100 * r->err_median, 100 * r->err_p95, 100 * r->err_max, 100 * v->tolerance, 100 * v->p95_tolerance);
    print_counts(r);
    print_kinds(r);
    print_layers(r);
}

static int check_run_flags(const ms_run_flags *f, const ms_run_config *cfg, const validate_flags *v)
{
    if (!v->backend)
        return ms_cli_usage("validate: --backend host|cuda is required");
    if (!f->model)
        return ms_cli_usage("validate: --model is required (the backend runs the model's expert dimensions)");
    if (!f->platform)
        return ms_cli_usage("validate: --platform is required (the backend's calibrated profile: moesim calibrate "
                            "--backend %s --out FILE.ini)", v->backend);
    if (cfg->cap_kind != MS_CAP_EXPERTS)
        return ms_cli_usage("validate: give the GPU cache as --cache-experts N (the backend's slot pool)");
    return 0;
}

/* One expert copy and one 1-token expert op timed on the backend alone (its
 * calibration probes), against what the profile predicts: has the machine
 * changed since it was calibrated? */
typedef struct {
    double copy_s, expert_s;
} probe_times;

static int probe_backend(ms_exec *x, const ms_backend_config *bc, probe_times *t, ms_err *err)
{
    const ms_exec_ops *o = x->ops;
    if (!o->time_copy || !o->time_expert)
        return 0;
    return o->time_copy(x->st, ms_backend_expert_bytes(bc), 1, 0, 5, &t->copy_s, err) ||
                   o->time_expert(x->st, 1, 5, &t->expert_s, err)
               ? -1
               : 0;
}

static void print_drift(const ms_platform *p, const ms_backend_config *bc, const probe_times *before,
                        const probe_times *after)
{
    if (!(before->copy_s > 0))
        return;
    double bytes = ms_backend_expert_bytes(bc), params = ms_backend_expert_params(bc);
    double copy = ms_t_copy_h2d(p, bytes), expert = ms_t_expert_gpu(p, bytes, params, 1);
    printf("  backend alone vs profile (before / after the run): expert copy %.4f / %.4f ms vs %.4f (x%.2f / x%.2f), "
           "1-token expert %.4f / %.4f ms vs %.4f (x%.2f / x%.2f)\n", before->copy_s * 1e3, after->copy_s * 1e3,
           copy * 1e3, before->copy_s / copy, after->copy_s / copy, before->expert_s * 1e3, after->expert_s * 1e3,
           expert * 1e3, before->expert_s / expert, after->expert_s / expert);
}

static int run_validation(ms_run_config *cfg, const ms_model *model, const validate_flags *v)
{
    ms_err err;
    uint32_t L = 0, J = 0, max_tokens = 1;
    if (ms_backend_available(v->backend, &err) != 1 ||
        trace_shape(cfg->trace_path, cfg->max_batch, &L, &J, &max_tokens, &err))
        return ms_cli_error(err.msg);
    ms_backend_config bc = {.model = model, .layers = L, .experts = J, .slots = (uint32_t)ceil(cfg->cap_value) + J,
                            .max_tokens = max_tokens, .expert_scale = v->scale, .cpu_threads = 1};
    double scale = effective_scale(&bc);
    ms_exec real;
    if (ms_backend_create(v->backend, &bc, &real, &err))
        return ms_cli_error(err.msg);
    cfg->work_scale = scale;
    ms_validate_result r;
    ms_metrics m;
    probe_times before = {0}, after = {0};
    int rc = probe_backend(&real, &bc, &before, &err) || ms_validate(cfg, &real, &v->csv, &r, &m, &err);
    if (!rc && probe_backend(&real, &bc, &after, &err)) {
        ms_metrics_free(&m);
        ms_validate_result_free(&r);
        rc = -1;
    }
    ms_exec_destroy(&real);
    if (rc)
        return ms_cli_error(err.msg);
    print_report(cfg, model, v, scale, &r);
    print_drift(cfg->platform, &bc, &before, &after);
    char msg[256] = "";
    if (r.err_median > v->tolerance)
        snprintf(msg, sizeof msg, "validate: median per-iteration latency error %.2f %% exceeds --tolerance %.2f %%",
                 100 * r.err_median, 100 * v->tolerance);
    else if (r.err_p95 > v->p95_tolerance)
        snprintf(msg, sizeof msg, "validate: p95 per-iteration latency error %.2f %% exceeds --p95-tolerance %.2f %%",
                 100 * r.err_p95, 100 * v->p95_tolerance);
    printf("%s\n", msg[0] ? "FAIL" : "PASS");
    ms_metrics_free(&m);
    ms_validate_result_free(&r);
    return msg[0] ? ms_cli_error(msg) : 0;
}

int ms_cli_validate(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(validate_usage, stdout);
            return 0;
        }
    ms_run_config cfg = {.prefetch_spec = "none", .cache_spec = "lru", .sched_spec = "gpu",
                         .distance = 1, .max_batch = 1, .seed = 1};
    validate_flags v = {.scale = 1, .tolerance = 0.05};
    ms_run_flags f = {.cmd = "validate", .extra = validate_flag, .ctx = &v};
    int rc = ms_cli_parse_run_flags(argc, argv, &cfg, &f);
    if (rc || (rc = check_run_flags(&f, &cfg, &v)))
        return rc;
    if (!(v.p95_tolerance > 0))
        v.p95_tolerance = 2 * v.tolerance;
    if (f.json)
        return ms_cli_usage("validate: --json is not supported; use --iterations-csv and --layers-csv");
    ms_err err;
    ms_model model;
    ms_platform platform;
    if (ms_cli_load_profiles(&f, &cfg, &model, &platform, &err))
        return ms_cli_error(err.msg);
    const char *outs[][2] = {{"--events", cfg.events_path}, {"--iterations-csv", v.csv.iterations},
                             {"--layers-csv", v.csv.layers}, {"--ops-csv", v.csv.ops}};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        if (outs[i][1] && !strcmp(outs[i][1], "-")) /* the CSV and the report would mix */
            return ms_cli_usage("validate: %s -: validate prints its report to standard output; write the CSV to a file",
                                outs[i][0]);
        if (outs[i][1] && ms_out_check(outs[i][0], outs[i][1], &err))
            return ms_cli_error(err.msg);
    }
    return run_validation(&cfg, &model, &v);
}
