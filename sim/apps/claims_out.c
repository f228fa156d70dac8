/* `moesim claims` outputs: the terminal table, JSON, the CSVs and the
 * figure of paper vs moesim (see claims.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/apps/claims.h"
#include "sim/apps/claims_table.h"
#include "sim/core/out.h"
#include "sim/core/paths.h"
#include "sim/core/version.h"

void ms_claims_table(FILE *out, const ms_claim_result *r, size_t n)
{
    int counts[4] = {0};
    for (size_t i = 0; i < n; i++) {
        const cl_claim *cl = cl_find(r[i].id);
        counts[r[i].verdict]++;
        fprintf(out, "%-22s %-14s %s\n", cl->id, ms_verdict_name(r[i].verdict), cl->statement);
        fprintf(out, "%-22s %-14s moesim: %s", "", "", r[i].value_text);
        if (cl->tol > 0)
            fprintf(out, cl->kind == CL_PLATEAU ? " (tolerance %g %%, relative)" : " (tolerance %g points)", cl->tol);
        fputc('\n', out);
        if (r[i].sensitivity[0])
            fprintf(out, "%-22s %-14s sensitivity: %s\n", "", "", r[i].sensitivity);
        if (r[i].note[0])
            fprintf(out, "%-22s %-14s note: %s\n", "", "", r[i].note);
    }
    fprintf(out, "%zu claims: %d hold, %d in direction only, %d do not hold, %d skipped\n", n, counts[0], counts[1],
            counts[2], counts[3]);
}

static cJSON *numbers(const double *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull());
    return a;
}

cJSON *ms_claims_json(const ms_claim_result *r, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        const cl_claim *cl = cl_find(r[i].id);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", cl->id);
        cJSON_AddStringToObject(o, "paper", cl->paper);
        cJSON_AddStringToObject(o, "where", cl->where);
        cJSON_AddStringToObject(o, "statement", cl->statement);
        cJSON_AddStringToObject(o, "model", cl->model);
        cJSON_AddStringToObject(o, "testbed", cl->platform);
        cJSON_AddStringToObject(o, "verdict", ms_verdict_name(r[i].verdict));
        cJSON_AddNumberToObject(o, "tolerance", cl->tol);
        cJSON_AddItemToObject(o, "paper_values", numbers(r[i].paper, r[i].n));
        cJSON_AddItemToObject(o, "moesim_values", numbers(r[i].moesim, r[i].n));
        cJSON_AddStringToObject(o, "moesim", r[i].value_text);
        cJSON_AddStringToObject(o, "sensitivity", r[i].sensitivity);
        cJSON_AddStringToObject(o, "note", r[i].note);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* One CSV field, quoted (every text field may hold a comma). */
static void field(FILE *f, const char *s, int last)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputs(last ? "\"\n" : "\",", f);
}

static int write_claims_csv(const char *path, const ms_claim_result *r, size_t n, ms_err *err)
{
    ms_out *o = ms_out_open("claims", path, err);
    if (!o)
        return -1;
    FILE *f = ms_out_fp(o);
    fprintf(f, "# moesim %s commit %s\n", ms_version(), ms_commit());
    fprintf(f, "id,paper,where,statement,model,testbed,verdict,tolerance,moesim,sensitivity,note\n");
    for (size_t i = 0; i < n; i++) {
        const cl_claim *cl = cl_find(r[i].id);
        char tol[32];
        snprintf(tol, sizeof tol, "%g", cl->tol);
        const char *fs[] = {cl->id, cl->paper, cl->where, cl->statement, cl->model, cl->platform,
                            ms_verdict_name(r[i].verdict), tol, r[i].value_text, r[i].sensitivity, r[i].note};
        for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++)
            field(f, fs[k], k + 1 == sizeof fs / sizeof fs[0]);
    }
    return ms_out_commit(o, err);
}

/* An item name as one CSV field the figure's gnuplot reads (it splits on
 * every comma, quoted or not): commas become semicolons. */
static void put_item(FILE *f, const char *id, const char *item)
{
    fprintf(f, "%s ", id);
    for (const char *c = item; *c; c++)
        fputc(*c == ',' ? ';' : *c, f);
}

/* The numeric comparisons, one row per value the paper gives (for the figure). */
static int write_values_csv(const char *path, const ms_claim_result *r, size_t n, ms_err *err)
{
    ms_out *o = ms_out_open("claims", path, err);
    if (!o)
        return -1;
    FILE *f = ms_out_fp(o);
    fprintf(f, "# moesim %s commit %s\n", ms_version(), ms_commit());
    fprintf(f, "item,paper,moesim,verdict\n");
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < r[i].n; k++)
            if (isfinite(r[i].paper[k]) && isfinite(r[i].moesim[k])) {
                put_item(f, r[i].id, r[i].item[k]);
                fprintf(f, ",%.4f,%.4f,%s\n", r[i].paper[k], r[i].moesim[k], ms_verdict_name(r[i].verdict));
            }
    return ms_out_commit(o, err);
}

static int render(const char *dir, const char *term, ms_err *err)
{
    char plots[4096], cmd[8192], out[1200];
    if (ms_path_plots(plots, sizeof plots, err))
        return -1;
    snprintf(out, sizeof out, "%s/claims.%s", dir, term);
    if (snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"dir='%s'; out='@OUT@'; term='%s'; plots='%s'; heading='Seed papers vs moesim'; "
                 "subtitle='moesim claims'\" '%s/fig_claims.gp'",
                 dir, term, plots, plots) >= (int)sizeof cmd)
        return ms_fail(err, "claims: the gnuplot command is too long");
    if (ms_out_from_command("claims", out, cmd, err))
        return ms_fail_prefix(err, "gnuplot on plots/fig_claims.gp");
    return 0;
}

int ms_claims_write(const ms_claims_opts *o, const ms_claim_result *r, size_t n, ms_err *err)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/claims.csv", o->out_dir);
    if (write_claims_csv(p, r, n, err))
        return -1;
    snprintf(p, sizeof p, "%s/claims_values.csv", o->out_dir);
    if (write_values_csv(p, r, n, err))
        return -1;
    size_t numeric = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < r[i].n; k++)
            numeric += isfinite(r[i].paper[k]) && isfinite(r[i].moesim[k]);
    return numeric ? render(o->out_dir, "png", err) : 0; /* no figure without a number to compare */
}
