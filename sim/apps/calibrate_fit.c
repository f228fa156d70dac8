/* Calibration fits (calibrate.h): the copy line and the roofline of expert
 * compute, per token count and jointly over sizes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "sim/apps/calibrate.h"
#include "sim/apps/calibrate_parts.h"

#define CONSISTENT_TOL 1e-9 /* relative slack when checking a point's side of the crossover */

/* ---- fits ---- */

static void residuals(const double *model, const double *y, int n, double *rms, double *max)
{
    double ss = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        double r = (model[i] - y[i]) / y[i];
        ss += r * r;
        mx = fmax(mx, fabs(r));
    }
    *rms = n ? sqrt(ss / n) : 0;
    *max = mx;
}

static int check_points(const char *what, const double *x, const double *y, int n, int need, ms_err *err)
{
    if (n < need)
        return ms_fail(err, "calibrate: %s fit needs at least %d points (got %d)", what, need, n);
    for (int i = 0; i < n; i++)
        if (!(y[i] > 0 && isfinite(y[i]) && x[i] >= 0 && isfinite(x[i])))
            return ms_fail(err, "calibrate: %s point %d: time %g s at %g is not a positive finite time", what, i,
                           y[i], x[i]);
    return 0;
}

double ms_fit_copy_eval(const ms_fit_copy *f, double bytes)
{
    return f->latency_s + bytes / f->bw;
}

int ms_fit_copy_line(const double *bytes, const double *secs, int n, ms_fit_copy *out, ms_err *err)
{
    if (check_points("copy", bytes, secs, n, 2, err))
        return -1;
    double w[MS_CALIB_MAX_POINTS], model[MS_CALIB_MAX_POINTS];
    if (n > MS_CALIB_MAX_POINTS)
        return ms_fail(err, "calibrate: copy fit of %d points (at most %d)", n, MS_CALIB_MAX_POINTS);
    for (int i = 0; i < n; i++)
        w[i] = 1.0 / (secs[i] * secs[i]);
    double c0, c1, cov00, cov01, cov11, chisq;
    gsl_fit_wlinear(bytes, 1, w, 1, secs, 1, (size_t)n, &c0, &c1, &cov00, &cov01, &cov11, &chisq);
    if (c0 < 0) /* a negative latency is noise: fit through the origin */
        gsl_fit_wmul(bytes, 1, w, 1, secs, 1, (size_t)n, &c1, &cov11, &chisq), c0 = 0;
    if (!(c1 > 0) || !isfinite(c1))
        return ms_fail(err, "calibrate: copy time does not grow with bytes (slope %g s/B)", c1);
    out->latency_s = c0;
    out->bw = 1.0 / c1;
    out->n = n;
    for (int i = 0; i < n; i++)
        model[i] = ms_fit_copy_eval(out, bytes[i]);
    residuals(model, secs, n, &out->rms_rel, &out->max_rel);
    return 0;
}

double ms_fit_roof_eval(const ms_fit_roof *f, double bytes, double params, double tokens)
{
    return f->launch_s + fmax(bytes / f->bw, 2.0 * params * tokens / f->flops);
}

/* One candidate split: the first k points memory-bound.  0 when consistent. */
static int roof_candidate(const double *t, const double *y, int n, int k, double *launch, double *mem_s,
                          double *slope)
{
    int m = n - k;
    if (m < 2)
        return -1;
    double w[MS_CALIB_MAX_POINTS], cov00, cov01, cov11, chisq;
    for (int i = 0; i < n; i++)
        w[i] = 1.0 / (y[i] * y[i]);
    gsl_fit_wlinear(t + k, 1, w + k, 1, y + k, 1, (size_t)m, launch, slope, &cov00, &cov01, &cov11, &chisq);
    if (*slope > 0 && *launch < 0) { /* a negative launch time is noise: through the origin */
        gsl_fit_wmul(t + k, 1, w + k, 1, y + k, 1, (size_t)m, slope, &cov11, &chisq);
        *launch = 0;
    }
    if (!(*slope > 0))
        return -1;
    if (k == 0) {
        *mem_s = *slope * t[0];
        return 0;
    }
    double sw = 0, swy = 0; /* weighted mean minimising the relative residuals: sum(1/y) / sum(1/y^2) */
    for (int i = 0; i < k; i++)
        sw += w[i], swy += w[i] * y[i];
    *mem_s = swy / sw - *launch;
    if (!(*mem_s > 0))
        return -1;
    for (int i = 0; i < n; i++) {
        double c = *slope * t[i];
        if (i < k ? c > *mem_s * (1 + CONSISTENT_TOL) : c < *mem_s * (1 - CONSISTENT_TOL))
            return -1;
    }
    return 0;
}

int ms_fit_roofline(const double *tokens, const double *secs, int n, double bytes, double params, ms_fit_roof *out,
                    ms_err *err)
{
    if (check_points("roofline", tokens, secs, n, 2, err))
        return -1;
    if (n > MS_CALIB_MAX_POINTS || !(bytes > 0) || !(params > 0))
        return ms_fail(err, "calibrate: roofline fit of %d points over %g bytes, %g params", n, bytes, params);
    for (int i = 1; i < n; i++)
        if (!(tokens[i] > tokens[i - 1]))
            return ms_fail(err, "calibrate: roofline tokens must increase (%g after %g)", tokens[i], tokens[i - 1]);
    double best = INFINITY, model[MS_CALIB_MAX_POINTS];
    for (int k = 0; k < n; k++) {
        double launch, mem_s, slope;
        if (roof_candidate(tokens, secs, n, k, &launch, &mem_s, &slope))
            continue;
        ms_fit_roof f = {.launch_s = launch, .bw = bytes / mem_s, .flops = 2.0 * params / slope, .mem_points = k,
                         .n = n};
        for (int i = 0; i < n; i++)
            model[i] = ms_fit_roof_eval(&f, bytes, params, tokens[i]);
        residuals(model, secs, n, &f.rms_rel, &f.max_rel);
        if (f.rms_rel < best - 1e-12) { /* ties (to rounding) keep the fewer memory-bound points */
            best = f.rms_rel;
            *out = f;
        }
    }
    if (!isfinite(best))
        return ms_fail(err, "calibrate: no roofline fits the %d points (time does not grow with tokens, or a "
                       "negative launch time: noisy timings? more --reps on a quieter machine)", n);
    return 0;
}

/* Joint roofline over points of several op sizes (same kernel): point i
 * (tokens[i], bytes[i], params[i], secs[i]) is memory-bound when its
 * arithmetic intensity q = 2 params tokens / bytes is below the crossover.
 * For each candidate crossover (between sorted distinct q) one weighted
 * linear least-squares fit (gsl_multifit_wlinear, weights 1/t^2):
 *   t = launch + a bytes [memory-bound] + b 2 params tokens [compute-bound]
 * with bw = 1/a, flops = 1/b; a negative launch is refit through the origin.
 * Candidates whose points fall on the wrong side of their own crossover are
 * dropped; the least RMS relative residual wins. */
typedef struct {
    double launch, a, b;
} roof_coef;

/* Weighted least squares of t on the chosen columns; 0 when the fit exists. */
static int joint_lsq(const double *bytes, const double *flop, const double *secs, int n,
                     const int *mem, int intercept, int k, roof_coef *c)
{
    int cols = intercept + (k > 0) + (k < n);
    if (n < cols)
        return -1;
    gsl_matrix *X = gsl_matrix_calloc((size_t)n, (size_t)cols);
    gsl_vector *y = gsl_vector_alloc((size_t)n), *w = gsl_vector_alloc((size_t)n), *cf = gsl_vector_alloc((size_t)cols);
    gsl_matrix *cov = gsl_matrix_alloc((size_t)cols, (size_t)cols);
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)n, (size_t)cols);
    for (int i = 0; i < n; i++) {
        int j = 0;
        if (intercept)
            gsl_matrix_set(X, (size_t)i, (size_t)j++, 1.0);
        if (k > 0)
            gsl_matrix_set(X, (size_t)i, (size_t)j++, mem[i] ? bytes[i] : 0.0);
        if (k < n)
            gsl_matrix_set(X, (size_t)i, (size_t)j, mem[i] ? 0.0 : flop[i]);
        gsl_vector_set(y, (size_t)i, secs[i]);
        gsl_vector_set(w, (size_t)i, 1.0 / (secs[i] * secs[i]));
    }
    double chisq;
    int rc = gsl_multifit_wlinear(X, w, y, cf, cov, &chisq, ws);
    int j = 0;
    c->launch = intercept ? gsl_vector_get(cf, (size_t)j++) : 0;
    c->a = k > 0 ? gsl_vector_get(cf, (size_t)j++) : 0;
    c->b = k < n ? gsl_vector_get(cf, (size_t)j) : 0;
    gsl_multifit_linear_free(ws);
    gsl_matrix_free(cov);
    gsl_vector_free(cf);
    gsl_vector_free(w);
    gsl_vector_free(y);
    gsl_matrix_free(X);
    return rc ? -1 : 0;
}

int ms_fit_roofline_joint(const double *tokens, const double *bytes, const double *params, const double *secs, int n,
                          ms_fit_roof *out, ms_err *err)
{
    if (check_points("joint roofline", tokens, secs, n, 3, err))
        return -1;
    if (n > MS_CALIB_JOINT_MAX)
        return ms_fail(err, "calibrate: joint roofline fit of %d points (at most %d)", n, MS_CALIB_JOINT_MAX);
    double q[MS_CALIB_JOINT_MAX], qs[MS_CALIB_JOINT_MAX], flop[MS_CALIB_JOINT_MAX], model[MS_CALIB_JOINT_MAX];
    int mem[MS_CALIB_JOINT_MAX];
    for (int i = 0; i < n; i++) {
        if (!(bytes[i] > 0) || !(params[i] > 0))
            return ms_fail(err, "calibrate: joint roofline point %d of %g bytes, %g params", i, bytes[i], params[i]);
        flop[i] = 2.0 * params[i] * tokens[i];
        q[i] = qs[i] = flop[i] / bytes[i];
    }
    gsl_sort(qs, 1, (size_t)n);
    double best = INFINITY;
    for (int s = 0; s <= n; s++) { /* crossover just above qs[s-1]: the points with q < qs[s] are memory-bound */
        if (s > 0 && s < n && qs[s] == qs[s - 1])
            continue;
        int k = 0;
        for (int i = 0; i < n; i++)
            k += mem[i] = s == n || q[i] < qs[s];
        if (k == n) /* no compute-bound point: FLOP/s unknown */
            continue;
        roof_coef c;
        if (joint_lsq(bytes, flop, secs, n, mem, 1, k, &c))
            continue;
        if (c.launch < 0 && joint_lsq(bytes, flop, secs, n, mem, 0, k, &c))
            continue;
        if (!(c.b > 0) || (k > 0 && !(c.a > 0)))
            continue;
        if (k == 0) /* crossover at the least intense point */
            c.a = c.b * qs[0];
        int consistent = 1;
        for (int i = 0; i < n && consistent; i++) {
            double m = c.a * bytes[i], f = c.b * flop[i];
            consistent = mem[i] ? f <= m * (1 + CONSISTENT_TOL) : f >= m * (1 - CONSISTENT_TOL);
        }
        if (!consistent)
            continue;
        ms_fit_roof f = {.launch_s = c.launch, .bw = 1.0 / c.a, .flops = 1.0 / c.b, .mem_points = k, .n = n};
        for (int i = 0; i < n; i++)
            model[i] = ms_fit_roof_eval(&f, bytes[i], params[i], tokens[i]);
        residuals(model, secs, n, &f.rms_rel, &f.max_rel);
        if (f.rms_rel < best - 1e-12) {
            best = f.rms_rel;
            *out = f;
        }
    }
    if (!isfinite(best))
        return ms_fail(err, "calibrate: no joint roofline fits the %d points (noisy timings? more --reps on a "
                       "quieter machine)", n);
    return 0;
}

int ms_calib_fit(ms_calib *c, ms_err *err)
{
    static const char *const names[] = {"H2D pinned", "D2H pinned", "H2D pageable", "D2H pageable"};
    for (int k = 0; k < MS_CAL_COPIES; k++)
        if (ms_fit_copy_line(c->sizes, c->copy_s[k], c->nsizes, &c->copy[k], err))
            return ms_fail_prefix(err, "%s", names[k]);
    /* the expert FFN and dense stand-in alone are reported, not used: no fit there is not an error */
    ms_err quiet;
    if (ms_fit_roofline(c->tokens, c->expert_s, c->ntokens, c->expert_bytes, c->expert_params, &c->expert, &quiet))
        c->expert = (ms_fit_roof){.launch_s = NAN, .bw = NAN, .flops = NAN, .rms_rel = NAN, .max_rel = NAN};
    if (ms_fit_roofline(c->tokens, c->cpu_s, c->ntokens, c->expert_bytes, c->expert_params, &c->cpu, err))
        return ms_fail_prefix(err, "CPU expert");
    if (c->dense_params > 0 &&
        ms_fit_roofline(c->tokens, c->dense_s, c->ntokens, c->dense_bytes, c->dense_params, &c->dense, &quiet))
        c->dense = (ms_fit_roof){.launch_s = NAN, .bw = NAN, .flops = NAN, .rms_rel = NAN, .max_rel = NAN};
    double tok[MS_CALIB_JOINT_MAX], by[MS_CALIB_JOINT_MAX], pa[MS_CALIB_JOINT_MAX], se[MS_CALIB_JOINT_MAX];
    int nj = 0;
    for (int i = 0; i < c->ntokens; i++) {
        tok[nj] = c->tokens[i], by[nj] = c->expert_bytes, pa[nj] = c->expert_params, se[nj++] = c->expert_s[i];
        if (c->dense_params > 0)
            tok[nj] = c->tokens[i], by[nj] = c->dense_bytes, pa[nj] = c->dense_params, se[nj++] = c->dense_s[i];
    }
    if (ms_fit_roofline_joint(tok, by, pa, se, nj, &c->gpu, err))
        return ms_fail_prefix(err, "expert FFN + dense stand-in");
    double model[MS_CALIB_MAX_POINTS] = {0};
    for (int i = 0; i < c->ntokens; i++)
        model[i] = ms_fit_roof_eval(&c->gpu, c->expert_bytes, c->expert_params, c->tokens[i]);
    residuals(model, c->expert_s, c->ntokens, &c->gpu_expert_rms_rel, &c->gpu_expert_max_rel);
    if (!(c->dense_params > 0))
        return 0;
    for (int i = 0; i < c->ntokens; i++)
        model[i] = ms_fit_roof_eval(&c->gpu, c->dense_bytes, c->dense_params, c->tokens[i]);
    residuals(model, c->dense_s, c->ntokens, &c->gpu_dense_rms_rel, &c->gpu_dense_max_rel);
    for (int i = 0; i < c->ntokens; i++)
        model[i] = ms_fit_roof_eval(&c->expert, c->dense_bytes, c->dense_params, c->tokens[i]);
    residuals(model, c->dense_s, c->ntokens, &c->dense_pred_rms_rel, &c->dense_pred_max_rel);
    return 0;
}
