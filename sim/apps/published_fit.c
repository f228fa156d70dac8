/* `moesim published --fit` (see published.h): the framework constants no
 * datasheet gives, fitted on the calibration rows only. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>

#include "sim/apps/published.h"
#include "sim/apps/published_presets.h"
#include "sim/core/out.h"

/* The fitted keys of a framework profile: one line each (a key added to
 * ms_framework is fitted by adding it here). */
typedef struct {
    const char *key;
    size_t offset;              /* its double in ms_framework */
    double max;                 /* the profile reader's upper bound */
    double start0;              /* where the search starts when the profile's figure is 0 */
    int quantized_only;         /* fitted only when a calibration row of the framework has bits below 16 */
} fit_key;

/* A dequantisation rate of 0 means free: its search starts at 1 TB/s (a
 * fast fused kernel), the seconds at FIT_FLOOR (nearly nothing). */
static const fit_key fit_keys[] = {
    {"layer_s", offsetof(ms_framework, layer_s), 0.1, 0, 0},
    {"iteration_s", offsetof(ms_framework, iteration_s), 1.0, 0, 0},
    {"expert_s", offsetof(ms_framework, expert_s), 0.1, 0, 0},
    {"dequant_bw", offsetof(ms_framework, dequant_bw), 1e15, 1e12, 1},
};
#define N_KEYS (sizeof fit_keys / sizeof fit_keys[0])
#define FIT_FLOOR 1e-7          /* the smallest figure the log-scaled search reaches (a start of 0 starts here) */
#define FIT_MAX_ITER 300
/* A weak prior at the profile's figures: moving a figure one decade from
 * its start costs as much as a 0.01 % misfit of every row ((ln 1.0001)^2 per
 * decade squared), so a figure the rows do not determine (three host costs
 * from two rows) stays near its estimate instead of drifting, while one they
 * do determine moves as the rows say (the bias is below 1 % on the fit's
 * recovery test, tests/published/fit_recovery.sh). */
#define FIT_PRIOR 1e-8

static double *key_of(ms_framework *fw, size_t k) { return (double *)((char *)fw + fit_keys[k].offset); }

typedef struct {
    ms_pub_opts o;              /* the caller's, with the frameworks being tried */
    ms_pub_rows cal;            /* the calibration rows (of the framework being fitted, in the search) */
    ms_framework *fw;
    int n_fw;
    int cur;                    /* the framework being fitted */
    size_t np, key[N_KEYS];     /* its fitted keys (fit_keys indices) */
    double x0[N_KEYS];          /* their starts, log10: the prior's centre */
    ms_pub_result *res;
    ms_err *err;
    int failed;
    unsigned evals;
} fit_ctx;

static void params_to_framework(fit_ctx *c, const gsl_vector *x)
{
    for (size_t j = 0; j < c->np; j++) {
        size_t k = c->key[j];
        double v = pow(10, gsl_vector_get(x, j));
        if (fit_keys[k].start0 == 0 && v <= FIT_FLOOR) /* seconds below 0.1 us: none (0, as a profile says it) */
            v = 0;
        *key_of(&c->fw[c->cur], k) = v > fit_keys[k].max ? fit_keys[k].max : v;
    }
}

static double prior(const fit_ctx *c, const gsl_vector *x)
{
    double s = 0;
    for (size_t j = 0; j < c->np; j++) {
        double d = gsl_vector_get(x, j) - c->x0[j];
        s += d * d;
    }
    return FIT_PRIOR * s;
}

/* The mean squared ln(predicted / measured) of the calibration rows. */
static double objective(const gsl_vector *x, void *user)
{
    fit_ctx *c = user;
    if (c->failed)
        return GSL_POSINF;
    params_to_framework(c, x);
    c->evals++;
    if (ms_published_run(&c->o, &c->cal, c->res, c->err)) {
        c->failed = 1;
        return GSL_POSINF;
    }
    c->o.reuse_traces = 1; /* made by the first evaluation */
    double s = 0;
    for (size_t i = 0; i < c->cal.n; i++) {
        if (c->res[i].error[0]) {
            ms_fail(c->err, "published --fit: a calibration row cannot run: %s", c->res[i].error);
            c->failed = 1;
            return GSL_POSINF;
        }
        double l = log(c->res[i].ratio);
        s += l * l;
    }
    return s / (double)c->cal.n + prior(c, x);
}

/* Runs the calibration rows once with the profiles' figures (making their
 * traces) and leaves out, one log line each, the rows that cannot run (e.g. a cache
 * their preset's policies refuse): they are named in the table as well.  -1
 * when none is left. */
static int drop_unrunnable(fit_ctx *c, FILE *log, ms_err *err)
{
    c->res = ms_xcalloc(c->cal.n, sizeof *c->res);
    if (ms_published_run(&c->o, &c->cal, c->res, err))
        return -1;
    c->o.reuse_traces = 1;
    size_t m = 0;
    for (size_t i = 0; i < c->cal.n; i++) {
        if (!c->res[i].error[0]) {
            c->cal.row[m++] = c->cal.row[i];
            continue;
        }
        if (log)
            fprintf(log, "published --fit: calibration row %s left out: %s\n", c->cal.row[i].name, c->res[i].error);
    }
    if (!m)
        return ms_fail(err, "published --fit: none of the %zu calibration rows can run (the table says why)", c->cal.n);
    c->cal.n = m;
    return 0;
}

/* The frameworks of the calibration rows' systems, each from its profile. */
static int collect_frameworks(fit_ctx *c, ms_err *err)
{
    c->fw = ms_xcalloc(c->cal.n, sizeof *c->fw);
    for (size_t i = 0; i < c->cal.n; i++) {
        const ms_pub_preset *p = ms_pub_preset_find(c->cal.row[i].system);
        int f = 0;
        while (f < c->n_fw && strcmp(c->fw[f].name, p->framework))
            f++;
        if (f < c->n_fw)
            continue;
        int have;
        if (ms_framework_resolve(p->framework, &c->fw[c->n_fw], &have, err))
            return -1;
        c->n_fw++;
    }
    return 0;
}

/* The fit's provenance: the command, the fit, its rows (malloc'd). */
static char *provenance(const fit_ctx *c, const char *command, double mse, unsigned evals)
{
    size_t n = strlen(command) + 512;
    for (size_t i = 0; i < c->cal.n; i++)
        n += strlen(c->cal.row[i].name) + 1;
    char *buf = ms_xcalloc(n, 1);
    size_t u = (size_t)snprintf(buf, n, "fitted by `%s`: GSL Nelder-Mead (nmsimplex2, on log10 of each figure) "
                                        "minimising the mean squared ln(predicted/measured) of %zu calibration rows:",
                                command, c->cal.n);
    for (size_t i = 0; i < c->cal.n; i++)
        u += (size_t)snprintf(buf + u, n - u, " %s", c->cal.row[i].name);
    snprintf(buf + u, n - u,
             "; plus a prior of 1e-8 per squared decade from the profile's figures; %u evaluations, final objective "
             "%.6g; the evaluation rows were never seen",
             evals, mse);
    return buf;
}

static int minimise(fit_ctx *c, gsl_vector *x, double *mse, FILE *log)
{
    size_t np = c->np;
    unsigned evals0 = c->evals;
    gsl_vector *step = gsl_vector_alloc(np);
    gsl_vector_set_all(step, 0.5);
    gsl_multimin_function fn = {.f = objective, .n = np, .params = c};
    gsl_multimin_fminimizer *m = gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2, np);
    gsl_multimin_fminimizer_set(m, &fn, x, step);
    int status = GSL_CONTINUE;
    for (int it = 0; it < FIT_MAX_ITER && status == GSL_CONTINUE && !c->failed; it++) {
        if (gsl_multimin_fminimizer_iterate(m))
            break;
        status = gsl_multimin_test_size(gsl_multimin_fminimizer_size(m), 1e-4);
    }
    gsl_vector_memcpy(x, gsl_multimin_fminimizer_x(m));
    *mse = gsl_multimin_fminimizer_minimum(m);
    if (log && !c->failed)
        fprintf(log, "published --fit: %s: %u evaluations, mean squared ln ratio %.6g on %zu calibration rows%s\n",
                c->fw[c->cur].name, c->evals - evals0, *mse, c->cal.n,
                status == GSL_SUCCESS ? "" : " (stopped at the iteration limit)");
    gsl_multimin_fminimizer_free(m);
    gsl_vector_free(step);
    return c->failed ? -1 : 0;
}

/* Whether a row's weights are quantised (bits below 16): dequant_bw moves
 * its time. */
static int row_quantised(const ms_pub_row *r)
{
    return (r->expert_bits > 0 && r->expert_bits < 16) || (r->dense_bits > 0 && r->dense_bits < 16);
}

/* Fits framework c->cur on its calibration rows (those whose preset uses
 * it; all holds every runnable calibration row): its provenance in *prov,
 * the fitted keys as bits of *mask. */
static int fit_one(fit_ctx *c, const ms_pub_rows *all, const char *command, char **prov, unsigned *mask, FILE *log)
{
    const char *name = c->fw[c->cur].name;
    int quantised = 0;
    c->cal.n = 0;
    for (size_t i = 0; i < all->n; i++)
        if (!strcmp(ms_pub_preset_find(all->row[i].system)->framework, name)) {
            c->cal.row[c->cal.n++] = all->row[i];
            quantised |= row_quantised(&all->row[i]);
        }
    c->np = 0;
    *mask = 0;
    for (size_t k = 0; k < N_KEYS; k++)
        if (quantised || !fit_keys[k].quantized_only) {
            c->key[c->np++] = k;
            *mask |= 1u << k;
        }
    gsl_vector *x = gsl_vector_alloc(c->np);
    for (size_t j = 0; j < c->np; j++) {
        size_t k = c->key[j];
        double v = *key_of(&c->fw[c->cur], k);
        if (!(v > 0) && fit_keys[k].start0 > 0)
            v = fit_keys[k].start0;
        c->x0[j] = log10(v > FIT_FLOOR ? v : FIT_FLOOR);
        gsl_vector_set(x, j, c->x0[j]);
    }
    double mse = NAN;
    unsigned evals0 = c->evals;
    int rc = minimise(c, x, &mse, log);
    if (!rc) {
        params_to_framework(c, x);
        *prov = provenance(c, command, mse, c->evals - evals0);
        for (size_t j = 0; log && j < c->np; j++)
            fprintf(log, "published --fit: %s %s = %.6g\n", name, fit_keys[c->key[j]].key,
                    *key_of(&c->fw[c->cur], c->key[j]));
    }
    gsl_vector_free(x);
    return rc;
}

int ms_published_fit(const ms_pub_opts *o, const ms_pub_rows *rows, const char *command, ms_pub_fit *fit, FILE *log,
                     ms_err *err)
{
    fit_ctx c = {.o = *o, .err = err};
    memset(fit, 0, sizeof *fit);
    c.o.progress = NULL;
    c.cal.row = ms_xcalloc(rows->n ? rows->n : 1, sizeof *c.cal.row);
    for (size_t i = 0; i < rows->n; i++)
        if (rows->row[i].role == MS_PUB_CALIBRATION)
            c.cal.row[c.cal.n++] = rows->row[i];
    int rc = 0;
    if (!c.cal.n)
        rc = ms_fail(err, "published --fit: no row has role = calibration");
    if (!rc)
        rc = drop_unrunnable(&c, log, err);
    if (!rc)
        rc = collect_frameworks(&c, err);
    ms_pub_rows all = {.n = c.cal.n, .row = ms_xcalloc(c.cal.n ? c.cal.n : 1, sizeof *all.row)};
    if (!rc) {
        memcpy(all.row, c.cal.row, c.cal.n * sizeof *all.row);
        c.o.frameworks = c.fw;
        c.o.n_frameworks = c.n_fw;
        gsl_set_error_handler_off();
        fit->provenance = ms_xcalloc((size_t)c.n_fw, sizeof *fit->provenance);
        fit->fitted = ms_xcalloc((size_t)c.n_fw, sizeof *fit->fitted);
        for (c.cur = 0; c.cur < c.n_fw && !rc; c.cur++)
            rc = fit_one(&c, &all, command, &fit->provenance[c.cur], &fit->fitted[c.cur], log);
    }
    free(all.row);
    free(c.res);
    free(c.cal.row);
    fit->fw = c.fw;
    fit->n = c.n_fw;
    if (rc) {
        ms_published_fit_free(fit);
        return -1;
    }
    return 0;
}

void ms_published_fit_free(ms_pub_fit *fit)
{
    for (int i = 0; fit->provenance && i < fit->n; i++)
        free(fit->provenance[i]);
    free(fit->provenance);
    free(fit->fitted);
    free(fit->fw);
    memset(fit, 0, sizeof *fit);
}

/* text as comment lines of at most ~120 characters (a profile line holds 198) */
static void comment_lines(FILE *fp, const char *text)
{
    while (*text) {
        size_t len = strlen(text), cut = len;
        if (len > 120) {
            cut = 120;
            while (cut > 40 && text[cut] != ' ')
                cut--;
            if (text[cut] != ' ')
                cut = 120;
        }
        fprintf(fp, "; fit: %.*s\n", (int)cut, text);
        text += cut;
        while (*text == ' ')
            text++;
    }
}

/* The keys the fit does not move, as the profile it started from had them. */
#define FITTED_SOURCE                                                                                                   \
    "derived fitted by moesim published --fit on calibration rows (the '; fit:' lines above: command, fit, rows)"

/* Whether line (leading blanks skipped) sets key: "key =" or "key=". */
static int line_sets(const char *line, const char *key)
{
    line += strspn(line, " \t");
    size_t n = strlen(key);
    return !strncmp(line, key, n) && line[n + strspn(line + n, " \t")] == '=';
}

/* The fitted keys of framework f that section ("framework" or "source")
 * has not had yet, at the section's end. */
static void flush_fitted(FILE *fp, const ms_pub_fit *fit, int f, int source, unsigned *seen)
{
    for (size_t k = 0; k < N_KEYS; k++)
        if ((fit->fitted[f] >> k & 1) && !(*seen >> k & 1)) {
            if (source)
                fprintf(fp, "%s = %s\n", fit_keys[k].key, FITTED_SOURCE);
            else
                fprintf(fp, "%s = %.6g\n", fit_keys[k].key, *key_of(&fit->fw[f], k));
            *seen |= 1u << k;
        }
}

/* The profile framework f was read from, line by line, with the fitted
 * keys' values and [source] lines replaced (added at the section's end when
 * absent) and the fit's '; fit:' comment lines at the top (an earlier fit's
 * dropped): every comment and kept key stays as it was.  -1 with err when
 * the file cannot be read again. */
static int rewrite_profile(FILE *fp, const ms_pub_fit *fit, int f, ms_err *err)
{
    FILE *in = fopen(fit->fw[f].file, "r");
    if (!in)
        return ms_fail(err, "published --fit: %s: cannot read the profile again to write its fit: %s", fit->fw[f].file,
                       strerror(errno));
    fprintf(fp, "; fit: written by moesim published --fit: %s with its fitted figures\n", fit->fw[f].name);
    comment_lines(fp, fit->provenance[f]);
    char line[2048];
    int section = 0; /* 1: [framework], 2: [source] */
    unsigned seen_fw = 0, seen_src = 0, blank = 0; /* blank lines held back: a section's added keys go before them */
    while (fgets(line, sizeof line, in)) {
        const char *t = line + strspn(line, " \t");
        if (!strncmp(t, "; fit:", 6))
            continue;
        if (*t == '\n' || *t == '\r' || !*t) {
            blank++;
            continue;
        }
        if (*t == '[' && section)
            flush_fitted(fp, fit, f, section == 2, section == 2 ? &seen_src : &seen_fw);
        for (; blank; blank--)
            fputc('\n', fp);
        if (*t == '[') {
            section = !strncmp(t, "[framework]", 11) ? 1 : !strncmp(t, "[source]", 8) ? 2 : 0;
            fputs(line, fp);
            continue;
        }
        size_t k = N_KEYS;
        for (size_t i = 0; section && i < N_KEYS; i++)
            if ((fit->fitted[f] >> i & 1) && line_sets(t, fit_keys[i].key))
                k = i;
        if (k == N_KEYS) {
            fputs(line, fp);
            continue;
        }
        if (section == 1) {
            fprintf(fp, "%s = %.6g\n", fit_keys[k].key, *key_of(&fit->fw[f], k));
            seen_fw |= 1u << k;
        } else {
            fprintf(fp, "%s = %s\n", fit_keys[k].key, FITTED_SOURCE);
            seen_src |= 1u << k;
        }
    }
    if (section)
        flush_fitted(fp, fit, f, section == 2, section == 2 ? &seen_src : &seen_fw);
    for (; blank; blank--)
        fputc('\n', fp);
    int bad = ferror(in);
    fclose(in);
    return bad ? ms_fail(err, "published --fit: %s: read error while writing its fit", fit->fw[f].file) : 0;
}

int ms_published_write_frameworks(const char *dir, const ms_pub_fit *fit, ms_err *err)
{
    char d[1200];
    snprintf(d, sizeof d, "%s/frameworks", dir);
    if (fit->n && ms_out_make_dir("published --fit", d, err))
        return -1;
    for (int f = 0; f < fit->n; f++) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s.ini", d, fit->fw[f].name);
        if (!fit->fw[f].file[0]) /* every preset names a framework profile file (ms_framework_resolve) */
            return ms_fail(err,
                           "published --fit: framework '%s' was not read from a profile: nothing to write its fit into",
                           fit->fw[f].name);
        ms_out *o = ms_out_open("published --fit", p, err);
        if (!o)
            return -1;
        if (rewrite_profile(ms_out_fp(o), fit, f, err)) {
            ms_out_abort(o);
            return -1;
        }
        if (ms_out_commit(o, err))
            return -1;
        ms_framework check; /* what was written reads back as a profile */
        if (ms_framework_load(p, &check, err))
            return ms_fail_prefix(err, "published --fit: the written profile");
    }
    return 0;
}
