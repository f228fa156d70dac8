/* Calibration: the measurement plan and the measurements through the
 * executor contract (calibrate.h); the fits are in calibrate_fit.c, the
 * outputs in calibrate_out.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "sim/apps/calibrate.h"
#include "sim/apps/calibrate_parts.h"
#include "sim/core/dvec.h"

#define KIB 1024.0

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

double ms_calib_slowdown(double together, double alone)
{
    return alone > 0 ? together / alone : 0;
}

/* The profile's contention term: the slowdown beyond 1, never negative. */
static double contention_of(double busy, double alone_s)
{
    double r = ms_calib_slowdown(busy, alone_s);
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
