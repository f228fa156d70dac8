/* Seed paper 002's Fig. 14 comparison on a trace (serverless_study.h). */
#include "sim/serverless/serverless_study.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/profile.h"
#include "sim/serverless/serverless_bo.h"
#include "sim/serverless/serverless_ods.h"

const char *ms_sl_dep_name(int dep)
{
    static const char *const names[MS_SL_N_DEP] = {"predicted+BO", "real", "predicted-noBO", "LambdaML",
                                                   "CPU-cluster"};
    return dep >= 0 && dep < MS_SL_N_DEP ? names[dep] : "?";
}

const char *ms_sl_sampler_name(int sampler)
{
    static const char *const names[3] = {"multi-eps", "single-eps", "random"};
    return sampler >= 0 && sampler < 3 ? names[sampler] : "?";
}

const char *ms_sl_predictor_name(int kind)
{
    static const char *const names[3] = {"paper", "position", "lina"};
    return kind >= 0 && kind < 3 ? names[kind] : "?";
}

/* The model's sizes for the cost model; its shape must be the trace's. */
static int model_shape(const char *name, uint32_t L, uint32_t J, uint32_t K, const ms_sl_platform *p,
                       ms_sl_model *m, ms_err *err)
{
    ms_model mp;
    if (ms_model_load(name, &mp, err))
        return -1;
    if (mp.moe_layers != L || mp.experts != J || mp.top_k != K)
        return ms_fail(err, "serverless: model '%s' has L=%u J=%u K=%u but the trace has L=%u J=%u K=%u", name,
                       mp.moe_layers, mp.experts, mp.top_k, L, J, K);
    *m = (ms_sl_model){L, J, K, (double)mp.expert_bytes, 2.0 * mp.expert_params, (double)mp.dense_bytes,
                       2.0 * mp.dense_params, mp.hidden * p->act_bytes};
    return 0;
}

/* Everything one study holds, freed in one place on every path. */
typedef struct {
    ms_sl_batch train, bo, test;
    ms_sl_table table, learnt[3];
    ms_sl_plan plan;
    uint32_t *real, *pred;
} study_mem;

static void study_mem_free(study_mem *r)
{
    ms_sl_plan_free(&r->plan);
    for (int s = 0; s < 3; s++)
        ms_sl_table_free(&r->learnt[s]);
    ms_sl_table_free(&r->table);
    ms_sl_batch_free(&r->train);
    ms_sl_batch_free(&r->bo);
    ms_sl_batch_free(&r->test);
    free(r->real);
    free(r->pred);
}

static ms_sl_pred_kind predictor_kind(const char *name)
{
    return !strcmp(name, "lina") ? MS_SL_PRED_LINA : !strcmp(name, "position") ? MS_SL_PRED_POSITION : MS_SL_PRED_PAPER;
}

/* The three splits of the trace's requests, and the profiled table. */
static int load_batches(const ms_sl_study_opts *o, uint64_t nreq, uint32_t L, uint32_t J, uint32_t K, study_mem *r,
                        ms_sl_study *s, ms_err *err)
{
    uint64_t n_train = (uint64_t)floor(o->train * nreq), n_bo = (uint64_t)floor(o->bo_split * nreq);
    if (!n_train || !n_bo || n_train + n_bo >= nreq)
        return ms_fail(err, "serverless: %llu requests cannot be split into training (%g), BO (%g) and test requests",
                       (unsigned long long)nreq, o->train, o->bo_split);
    if (ms_sl_batch_load(o->trace, 0, n_train, &r->train, err) ||
        ms_sl_batch_load(o->trace, n_train, n_train + n_bo, &r->bo, err) ||
        ms_sl_batch_load(o->trace, n_train + n_bo, nreq, &r->test, err))
        return -1;
    ms_sl_table_init(&r->table, L, J, K);
    ms_sl_table_profile(&r->table, &r->train);
    if (!r->table.n || !r->test.n || !r->bo.n)
        return ms_fail(err, "serverless: empty key-value table or batch (training %zu, BO %zu, test %zu tokens)",
                       r->train.n, r->bo.n, r->test.n);
    s->test_tokens = r->test.n;
    s->train_tokens = r->train.n;
    s->table_keys = r->table.n;
    s->test_first = n_train + n_bo;
    s->test_last = nreq - 1;
    return 0;
}

static int run_study(const ms_sl_study_opts *o, study_mem *r, ms_sl_study *s, ms_err *err)
{
    ms_sl_platform plat;
    uint64_t nreq;
    uint32_t L, J, K;
    char mname[128];
    ms_sl_model m;
    if (ms_sl_platform_load(o->profile, &plat, err) ||
        ms_sl_trace_shape(o->trace, &nreq, &L, &J, &K, mname, sizeof mname, err) ||
        model_shape(o->model ? o->model : mname, L, J, K, &plat, &m, err) ||
        load_batches(o, nreq, L, J, K, r, s, err))
        return -1;
    ms_sl_pred_kind kind = predictor_kind(o->predictor);
    size_t LJ = (size_t)L * J;
    uint32_t *real = r->real = ms_xcalloc(LJ, sizeof *real), *pred = r->pred = ms_xcalloc(LJ, sizeof *pred);
    ms_sl_real_counts(&r->test, real);
    for (int k = 0; k < 3; k++) { /* prediction accuracy (Fig. 10) */
        ms_sl_predict(&r->table, (ms_sl_pred_kind)k, &r->test, pred);
        s->pred_error[k] = ms_sl_pred_error(pred, real, LJ);
    }
    /* BO (Alg. 2) with the three samplers on the BO batch */
    ms_sl_bo_params bp;
    ms_sl_bo_defaults(&bp);
    bp.iters = (int)o->bo_iters;
    bp.seed = o->seed;
    bp.grid = (int)o->grid;
    bp.target_s = o->target_s;
    ms_sl_plan_alloc(&r->plan, L, J);
    for (int k = 0; k < 3; k++) {
        bp.sampler = (ms_sl_sampler)k;
        if (ms_sl_bo(&plat, &m, &r->table, kind, &r->bo, &bp, &r->learnt[k], o->bo_log, err))
            return -1;
        s->bo_test_cost[k] = ms_sl_table_cost(&plat, &m, &r->learnt[k], kind, &r->test, o->target_s, bp.grid, pred,
                                              &r->plan);
        ms_sl_predict(&r->learnt[k], kind, &r->test, pred);
        s->bo_pred_error[k] = ms_sl_pred_error(pred, real, LJ);
    }
    /* the deployments planned by ODS: on BO's table, on the real counts, on the profiled table */
    const ms_sl_table *tabs[3] = {&r->learnt[0], NULL, &r->table};
    ms_sl_ods_info info;
    for (int d = 0; d < 3; d++) {
        if (tabs[d])
            ms_sl_predict(tabs[d], kind, &r->test, pred);
        if (ms_sl_ods(&plat, &m, tabs[d] ? pred : real, r->test.n, o->target_s, bp.grid, &r->plan, &info, err) ||
            ms_sl_evaluate(&plat, &m, &r->plan, real, r->test.n, &s->dep[d], err))
            return ms_fail_prefix(err, "%s", ms_sl_dep_name(d));
    }
    ms_sl_platform lam = plat;
    ms_sl_fixed_plan(&lam, plat.lambdaml_mb, MS_SL_INDIRECT, &r->plan);
    if (ms_sl_evaluate(&lam, &m, &r->plan, real, r->test.n, &s->dep[MS_SL_DEP_LAMBDAML], err))
        return ms_fail_prefix(err, "LambdaML");
    ms_sl_cluster(&plat, &m, real, r->test.n, &s->dep[MS_SL_DEP_CPU]);
    return 0;
}

int ms_sl_study_run(const ms_sl_study_opts *o, ms_sl_study *s, ms_err *err)
{
    study_mem r;
    memset(&r, 0, sizeof r);
    memset(s, 0, sizeof *s);
    int rc = run_study(o, &r, s, err);
    study_mem_free(&r);
    return rc;
}
