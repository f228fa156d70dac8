/* `moesim published`: the runs of the rows (see published.h). */
#include "sim/apps/published.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/apps/published_presets.h"
#include "sim/engine/budget.h"
#include "sim/apps/sweep_pool.h"
#include "sim/engine/engine.h"
#include "sim/engine/runkeys.h"
#include "traces/synth/gen.h"

/* ---- one row's run ---- */

static void copy_msg(char *dst, size_t n, const char *src)
{
    size_t len = strnlen(src, n - 1);
    memcpy(dst, src, len);
    dst[len] = 0;
}

typedef struct {
    char trace[1300];
    char key[2600];             /* what makes two rows' runs the same */
    char setup[800];            /* ms_pub_result.setup */
} row_plan;

/* The generated workload of a row: its file name names what decides it. */
static void trace_path(const ms_pub_opts *o, const ms_pub_row *r, size_t idx, char *path, size_t cap)
{
    if (r->trace[0]) {
        snprintf(path, cap, "%s", r->trace);
        return;
    }
    int model_sets = 0;
    for (int i = 0; i < r->n_sets; i++)
        model_sets += r->set_is_model[i];
    char sets[32] = "";
    if (model_sets) /* a row's own model overrides: its own trace */
        snprintf(sets, sizeof sets, "-row%zu", idx);
    snprintf(path, cap, "%s/published-%s-p%u-o%u-r%u-s%llu%s.h5", o->out_dir, r->model, r->prompt_len, r->output_len,
             r->requests, (unsigned long long)r->seed, sets);
}

static int load_profiles(const ms_pub_row *r, ms_model *m, ms_platform *p, ms_err *err)
{
    ms_profile_set ms[MS_PUB_MAX_SETS], ps[MS_PUB_MAX_SETS];
    int nm, np;
    ms_pub_row_sets(r, ms, &nm, ps, &np);
    return ms_model_load_set(r->model, ms, nm, m, err) || ms_platform_load_set(r->platform, ps, np, p, err) ? -1 : 0;
}

static int write_trace(const ms_pub_row *r, const char *path, ms_err *err)
{
    ms_model m;
    ms_platform p;
    if (load_profiles(r, &m, &p, err))
        return -1;
    ms_gen_params g;
    if (ms_gen_model_defaults(&g, &m, err)) /* the model's routing (docs/generator.md) */
        return -1;
    /* every request exactly prompt_len tokens in and output_len out: the
     * prefill makes the first output token, output_len - 1 decode iterations
     * the rest (docs/trace-format.md: a trace's output_len counts decode
     * iterations) */
    uint32_t prompt = r->prompt_len, output = r->output_len - 1;
    g.prompt_lens = &prompt;
    g.output_lens = &output;
    g.n_lens = 1;
    g.prompt_max = prompt > g.prompt_max ? prompt : g.prompt_max;
    g.output_max = output > g.output_max ? output : g.output_max;
    g.requests = r->requests;
    g.arrival_rate = 0;
    g.seed = r->seed;
    ms_gen_summary sum;
    if (ms_gen_write(&g, &m, path, &sum, err))
        return ms_fail_prefix(err, "%s: row %s: the workload of model %s", r->file, r->name, r->model);
    return 0;
}

/* The framework of a row: the fit's when it has one of that name. */
static int row_framework(const ms_pub_opts *o, const char *name, ms_framework *fw, ms_err *err)
{
    for (int i = 0; i < o->n_frameworks; i++)
        if (!strcmp(o->frameworks[i].name, name)) {
            *fw = o->frameworks[i];
            return 0;
        }
    int have;
    return ms_framework_resolve(name, fw, &have, err);
}

/* expert_bits / dense_bits become the run keys of the same names. */
static int apply_bits(const ms_pub_row *r, ms_run_config *cfg, ms_err *err)
{
    const char *names[] = {"expert_bits", "dense_bits"};
    double vals[] = {r->expert_bits, r->dense_bits};
    for (int i = 0; i < 2; i++) {
        if (!(vals[i] > 0))
            continue;
        char text[32], why[256];
        snprintf(text, sizeof text, "%.17g", vals[i]);
        int id = ms_runkey_find(names[i]);
        if (id < 0)
            return ms_fail(err, "%s: row %s: %s = %g: needs the run key %s, which this build does not have", r->file,
                           r->name, names[i], vals[i], names[i]);
        double x;
        int rc = ms_runkey_apply(cfg, id, text, &x, why, sizeof why);
        if (rc < 0)
            return ms_fail(err, "%s: row %s: %s = %g: %s", r->file, r->name, names[i], vals[i], why);
        if (rc > 0) /* a key the caller would have to apply: never ignored */
            return ms_fail(err, "%s: row %s: %s = %g: the run key %s is not a field of the run configuration", r->file,
                           r->name, names[i], vals[i], names[i]);
    }
    return 0;
}

/* The bytes row r's GPU has for experts (budget.h), with the row's bits,
 * batch and lengths and the framework's reserve. */
static double gpu_room(const ms_pub_row *r, const ms_model *m, const ms_platform *p, const ms_framework *fw)
{
    ms_budget_in in = {.platform = p, .model = m, .framework = fw,
                       .dense_bytes = ms_pub_dense_bytes(r, m) * m->moe_layers,
                       .batch = r->batch, .context_tokens = (double)r->prompt_len + r->output_len};
    ms_budget b;
    ms_budget_compute(&in, &b);
    return ms_budget_cache_room(&b, m);
}

/* Row r's profiles, its preset's framework (the fit's when it has one) and
 * setup. */
static int row_setup(const ms_pub_opts *o, const ms_pub_row *r, ms_model *m, ms_platform *p, ms_pub_setup *s,
                     ms_framework *fw, ms_err *err)
{
    const ms_pub_preset *pr = ms_pub_preset_find(r->system);
    if (load_profiles(r, m, p, err))
        return -1;
    if (!pr) /* the setup says the system is unknown */
        return ms_pub_preset_setup(r, m, NAN, s, err);
    if (row_framework(o, pr->framework, fw, err))
        return -1;
    return ms_pub_preset_setup(r, m, p->gpu_mem_bytes > 0 ? gpu_room(r, m, p, fw) : NAN, s, err);
}

/* The run's description: the same text means the same run. */
static int plan_row(const ms_pub_opts *o, const ms_pub_row *r, size_t idx, row_plan *pl, ms_err *err)
{
    ms_model m;
    ms_platform p;
    ms_pub_setup s;
    ms_framework fw;
    if (row_setup(o, r, &m, &p, &s, &fw, err))
        return -1;
    if (s.cap_kind == MS_CAP_BYTES)
        snprintf(pl->setup, sizeof pl->setup, "%s + %s + %s, cache %.4g GB, framework %s", s.prefetch, s.cache, s.sched,
                 s.cap_value / 1e9, s.framework);
    else
        snprintf(pl->setup, sizeof pl->setup, "%s + %s + %s, cache %.0f experts, framework %s", s.prefetch, s.cache,
                 s.sched, s.cap_value, s.framework);
    ms_run_config cfg = {0};
    if (apply_bits(r, &cfg, err))
        return -1;
    trace_path(o, r, idx, pl->trace, sizeof pl->trace);
    char sets[1100] = "";
    for (int i = 0, u = 0; i < r->n_sets && u < (int)sizeof sets; i++)
        u += snprintf(sets + u, sizeof sets - (size_t)u, "%s.%s=%s;", r->set_is_model[i] ? "m" : "p",
                      r->set_store + r->set_key[i], r->set_store + r->set_value[i]);
    snprintf(pl->key, sizeof pl->key, "%s|%s|%s|%s|%s|%s|%s|%d|%.17g|%s|%.17g|%.17g|%u|%llu|%u|%.17g|%.17g",
             pl->trace, r->model, r->platform, sets, s.prefetch, s.cache, s.sched, (int)s.cap_kind, s.cap_value,
             s.framework, fw.layer_s, fw.iteration_s, r->batch, (unsigned long long)r->seed, s.cpu_cores,
             r->expert_bits, r->dense_bits);
    return 0;
}

/* The metrics of a run, in ms_pub_metric order. */
static void metrics_of(const ms_metrics *mt, uint32_t output_len, double v[MS_PUB_METRIC_N])
{
    double tpot_ms = mt->tpot_mean_s * 1e3;
    v[MS_PUB_TPOT_MS] = tpot_ms;
    v[MS_PUB_DECODE_TOK_S] = 1e3 / tpot_ms;
    v[MS_PUB_TTFT_MS] = mt->ttft_service_mean_s * 1e3;
    v[MS_PUB_E2E_TOK_S] = (double)output_len / mt->latency_service_mean_s;
}

static int run_row(const ms_pub_opts *o, const ms_pub_row *r, const char *trace, double v[MS_PUB_METRIC_N],
                   ms_err *err)
{
    ms_model m;
    ms_platform p;
    ms_pub_setup s;
    ms_framework fw;
    if (row_setup(o, r, &m, &p, &s, &fw, err))
        return -1;
    if (s.cpu_cores)
        p.cpu_cores = s.cpu_cores;
    ms_profile_set ms[MS_PUB_MAX_SETS], ps[MS_PUB_MAX_SETS];
    int nm, np;
    ms_pub_row_sets(r, ms, &nm, ps, &np);
    ms_run_config cfg = {.trace_path = trace, .model = &m, .platform = &p, .model_sets = ms, .n_model_sets = nm,
                         .platform_sets = ps, .n_platform_sets = np, .prefetch_spec = s.prefetch,
                         .cache_spec = s.cache, .sched_spec = s.sched, .cap_kind = s.cap_kind,
                         .cap_value = s.cap_value, .distance = 1, .max_batch = r->batch, .offline = 1,
                         .seed = r->seed, .keys_as_ini = 1, .framework = &fw};
    if (apply_bits(r, &cfg, err))
        return -1;
    ms_metrics mt;
    if (ms_run(&cfg, &mt, err))
        return ms_fail_prefix(err, "%s: row %s: %s (%s + %s + %s)", r->file, r->name, r->system, s.prefetch, s.cache,
                              s.sched);
    metrics_of(&mt, r->output_len, v);
    ms_metrics_free(&mt);
    return 0;
}

/* ---- the runs as jobs of the pool ---- */

typedef struct {
    const ms_pub_opts *o;
    const ms_pub_rows *rows;
    row_plan *plan;
    size_t *first;              /* run j: its first row */
    size_t *run_of;             /* row i: its run, or SIZE_MAX when it could not be planned */
    size_t nruns;
    double (*v)[MS_PUB_METRIC_N];
    char **errs;                /* run j's error, or NULL */
} pub_jobs;

static char *pub_job(void *ctx, uint64_t job)
{
    pub_jobs *j = ctx;
    size_t i = j->first[job];
    double v[MS_PUB_METRIC_N];
    ms_err err;
    char *out = ms_xcalloc(sizeof err.msg + 128, 1);
    if (run_row(j->o, &j->rows->row[i], j->plan[i].trace, v, &err))
        snprintf(out, sizeof err.msg + 128, "E%s", err.msg);
    else
        snprintf(out, sizeof err.msg + 128, "R%.17g %.17g %.17g %.17g", v[0], v[1], v[2], v[3]);
    return out;
}

static int pub_sink(void *ctx, uint64_t job, const char *row, size_t len, ms_err *err)
{
    pub_jobs *j = ctx;
    (void)len;
    if (row[0] == 'E') {
        j->errs[job] = ms_xstrdup(row + 1);
    } else if (row[0] != 'R' || sscanf(row + 1, "%lf %lf %lf %lf", &j->v[job][0], &j->v[job][1], &j->v[job][2],
                                       &j->v[job][3]) != 4) {
        return ms_fail(err, "published: a worker sent a malformed result for run %llu", (unsigned long long)job);
    }
    if (j->o->progress) {
        fprintf(j->o->progress, "\rpublished: %llu of %zu runs done", (unsigned long long)job + 1, j->nruns);
        if (job + 1 == j->nruns)
            fputc('\n', j->o->progress);
        fflush(j->o->progress);
    }
    return 0;
}

/* The error of a run shared by several rows, as row `row`'s: the run's
 * first row's "FILE: row NAME: " prefix becomes this row's. */
static void shared_error(const ms_pub_row *first, const ms_pub_row *row, const char *msg, char *out, size_t n)
{
    char prefix[1400];
    int u = snprintf(prefix, sizeof prefix, "%s: row %s: ", first->file, first->name);
    if (row == first || u <= 0 || (size_t)u >= sizeof prefix || strncmp(msg, prefix, (size_t)u) ||
        snprintf(out, n, "%s: row %s: %s", row->file, row->name, msg + u) < 0) /* truncation is fine */
        copy_msg(out, n, msg);
}

/* Plans every row, makes every generated trace once, then runs each
 * distinct run once. */
int ms_published_run(const ms_pub_opts *o, const ms_pub_rows *rows, ms_pub_result *res, ms_err *err)
{
    size_t n = rows->n;
    pub_jobs j = {.o = o, .rows = rows, .plan = ms_xcalloc(n ? n : 1, sizeof *j.plan),
                  .first = ms_xcalloc(n ? n : 1, sizeof *j.first), .run_of = ms_xcalloc(n ? n : 1, sizeof *j.run_of)};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        ms_pub_result *r = &res[i];
        memset(r, 0, sizeof *r);
        r->predicted = r->ratio = NAN;
        r->run = -1;
        j.run_of[i] = SIZE_MAX;
        ms_err e;
        if (plan_row(o, &rows->row[i], i, &j.plan[i], &e)) {
            copy_msg(r->error, sizeof r->error, e.msg);
            continue;
        }
        copy_msg(r->setup, sizeof r->setup, j.plan[i].setup);
        int made = rows->row[i].trace[0] != 0 || (o->reuse_traces && access(j.plan[i].trace, R_OK) == 0);
        for (size_t k = 0; k < i && !made; k++)
            made = j.run_of[k] != SIZE_MAX && !strcmp(j.plan[k].trace, j.plan[i].trace);
        if (!made && write_trace(&rows->row[i], j.plan[i].trace, err))
            rc = -1;
        size_t run = 0;
        while (run < j.nruns && strcmp(j.plan[j.first[run]].key, j.plan[i].key))
            run++;
        if (run == j.nruns)
            j.first[j.nruns++] = i;
        j.run_of[i] = run;
    }
    j.v = ms_xcalloc(j.nruns ? j.nruns : 1, sizeof *j.v);
    j.errs = ms_xcalloc(j.nruns ? j.nruns : 1, sizeof *j.errs);
    ms_sweep_pool pool = {.ctx = &j, .job = pub_job, .sink = pub_sink};
    if (!rc && j.nruns)
        rc = ms_sweep_pool_run(&pool, j.nruns, o->jobs, err);
    for (size_t i = 0; i < n && !rc; i++) {
        size_t run = j.run_of[i];
        if (run == SIZE_MAX)
            continue;
        res[i].run = (long)run;
        if (j.errs[run]) {
            shared_error(&rows->row[j.first[run]], &rows->row[i], j.errs[run], res[i].error, sizeof res[i].error);
            continue;
        }
        double p = j.v[run][rows->row[i].metric];
        if (!isfinite(p) || p <= 0) {
            snprintf(res[i].error, sizeof res[i].error, "%.600s: row %s: metric = %s: undefined on this run",
                     rows->row[i].file, rows->row[i].name, ms_pub_metric_name(rows->row[i].metric));
            continue;
        }
        res[i].predicted = p;
        res[i].ratio = p / rows->row[i].value;
    }
    for (size_t k = 0; k < j.nruns; k++)
        free(j.errs[k]);
    free(j.errs);
    free(j.v);
    free(j.plan);
    free(j.first);
    free(j.run_of);
    return rc;
}
