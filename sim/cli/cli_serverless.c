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
#include "sim/core/out.h"
#include "sim/engine/report.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"
#include "sim/serverless/serverless_study.h"

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

static void write_row(FILE *csv, const char *name, const ms_sl_eval *ev, double target_s)
{
    double thr = ev->latency > 0 ? ev->tokens / ev->latency : 0;
    fprintf(csv, "%s,%.9f,%.6f,%.6f,%.9f,%llu,%u,%d\n", name, ev->cost, ev->latency, thr, thr > 0 ? 1 / thr : 0,
            (unsigned long long)ev->tokens, ev->fixes, ev->latency <= target_s * (1 + 1e-12));
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
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", f->out, name);
    if (!(*o = ms_out_open("serverless", path, err)))
        return NULL;
    FILE *fp = ms_out_fp(*o);
    ms_report_provenance_line_head(fp, f->trace);
    fprintf(fp, "; profile %s\n", f->profile);
    return fp;
}

/* prediction.csv: the three predictors, then the chosen one after BO per sampler (Fig. 10, 13). */
static int write_prediction(const sl_flags *f, const ms_sl_study *s, ms_err *err)
{
    ms_out *o;
    FILE *pc = open_out(f, "prediction.csv", &o, err);
    if (!pc)
        return -1;
    fputs("predictor,mean_abs_diff_per_expert,tokens\n", pc);
    for (int k = 0; k < 3; k++)
        fprintf(pc, "%s,%.6f,%zu\n", ms_sl_predictor_name(k), s->pred_error[k], s->test_tokens);
    for (int k = 0; k < 3; k++)
        fprintf(pc, "%s+bo-%s,%.6f,%zu\n", f->predictor, ms_sl_sampler_name(k), s->bo_pred_error[k], s->test_tokens);
    return ms_out_commit(o, err);
}

/* serverless.csv and the table on the terminal: the five deployments. */
static int write_deployments(const sl_flags *f, const ms_sl_study *s, ms_err *err)
{
    ms_out *o;
    FILE *csv = open_out(f, "serverless.csv", &o, err);
    if (!csv)
        return -1;
    double target = f->target_ms * 1e-3;
    fputs("scenario,cost_usd,latency_s,throughput_tok_s,inv_throughput_s_per_tok,tokens,serving_fixes,meets_target\n",
          csv);
    printf("\n%-16s %14s %12s %14s %6s\n", "deployment", "cost (USD)", "latency (s)", "tokens/s", "fixes");
    for (int d = 0; d < MS_SL_N_DEP; d++) {
        const ms_sl_eval *ev = &s->dep[d];
        write_row(csv, ms_sl_dep_name(d), ev, target);
        printf("%-16s %14.6g %12.3f %14.2f %6u\n", ms_sl_dep_name(d), ev->cost, ev->latency,
               ev->latency > 0 ? ev->tokens / ev->latency : 0, ev->fixes);
    }
    return ms_out_commit(o, err);
}

static int run(const sl_flags *f, ms_err *err)
{
    if (ms_out_make_dir("serverless: --out", f->out, err))
        return -1;
    ms_out *bo_out;
    FILE *bl = open_out(f, "bo.csv", &bo_out, err);
    if (!bl)
        return -1;
    fputs("sampler,iter,cost_usd,best_usd\n", bl);
    ms_sl_study_opts o = {.trace = f->trace, .profile = f->profile, .model = f->model, .predictor = f->predictor,
                          .target_s = f->target_ms * 1e-3, .train = f->train, .bo_split = f->bo_split,
                          .bo_iters = (unsigned)f->bo_iters, .grid = (unsigned)f->grid,
                          .seed = (unsigned long)f->seed, .bo_log = bl};
    ms_sl_study s;
    if (ms_sl_study_run(&o, &s, err)) {
        ms_out_abort(bo_out);
        return -1;
    }
    if (ms_out_commit(bo_out, err))
        return -1;
    printf("test batch: %zu prompt tokens (requests %llu..%llu); table from %zu tokens, %zu keys\n", s.test_tokens,
           (unsigned long long)s.test_first, (unsigned long long)s.test_last, s.train_tokens, s.table_keys);
    for (int k = 0; k < 3; k++)
        printf("prediction error (%-8s): %.3f tokens per expert\n", ms_sl_predictor_name(k), s.pred_error[k]);
    if (write_prediction(f, &s, err) || write_deployments(f, &s, err))
        return -1;
    const ms_sl_eval *dep = s.dep;
    printf("\nvs LambdaML: predicted+BO costs %.1f %% less; test-batch cost after BO: multi-eps %.6g, "
           "single-eps %.6g, random %.6g USD\n",
           100 * (1 - dep[MS_SL_DEP_PRED_BO].cost / dep[MS_SL_DEP_LAMBDAML].cost), s.bo_test_cost[0],
           s.bo_test_cost[1], s.bo_test_cost[2]);
    return render(f->out, err);
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
