/* `moesim published` outputs: the table, the summary, JSON, CSV and the
 * log-log figure (see published.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/apps/published.h"
#include "sim/apps/published_presets.h"
#include "sim/core/out.h"
#include "sim/core/paths.h"
#include "sim/core/version.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    size_t n;
    double median, worst;
    const char *worst_row;
} pub_stat;

/* |ln ratio| over the rows that ran with role (or any role when role < 0)
 * and system (NULL: any). */
static pub_stat stat_of(const ms_pub_rows *rows, const ms_pub_result *res, int role, const char *system)
{
    pub_stat s = {0, NAN, NAN, ""};
    double *v = ms_xcalloc(rows->n ? rows->n : 1, sizeof *v);
    for (size_t i = 0; i < rows->n; i++) {
        const ms_pub_row *r = &rows->row[i];
        if (res[i].error[0] || (role >= 0 && (int)r->role != role) || (system && strcmp(system, r->system)))
            continue;
        double a = fabs(log(res[i].ratio));
        if (!s.n || a > s.worst) {
            s.worst = a;
            s.worst_row = r->name;
        }
        v[s.n++] = a;
    }
    if (s.n) {
        qsort(v, s.n, sizeof *v, cmp_double);
        s.median = s.n % 2 ? v[s.n / 2] : 0.5 * (v[s.n / 2 - 1] + v[s.n / 2]);
    }
    free(v);
    return s;
}

static void print_stat(FILE *out, const char *what, pub_stat s)
{
    if (!s.n)
        return;
    fprintf(out, "%-34s %3zu rows  median |ln ratio| %.3f (x%.2f)  worst %.3f (x%.2f, %s)\n", what, s.n, s.median,
            exp(s.median), s.worst, exp(s.worst), s.worst_row);
}

/* The distinct systems of the rows, in order of first appearance. */
static size_t systems_of(const ms_pub_rows *rows, const char **sys)
{
    size_t n = 0;
    for (size_t i = 0; i < rows->n; i++) {
        size_t k = 0;
        while (k < n && strcmp(sys[k], rows->row[i].system))
            k++;
        if (k == n)
            sys[n++] = rows->row[i].system;
    }
    return n;
}

void ms_published_table(FILE *out, const ms_pub_rows *rows, const ms_pub_result *res)
{
    fprintf(out, "%-28s %-18s %-11s %-12s %10s %10s %7s\n", "row", "system", "role", "metric", "measured", "predicted",
            "ratio");
    size_t failed = 0;
    long runs = 0;
    for (size_t i = 0; i < rows->n; i++) {
        runs = res[i].run + 1 > runs ? res[i].run + 1 : runs;
        const ms_pub_row *r = &rows->row[i];
        fprintf(out, "%-28s %-18s %-11s %-12s %10.4g ", r->name, r->system, ms_pub_role_name(r->role),
                ms_pub_metric_name(r->metric), r->value);
        if (res[i].error[0]) {
            fprintf(out, "%10s %7s\n    cannot run: %s\n", "-", "-", res[i].error);
            failed++;
        } else {
            fprintf(out, "%10.4g %7.3f\n", res[i].predicted, res[i].ratio);
        }
    }
    print_stat(out, "calibration", stat_of(rows, res, MS_PUB_CALIBRATION, NULL));
    print_stat(out, "evaluation", stat_of(rows, res, MS_PUB_EVALUATION, NULL));
    const char **sys = ms_xcalloc(rows->n ? rows->n : 1, sizeof *sys);
    size_t ns = systems_of(rows, sys);
    for (size_t k = 0; k < ns; k++)
        for (int role = 0; role < 2; role++) {
            char what[96];
            snprintf(what, sizeof what, "%s, %s", sys[k], ms_pub_role_name((ms_pub_role)role));
            print_stat(out, what, stat_of(rows, res, role, sys[k]));
        }
    free(sys);
    fprintf(out, "%zu rows in %ld runs\n", rows->n, runs);
    if (failed)
        fprintf(out, "%zu of %zu rows could not run\n", failed, rows->n);
}

static cJSON *stat_json(pub_stat s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rows", (double)s.n);
    if (s.n) {
        cJSON_AddNumberToObject(o, "median_abs_ln_ratio", s.median);
        cJSON_AddNumberToObject(o, "worst_abs_ln_ratio", s.worst);
        cJSON_AddStringToObject(o, "worst_row", s.worst_row);
    }
    return o;
}

cJSON *ms_published_json(const ms_pub_rows *rows, const ms_pub_result *res)
{
    cJSON *top = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(top, "rows");
    for (size_t i = 0; i < rows->n; i++) {
        const ms_pub_row *r = &rows->row[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "row", r->name);
        cJSON_AddStringToObject(o, "file", r->file);
        cJSON_AddStringToObject(o, "source", r->source);
        cJSON_AddStringToObject(o, "system", r->system);
        cJSON_AddStringToObject(o, "model", r->model);
        cJSON_AddStringToObject(o, "platform", r->platform);
        cJSON_AddStringToObject(o, "role", ms_pub_role_name(r->role));
        cJSON_AddStringToObject(o, "metric", ms_pub_metric_name(r->metric));
        cJSON_AddNumberToObject(o, "measured", r->value);
        if (res[i].setup[0])
            cJSON_AddStringToObject(o, "setup", res[i].setup);
        if (res[i].error[0]) {
            cJSON_AddNullToObject(o, "predicted");
            cJSON_AddNullToObject(o, "ratio");
            cJSON_AddStringToObject(o, "error", res[i].error);
        } else {
            cJSON_AddNumberToObject(o, "predicted", res[i].predicted);
            cJSON_AddNumberToObject(o, "ratio", res[i].ratio);
        }
        cJSON_AddItemToArray(a, o);
    }
    cJSON *sum = cJSON_AddObjectToObject(top, "summary");
    cJSON_AddItemToObject(sum, "calibration", stat_json(stat_of(rows, res, MS_PUB_CALIBRATION, NULL)));
    cJSON_AddItemToObject(sum, "evaluation", stat_json(stat_of(rows, res, MS_PUB_EVALUATION, NULL)));
    cJSON *by = cJSON_AddObjectToObject(sum, "by_system");
    const char **sys = ms_xcalloc(rows->n ? rows->n : 1, sizeof *sys);
    size_t ns = systems_of(rows, sys);
    for (size_t k = 0; k < ns; k++) {
        cJSON *o = cJSON_AddObjectToObject(by, sys[k]);
        cJSON_AddItemToObject(o, "calibration", stat_json(stat_of(rows, res, MS_PUB_CALIBRATION, sys[k])));
        cJSON_AddItemToObject(o, "evaluation", stat_json(stat_of(rows, res, MS_PUB_EVALUATION, sys[k])));
    }
    free(sys);
    return top;
}

/* One CSV text field, quoted. */
static void field(FILE *f, const char *s, const char *end)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fprintf(f, "\"%s", end);
}

/* The numeric columns (5-10) come before any text that may hold a comma:
 * the figure's gnuplot splits on every comma. */
static int write_csv(const char *path, const ms_pub_rows *rows, const ms_pub_result *res, ms_err *err)
{
    ms_out *o = ms_out_open("published", path, err);
    if (!o)
        return -1;
    FILE *f = ms_out_fp(o);
    const char **sys = ms_xcalloc(rows->n ? rows->n : 1, sizeof *sys);
    size_t ns = systems_of(rows, sys);
    fprintf(f, "# moesim %s commit %s\n", ms_version(), ms_commit());
    fprintf(f, "row,system,role,metric,measured,predicted,ratio,abs_ln_ratio,system_index,calibration,error,source\n");
    for (size_t i = 0; i < rows->n; i++) {
        const ms_pub_row *r = &rows->row[i];
        size_t k = 0;
        while (k < ns && strcmp(sys[k], r->system))
            k++;
        fprintf(f, "%s,%s,%s,%s,%.6g,", r->name, r->system, ms_pub_role_name(r->role), ms_pub_metric_name(r->metric),
                r->value);
        if (res[i].error[0])
            fprintf(f, ",,,%zu,%d,", k, r->role == MS_PUB_CALIBRATION);
        else
            fprintf(f, "%.6g,%.6g,%.6g,%zu,%d,", res[i].predicted, res[i].ratio, fabs(log(res[i].ratio)), k,
                    r->role == MS_PUB_CALIBRATION);
        field(f, res[i].error, ",");
        field(f, r->source, "\n");
    }
    free(sys);
    return ms_out_commit(o, err);
}

static int write_json(const char *path, const ms_pub_rows *rows, const ms_pub_result *res, ms_err *err)
{
    ms_out *o = ms_out_open("published", path, err);
    if (!o)
        return -1;
    cJSON *j = ms_published_json(rows, res);
    char *s = cJSON_Print(j);
    fprintf(ms_out_fp(o), "%s\n", s);
    free(s);
    cJSON_Delete(j);
    return ms_out_commit(o, err);
}

static int render(const char *dir, const ms_pub_rows *rows, ms_err *err)
{
    char plots[4096], cmd[8192], out[1200], names[2048] = "";
    if (ms_path_plots(plots, sizeof plots, err))
        return -1;
    const char **sys = ms_xcalloc(rows->n ? rows->n : 1, sizeof *sys);
    size_t ns = systems_of(rows, sys);
    for (size_t k = 0, u = 0; k < ns && u < sizeof names; k++)
        u += (size_t)snprintf(names + u, sizeof names - u, "%s%s", k ? " " : "", sys[k]);
    free(sys);
    snprintf(out, sizeof out, "%s/published.png", dir);
    if (snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"dir='%s'; out='@OUT@'; term='png'; plots='%s'; systems='%s'; "
                 "heading='Published measurements vs moesim'; subtitle='moesim published'\" '%s/fig_published.gp'",
                 dir, plots, names, plots) >= (int)sizeof cmd)
        return ms_fail(err, "published: the gnuplot command is too long");
    if (ms_out_from_command("published", out, cmd, err))
        return ms_fail_prefix(err, "gnuplot on plots/fig_published.gp");
    return 0;
}

int ms_published_write(const ms_pub_opts *o, const ms_pub_rows *rows, const ms_pub_result *res, ms_err *err)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/published.csv", o->out_dir);
    if (write_csv(p, rows, res, err))
        return -1;
    snprintf(p, sizeof p, "%s/published.json", o->out_dir);
    if (write_json(p, rows, res, err))
        return -1;
    size_t ran = 0;
    for (size_t i = 0; i < rows->n; i++)
        ran += !res[i].error[0];
    return ran ? render(o->out_dir, rows, err) : 0; /* no figure without a point */
}
