/* BO loop (Alg. 2) with multi-dimensional epsilon-greedy search; see serverless_bo.h. */
#include "sim/serverless/serverless_bo.h"

#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/serverless/serverless_ods.h"

void ms_sl_bo_defaults(ms_sl_bo_params *p)
{
    *p = (ms_sl_bo_params){.sampler = MS_SL_BO_MULTI, .iters = 20, .Q = 64, .lambda = 8, .mu = 0.5, .eps0 = 0.5,
                           .rho = 0.5, .rho1 = 0.3, .rho2 = 0.2, .rho3 = 0.1, .alpha = 1, .zeta = 1e-4, .seed = 1,
                           .grid = 400, .target_s = 60};
}

double ms_sl_table_cost(const ms_sl_platform *p, const ms_sl_model *m, const ms_sl_table *t, ms_sl_pred_kind kind,
                        const ms_sl_batch *b, double target_s, int grid, uint32_t *pred, ms_sl_plan *plan)
{
    ms_sl_predict(t, kind, b, pred);
    ms_sl_ods_info info;
    ms_err e;
    if (ms_sl_ods(p, m, pred, b->n, target_s, grid, plan, &info, &e))
        return INFINITY;
    uint32_t *real = ms_xcalloc((size_t)m->L * m->J, sizeof *real);
    ms_sl_real_counts(b, real);
    ms_sl_eval ev;
    double c = ms_sl_evaluate(p, m, plan, real, b->n, &ev, &e) ? INFINITY : ev.cost;
    free(real);
    return c;
}

typedef struct {
    ms_sl_feat f;
    uint32_t e, i;
    double v;
} kv_pair;

static double table_vmax(const ms_sl_table *t)
{
    double v = 0;
    for (size_t k = 0; k < t->n * t->L * t->J; k++)
        v = fmax(v, t->cnt[k]);
    return v + 1;
}

static void apply_pairs(ms_sl_table *t, const ms_sl_table *base, const kv_pair *z, int Q)
{
    ms_sl_table_free(t);
    ms_sl_table_copy(t, base);
    for (int q = 0; q < Q; q++)
        ms_sl_table_set(t, z[q].f, z[q].e, z[q].i, z[q].v);
}

/* A pair from P: any profiled or BO-batch token, any layer and expert. */
static kv_pair draw_p(gsl_rng *rng, const ms_sl_table *base, const ms_sl_batch *b, double vmax)
{
    size_t n = base->n + b->n;
    size_t k = gsl_rng_uniform_int(rng, n);
    kv_pair z;
    z.f = k < base->n ? base->key[k] : b->feat[k - base->n];
    z.e = (uint32_t)gsl_rng_uniform_int(rng, base->L);
    z.i = (uint32_t)gsl_rng_uniform_int(rng, base->J);
    z.v = 1 + (double)gsl_rng_uniform_int(rng, (unsigned long)vmax);
    return z;
}

/* A pair from L: a BO-batch token, a flagged (layer, under-predicted expert). */
static kv_pair draw_l(gsl_rng *rng, const ms_sl_batch *b, const uint32_t *flag, size_t nflag, uint32_t J, double vmax)
{
    kv_pair z;
    z.f = b->feat[gsl_rng_uniform_int(rng, b->n)];
    uint32_t c = flag[gsl_rng_uniform_int(rng, nflag)];
    z.e = c / J;
    z.i = c % J;
    z.v = 1 + (double)gsl_rng_uniform_int(rng, (unsigned long)vmax);
    return z;
}

/* Feedback of lines 11-21: flags under-predicted (layer, expert) cells and
 * returns rho' (0 when every expert is within alpha). */
static double feedback(const ms_sl_platform *p, const ms_sl_model *m, const ms_sl_plan *plan, const uint32_t *pred,
                       const uint32_t *real, const ms_sl_bo_params *bp, uint32_t *flag, size_t *nflag)
{
    double rho = 0;
    *nflag = 0;
    for (uint32_t e = 0; e < m->L; e++)
        for (uint32_t i = 0; i < m->J; i++) {
            size_t c = (size_t)e * m->J + i;
            if (fabs((double)pred[c] - (double)real[c]) <= bp->alpha)
                continue;
            if (real[c] > pred[c])
                flag[(*nflag)++] = (uint32_t)c;
            const ms_sl_cfg *cfg = &plan->cfg[c];
            uint32_t r = ms_sl_per_replica(real[c], cfg->g);
            double rr = bp->rho3;
            if (!ms_sl_fits_memory(p, m, p->mem_mb[cfg->mem], r))
                rr = bp->rho1;
            else if (plan->a[e] == MS_SL_DIRECT && !ms_sl_fits_payload(p, m, r))
                rr = bp->rho2;
            rho = fmax(rho, rr);
        }
    return rho;
}

int ms_sl_bo(const ms_sl_platform *p, const ms_sl_model *m, const ms_sl_table *base, ms_sl_pred_kind kind,
             const ms_sl_batch *batch, const ms_sl_bo_params *bp, ms_sl_table *best, FILE *log, ms_err *err)
{
    if (!base->n)
        return ms_fail(err, "serverless: bo: the profiled key-value table is empty");
    if (!batch->n)
        return ms_fail(err, "serverless: bo: the BO batch has no token");
    static const char *names[] = {"multi-eps", "single-eps", "random"};
    int Q = bp->Q, muQ = (int)floor(bp->mu * Q);
    size_t LJ = (size_t)m->L * m->J;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, bp->seed);
    double vmax = table_vmax(base);
    kv_pair *z = ms_xcalloc((size_t)Q, sizeof *z), *zbest = ms_xcalloc((size_t)Q, sizeof *zbest);
    uint32_t *pred = ms_xcalloc(LJ, sizeof *pred), *real = ms_xcalloc(LJ, sizeof *real),
             *flag = ms_xcalloc(LJ, sizeof *flag);
    size_t nflag = 0;
    ms_sl_real_counts(batch, real);
    /* line 1: Q pairs read from the profiled table (iteration 1 = no BO) */
    for (int q = 0; q < Q; q++) {
        size_t k = gsl_rng_uniform_int(rng, base->n);
        uint32_t e = (uint32_t)gsl_rng_uniform_int(rng, m->L), i = (uint32_t)gsl_rng_uniform_int(rng, m->J);
        z[q] = (kv_pair){base->key[k], e, i, base->cnt[k * LJ + (size_t)e * m->J + i]};
    }
    ms_sl_table cur = {0};
    ms_sl_plan plan;
    ms_sl_plan_alloc(&plan, m->L, m->J);
    double best_cost = INFINITY, window_start = INFINITY;
    ms_sl_table_free(best);
    ms_sl_table_copy(best, base);
    for (int tau = 1; tau <= bp->iters; tau++) {
        apply_pairs(&cur, base, z, Q);
        double c = ms_sl_table_cost(p, m, &cur, kind, batch, bp->target_s, bp->grid, pred, &plan);
        if (c < best_cost) {
            best_cost = c;
            memcpy(zbest, z, (size_t)Q * sizeof *z);
            ms_sl_table_free(best);
            ms_sl_table_copy(best, &cur);
        }
        if (log)
            fprintf(log, "%s,%d,%.9g,%.9g\n", names[bp->sampler], tau, c, best_cost);
        if (tau == 1 || (tau - 1) % bp->lambda == 0) {
            if (tau > 1 && isfinite(window_start) && fabs(window_start - best_cost) <= bp->zeta * window_start)
                break; /* line 33 */
            window_start = best_cost;
        }
        double rho_fb = isfinite(c) ? feedback(p, m, &plan, pred, real, bp, flag, &nflag) : 0;
        double single_draw = gsl_rng_uniform(rng);
        for (int q = 0; q < Q; q++) {
            double e_q = bp->eps0 / (1 + bp->rho * tau); /* line 3 */
            if (bp->sampler == MS_SL_BO_MULTI && q < muQ && rho_fb > 0)
                e_q = fmin(1, e_q * (1 + rho_fb * tau)); /* line 20: slower decay (1+rho' tau)/(1+rho tau) */
            if (bp->sampler == MS_SL_BO_RANDOM)
                e_q = 1;
            double u = bp->sampler == MS_SL_BO_SINGLE ? single_draw : gsl_rng_uniform(rng);
            if (u >= e_q && isfinite(best_cost))
                z[q] = zbest[q]; /* exploit */
            else if (bp->sampler == MS_SL_BO_MULTI && q < muQ && nflag)
                z[q] = draw_l(rng, batch, flag, nflag, m->J, vmax);
            else
                z[q] = draw_p(rng, base, batch, vmax);
        }
    }
    ms_sl_table_free(&cur);
    ms_sl_plan_free(&plan);
    gsl_rng_free(rng);
    free(z);
    free(zbest);
    free(pred);
    free(real);
    free(flag);
    return 0;
}
