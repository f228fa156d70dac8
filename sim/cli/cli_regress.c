/* `moesim regress`: replays the points of a golden file (sim/apps/golden.h) and
 * compares hit rates and counts with it at a stated tolerance; prints a diff
 * table of the points that changed and a summary; exit 1 on any regression
 * (and on improvements or changed counts unless allowed).  --update rewrites
 * the golden file's results instead. */
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "traces/synth/gen.h"
#include "traces/import/import.h"
#include "sim/cli/cli.h"
#include "sim/cli/cli_trace_common.h"
#include "sim/core/out.h"
#include "sim/engine/engine.h"
#include "sim/apps/golden.h"
#include "sim/core/params.h"
#include "sim/engine/report.h"

static const char regress_usage[] =
    "usage: moesim regress --golden FILE [--tolerance T] [--count-tolerance N] [--allow-improvement]\n"
    "                      [--json] [--update]\n"
    "\n"
    "Replays every (trace, policy, cache size) point of the golden file FILE and compares the hit\n"
    "rate and the hits / late / misses / on_cpu counts with it.  Prints a diff table of the points\n"
    "that differ (point, metric, golden, got, delta) and a summary line.\n"
    "\n"
    "  --golden FILE         the golden file (format: docs/sweeps.md, `moesim regress`)\n"
    "  --tolerance T         absolute hit-rate tolerance (default 0: exact at 6 decimals); a point\n"
    "                        regresses when its hit rate is more than T below the golden\n"
    "  --count-tolerance N   counts may differ by N (default 0) when the hit rate is within T\n"
    "  --allow-improvement   hit rates above the golden (by more than T) do not fail\n"
    "  --json                print the comparison as JSON instead of the table\n"
    "  --update              run every point and rewrite FILE's results (atomically); rows may\n"
    "                        leave the results empty to be filled\n"
    "\n"
    "Exit status: 0 every point within tolerance; 1 a regression, a change, an improvement\n"
    "(without --allow-improvement), a point that failed to run, or a bad golden file; 2 usage.\n";

typedef struct {
    const char *golden;
    double hit_tol;
    uint64_t count_tol;
    int allow_improvement, json, update;
} regress_flags;

typedef enum { ST_SAME, ST_REGRESSED, ST_IMPROVED, ST_CHANGED, ST_FAILED, ST_NEW, ST_N } point_status;
static const char *const status_names[ST_N] = {"same", "REGRESSION", "improved", "changed", "FAILED", "new"};

typedef struct {
    point_status status;
    ms_golden_result got;
    char *error; /* ST_FAILED */
} point_outcome;

static int parse_regress_flags(int argc, char **argv, regress_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--allow-improvement") || !strcmp(a, "--json") || !strcmp(a, "--update")) {
            *(a[2] == 'a' ? &f->allow_improvement : a[2] == 'j' ? &f->json : &f->update) = 1;
            continue;
        }
        if (strcmp(a, "--golden") && strcmp(a, "--tolerance") && strcmp(a, "--count-tolerance"))
            return ms_cli_usage("regress: unknown option '%s' (see moesim regress --help)", a);
        if (i + 1 >= argc)
            return ms_cli_usage("regress: %s needs a value", a);
        const char *val = argv[++i];
        unsigned long long u;
        if (!strcmp(a, "--golden"))
            f->golden = val;
        else if (!strcmp(a, "--tolerance")) {
            if (ms_parse_double(val, &f->hit_tol) || !(f->hit_tol >= 0 && f->hit_tol <= 1))
                return ms_cli_usage("regress: --tolerance %s: expected a hit-rate difference in [0, 1]", val);
        } else {
            if (ms_parse_u64(val, &u))
                return ms_cli_usage("regress: --count-tolerance %s: expected a whole number", val);
            f->count_tol = u;
        }
    }
    if (!f->golden)
        return ms_cli_usage("regress: --golden FILE is required");
    return 0;
}

/* ---- temp dir with the prepared traces ---- */

/* The temp folder, removed on a signal (out.h ms_out_remove_on_signal) as
 * is every source written into it. */
static int make_work_dir(char *dir, size_t cap, ms_err *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/moesim-regress-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return ms_fail(err, "regress: cannot create a temp folder %s: %s", dir, strerror(errno));
    if (ms_out_remove_on_signal(dir, err)) {
        rmdir(dir);
        return -1;
    }
    return 0;
}

static void remove_work_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) {
                unlink(path);
                ms_out_forget_on_signal(path);
            }
        }
    closedir(d);
    rmdir(dir);
    ms_out_forget_on_signal(dir);
}

/* The size guard of a gen: source: its estimated size (as `trace gen`'s)
 * must fit in the free space of the temp folder. */
static int check_gen_size(const ms_golden *g, const ms_golden_source *s, const char *dir, ms_err *err)
{
    ms_trace_meta meta;
    if (ms_gen_meta(&s->gen, &s->gen_model, &meta, err))
        return ms_fail_prefix(err, "regress: %s: trace %s", g->path, s->spec);
    uint64_t est = ms_trace_cli_gen_estimate(&s->gen, &meta);
    ms_trace_meta_free(&meta);
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0)
        return ms_fail(err, "regress: %s: cannot read the free space of %s: %s", g->path, dir, strerror(errno));
    uint64_t free_bytes = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    char a[32], b[32], parent[4096];
    ms_out_dir_of(dir, parent, sizeof parent);
    if (est > free_bytes)
        return ms_fail(err, "regress: %s: trace %s: estimated size %s (uncompressed, from the knobs' expected "
                       "lengths) is more than the %s free in %s; use fewer requests or set TMPDIR to a larger folder",
                       g->path, s->spec, ms_trace_cli_bytes(est, a, sizeof a),
                       ms_trace_cli_bytes(free_bytes, b, sizeof b), parent);
    return 0;
}

/* Generates or imports every source that is not a trace file already. */
static int prepare_sources(ms_golden *g, const char *dir, ms_err *err)
{
    for (size_t i = 0; i < g->n_srcs; i++) {
        ms_golden_source *s = &g->srcs[i];
        if (s->kind == MS_SRC_H5)
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/source%zu.h5", dir, i);
        if (s->kind == MS_SRC_GEN && check_gen_size(g, s, dir, err))
            return -1;
        if (ms_out_remove_on_signal(path, err))
            return -1;
        int rc = s->kind == MS_SRC_GEN ? ms_gen_write(&s->gen, &s->gen_model, path, NULL, err)
                                       : ms_import_routecsv(s->input, path, NULL, err);
        if (rc)
            return ms_fail_prefix(err, "regress: %s: trace %s", g->path, s->spec);
        s->h5 = ms_xstrdup(path);
    }
    return 0;
}

/* ---- runs ---- */

static point_status status_of(const ms_golden_point *p, const ms_golden_result *got, const regress_flags *f)
{
    if (!p->has_expected)
        return ST_NEW;
    switch (ms_golden_compare(&p->expected, got, f->hit_tol, f->count_tol)) {
    case MS_CMP_SAME: return ST_SAME;
    case MS_CMP_REGRESSED: return ST_REGRESSED;
    case MS_CMP_IMPROVED: return ST_IMPROVED;
    case MS_CMP_CHANGED: return ST_CHANGED;
    }
    return ST_CHANGED;
}

static void run_point(const ms_golden *g, const ms_golden_point *p, const regress_flags *f, point_outcome *o)
{
    ms_run_config cfg = {.trace_path = g->srcs[p->source].h5, .model = p->has_model ? &p->model : NULL,
                         .platform = &p->platform, .prefetch_spec = p->prefetch, .cache_spec = p->cache,
                         .sched_spec = p->sched, .cap_kind = p->cap_kind, .cap_value = p->cap_value,
                         .distance = p->distance, .max_batch = 1, .seed = 1,
                         .train_set = p->train_set, .train_frac = p->train_frac, .keys_as_ini = 1};
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) {
        o->status = ST_FAILED;
        o->error = ms_xstrdup(err.msg);
        return;
    }
    o->got = ms_golden_result_of(&m.total);
    ms_metrics_free(&m);
    o->status = status_of(p, &o->got, f);
}

/* ---- text output ---- */

static void point_label(const ms_golden *g, const ms_golden_point *p, char *out, size_t cap)
{
    const char *spec = g->srcs[p->source].spec;
    const char *slash = strrchr(spec, '/');
    const char *trace = strncmp(spec, "gen:", 4) && slash ? slash + 1 : spec;
    snprintf(out, cap, "%s %s+%s+%s size=%s d=%u train=%s", trace, p->prefetch, p->cache, p->sched, p->cache_size,
             p->distance, p->train);
}

typedef struct {
    const char *status;
    uint32_t line;
    char point[512], metric[16], golden[32], got[32], delta[32];
} diff_row;

static void count_row(diff_row *r, const char *metric, int have_golden, uint64_t want, uint64_t got)
{
    snprintf(r->metric, sizeof r->metric, "%s", metric);
    snprintf(r->golden, sizeof r->golden, have_golden ? "%llu" : "-", (unsigned long long)want);
    snprintf(r->got, sizeof r->got, "%llu", (unsigned long long)got);
    if (have_golden)
        snprintf(r->delta, sizeof r->delta, "%+lld", (long long)got - (long long)want);
    else
        snprintf(r->delta, sizeof r->delta, "-");
}

/* The rows of one point: hit_rate, then every count that differs (all for a new point). */
static size_t point_rows(const ms_golden *g, const ms_golden_point *p, const point_outcome *o, diff_row *rows)
{
    diff_row base = {.status = status_names[o->status], .line = p->line};
    point_label(g, p, base.point, sizeof base.point);
    if (o->status == ST_FAILED) {
        rows[0] = base;
        snprintf(rows[0].metric, sizeof rows[0].metric, "error");
        snprintf(rows[0].golden, sizeof rows[0].golden, "-");
        snprintf(rows[0].got, sizeof rows[0].got, "-");
        snprintf(rows[0].delta, sizeof rows[0].delta, "-");
        return 1;
    }
    const ms_golden_result *w = &p->expected, *r = &o->got;
    int have = p->has_expected;
    rows[0] = base;
    snprintf(rows[0].metric, sizeof rows[0].metric, "hit_rate");
    snprintf(rows[0].golden, sizeof rows[0].golden, have ? "%.6f" : "-", w->hit_rate);
    snprintf(rows[0].got, sizeof rows[0].got, "%.6f", r->hit_rate);
    snprintf(rows[0].delta, sizeof rows[0].delta, have ? "%+.6f" : "-", r->hit_rate - w->hit_rate);
    const char *names[4] = {"hits", "late", "misses", "on_cpu"};
    const uint64_t want[4] = {w->hits, w->late, w->misses, w->on_cpu}, got[4] = {r->hits, r->late, r->misses, r->on_cpu};
    size_t n = 1;
    for (int i = 0; i < 4; i++)
        if (!have || want[i] != got[i]) {
            rows[n] = base;
            count_row(&rows[n++], names[i], have, want[i], got[i]);
        }
    return n;
}

static size_t width_of(const diff_row *rows, size_t n, size_t off, size_t min)
{
    size_t w = min;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen((const char *)&rows[i] + off);
        w = l > w ? l : w;
    }
    return w;
}

static void print_table(const ms_golden *g, const point_outcome *out)
{
    diff_row *rows = ms_xcalloc(g->n_pts * 5, sizeof *rows);
    size_t n = 0;
    for (size_t i = 0; i < g->n_pts; i++)
        if (out[i].status != ST_SAME)
            n += point_rows(g, &g->pts[i], &out[i], rows + n);
    if (!n) {
        free(rows);
        return;
    }
    int wp = (int)width_of(rows, n, offsetof(diff_row, point), 5);
    int wg = (int)width_of(rows, n, offsetof(diff_row, golden), 6), wo = (int)width_of(rows, n, offsetof(diff_row, got), 3);
    int wd = (int)width_of(rows, n, offsetof(diff_row, delta), 5);
    printf("%-10s %5s  %-*s  %-8s  %*s  %*s  %*s\n", "status", "line", wp, "point", "metric", wg, "golden", wo, "got",
           wd, "delta");
    for (size_t i = 0; i < n; i++)
        printf("%-10s %5u  %-*s  %-8s  %*s  %*s  %*s\n", rows[i].status, rows[i].line, wp, rows[i].point,
               rows[i].metric, wg, rows[i].golden, wo, rows[i].got, wd, rows[i].delta);
    for (size_t i = 0; i < g->n_pts; i++)
        if (out[i].status == ST_FAILED)
            printf("line %u: %s\n", g->pts[i].line, out[i].error);
    printf("\n");
    free(rows);
}

static int verdict_fails(const size_t count[ST_N], const regress_flags *f)
{
    return count[ST_REGRESSED] || count[ST_CHANGED] || count[ST_FAILED] ||
           (count[ST_IMPROVED] && !f->allow_improvement) || (count[ST_NEW] && !f->update);
}

static void print_summary(const ms_golden *g, const size_t count[ST_N], const regress_flags *f, const char *verdict)
{
    printf("regress %s: %zu points: %zu same, %zu regressed, %zu improved, %zu changed, %zu failed", g->path, g->n_pts,
           count[ST_SAME], count[ST_REGRESSED], count[ST_IMPROVED], count[ST_CHANGED], count[ST_FAILED]);
    if (count[ST_NEW])
        printf(", %zu new", count[ST_NEW]);
    printf("; tolerance: hit rate +-%g (absolute), counts +-%llu%s: %s\n", f->hit_tol,
           (unsigned long long)f->count_tol, f->allow_improvement ? ", improvements allowed" : "", verdict);
}

/* ---- JSON output ---- */

static cJSON *result_json(const ms_golden_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "hit_rate", r->hit_rate);
    cJSON_AddNumberToObject(o, "hits", (double)r->hits);
    cJSON_AddNumberToObject(o, "late", (double)r->late);
    cJSON_AddNumberToObject(o, "misses", (double)r->misses);
    cJSON_AddNumberToObject(o, "on_cpu", (double)r->on_cpu);
    return o;
}

static cJSON *point_json(const ms_golden *g, const ms_golden_point *p, const point_outcome *o)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "line", p->line);
    cJSON_AddStringToObject(j, "trace", g->srcs[p->source].spec);
    cJSON_AddStringToObject(j, "prefetch", p->prefetch);
    cJSON_AddStringToObject(j, "cache", p->cache);
    cJSON_AddStringToObject(j, "sched", p->sched);
    cJSON_AddStringToObject(j, p->cap_kind == MS_CAP_EXPERTS ? "cache_experts" : "cache_bytes", p->cache_size);
    cJSON_AddNumberToObject(j, "distance", p->distance);
    cJSON_AddStringToObject(j, "train", p->train);
    cJSON_AddStringToObject(j, "status", o->status == ST_REGRESSED ? "regressed" : o->status == ST_FAILED ? "failed"
                                                                                     : status_names[o->status]);
    cJSON_AddItemToObject(j, "golden", p->has_expected ? result_json(&p->expected) : cJSON_CreateNull());
    cJSON_AddItemToObject(j, "got", o->status == ST_FAILED ? cJSON_CreateNull() : result_json(&o->got));
    if (o->error)
        cJSON_AddStringToObject(j, "error", o->error);
    if (p->has_model)
        ms_report_provenance_add(j, "model", p->model.file, p->model.sha256);
    ms_report_provenance_add(j, "platform", p->platform.file, p->platform.sha256);
    return j;
}

static void print_json(const ms_golden *g, const point_outcome *out, const size_t count[ST_N], const regress_flags *f,
                       const char *verdict)
{
    cJSON *j = cJSON_CreateObject();
    cJSON *prov = ms_report_provenance_base();
    ms_report_provenance_add(prov, "golden", g->path, NULL);
    cJSON *srcs = cJSON_AddArrayToObject(prov, "traces");
    for (size_t i = 0; i < g->n_srcs; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "spec", g->srcs[i].spec);
        if (g->srcs[i].input && g->srcs[i].kind == MS_SRC_H5)
            ms_report_provenance_add_trace(t, "input", g->srcs[i].input);
        else if (g->srcs[i].input)
            ms_report_provenance_add(t, "input", g->srcs[i].input, NULL); /* a route_trace CSV */
        cJSON_AddItemToArray(srcs, t);
    }
    cJSON_AddItemToObject(j, "provenance", prov);
    cJSON_AddStringToObject(j, "golden", g->path);
    cJSON *tol = cJSON_AddObjectToObject(j, "tolerance");
    cJSON_AddNumberToObject(tol, "hit_rate", f->hit_tol);
    cJSON_AddNumberToObject(tol, "counts", (double)f->count_tol);
    cJSON_AddBoolToObject(j, "allow_improvement", f->allow_improvement);
    cJSON *pts = cJSON_AddArrayToObject(j, "points");
    for (size_t i = 0; i < g->n_pts; i++)
        cJSON_AddItemToArray(pts, point_json(g, &g->pts[i], &out[i]));
    cJSON *sum = cJSON_AddObjectToObject(j, "summary");
    const char *keys[ST_N] = {"same", "regressed", "improved", "changed", "failed", "new"};
    for (int s = 0; s < ST_N; s++)
        cJSON_AddNumberToObject(sum, keys[s], (double)count[s]);
    cJSON_AddStringToObject(j, "verdict", verdict);
    char *s = cJSON_Print(j);
    puts(s);
    free(s);
    cJSON_Delete(j);
}

/* ---- the command ---- */

static int run_all(ms_golden *g, const regress_flags *f, point_outcome *out, ms_err *err)
{
    char dir[4096];
    if (make_work_dir(dir, sizeof dir, err))
        return -1;
    int rc = prepare_sources(g, dir, err);
    for (size_t i = 0; i < g->n_pts && !rc; i++)
        run_point(g, &g->pts[i], f, &out[i]);
    remove_work_dir(dir);
    return rc;
}

static int report_and_exit(ms_golden *g, const point_outcome *out, const regress_flags *f)
{
    size_t count[ST_N] = {0};
    for (size_t i = 0; i < g->n_pts; i++)
        count[out[i].status]++;
    int fails = verdict_fails(count, f);
    ms_err err;
    const char *verdict = fails ? "FAIL" : "PASS";
    if (f->update) {
        if (count[ST_FAILED])
            verdict = "FAIL (not updated: points failed to run)";
        else {
            ms_golden_result *res = ms_xcalloc(g->n_pts, sizeof *res);
            for (size_t i = 0; i < g->n_pts; i++)
                res[i] = out[i].got;
            int wrc = ms_golden_write(g, res, &err);
            free(res);
            if (wrc)
                return ms_cli_error(err.msg);
            verdict = "UPDATED";
            fails = 0;
        }
    }
    if (f->json)
        print_json(g, out, count, f, verdict);
    else {
        print_table(g, out);
        print_summary(g, count, f, verdict);
    }
    return fails ? 1 : 0;
}

int ms_cli_regress(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(regress_usage, stdout);
            return 0;
        }
    regress_flags f = {0};
    int rc = parse_regress_flags(argc, argv, &f);
    if (rc)
        return rc;
    ms_golden g;
    ms_err err;
    if (ms_golden_load(f.golden, f.update, &g, &err)) {
        ms_golden_free(&g);
        return ms_cli_error(err.msg);
    }
    point_outcome *out = ms_xcalloc(g.n_pts, sizeof *out);
    if (run_all(&g, &f, out, &err))
        rc = ms_cli_error(err.msg);
    else
        rc = report_and_exit(&g, out, &f);
    for (size_t i = 0; i < g.n_pts; i++)
        free(out[i].error);
    free(out);
    ms_golden_free(&g);
    return rc;
}
