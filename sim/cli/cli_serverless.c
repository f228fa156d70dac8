/* `moesim serverless`: seed paper 002's serverless MoE deployment on a trace.
 * Profiles the key-value table on a training split, runs the BO loop on a
 * BO split, and bills the test split under (predicted + BO), (real
 * popularity), (predicted, no BO), LambdaML and a CPU cluster; writes
 * DIR/serverless.csv, DIR/prediction.csv, DIR/bo.csv and DIR/serverless.png. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "sim/cli/cli.h"
#include "sim/core/digest.h"
#include "sim/core/out.h"
#include "sim/core/version.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"
#include "sim/serverless/serverless_bo.h"
#include "sim/serverless/serverless_ods.h"

static const char sl_usage[] =
    "usage: moesim serverless --trace F --profile P --latency-target MS [--model M] [--out DIR]\n"
    "                         [--train F] [--bo-split F] [--bo-iters N] [--seed N] [--grid N]\n"
    "                         [--predictor paper|position|lina]\n"
    "\n"
    "Serverless MoE deployment (seed paper 002): one function per expert replica, billed per GB-s.\n"
    "Requests [0, train) profile the key-value table, the next bo-split fraction is the BO batch,\n"
    "the rest the test batch (prompt tokens only).  Defaults: --model from the trace, --out\n"
    "moesim-serverless, --train 0.5, --bo-split 0.25, --bo-iters 20, --seed 1, --grid 400,\n"
    "--predictor paper.  P: a name in sim/profiles/serverless/ or a .ini path.\n";

typedef struct {
    const char *trace, *profile, *model, *out, *predictor;
    double target_ms, train, bo_split;
    unsigned long long bo_iters, seed, grid;
} sl_flags;

static int parse_flags(int argc, char **argv, sl_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            return ms_cli_usage("serverless: %s needs a value (see moesim serverless --help)", a);
        const char *v = argv[++i];
        double x;
        unsigned long long u;
        if (!strcmp(a, "--trace"))
            f->trace = v;
        else if (!strcmp(a, "--profile"))
            f->profile = v;
        else if (!strcmp(a, "--model"))
            f->model = v;
        else if (!strcmp(a, "--out"))
            f->out = v;
        else if (!strcmp(a, "--predictor")) {
            if (strcmp(v, "paper") && strcmp(v, "position") && strcmp(v, "lina"))
                return ms_cli_usage("serverless: --predictor %s: expected paper, position or lina", v);
            f->predictor = v;
        } else if (!strcmp(a, "--latency-target") || !strcmp(a, "--train") || !strcmp(a, "--bo-split")) {
            int frac = strcmp(a, "--latency-target");
            if (ms_parse_double(v, &x) || !(frac ? x > 0 && x < 1 : x > 0 && x < 1e12))
                return ms_cli_usage("serverless: %s %s: expected %s", a, v,
                                    frac ? "a fraction in (0, 1)" : "a positive number of milliseconds");
            *(!frac ? &f->target_ms : !strcmp(a, "--train") ? &f->train : &f->bo_split) = x;
        } else if (!strcmp(a, "--bo-iters") || !strcmp(a, "--seed") || !strcmp(a, "--grid")) {
            if (ms_parse_u64(v, &u) || (strcmp(a, "--seed") && (u < 1 || u > 100000)))
                return ms_cli_usage("serverless: %s %s: expected a whole number%s", a, v,
                                    strcmp(a, "--seed") ? " in [1, 100000]" : "");
            *(!strcmp(a, "--bo-iters") ? &f->bo_iters : !strcmp(a, "--seed") ? &f->seed : &f->grid) = u;
        } else
            return ms_cli_usage("serverless: unknown option '%s' (see moesim serverless --help)", a);
    }
    if (!f->trace || !f->profile || !(f->target_ms > 0))
        return ms_cli_usage("serverless: --trace, --profile and --latency-target are required");
    if (f->train + f->bo_split >= 1)
        return ms_cli_usage("serverless: --train %g + --bo-split %g leaves no test requests", f->train, f->bo_split);
    return 0;
}

typedef struct {
    const char *name;
    ms_sl_eval ev;
    int meets;
} scenario;

static void write_row(FILE *csv, const scenario *s, double target_s)
{
    double thr = s->ev.latency > 0 ? s->ev.tokens / s->ev.latency : 0;
    fprintf(csv, "%s,%.9f,%.6f,%.6f,%.9f,%llu,%u,%d\n", s->name, s->ev.cost, s->ev.latency, thr,
            thr > 0 ? 1 / thr : 0, (unsigned long long)s->ev.tokens, s->ev.fixes,
            s->ev.latency <= target_s * (1 + 1e-12));
}

static int model_shape(const sl_flags *f, const char *trace_model, uint32_t L, uint32_t J, uint32_t K,
                       const ms_sl_platform *p, ms_sl_model *m, ms_err *err)
{
    ms_model mp;
    const char *name = f->model ? f->model : trace_model;
    if (ms_model_load(name, &mp, err))
        return -1;
    if (mp.moe_layers != L || mp.experts != J || mp.top_k != K)
        return ms_fail(err, "serverless: model '%s' has L=%u J=%u K=%u but the trace has L=%u J=%u K=%u", name,
                       mp.moe_layers, mp.experts, mp.top_k, L, J, K);
    *m = (ms_sl_model){L, J, K, (double)mp.expert_bytes, 2.0 * mp.expert_params, (double)mp.dense_bytes,
                       2.0 * mp.dense_params, mp.hidden * p->act_bytes};
    return 0;
}

static int render(const char *dir, ms_err *err)
{
    char cmd[12800], plots[4096], png[4200];
    if (ms_path_plots(plots, sizeof plots, err))
        return -1;
    snprintf(cmd, sizeof cmd, "gnuplot -e \"csv='%s/serverless.csv'; out='@OUT@'\" '%s/serverless_cost.gp'", dir,
             plots);
    snprintf(png, sizeof png, "%s/serverless.png", dir);
    if (ms_out_from_command("serverless", png, cmd, err))
        return ms_fail_prefix(err, "serverless: gnuplot");
    return 0;
}

/* One CSV of the run through sim/core/out.h, its provenance line first. */
static FILE *open_out(const sl_flags *f, const char *name, ms_out **o, ms_err *err)
{
    char path[4096], hex[MS_DIGEST_HEX];
    snprintf(path, sizeof path, "%s/%s", f->out, name);
    if (ms_digest_file_cached(f->trace, hex, err) || !(*o = ms_out_open("serverless", path, err)))
        return NULL;
    FILE *fp = ms_out_fp(*o);
    fprintf(fp, "# moesim %s commit %s; trace %s sha256 %s; profile %s\n", ms_version(), ms_commit(), f->trace, hex,
            f->profile);
    return fp;
}

/* Everything one run holds, freed in one place on every path. */
typedef struct {
    ms_sl_batch train, bo, test;
    ms_sl_table table, learnt[3];
    ms_sl_plan plan;
    uint32_t *real, *pred;
    ms_out *pc, *bl, *csv;   /* the CSVs: committed when written whole, else removed */
} sl_run;

static void sl_run_free(sl_run *r)
{
    ms_out_abort(r->pc);
    ms_out_abort(r->bl);
    ms_out_abort(r->csv);
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

static int run_stages(const sl_flags *f, sl_run *r, ms_err *err);

static int run(const sl_flags *f, ms_err *err)
{
    sl_run r;
    memset(&r, 0, sizeof r);
    int rc = run_stages(f, &r, err);
    sl_run_free(&r);
    return rc ? -1 : render(f->out, err);
}

static int run_stages(const sl_flags *f, sl_run *r, ms_err *err)
{
    ms_sl_platform plat;
    if (ms_out_make_dir("serverless: --out", f->out, err) || ms_sl_platform_load(f->profile, &plat, err))
        return -1;
    uint64_t nreq;
    uint32_t L, J, K;
    char mname[128];
    if (ms_sl_trace_shape(f->trace, &nreq, &L, &J, &K, mname, sizeof mname, err))
        return -1;
    ms_sl_model m;
    if (model_shape(f, mname, L, J, K, &plat, &m, err))
        return -1;
    uint64_t n_train = (uint64_t)floor(f->train * nreq), n_bo = (uint64_t)floor(f->bo_split * nreq);
    if (!n_train || !n_bo || n_train + n_bo >= nreq)
        return ms_fail(err, "serverless: %llu requests cannot be split into training (%g), BO (%g) and test requests",
                       (unsigned long long)nreq, f->train, f->bo_split);
    if (ms_sl_batch_load(f->trace, 0, n_train, &r->train, err) ||
        ms_sl_batch_load(f->trace, n_train, n_train + n_bo, &r->bo, err) ||
        ms_sl_batch_load(f->trace, n_train + n_bo, nreq, &r->test, err))
        return -1;
    ms_sl_table_init(&r->table, L, J, K);
    ms_sl_table_profile(&r->table, &r->train);
    if (!r->table.n || !r->test.n || !r->bo.n)
        return ms_fail(err, "serverless: empty key-value table or batch (training %zu, BO %zu, test %zu tokens)",
                       r->train.n, r->bo.n, r->test.n);
    ms_sl_pred_kind kind = !strcmp(f->predictor, "lina") ? MS_SL_PRED_LINA
                           : !strcmp(f->predictor, "position") ? MS_SL_PRED_POSITION : MS_SL_PRED_PAPER;
    double target = f->target_ms * 1e-3;
    size_t LJ = (size_t)L * J;
    uint32_t *real = r->real = ms_xcalloc(LJ, sizeof *real), *pred = r->pred = ms_xcalloc(LJ, sizeof *pred);
    ms_sl_real_counts(&r->test, real);
    /* prediction accuracy (Fig. 10) on the test batch */
    FILE *pc = open_out(f, "prediction.csv", &r->pc, err);
    if (!pc)
        return -1;
    fputs("predictor,mean_abs_diff_per_expert,tokens\n", pc);
    static const char *pn[] = {"paper", "position", "lina"};
    printf("test batch: %zu prompt tokens (requests %llu..%llu); table from %zu tokens, %zu keys\n", r->test.n,
           (unsigned long long)(n_train + n_bo), (unsigned long long)nreq - 1, r->train.n, r->table.n);
    for (int k = 0; k < 3; k++) {
        ms_sl_predict(&r->table, (ms_sl_pred_kind)k, &r->test, pred);
        double e = ms_sl_pred_error(pred, real, LJ);
        fprintf(pc, "%s,%.6f,%zu\n", pn[k], e, r->test.n);
        printf("prediction error (%-8s): %.3f tokens per expert\n", pn[k], e);
    }
    /* BO (Alg. 2) with the three samplers on the BO batch */
    FILE *bl = open_out(f, "bo.csv", &r->bl, err);
    if (!bl)
        return -1;
    fputs("sampler,iter,cost_usd,best_usd\n", bl);
    ms_sl_bo_params bp;
    ms_sl_bo_defaults(&bp);
    bp.iters = (int)f->bo_iters;
    bp.seed = (unsigned long)f->seed;
    bp.grid = (int)f->grid;
    bp.target_s = target;
    ms_sl_table *learnt = r->learnt;
    double test_cost[3];
    ms_sl_plan *plan = &r->plan;
    ms_sl_plan_alloc(plan, L, J);
    for (int s = 0; s < 3; s++) {
        bp.sampler = (ms_sl_sampler)s;
        if (ms_sl_bo(&plat, &m, &r->table, kind, &r->bo, &bp, &learnt[s], bl, err))
            return -1;
        test_cost[s] = ms_sl_table_cost(&plat, &m, &learnt[s], kind, &r->test, target, bp.grid, pred, plan);
        ms_sl_predict(&learnt[s], kind, &r->test, pred);
        fprintf(pc, "%s+bo-%s,%.6f,%zu\n", f->predictor, s == 0 ? "multi-eps" : s == 1 ? "single-eps" : "random",
                ms_sl_pred_error(pred, real, LJ), r->test.n);
    }
    int wrc = ms_out_commit(r->bl, err);
    r->bl = NULL;
    wrc |= wrc ? 0 : ms_out_commit(r->pc, err);
    r->pc = NULL;
    if (wrc)
        return -1;
    /* the five deployments, billed on the test batch's real counts */
    static const char *scn[5] = {"predicted+BO", "real", "predicted-noBO", "LambdaML", "CPU-cluster"};
    scenario sc[5];
    memset(sc, 0, sizeof sc);
    for (int s = 0; s < 5; s++)
        sc[s].name = scn[s];
    ms_sl_ods_info info;
    const ms_sl_table *tabs[3] = {&learnt[0], NULL, &r->table};
    for (int s = 0; s < 3; s++) {
        if (tabs[s])
            ms_sl_predict(tabs[s], kind, &r->test, pred);
        if (ms_sl_ods(&plat, &m, tabs[s] ? pred : real, r->test.n, target, bp.grid, plan, &info, err) ||
            ms_sl_evaluate(&plat, &m, plan, real, r->test.n, &sc[s].ev, err))
            return ms_fail_prefix(err, "%s", sc[s].name);
    }
    ms_sl_platform lam = plat;
    ms_sl_fixed_plan(&lam, plat.lambdaml_mb, MS_SL_INDIRECT, plan);
    if (ms_sl_evaluate(&lam, &m, plan, real, r->test.n, &sc[3].ev, err))
        return ms_fail_prefix(err, "LambdaML");
    ms_sl_cluster(&plat, &m, real, r->test.n, &sc[4].ev);
    FILE *csv = open_out(f, "serverless.csv", &r->csv, err);
    if (!csv)
        return -1;
    fputs("scenario,cost_usd,latency_s,throughput_tok_s,inv_throughput_s_per_tok,tokens,serving_fixes,meets_target\n",
          csv);
    printf("\n%-16s %14s %12s %14s %6s\n", "deployment", "cost (USD)", "latency (s)", "tokens/s", "fixes");
    for (int s = 0; s < 5; s++) {
        write_row(csv, &sc[s], target);
        printf("%-16s %14.6g %12.3f %14.2f %6u\n", sc[s].name, sc[s].ev.cost, sc[s].ev.latency,
               sc[s].ev.latency > 0 ? sc[s].ev.tokens / sc[s].ev.latency : 0, sc[s].ev.fixes);
    }
    wrc = ms_out_commit(r->csv, err);
    r->csv = NULL;
    if (wrc)
        return -1;
    printf("\nvs LambdaML: predicted+BO costs %.1f %% less; test-batch cost after BO: multi-eps %.6g, "
           "single-eps %.6g, random %.6g USD\n",
           100 * (1 - sc[0].ev.cost / sc[3].ev.cost), test_cost[0], test_cost[1], test_cost[2]);
    return 0;
}

int ms_cli_serverless(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(sl_usage, stdout);
        return 0;
    }
    sl_flags f = {.out = "moesim-serverless", .predictor = "paper", .train = 0.5, .bo_split = 0.25, .bo_iters = 20,
                  .seed = 1, .grid = 400};
    int rc = parse_flags(argc, argv, &f);
    if (rc)
        return rc;
    ms_err err;
    if (run(&f, &err))
        return ms_cli_error(err.msg);
    return 0;
}
