/* The serverless paper's claim (seed 002 §V-G, Fig. 14) for `moesim claims`:
 * the Fig. 14 comparison (sim/serverless/serverless_study.h) on the claim's
 * trace, its three numbers against the paper's bounds, and a sensitivity
 * over the one setting the paper does not state, the latency target. */
#include "sim/apps/claims_serverless.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/serverless/serverless_study.h"

/* The paper gives no latency target for Fig. 14: the main run plans under a
 * target that does not bind (one hour for the test batch), the sensitivity
 * under targets of k x LambdaML's latency. */
#define CL_SL_LOOSE_TARGET_S 3600.0
static const double cl_sl_target_x[] = {1.0, 1.25, 1.5, 2.0, 4.0};

static int study(const cl_claim *cl, const char *trace, const char *model, unsigned seed, double target_s,
                 ms_sl_study *s, ms_err *err)
{
    ms_sl_study_opts o = {.trace = trace, .profile = cl->platform, .model = model, .predictor = "paper",
                          .target_s = target_s, .train = 0.5, .bo_split = 0.25, .bo_iters = 20, .grid = 400,
                          .seed = seed, .bo_log = NULL};
    return ms_sl_study_run(&o, s, err);
}

static double throughput(const ms_sl_eval *e)
{
    return e->latency > 0 ? (double)e->tokens / e->latency : NAN;
}

/* The three values: cost below LambdaML (>= paper_vals[0] %), throughput
 * below LambdaML's (<= paper_vals[1] %), cost below the CPU cluster (>=
 * paper_vals[2] %).  Holds when all three bounds hold; direction only when
 * predicted+BO is at least cheaper than both. */
static ms_verdict judge(const cl_claim *cl, const ms_sl_study *s, ms_claim_result *r)
{
    const ms_sl_eval *bo = &s->dep[MS_SL_DEP_PRED_BO], *lam = &s->dep[MS_SL_DEP_LAMBDAML],
                     *cpu = &s->dep[MS_SL_DEP_CPU];
    double v[3] = {100.0 * (1.0 - bo->cost / lam->cost), 100.0 * (1.0 - throughput(bo) / throughput(lam)),
                   100.0 * (1.0 - bo->cost / cpu->cost)};
    static const char *const items[3] = {"cost below LambdaML", "throughput below LambdaML", "cost below CPU cluster"};
    r->n = 3;
    for (size_t i = 0; i < 3; i++) {
        r->paper[i] = cl->paper_vals[i];
        r->moesim[i] = v[i];
        snprintf(r->item[i], sizeof r->item[i], "%s", items[i]);
    }
    snprintf(r->value_text, sizeof r->value_text,
             "%.1f %% cheaper than LambdaML (paper >= %.2f), throughput %.1f %% below it (paper <= %.2f), "
             "%.1f %% cheaper than the CPU cluster (paper >= %.2f)",
             v[0], cl->paper_vals[0], v[1], cl->paper_vals[1], v[2], cl->paper_vals[2]);
    int all = v[0] >= cl->paper_vals[0] && v[1] <= cl->paper_vals[1] && v[2] >= cl->paper_vals[2];
    return all ? MS_VERDICT_HOLDS : v[0] > 0 && v[2] > 0 ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
}

int cl_serverless_evaluate(const cl_claim *cl, const char *trace, const char *model, unsigned seed, int with_sensitivity,
                           ms_claim_result *r, ms_verdict *vd, ms_err *err)
{
    ms_sl_study s;
    if (study(cl, trace, model, seed, CL_SL_LOOSE_TARGET_S, &s, err))
        return -1;
    *vd = judge(cl, &s, r);
    if (*vd == MS_VERDICT_HOLDS || !with_sensitivity)
        return 0;
    double lam_latency = s.dep[MS_SL_DEP_LAMBDAML].latency, flip = NAN;
    int unplannable = 0, tightest_ok = 0;
    ms_sl_study tightest = {0};
    for (size_t i = 0; i < sizeof cl_sl_target_x / sizeof *cl_sl_target_x && isnan(flip); i++) {
        ms_sl_study t;
        ms_claim_result tmp = *r;
        ms_err e;
        if (study(cl, trace, model, seed, cl_sl_target_x[i] * lam_latency, &t, &e)) {
            unplannable++; /* no plan meets so tight a target */
            continue;
        }
        if (!tightest_ok)
            tightest = t, tightest_ok = 1;
        if (judge(cl, &t, &tmp) == MS_VERDICT_HOLDS)
            flip = cl_sl_target_x[i];
    }
    if (isnan(flip) && tightest_ok) /* where the gap comes from: the plan on predicted counts vs on real ones */
        snprintf(r->sensitivity, sizeof r->sensitivity,
                 "no latency target from 1x to 4x LambdaML's (%.1f s) flips it%s; at the tightest that plans, "
                 "predicted+BO takes %.1f s and the real-count plan %.1f s at %.1f %% below LambdaML's cost",
                 lam_latency, unplannable ? " (some targets have no plan)" : "", tightest.dep[MS_SL_DEP_PRED_BO].latency,
                 tightest.dep[MS_SL_DEP_REAL].latency,
                 100.0 * (1.0 - tightest.dep[MS_SL_DEP_REAL].cost / tightest.dep[MS_SL_DEP_LAMBDAML].cost));
    else if (isnan(flip))
        snprintf(r->sensitivity, sizeof r->sensitivity, "no latency target from 1x to 4x LambdaML's (%.1f s) has a plan",
                 lam_latency);
    else
        snprintf(r->sensitivity, sizeof r->sensitivity, "holds at a latency target of %gx LambdaML's (%.1f s)", flip,
                 flip * lam_latency);
    return 0;
}
