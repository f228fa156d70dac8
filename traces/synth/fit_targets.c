/* Fitting routing knobs to published locality targets (contract in
 * fit_targets.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>

#include "sim/core/out.h"
#include "traces/synth/fit.h"
#include "traces/synth/fit_targets.h"

#define FT_DECODE_MIX 0.4   /* decode_mix for locality t >= 0: the map of `trace fit` (fit_search.c) */
#define FT_MAX_RECALL 0.95  /* at 1 no decode row would draw a fresh gate */
#define FT_MAX_DRIFT 0.2    /* a new preference every 5 rows at most: drift, not noise */
#define FT_SIZE_TOL 0.02    /* simplex size at which the search stops */

void ms_fit_targets_default_options(ms_fit_targets_options *o)
{
    o->seed = 1;
    o->trial_seeds = 2;
    o->trial_requests = 16;
    o->max_evals = 80;
}

typedef struct {
    const ms_model *m;
    const ms_targets *ts;
    const ms_fit_targets_options *o;
    ms_gen_params base;
    double last[MS_TARGETS_MAX];
    uint32_t evals, generations;
    int failed;
    ms_err *err;
} ft_ctx;

static double clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* The knobs of point x (fit_targets.h: the maps keep each in its range). */
static void set_knobs(ms_gen_params *p, const double *x)
{
    p->pref_alpha = clamp(exp(x[0]), 0.01, 100);
    double t = tanh(x[1]);
    p->decode_reuse = t >= 0 ? t : 0;
    p->decode_mix = t >= 0 ? FT_DECODE_MIX : FT_DECODE_MIX * (1 + t);
    p->decode_recall = FT_MAX_RECALL / (1 + exp(-x[2]));
    p->pref_drift = FT_MAX_DRIFT / (1 + exp(-x[3]));
}

/* logit(v / max), v / max clamped to floor .. 1 - 1e-3 */
static double logit_of(double v, double max, double floor)
{
    double r = clamp(v / max, floor, 1 - 1e-3);
    return log(r / (1 - r));
}

/* The point of the knobs in p (the inverse maps, clamped off the ends). */
static void point_of(const ms_gen_params *p, double *x)
{
    x[0] = log(clamp(p->pref_alpha, 0.01, 100));
    double t = p->decode_reuse > 0 ? p->decode_reuse : p->decode_mix / FT_DECODE_MIX - 1;
    x[1] = atanh(clamp(t, -0.999, 0.999));
    x[2] = logit_of(p->decode_recall, FT_MAX_RECALL, 1e-3);
    x[3] = logit_of(p->pref_drift, FT_MAX_DRIFT, 1e-2); /* drift 0 starts at 0.002: a few renewals a request */
}

/* Trial means of every target at knobs p into out[]. */
static int measure(ft_ctx *c, const ms_gen_params *knobs, double *out)
{
    ms_gen_params p = *knobs;
    p.requests = c->o->trial_requests;
    p.layer_steps = 0;
    for (int i = 0; i < c->ts->n; i++)
        out[i] = 0;
    for (uint32_t t = 0; t < c->o->trial_seeds; t++) {
        p.seed = c->o->seed + 1 + t;
        ms_stats *s = ms_fit_stats_of_gen(&p, c->m, c->err);
        if (!s)
            return -1;
        c->generations++;
        for (int i = 0; i < c->ts->n; i++)
            out[i] += ms_target_measure(&c->ts->t[i], s) / c->o->trial_seeds;
        ms_stats_free(s);
    }
    return 0;
}

static double cost_of(const ms_targets *ts, const double *v)
{
    double sum = 0;
    for (int i = 0; i < ts->n; i++) {
        const ms_target *t = &ts->t[i];
        double tol = t->tol_relative ? t->tolerance * fabs(t->value) : t->tolerance;
        double z = isfinite(v[i]) ? (v[i] - t->value) / (tol > 0 ? tol : 1e-3) : 1e3;
        sum += z * z;
    }
    return sum;
}

static double objective(const gsl_vector *xv, void *user)
{
    ft_ctx *c = user;
    if (c->failed)
        return GSL_POSINF;
    double x[MS_FIT_TARGET_KNOBS];
    for (int i = 0; i < MS_FIT_TARGET_KNOBS; i++)
        x[i] = gsl_vector_get(xv, (size_t)i);
    ms_gen_params p = c->base;
    set_knobs(&p, x);
    c->evals++;
    if (measure(c, &p, c->last)) {
        c->failed = 1;
        return GSL_POSINF;
    }
    return cost_of(c->ts, c->last);
}

int ms_fit_targets(const ms_model *m, const ms_targets *ts, const ms_fit_targets_options *o,
                   ms_fit_targets_result *r, ms_err *err)
{
    memset(r, 0, sizeof *r);
    if (strcmp(ts->model, m->name))
        return ms_fail(err, "trace fit --against: %s is for model %s, not %s", ts->file, ts->model, m->name);
    ft_ctx c = {.m = m, .ts = ts, .o = o, .err = err};
    if (ms_gen_model_defaults(&c.base, m, err))
        return -1;
    if (measure(&c, &c.base, r->start_measured))
        return -1;
    r->start_cost = cost_of(ts, r->start_measured);

    gsl_vector *x = gsl_vector_alloc(MS_FIT_TARGET_KNOBS), *step = gsl_vector_alloc(MS_FIT_TARGET_KNOBS);
    double x0[MS_FIT_TARGET_KNOBS];
    point_of(&c.base, x0);
    /* first simplex steps: drift's reaches 0.014 from 0.002 (segments of tens of rows) */
    const double step0[MS_FIT_TARGET_KNOBS] = {1.0, 1.0, 1.0, 2.0};
    for (int i = 0; i < MS_FIT_TARGET_KNOBS; i++) {
        gsl_vector_set(x, (size_t)i, x0[i]);
        gsl_vector_set(step, (size_t)i, step0[i]);
    }
    gsl_multimin_function f = {.f = objective, .n = MS_FIT_TARGET_KNOBS, .params = &c};
    gsl_multimin_fminimizer *mn = gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2,
                                                               MS_FIT_TARGET_KNOBS);
    gsl_multimin_fminimizer_set(mn, &f, x, step);
    while (!c.failed && c.evals < o->max_evals) {
        if (gsl_multimin_fminimizer_iterate(mn))
            break;
        if (gsl_multimin_test_size(gsl_multimin_fminimizer_size(mn), FT_SIZE_TOL) == GSL_SUCCESS)
            break;
    }
    int rc = 0;
    if (c.failed) {
        rc = -1;
    } else {
        double best[MS_FIT_TARGET_KNOBS];
        for (int i = 0; i < MS_FIT_TARGET_KNOBS; i++)
            best[i] = gsl_vector_get(mn->x, (size_t)i);
        r->p = c.base;
        set_knobs(&r->p, best);
        /* the written values are rounded: measure what the profile will say */
        char buf[32];
        double *fitted[] = {&r->p.pref_alpha, &r->p.decode_reuse, &r->p.decode_mix, &r->p.decode_recall,
                           &r->p.pref_drift};
        for (size_t i = 0; i < sizeof fitted / sizeof fitted[0]; i++) {
            snprintf(buf, sizeof buf, "%.4g", *fitted[i]);
            *fitted[i] = strtod(buf, NULL);
        }
        rc = measure(&c, &r->p, r->measured);
        r->cost = cost_of(ts, r->measured);
        if (!rc && r->cost > r->start_cost) { /* never worse than the profile's knobs */
            r->p = c.base;
            memcpy(r->measured, r->start_measured, sizeof r->measured);
            r->cost = r->start_cost;
        }
    }
    r->evals = c.evals;
    r->generations = c.generations;
    gsl_multimin_fminimizer_free(mn);
    gsl_vector_free(x);
    gsl_vector_free(step);
    return rc;
}

int ms_fit_targets_write(const ms_model *m, const ms_targets *ts, const ms_fit_targets_options *o,
                         const ms_fit_targets_result *r, const char *out_path, ms_err *err)
{
    ms_out *out = ms_out_open("trace fit -o", out_path, err);
    if (!out)
        return -1;
    FILE *f = ms_out_fp(out);
    char names[600] = "";
    size_t used = 0;
    for (int i = 0; i < ts->n && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? " " : "", ts->t[i].name);
    fprintf(f, "; moesim trace fit --against %s --seed %llu --trial-seeds %u --trial-requests %llu --max-evals %u\n"
               "; %u evaluations, %u trial generations; cost (sum of squared errors in tolerances) %.4g -> %.4g\n"
               "; target: value, trials at the start, trials at the result\n",
            m->name, (unsigned long long)o->seed, o->trial_seeds, (unsigned long long)o->trial_requests,
            o->max_evals, r->evals, r->generations, r->start_cost, r->cost);
    for (int i = 0; i < ts->n; i++)
        fprintf(f, ";   %s: %.3f, %.3f, %.3f\n", ts->t[i].name, ts->t[i].value, r->start_measured[i], r->measured[i]);
    fprintf(f, "[routing]\npref_alpha = %.4g\ndecode_reuse = %.4g\ndecode_mix = %.4g\ndecode_recall = %.4g\n"
               "pref_drift = %.4g\n\n",
            r->p.pref_alpha, r->p.decode_reuse, r->p.decode_mix, r->p.decode_recall, r->p.pref_drift);
    const char *knobs[] = {"pref_alpha", "decode_reuse", "decode_mix", "decode_recall", "pref_drift"};
    fprintf(f, "[source]\n");
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
        fprintf(f, "routing.%s = fitted to targets/%s.ini (%.80s) by moesim trace fit --against %s\n", knobs[i],
                m->name, names, m->name);
    return ms_out_commit(out, err);
}
