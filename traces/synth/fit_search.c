/* Coordinate search of the generator's knobs (traces/synth/fit.h, "searched"):
 * each knob is moved, by GSL's Brent root finder on seeded trial generations,
 * until the statistic it controls matches the source's. */
#include <math.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>
#include <gsl/gsl_sf_psi.h>

#include "traces/synth/fit_search.h"

#define FIT_MAX_ITERS 12         /* Brent iterations per knob and pass */
#define FIT_DECODE_MIX 0.4       /* decode_mix for locality t >= 0 (the generator's default) */
#define FIT_MAX_LAYER_CORR 0.9   /* above, the pure transition tilt starves experts the maps rarely reach */
#define FIT_MAX_RECALL 0.95      /* at 1 no decode row would draw a fresh gate */

/* search order:
 * weight_power shapes the weights the layer tilt follows, so it
 * comes before layer_corr */
typedef enum { S_GATE, S_PREF, S_WEIGHT, S_TOKEN, S_LOCALITY, S_RECALL, S_LAYER, S_TRANS, N_SEARCH } search_knob;

typedef struct {
    const char *knob, *statistic;
    double lo, hi;       /* search range, in the knob's search scale */
    int log_scale;
} knob_def;

static const knob_def defs[N_SEARCH] = {
    [S_GATE] = {"gate_alpha", "h_req", 0.01, 1000, 1},
    [S_PREF] = {"pref_alpha", "h_trace - h_req", 0.01, 100, 1},
    [S_LOCALITY] = {"decode_reuse / decode_mix", "reuse_prev", -1, 1, 0},
    [S_RECALL] = {"decode_recall", "reuse_w8", 0, FIT_MAX_RECALL, 0},
    [S_LAYER] = {"layer_corr", "mi_top1", 0, FIT_MAX_LAYER_CORR, 0},
    [S_TRANS] = {"trans_alpha", "succ_hit", 0.01, 100, 1},
    [S_WEIGHT] = {"weight_power", "hw_iter", 0.05, 20, 1},
    [S_TOKEN] = {"token_repeat", "xreq_overlap", 0, 1, 0},
};

typedef struct {
    ms_fit_result *r;
    const ms_fit_options *o;
    search_knob knob;
    double target;
    ms_fit_stats last;      /* statistics of the last evaluation */
    int failed;
    ms_err *err;
} search_ctx;

static double nan_to(double v, double fallback)
{
    return isnan(v) ? fallback : v;
}

static void set_search_knob(ms_gen_params *p, search_knob k, double x)
{
    switch (k) {
    case S_GATE: p->gate_alpha = exp(x); break;
    case S_PREF: p->pref_alpha = exp(x); break;
    case S_LOCALITY:
        p->decode_reuse = x >= 0 ? x : 0;
        p->decode_mix = x >= 0 ? FIT_DECODE_MIX : FIT_DECODE_MIX * (1 + x);
        break;
    case S_RECALL: p->decode_recall = x; break;
    case S_LAYER: p->layer_corr = x; break;
    case S_TRANS: p->trans_alpha = exp(x); break;
    case S_TOKEN: p->token_repeat = x; break;
    default: p->weight_power = exp(x); break;
    }
}

static double knob_value(const ms_gen_params *p, search_knob k)
{
    switch (k) {
    case S_GATE: return p->gate_alpha;
    case S_PREF: return p->pref_alpha;
    case S_LOCALITY: return p->decode_reuse > 0 ? p->decode_reuse : p->decode_mix / FIT_DECODE_MIX - 1;
    case S_RECALL: return p->decode_recall;
    case S_LAYER: return p->layer_corr;
    case S_TRANS: return p->trans_alpha;
    case S_TOKEN: return p->token_repeat;
    default: return p->weight_power;
    }
}

static double stat_of(const ms_fit_stats *s, search_knob k)
{
    switch (k) {
    case S_GATE: return s->h_req;
    case S_PREF: return s->h_trace - s->h_req;
    case S_LOCALITY: return s->reuse_prev;
    case S_RECALL: return s->reuse_w8;
    case S_LAYER: return s->mi_top1;
    case S_TRANS: return s->succ_hit;
    case S_TOKEN: return s->xreq;
    default: return s->hw_iter;
    }
}

/* Mean statistics over the trial seeds at the current knobs; when shares is
 * not NULL, also the mean activation shares [L][J]. */
static int evaluate(search_ctx *c, ms_fit_stats *out, double *shares)
{
    ms_gen_params p = c->r->p;
    double sum[12] = {0};
    int with_xreq = !isnan(c->r->source.xreq);
    size_t LJ = (size_t)c->r->model.moe_layers * c->r->model.experts;
    double *one_shares = shares ? ms_xcalloc(LJ, sizeof *one_shares) : NULL;
    if (shares)
        memset(shares, 0, LJ * sizeof *shares);
    for (uint32_t t = 0; t < c->o->trial_seeds; t++) {
        p.seed = c->o->seed + 1 + t;
        ms_fit_stats one;
        if (ms_fit_measure_gen(&p, &c->r->model, with_xreq, &one, one_shares, c->err)) {
            free(one_shares);
            return -1;
        }
        for (size_t i = 0; shares && i < LJ; i++)
            shares[i] += one_shares[i] / c->o->trial_seeds;
        double v[12] = {one.hw_iter, one.h_req, one.h_trace, one.reuse_prev, one.reuse_w8,
                        one.reuse_half, one.mi_top1, one.succ_hit, one.h_iter, one.gini, one.xreq,
                        one.xreq_exact};
        for (int i = 0; i < 12; i++)
            sum[i] += nan_to(v[i], 0);
        c->r->trials++;
    }
    free(one_shares);
    double n = c->o->trial_seeds;
    *out = (ms_fit_stats){sum[0] / n, sum[1] / n, sum[2] / n, sum[3] / n, sum[4] / n,
                          sum[5] / n, sum[6] / n, sum[7] / n, sum[8] / n, sum[9] / n,
                          with_xreq ? sum[10] / n : NAN, with_xreq ? sum[11] / n : NAN};
    return 0;
}

static double objective(double x, void *arg)
{
    search_ctx *c = arg;
    if (c->failed)
        return 0;
    set_search_knob(&c->r->p, c->knob, x);
    if (evaluate(c, &c->last, NULL)) {
        c->failed = 1;
        return 0;
    }
    return stat_of(&c->last, c->knob) - c->target;
}

/* Root of stat(x) = target on the knob's range by Brent's method; the nearer
 * end when the target is out of reach.  Leaves the knob set to the answer
 * and records it in the result's list. */
static int search_one(search_ctx *c, search_knob k)
{
    const knob_def *d = &defs[k];
    ms_fit_knob *out = &c->r->searched[k];
    out->knob = d->knob;
    out->statistic = d->statistic;
    c->knob = k;
    c->target = stat_of(&c->r->source, k);
    if (isnan(c->target)) {
        out->skipped = 1;
        out->why = "the source has no such statistic";
        return 0;
    }
    double lo = d->log_scale ? log(d->lo) : d->lo, hi = d->log_scale ? log(d->hi) : d->hi;
    double f_lo = objective(lo, c), f_hi = objective(hi, c);
    if (c->failed)
        return -1;
    if (f_lo * f_hi > 0) {
        int low = fabs(f_lo) < fabs(f_hi);
        set_search_knob(&c->r->p, k, low ? lo : hi);
        out->at_bound = low ? -1 : 1;
        out->value = knob_value(&c->r->p, k);
        return 0;
    }
    out->at_bound = 0;
    gsl_function F = {objective, c};
    gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    gsl_root_fsolver_set(s, &F, lo, hi);
    double x = 0.5 * (lo + hi);
    double tol_f = 0.005 * fabs(c->target) + 1e-4;
    for (int it = 0; it < FIT_MAX_ITERS && !c->failed; it++) {
        if (gsl_root_fsolver_iterate(s))
            break;
        x = gsl_root_fsolver_root(s);
        if (fabs(stat_of(&c->last, k) - c->target) < tol_f)
            break;
        if (gsl_root_test_interval(gsl_root_fsolver_x_lower(s), gsl_root_fsolver_x_upper(s), 1e-3, 1e-3) == GSL_SUCCESS)
            break;
    }
    gsl_root_fsolver_free(s);
    set_search_knob(&c->r->p, k, x);
    out->value = knob_value(&c->r->p, k);
    return c->failed ? -1 : 0;
}

static void skip(ms_fit_result *r, search_knob k, const char *why)
{
    ms_fit_knob *out = &r->searched[k];
    out->knob = defs[k].knob;
    out->statistic = defs[k].statistic;
    out->skipped = 1;
    out->why = why;
}

/* Expected entropy (bits) of a symmetric Dirichlet(a) draw over J experts:
 * (psi(J a + 1) - psi(a + 1)) / ln 2. */
static double dirichlet_entropy_bits(double a, uint32_t J)
{
    return (gsl_sf_psi(J * a + 1) - gsl_sf_psi(a + 1)) / M_LN2;
}

/* pref_alpha by moments, not by search: a request is as much skewer than the
 * whole trace (h_trace - h_req bits) as a Dirichlet(pref_alpha) draw is
 * below log2 J.  (A 1-D search on that gap couples with gate_alpha's on
 * h_req: on a 12-request synthetic source the coordinate search drove both
 * to their bounds.)  gate_alpha's search then matches h_req's level. */
static void estimate_pref_alpha(ms_fit_result *r)
{
    ms_fit_knob *out = &r->searched[S_PREF];
    uint32_t J = r->model.experts;
    out->knob = defs[S_PREF].knob;
    out->statistic = "h_trace - h_req (moments)";
    double gap = r->source.h_trace - r->source.h_req, want = log2((double)J) - gap;
    double lo = log(defs[S_PREF].lo), hi = log(defs[S_PREF].hi);
    if (isnan(gap) || J < 2) {
        out->skipped = 1;
        out->why = "no request entropy to measure";
        return;
    }
    if (dirichlet_entropy_bits(exp(lo), J) >= want) {
        out->at_bound = -1;
        r->p.pref_alpha = exp(lo);
    } else if (dirichlet_entropy_bits(exp(hi), J) <= want) {
        out->at_bound = 1;
        r->p.pref_alpha = exp(hi);
    } else {
        for (int i = 0; i < 60; i++) { /* E[H] grows with a */
            double mid = 0.5 * (lo + hi);
            if (dirichlet_entropy_bits(exp(mid), J) < want)
                lo = mid;
            else
                hi = mid;
        }
        r->p.pref_alpha = exp(0.5 * (lo + hi));
    }
    out->value = r->p.pref_alpha;
}

/* Mean over layers of the total variation distance between two [L][J] share tables. */
static double mean_tv(const double *a, const double *b, uint32_t L, uint32_t J)
{
    double sum = 0;
    for (size_t i = 0; i < (size_t)L * J; i++)
        sum += fabs(a[i] - b[i]);
    return 0.5 * sum / L;
}

/* The popularity is the mean of each row's preference, but a row's top-k
 * of a sharp gate draw does not pick experts in proportion to it, and the
 * layer tilt and the clusters' balancing move the shares further (a layer's
 * top expert can lose a third of its share): the twin's activation shares
 * come out flatter than the popularity it was given.  One multiplicative
 * correction, popularity x source share / twin share per expert (then
 * renormalised per layer), measured on the trial generations, brings them
 * back.  Only where one popularity governs every row: with decode
 * popularities (one-request sources) the decode rows follow their own.
 * Kept only when it brings the shares closer: where most rows are copies
 * (loops, repeated tokens) the popularity no longer sets the shares. */
static int calibrate_popularity(search_ctx *c)
{
    ms_fit_result *r = c->r;
    uint32_t L = r->model.moe_layers, J = r->model.experts;
    size_t LJ = (size_t)L * J;
    double *twin = ms_xcalloc(LJ, sizeof *twin), *before = ms_xcalloc(LJ, sizeof *before);
    int rc = evaluate(c, &c->last, twin);
    if (rc == 0) {
        r->calib_tv[0] = mean_tv(r->source_freq, twin, L, J);
        memcpy(before, r->popularity, LJ * sizeof *before);
        const double eps = 1e-6; /* an expert neither uses keeps its popularity */
        for (uint32_t l = 0; l < L; l++) {
            double *pop = r->popularity + (size_t)l * J, sum = 0;
            for (uint32_t j = 0; j < J; j++) {
                size_t i = (size_t)l * J + j;
                pop[j] *= (r->source_freq[i] + eps) / (twin[i] + eps);
                sum += pop[j];
            }
            for (uint32_t j = 0; sum > 0 && j < J; j++)
                pop[j] /= sum;
        }
        rc = evaluate(c, &r->fitted, twin); /* the fitted statistics, when kept */
    }
    if (rc == 0) {
        r->calib_tv[1] = mean_tv(r->source_freq, twin, L, J);
        r->calibrated = r->calib_tv[1] < r->calib_tv[0] ? 1 : -1;
        if (r->calibrated < 0) {
            memcpy(r->popularity, before, LJ * sizeof *before);
            rc = evaluate(c, &r->fitted, NULL);
        }
    }
    free(twin);
    free(before);
    return rc;
}

int ms_fit_search(ms_fit_result *r, const ms_fit_options *o, ms_err *err)
{
    search_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.o = o;
    c.err = err;
    r->n_searched = N_SEARCH;
    int one_request = r->p.requests < 2, one_layer = r->model.moe_layers < 2;
    if (one_request)
        skip(r, S_PREF, "one request: no request-level skew to measure");
    else
        estimate_pref_alpha(r);
    if (one_layer)
        skip(r, S_LAYER, "one MoE layer");
    int no_xreq = isnan(r->source.xreq);
    if (no_xreq)
        skip(r, S_TOKEN, one_request ? "one request: no earlier request to repeat" : "no decode steps to compare");
    int ids_only = r->p.probs == MS_PROBS_TOPK_IDS;
    if (ids_only)
        skip(r, S_WEIGHT, "ids-only trace (topk_ids): no weights to match");
    /* succ_hit is an in-sample maximum over J x J co-occurrence counts: on
     * traces of a few hundred rows it measures the sample size more than the
     * routing, and low trans_alpha makes every trial slow (Sinkhorn
     * balancing of near-degenerate maps) */
    skip(r, S_TRANS, "in-sample successor hit is dominated by sample size on small traces (default kept)");
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int rc = 0;
    for (uint32_t pass = 0; pass < o->passes && rc == 0; pass++)
        for (search_knob k = 0; k < N_SEARCH && rc == 0; k++) {
            if (k == S_PREF || (k == S_LAYER && one_layer) || k == S_TRANS || (k == S_WEIGHT && ids_only) ||
                (k == S_TOKEN && no_xreq))
                continue;
            rc = search_one(&c, k);
        }
    if (!rc && r->p.decode_phases == 0 && r->popularity && r->source_freq)
        rc = calibrate_popularity(&c); /* fills r->fitted */
    else if (!rc)
        rc = evaluate(&c, &r->fitted, NULL);
    for (search_knob k = 0; k < N_SEARCH && rc == 0; k++) {
        r->searched[k].source_value = stat_of(&r->source, k);
        r->searched[k].fitted_value = stat_of(&r->fitted, k);
    }
    gsl_set_error_handler(old);
    return rc;
}
