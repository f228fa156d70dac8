/* Calibration: measurement plan, fits and profile (calibrate.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>

#include "sim/apps/calibrate.h"
#include "sim/core/dvec.h"
#include "sim/core/out.h"
#include "sim/core/version.h"

#define KIB 1024.0
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

/* ---- plan ---- */

int ms_calib_sizes(double max_bytes, double *sizes)
{
    int n = 0;
    for (double b = 4 * KIB; b <= max_bytes && n < MS_CALIB_MAX_POINTS; b *= 4)
        sizes[n++] = b;
    return n;
}

int ms_calib_tokens(unsigned max_tokens, double *tokens)
{
    int n = 0;
    for (unsigned t = 1; t <= max_tokens && n < MS_CALIB_MAX_POINTS - 1; t *= 2) {
        tokens[n++] = t;
        if (t >= 2 && t + t / 2 <= max_tokens && n < MS_CALIB_MAX_POINTS - 1)
            tokens[n++] = t + t / 2;
    }
    if (tokens[n - 1] != max_tokens)
        tokens[n++] = max_tokens;
    return n;
}

/* ---- measurements through the contract ---- */

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
    gsl_sort(v, 1, (size_t)n);
    return gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
}

static ms_op make_op(ms_op_kind kind, uint32_t expert, uint32_t tokens, double bytes, double params)
{
    ms_op op = {.kind = kind, .layer = 0, .expert = kind == MS_OP_DENSE ? UINT32_MAX : expert, .tokens = tokens,
                .bytes = bytes, .params = params, .demand = 1, .after = MS_NO_EVENT, .iteration = 0};
    return op;
}

/* Duration (end - start) of one op, submitted alone and waited for. */
static int time_op(ms_exec *x, const ms_op *op, double *dur, ms_err *err)
{
    ms_event ev;
    double t0, t1;
    if (ms_exec_submit(x, op, &ev, err) || ms_exec_wait(x, ev, &t0, &t1, err))
        return -1;
    *dur = t1 - t0;
    return 0;
}

static int median_op(ms_exec *x, const ms_op *op, int reps, double *out, ms_err *err)
{
    double v[64];
    int r = reps < 64 ? reps : 64;
    for (int i = 0; i < r; i++)
        if (time_op(x, op, &v[i], err))
            return -1;
    *out = median(v, r);
    return 0;
}

static int measure_copies(ms_exec *x, ms_calib *c, FILE *progress, ms_err *err)
{
    static const char *const names[] = {"H2D pinned", "D2H pinned", "H2D pageable", "D2H pageable"};
    for (int k = 0; k < MS_CAL_COPIES; k++) {
        int to_device = k == MS_CAL_H2D || k == MS_CAL_H2D_PAGEABLE;
        int pageable = k >= MS_CAL_H2D_PAGEABLE;
        for (int i = 0; i < c->nsizes; i++)
            if (x->ops->time_copy(x->st, c->sizes[i], to_device, pageable, c->reps, &c->copy_s[k][i], err))
                return -1;
        if (progress)
            fprintf(progress, "measured %s copies: %d sizes x %d reps\n", names[k], c->nsizes, c->reps);
    }
    return 0;
}

static int measure_tokens(ms_exec *x, ms_calib *c, FILE *progress, ms_err *err)
{
    for (int i = 0; i < c->ntokens; i++) {
        uint32_t t = (uint32_t)c->tokens[i];
        ms_op dense = make_op(MS_OP_DENSE, 0, t, c->dense_bytes, c->dense_params);
        ms_op cpu = make_op(MS_OP_EXPERT_CPU, 0, t, c->expert_bytes, c->expert_params);
        if (x->ops->time_expert(x->st, t, c->reps, &c->expert_s[i], err) ||
            median_op(x, &dense, c->reps, &c->dense_s[i], err) || median_op(x, &cpu, c->reps, &c->cpu_s[i], err))
            return -1;
    }
    if (progress)
        fprintf(progress, "measured expert FFN, dense stand-in and CPU expert: %d token counts x %d reps\n",
                c->ntokens, c->reps);
    return 0;
}

/* One copy of expert (0,1) and one GPU expert op on the resident (0,0):
 * alone, then submitted together. */
static int measure_overlap(ms_exec *x, ms_calib *c, FILE *progress, ms_err *err)
{
    ms_op load = make_op(MS_OP_COPY, 0, 0, c->expert_bytes, 0);
    ms_op copy = make_op(MS_OP_COPY, 1, 0, c->expert_bytes, 0);
    ms_op run = make_op(MS_OP_EXPERT_GPU, 0, c->max_tokens, c->expert_bytes, c->expert_params);
    double dur;
    if (time_op(x, &load, &dur, err))
        return -1;
    double ca[64], ea[64], ct[64], et[64];
    int r = c->reps < 64 ? c->reps : 64;
    for (int i = 0; i < r; i++) {
        if (time_op(x, &copy, &ca[i], err) || ms_exec_release(x, 0, 1, err) || time_op(x, &run, &ea[i], err))
            return -1;
        ms_event e1, e2;
        double a0, a1, b0, b1;
        if (ms_exec_submit(x, &copy, &e1, err) || ms_exec_submit(x, &run, &e2, err) ||
            ms_exec_wait(x, e1, &a0, &a1, err) || ms_exec_wait(x, e2, &b0, &b1, err) ||
            ms_exec_release(x, 0, 1, err))
            return -1;
        ct[i] = a1 - a0;
        et[i] = b1 - b0;
    }
    if (ms_exec_release(x, 0, 0, err))
        return -1;
    c->copy_alone_s = median(ca, r);
    c->expert_alone_s = median(ea, r);
    c->copy_together_s = median(ct, r);
    c->expert_together_s = median(et, r);
    if (progress)
        fprintf(progress, "measured copy/compute overlap: %d reps\n", r);
    return 0;
}

uint32_t ms_calib_rotation(double expert_bytes)
{
    double k = ceil(2 * 64 * KIB * KIB / expert_bytes);
    return k < 2 ? 2 : k > 32 ? 32 : (uint32_t)k;
}

/* The contention probe.  K = c->rotation experts 0..K-1 stay resident
 * (expert ops cycle through them), experts K..3K-1 are copied in turn, each
 * released right after its copy is submitted (copies run in stream order, so
 * a later copy into the same slot waits for it). */
#define PROBE_MAX_OPS 4096

typedef struct {
    ms_event *ev;
    double *t0, *t1;
    uint32_t n;
} op_run;

static op_run run_alloc(uint32_t n)
{
    return (op_run){ms_xcalloc(n, sizeof(ms_event)), ms_xcalloc(n, sizeof(double)), ms_xcalloc(n, sizeof(double)), n};
}

static void run_free(op_run *r)
{
    free(r->ev);
    free(r->t0);
    free(r->t1);
}

static int submit_copies(ms_exec *x, const ms_calib *c, op_run *r, ms_err *err)
{
    uint32_t K = c->rotation;
    ms_op op = make_op(MS_OP_COPY, 0, 0, c->expert_bytes, 0);
    for (uint32_t i = 0; i < r->n; i++) {
        op.expert = K + i % (2 * K);
        if (ms_exec_submit(x, &op, &r->ev[i], err) || ms_exec_release(x, 0, op.expert, err))
            return -1;
    }
    return 0;
}

static int submit_experts(ms_exec *x, const ms_calib *c, op_run *r, ms_err *err)
{
    ms_op op = make_op(MS_OP_EXPERT_GPU, 0, 1, c->expert_bytes, c->expert_params);
    for (uint32_t i = 0; i < r->n; i++) {
        op.expert = i % c->rotation;
        if (ms_exec_submit(x, &op, &r->ev[i], err))
            return -1;
    }
    return 0;
}

static int wait_all(ms_exec *x, op_run *r, ms_err *err)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (ms_exec_wait(x, r->ev[i], &r->t0[i], &r->t1[i], err))
            return -1;
    return 0;
}

/* Durations of the ops of a that ran entirely while b's stream was busy:
 * inside [b's first start, b's last end]. */
static void add_inside(ms_dvec *s, const op_run *a, const op_run *b)
{
    double lo = b->t0[0], hi = b->t1[b->n - 1];
    for (uint32_t i = 0; i < a->n; i++)
        if (a->t0[i] >= lo && a->t1[i] <= hi)
            ms_dvec_push(s, a->t1[i] - a->t0[i]);
}

static void add_all(ms_dvec *s, const op_run *a)
{
    for (uint32_t i = 0; i < a->n; i++)
        ms_dvec_push(s, a->t1[i] - a->t0[i]);
}

/* `busy` ops on one stream beside `probe` ops on the other, submitted
 * together; the probe ops that ran wholly inside the busy span are samples. */
static int beside(ms_exec *x, const ms_calib *c, int probe_copies, uint32_t n_probe, uint32_t n_busy, ms_dvec *s,
                  ms_err *err)
{
    op_run probe = run_alloc(n_probe), busy = run_alloc(n_busy);
    op_run *cp = probe_copies ? &probe : &busy, *ex = probe_copies ? &busy : &probe;
    int rc = submit_copies(x, c, cp, err) || submit_experts(x, c, ex, err) || wait_all(x, cp, err) ||
             wait_all(x, ex, err);
    if (!rc)
        add_inside(s, &probe, &busy);
    run_free(&probe);
    run_free(&busy);
    return rc;
}

/* n ops alone on their stream. */
static int alone(ms_exec *x, const ms_calib *c, int copies, uint32_t n, ms_dvec *s, ms_err *err)
{
    op_run r = run_alloc(n);
    int rc = (copies ? submit_copies(x, c, &r, err) : submit_experts(x, c, &r, err)) || wait_all(x, &r, err);
    if (!rc)
        add_all(s, &r);
    run_free(&r);
    return rc;
}

/* How many ops of duration `busy_s` keep a stream busy through `n_probe`
 * ops of duration `probe_s` on the other, slowed up to x3 (at least `least`);
 * n_probe shrinks (to 1) when that needs more than PROBE_MAX_OPS. */
static void size_phase(double probe_s, double busy_s, uint32_t least, uint32_t *n_probe, uint32_t *n_busy)
{
    double per = 3 * probe_s / busy_s;
    if (*n_probe * per + 1 > PROBE_MAX_OPS)
        *n_probe = per + 1 > PROBE_MAX_OPS ? 1 : (uint32_t)((PROBE_MAX_OPS - 1) / per);
    double n = ceil(*n_probe * per) + 1;
    *n_busy = n > PROBE_MAX_OPS ? PROBE_MAX_OPS : n < least ? least : (uint32_t)n;
}

static double slowdown(double together, double alone)
{
    return alone > 0 ? together / alone : 0;
}

/* The profile's contention term: the slowdown beyond 1, never negative. */
static double contention_of(double busy, double alone_s)
{
    double r = slowdown(busy, alone_s);
    return r > 1 ? r - 1 : 0;
}

static int contention_rounds(ms_exec *x, ms_calib *c, ms_dvec *s, int rounds, ms_err *err)
{
    uint32_t K = c->rotation;
    int rc = 0;
    for (int r = 0; r < rounds && !rc; r++) {
        rc = alone(x, c, 1, K, &s[0], err) || alone(x, c, 0, K, &s[2], err);
        if (rc)
            break;
        /* sized from the alone times so far: on a GPU a copy can take 50x a 1-token expert op */
        double cs = median(s[0].v, (int)s[0].n), es = median(s[2].v, (int)s[2].n);
        uint32_t nc = K, ne = K, busy_e, busy_c;
        size_phase(cs, es, 3 * K, &nc, &busy_e);
        size_phase(es, cs, 2 * K, &ne, &busy_c);
        rc = beside(x, c, 1, nc, busy_e, &s[1], err) || beside(x, c, 0, ne, busy_c, &s[3], err);
    }
    return rc;
}

/* The profile's [contention] figures at 1 token (memory-bound). */
static int measure_contention(ms_exec *x, ms_calib *c, FILE *progress, ms_err *err)
{
    uint32_t K = c->rotation;
    if (K < 2 || K > 32)
        return ms_fail(err, "calibrate: contention probe over %u experts (2 .. 32)", K);
    if (c->set_cold && c->set_cold(x, 0))
        return ms_fail(err, "calibrate: contention probe: cannot turn the backend's cold timing off");
    op_run resident = run_alloc(K);
    ms_op load = make_op(MS_OP_COPY, 0, 0, c->expert_bytes, 0);
    int rc = 0;
    for (uint32_t i = 0; i < K && !rc; i++) {
        load.expert = i;
        rc = ms_exec_submit(x, &load, &resident.ev[i], err);
    }
    rc = rc || wait_all(x, &resident, err);
    run_free(&resident);
    ms_dvec s[4] = {{0}}; /* copy alone, copy beside compute, expert alone, expert beside copies */
    int rounds = c->reps < 16 ? c->reps : 16;
    rc = rc || contention_rounds(x, c, s, rounds, err);
    for (uint32_t i = 0; i < K && !rc; i++)
        rc = ms_exec_release(x, 0, i, err);
    if (!rc && c->set_cold && c->set_cold(x, 1))
        rc = ms_fail(err, "calibrate: contention probe: cannot turn the backend's cold timing back on");
    if (!rc && (!s[1].n || !s[3].n))
        rc = ms_fail(err, "calibrate: contention probe: no op ran wholly beside the other stream (%zu copies, %zu "
                     "expert ops); the backend may serialise its streams", s[1].n, s[3].n);
    if (!rc) {
        double *m[4] = {&c->cont_copy_alone_s, &c->cont_copy_busy_s, &c->cont_expert_alone_s, &c->cont_expert_busy_s};
        for (int i = 0; i < 4; i++)
            *m[i] = median(s[i].v, (int)s[i].n);
        c->contention_samples = (int)(s[1].n < s[3].n ? s[1].n : s[3].n);
        c->copy_contention = contention_of(c->cont_copy_busy_s, c->cont_copy_alone_s);
        c->compute_contention = contention_of(c->cont_expert_busy_s, c->cont_expert_alone_s);
        if (progress)
            fprintf(progress, "measured copy/compute contention at 1 token: %d rounds over %u experts\n", rounds, K);
    }
    for (int i = 0; i < 4; i++)
        free(s[i].v);
    return rc;
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

int ms_calib_run(ms_exec *x, double max_bytes, int reps, ms_calib *c, FILE *progress, ms_err *err)
{
    if (!x->ops->time_copy || !x->ops->time_expert)
        return ms_fail(err, "calibrate: the %s executor has no calibration probes (a real backend is needed)",
                       x->ops->name);
    c->reps = reps;
    c->nsizes = ms_calib_sizes(max_bytes, c->sizes);
    c->ntokens = ms_calib_tokens(c->max_tokens, c->tokens);
    if (c->nsizes < 2)
        return ms_fail(err, "calibrate: --max-bytes %.0f leaves %d copy size(s); at least 16 KiB is needed", max_bytes,
                       c->nsizes);
    if (!c->rotation)
        c->rotation = ms_calib_rotation(c->expert_bytes);
    if (ms_exec_begin(x, err) || measure_copies(x, c, progress, err) || measure_tokens(x, c, progress, err) ||
        measure_overlap(x, c, progress, err) || measure_contention(x, c, progress, err))
        return -1;
    return ms_calib_fit(c, err);
}

/* ---- output ---- */

static void fmt_bytes(double b, char *buf, size_t cap)
{
    if (b >= KIB * KIB * KIB)
        snprintf(buf, cap, "%g GiB", b / (KIB * KIB * KIB));
    else if (b >= KIB * KIB)
        snprintf(buf, cap, "%g MiB", b / (KIB * KIB));
    else
        snprintf(buf, cap, "%g KiB", b / KIB);
}

void ms_calib_print(const ms_calib *c, FILE *out)
{
    static const char *const names[] = {"H2D pinned", "D2H pinned", "H2D pageable", "D2H pageable"};
    fprintf(out, "%-14s %10s %14s %14s %8s\n", "copy", "bytes", "measured_us", "fitted_us", "resid");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        for (int i = 0; i < c->nsizes; i++) {
            char b[32];
            fmt_bytes(c->sizes[i], b, sizeof b);
            double f = ms_fit_copy_eval(&c->copy[k], c->sizes[i]);
            fprintf(out, "%-14s %10s %14.3f %14.3f %+7.1f%%\n", names[k], b, c->copy_s[k][i] * 1e6, f * 1e6,
                    100 * (f - c->copy_s[k][i]) / c->copy_s[k][i]);
        }
    fprintf(out, "\n%-14s %8s %14s %14s %8s %12s\n", "compute", "tokens", "measured_ms", "fitted_ms", "resid",
            "GFLOP/s");
    const struct { const char *name; const double *s; const ms_fit_roof *f; double bytes, params; } rows[] = {
        {"expert FFN", c->expert_s, &c->gpu, c->expert_bytes, c->expert_params},
        {"dense", c->dense_s, &c->gpu, c->dense_bytes, c->dense_params},
        {"CPU expert", c->cpu_s, &c->cpu, c->expert_bytes, c->expert_params},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (int i = 0; i < c->ntokens; i++) {
            double f = ms_fit_roof_eval(rows[r].f, rows[r].bytes, rows[r].params, c->tokens[i]);
            fprintf(out, "%-14s %8.0f %14.4f %14.4f %+7.1f%% %12.2f\n", rows[r].name, c->tokens[i],
                    rows[r].s[i] * 1e3, f * 1e3, 100 * (f - rows[r].s[i]) / rows[r].s[i],
                    2 * rows[r].params * c->tokens[i] / rows[r].s[i] / 1e9);
        }
    fprintf(out, "\nfits (residuals relative: RMS / max)\n");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        fprintf(out, "  %-14s latency %.3f us, bandwidth %.2f GB/s   (%.1f%% / %.1f%%)\n", names[k],
                c->copy[k].latency_s * 1e6, c->copy[k].bw / 1e9, 100 * c->copy[k].rms_rel, 100 * c->copy[k].max_rel);
    const struct { const char *name; const ms_fit_roof *f; } fits[] = {
        {"expert FFN", &c->expert}, {"dense", &c->dense}, {"CPU expert", &c->cpu}};
    for (size_t r = 0; r < 3; r++) {
        if (r == 1 && !(c->dense_params > 0))
            continue;
        fprintf(out, "  %-14s launch %.1f us, bandwidth %.2f GB/s, %.2f GFLOP/s, %d memory-bound point(s)   "
                "(%.1f%% / %.1f%%)\n", fits[r].name, fits[r].f->launch_s * 1e6, fits[r].f->bw / 1e9,
                fits[r].f->flops / 1e9, fits[r].f->mem_points, 100 * fits[r].f->rms_rel, 100 * fits[r].f->max_rel);
    }
    fprintf(out, "  dense predicted by the expert fit: %.1f%% / %.1f%%\n", 100 * c->dense_pred_rms_rel,
            100 * c->dense_pred_max_rel);
    fprintf(out, "  [gpu] joint    launch %.1f us, bandwidth %.2f GB/s, %.2f GFLOP/s, %d memory-bound of %d   (%.1f%% / "
            "%.1f%%; expert %.1f%% / %.1f%%, dense %.1f%% / %.1f%%)\n", c->gpu.launch_s * 1e6, c->gpu.bw / 1e9,
            c->gpu.flops / 1e9, c->gpu.mem_points, c->gpu.n, 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel,
            100 * c->gpu_expert_rms_rel, 100 * c->gpu_expert_max_rel, 100 * c->gpu_dense_rms_rel,
            100 * c->gpu_dense_max_rel);
    fprintf(out, "overlap (%u tokens): copy alone %.3f ms, with compute %.3f ms (x%.2f); expert alone %.3f ms, with "
            "copy %.3f ms (x%.2f)\n", c->max_tokens, c->copy_alone_s * 1e3, c->copy_together_s * 1e3,
            slowdown(c->copy_together_s, c->copy_alone_s), c->expert_alone_s * 1e3, c->expert_together_s * 1e3,
            slowdown(c->expert_together_s, c->expert_alone_s));
    fprintf(out, "contention (1 token, %u experts rotated, %d+ samples): copy alone %.3f ms, compute busy %.3f ms "
            "(copy_contention %.3f); expert alone %.3f ms, copies busy %.3f ms (compute_contention %.3f)\n",
            c->rotation, c->contention_samples, c->cont_copy_alone_s * 1e3, c->cont_copy_busy_s * 1e3,
            c->copy_contention, c->cont_expert_alone_s * 1e3, c->cont_expert_busy_s * 1e3, c->compute_contention);
}

static void write_points(FILE *fp, const char *what, const double *x, const double *y, int n, const char *unit)
{
    fprintf(fp, "# %s (%s: seconds):", what, unit);
    for (int i = 0; i < n; i++)
        fprintf(fp, "%s %.0f:%.4g", i % 4 ? "" : "\n#  ", x[i], y[i]);
    fputc('\n', fp);
}

/* "#   text" in lines under 120 characters (inih reads lines up to 198), split at spaces. */
static void write_wrapped(FILE *fp, const char *text)
{
    while (*text) {
        size_t n = strlen(text);
        if (n > 110) {
            n = 110;
            while (n > 40 && text[n] != ' ')
                n--;
        }
        fprintf(fp, "#   %.*s\n", (int)n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

static void write_comments(FILE *fp, const ms_calib *c, const ms_calib_meta *m)
{
    static const char *const names[] = {"H2D pinned", "D2H pinned", "H2D pageable", "D2H pageable"};
    fprintf(fp, "# Platform profile measured by:\n");
    write_wrapped(fp, m->command);
    if (m->conditions)
        fprintf(fp, "# Conditions: %s\n", m->conditions);
    fprintf(fp, "# Expert: %.0f bytes, %.0f params; dense stand-in: %.0f bytes, %.0f params; %d reps (medians).\n",
            c->expert_bytes, c->expert_params, c->dense_bytes, c->dense_params, c->reps);
    fprintf(fp, "# Fit residuals, (model - measured) / measured, RMS / max:\n");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        fprintf(fp, "#   %-13s latency %.4g s, bw %.4g B/s: %.2f%% / %.2f%% over %d sizes\n", names[k],
                c->copy[k].latency_s, c->copy[k].bw, 100 * c->copy[k].rms_rel, 100 * c->copy[k].max_rel,
                c->copy[k].n);
    const struct { const char *name; const ms_fit_roof *f; } fits[] = {
        {"expert FFN", &c->expert}, {"dense", &c->dense}, {"CPU expert", &c->cpu}};
    for (int r = 0; r < 3; r++)
        if (r != 1 || c->dense_params > 0)
            fprintf(fp, "#   %-13s launch %.4g s, bw %.4g B/s, %.4g FLOP/s, %d memory-bound: %.2f%% / %.2f%%\n",
                    fits[r].name, fits[r].f->launch_s, fits[r].f->bw, fits[r].f->flops, fits[r].f->mem_points,
                    100 * fits[r].f->rms_rel, 100 * fits[r].f->max_rel);
    fprintf(fp, "#   dense predicted by the expert fit: %.2f%% / %.2f%%\n", 100 * c->dense_pred_rms_rel,
            100 * c->dense_pred_max_rel);
    fprintf(fp, "#   [gpu] joint   launch %.4g s, bw %.4g B/s, %.4g FLOP/s, %d memory-bound of %d: %.2f%% / %.2f%% "
            "(expert %.2f%% / %.2f%%, dense %.2f%% / %.2f%%)\n", c->gpu.launch_s, c->gpu.bw, c->gpu.flops,
            c->gpu.mem_points, c->gpu.n, 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel, 100 * c->gpu_expert_rms_rel,
            100 * c->gpu_expert_max_rel, 100 * c->gpu_dense_rms_rel, 100 * c->gpu_dense_max_rel);
    fprintf(fp, "# Overlap (%u tokens): copy alone %.4g s, with compute %.4g s (x%.3f); expert alone %.4g s, "
            "with a copy %.4g s (x%.3f)\n", c->max_tokens, c->copy_alone_s, c->copy_together_s,
            slowdown(c->copy_together_s, c->copy_alone_s), c->expert_alone_s, c->expert_together_s,
            slowdown(c->expert_together_s, c->expert_alone_s));
    fprintf(fp, "# Contention (1 token, %u experts rotated, medians of >= %d ops): copy alone %.4g s, beside expert "
            "ops %.4g s;\n#   expert op alone %.4g s, beside copies %.4g s\n", c->rotation, c->contention_samples,
            c->cont_copy_alone_s, c->cont_copy_busy_s, c->cont_expert_alone_s, c->cont_expert_busy_s);
    fprintf(fp, "# Measured points:\n");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        write_points(fp, names[k], c->sizes, c->copy_s[k], c->nsizes, "bytes");
    write_points(fp, "expert FFN", c->tokens, c->expert_s, c->ntokens, "tokens");
    write_points(fp, "dense stand-in", c->tokens, c->dense_s, c->ntokens, "tokens");
    write_points(fp, "CPU expert", c->tokens, c->cpu_s, c->ntokens, "tokens");
}

static void write_sections(FILE *fp, const ms_calib *c, const ms_calib_meta *m)
{
    fprintf(fp, "[platform]\nname = %s\ndescription = %s\n\n", m->name, m->description);
    fprintf(fp, "[gpu]\ngpu_mem_bytes = %.0f\nhbm_bw = %.6g\ngpu_flops = %.6g\nlaunch_s = %.6g\n\n",
            m->gpu_mem_bytes, c->gpu.bw, c->gpu.flops, c->gpu.launch_s);
    fprintf(fp, "[link]\nh2d_bw = %.6g\nh2d_latency_s = %.6g\nd2h_bw = %.6g\nd2h_latency_s = %.6g\n"
            "pageable_bw = %.6g\ncopy_engines = 1\n\n", c->copy[MS_CAL_H2D].bw, c->copy[MS_CAL_H2D].latency_s,
            c->copy[MS_CAL_D2H].bw, c->copy[MS_CAL_D2H].latency_s, c->copy[MS_CAL_H2D_PAGEABLE].bw);
    fprintf(fp, "[cpu]\ncpu_cores = %u\ndram_bw = %.6g\ncpu_flops_per_core = %.6g\ncpu_launch_s = %.6g\n\n",
            m->cpu_threads, c->cpu.bw, c->cpu.flops / m->cpu_threads, c->cpu.launch_s);
    fprintf(fp, "[ssd]\nssd_bw = 7GB/s\nssd_latency_s = 8e-5\n\n[policy]\npolicy_op_s = 1e-9\n\n");
    fprintf(fp, "[contention]\ncopy_contention = %.4g\ncompute_contention = %.4g\n\n", c->copy_contention,
            c->compute_contention);
}

static const char *roof_status(const ms_fit_roof *f)
{
    return f->mem_points ? "measured" : "derived";
}

static void write_source(FILE *fp, const ms_calib *c, const ms_calib_meta *m)
{
    const ms_fit_copy *h = &c->copy[MS_CAL_H2D], *d = &c->copy[MS_CAL_D2H], *p = &c->copy[MS_CAL_H2D_PAGEABLE];
    fprintf(fp, "[source]\n");
    fprintf(fp, "gpu_mem_bytes = estimate host MemTotal (the host backend's device memory is host memory)\n");
    fprintf(fp, "hbm_bw = %s joint expert FFN + dense roofline fit, %d memory-bound of %d points%s, resid RMS "
            "%.2f%% max %.2f%%\n", roof_status(&c->gpu), c->gpu.mem_points, c->gpu.n,
            c->gpu.mem_points ? "" : " (none: crossover set at the least intense point)", 100 * c->gpu.rms_rel,
            100 * c->gpu.max_rel);
    fprintf(fp, "gpu_flops = measured joint expert FFN + dense roofline fit over tokens %.0f..%.0f, resid RMS %.2f%% "
            "max %.2f%%\n", c->tokens[0], c->tokens[c->ntokens - 1], 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel);
    fprintf(fp, "launch_s = measured intercept of the joint expert FFN + dense roofline fit, resid RMS %.2f%% max "
            "%.2f%%\n", 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel);
    fprintf(fp, "h2d_bw = measured fit of %d pinned H2D sizes (pinned: %s), resid RMS %.2f%% max %.2f%%\n", h->n,
            m->pinned_note, 100 * h->rms_rel, 100 * h->max_rel);
    fprintf(fp, "h2d_latency_s = measured intercept of the pinned H2D fit, resid RMS %.2f%% max %.2f%%\n",
            100 * h->rms_rel, 100 * h->max_rel);
    fprintf(fp, "d2h_bw = measured fit of %d pinned D2H sizes (pinned: %s), resid RMS %.2f%% max %.2f%%\n", d->n,
            m->pinned_note, 100 * d->rms_rel, 100 * d->max_rel);
    fprintf(fp, "d2h_latency_s = measured intercept of the pinned D2H fit, resid RMS %.2f%% max %.2f%%\n",
            100 * d->rms_rel, 100 * d->max_rel);
    fprintf(fp, "pageable_bw = measured fit of %d pageable H2D sizes, resid RMS %.2f%% max %.2f%%\n", p->n,
            100 * p->rms_rel, 100 * p->max_rel);
    fprintf(fp, "copy_engines = derived the backend has one copy stream\n");
    fprintf(fp, "cpu_cores = derived threads of the backend's CPU expert stream\n");
    fprintf(fp, "dram_bw = %s CPU expert roofline fit, %d memory-bound of %d points, resid RMS %.2f%% max %.2f%%\n",
            roof_status(&c->cpu), c->cpu.mem_points, c->cpu.n, 100 * c->cpu.rms_rel, 100 * c->cpu.max_rel);
    fprintf(fp, "cpu_flops_per_core = measured CPU expert roofline fit / cpu_cores, resid RMS %.2f%% max %.2f%%\n",
            100 * c->cpu.rms_rel, 100 * c->cpu.max_rel);
    fprintf(fp, "cpu_launch_s = measured intercept of the CPU expert roofline fit\n");
    fprintf(fp, "ssd_bw = estimate not measured: NVMe PCIe 4.0 x4 sequential read as in h100-pcie5\n");
    fprintf(fp, "ssd_latency_s = estimate not measured: ~80 us NVMe read latency as in h100-pcie5\n");
    fprintf(fp, "policy_op_s = estimate not measured: ~1 ns of host time per multiply-add of policy work\n");
    fprintf(fp, "copy_contention = measured median copy beside 1-token expert ops / alone - 1 (%.4g / %.4g s), over "
            "%u experts\n", c->cont_copy_busy_s, c->cont_copy_alone_s, c->rotation);
    fprintf(fp, "compute_contention = measured median 1-token expert op beside copies / alone - 1 (%.4g / %.4g s), "
            "over %u experts\n", c->cont_expert_busy_s, c->cont_expert_alone_s, c->rotation);
}

int ms_calib_write_profile(const ms_calib *c, const ms_calib_meta *m, const char *path, ms_err *err)
{
    ms_out *o = ms_out_open("calibrate: --out", path, err);
    if (!o)
        return -1;
    FILE *fp = ms_out_fp(o);
    fprintf(fp, "; written by moesim %s (commit %s)\n", ms_version(), ms_commit());
    write_comments(fp, c, m);
    write_sections(fp, c, m);
    write_source(fp, c, m);
    return ms_out_commit(o, err);
}

static void csv_series(FILE *fp, const char *name, const double *x, const double *y, int n, int by_bytes,
                       double (*eval)(const void *, double), const void *f)
{
    for (int i = 0; i < n; i++) {
        double m = eval(f, x[i]);
        fprintf(fp, "%s,%.0f,%.0f,%.9g,%.9g,%.6f\n", name, by_bytes ? x[i] : 0, by_bytes ? 0 : x[i], y[i], m,
                (m - y[i]) / y[i]);
    }
}

static double eval_copy(const void *f, double x)
{
    return ms_fit_copy_eval(f, x);
}

typedef struct {
    const ms_fit_roof *f;
    double bytes, params;
} roof_ctx;

static double eval_roof(const void *p, double x)
{
    const roof_ctx *r = p;
    return ms_fit_roof_eval(r->f, r->bytes, r->params, x);
}

int ms_calib_write_csv(const ms_calib *c, const char *path, ms_err *err)
{
    static const char *const names[] = {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"};
    ms_out *o = ms_out_open("calibrate: --csv", path, err);
    if (!o)
        return -1;
    FILE *fp = ms_out_fp(o);
    fprintf(fp, "# moesim %s commit %s\n", ms_version(), ms_commit());
    fputs("series,bytes,tokens,seconds,fitted_s,rel_residual\n", fp);
    for (int k = 0; k < MS_CAL_COPIES; k++)
        csv_series(fp, names[k], c->sizes, c->copy_s[k], c->nsizes, 1, eval_copy, &c->copy[k]);
    roof_ctx e = {&c->gpu, c->expert_bytes, c->expert_params};
    roof_ctx d = {&c->gpu, c->dense_bytes, c->dense_params};
    roof_ctx u = {&c->cpu, c->expert_bytes, c->expert_params};
    csv_series(fp, "expert_ffn", c->tokens, c->expert_s, c->ntokens, 0, eval_roof, &e);
    csv_series(fp, "dense", c->tokens, c->dense_s, c->ntokens, 0, eval_roof, &d);
    csv_series(fp, "cpu_expert", c->tokens, c->cpu_s, c->ntokens, 0, eval_roof, &u);
    return ms_out_commit(o, err);
}
