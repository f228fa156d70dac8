/* `moesim figures`: regenerates the paper figures (sim/apps/figures.h) into a
 * directory: for each figure its CSV, PNG and PDF.  Without --trace it first
 * generates the default trace, a seeded synthetic mixtral-8x7b trace with
 * the generator's defaults (embeddings and speculative gates) of
 * FIG_DEFAULT_REQUESTS requests, into DIR/default-trace.h5. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "traces/synth/gen.h"
#include "sim/cli/cli.h"
#include "sim/apps/figures.h"
#include "sim/core/out.h"
#include "sim/core/params.h"

#define FIG_DEFAULT_REQUESTS 16
#define FIG_MAX_ONLY 64

static const char figures_usage[] =
    "usage: moesim figures [--only NAME[,NAME...]] [--out DIR] [--trace FILE] [--model M] [--platform P]\n"
    "                      [--set platform.KEY=VALUE] [--set model.KEY=VALUE]\n"
    "                      [--seed N] [--requests N] [--list]\n"
    "\n"
    "Runs one recipe per paper figure (the sweep it needs, simulated in-process) and renders it with\n"
    "plots/fig_<name>.gp into DIR/<name>.png and DIR/<name>.pdf (the data: DIR/*.csv).  Without --trace\n"
    "the figures use a seeded synthetic mixtral-8x7b trace (generator defaults: embeddings and\n"
    "speculative gates; --requests N, --seed N) written to DIR/default-trace.h5.  Figures that need what\n"
    "a --trace lacks (embeddings, speculative gates) are skipped with a note.  Cache sizes are fractions\n"
    "of the trace's L x J experts (16 to 64 of Mixtral's 256: 1/16 to 1/4); layers are numbered from 0.\n"
    "--list names every figure.  --set KIND.KEY=VALUE overrides one key of the model or platform\n"
    "profile, as in moesim run.\n"
    "Defaults: --out moesim-figures --model mixtral-8x7b (with --trace: none, dimensions from the trace)\n"
    "--platform rtx3090-pcie4 --seed 42 --requests 16.\n";

typedef struct {
    const char *out_dir, *trace, *model, *platform, *only;
    uint64_t seed, requests;
    int list;
    ms_profile_set model_sets[MS_CLI_MAX_SETS], platform_sets[MS_CLI_MAX_SETS];
    int n_model_sets, n_platform_sets;
} fig_flags;

static int parse_u64_flag(const char *flag, const char *val, uint64_t lo, uint64_t hi, uint64_t *out)
{
    unsigned long long u;
    if (ms_parse_u64(val, &u) || u < lo || u > hi)
        return ms_cli_usage("figures: %s %s: expected a whole number in [%llu, %llu]", flag, val,
                            (unsigned long long)lo, (unsigned long long)hi);
    *out = u;
    return 0;
}

static int parse_figures_flags(int argc, char **argv, fig_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--list")) {
            f->list = 1;
            continue;
        }
        if (i + 1 >= argc)
            return ms_cli_usage("figures: %s needs a value (see moesim figures --help)", a);
        const char *val = argv[++i];
        if (!strcmp(a, "--out"))
            f->out_dir = val;
        else if (!strcmp(a, "--trace"))
            f->trace = val;
        else if (!strcmp(a, "--model"))
            f->model = val;
        else if (!strcmp(a, "--platform"))
            f->platform = val;
        else if (!strcmp(a, "--only"))
            f->only = val;
        else if (!strcmp(a, "--set")) {
            if (ms_cli_parse_set("figures", val, f->model_sets, &f->n_model_sets, f->platform_sets,
                                 &f->n_platform_sets))
                return 2;
        }
        else if (!strcmp(a, "--seed")) {
            if (parse_u64_flag(a, val, 0, 4294967294ULL, &f->seed))
                return 2;
        } else if (!strcmp(a, "--requests")) {
            if (parse_u64_flag(a, val, 2, 100000, &f->requests))
                return 2;
        } else
            return ms_cli_usage("figures: unknown option '%s' (see moesim figures --help)", a);
    }
    return 0;
}

static void known_names(char *out, size_t cap)
{
    out[0] = 0;
    for (size_t i = 0; i < ms_n_figures; i++) {
        size_t u = strlen(out);
        snprintf(out + u, cap - u, "%s%s", i ? ", " : "", ms_figures[i].name);
    }
}

/* Marks the figures --only names in sel[]; every figure without --only. */
static int select_figures(const char *only, int *sel)
{
    for (size_t i = 0; i < ms_n_figures; i++)
        sel[i] = only == NULL;
    if (!only)
        return 0;
    char buf[1024], known[1024];
    if (strlen(only) >= sizeof buf)
        return ms_cli_usage("figures: --only list too long");
    strcpy(buf, only);
    known_names(known, sizeof known);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const ms_figure *f = ms_figure_find(tok);
        if (!f)
            return ms_cli_usage("figures: unknown figure '%s' (known: %s)", tok, known);
        sel[f - ms_figures] = 1;
    }
    return 0;
}

static void print_list(void)
{
    for (size_t i = 0; i < ms_n_figures; i++)
        printf("%-20s %-22s %s\n", ms_figures[i].name, ms_figures[i].paper, ms_figures[i].title);
}

/* Paths go into a gnuplot command line inside single and double quotes. */
static int path_ok_for_gnuplot(const char *p)
{
    return strlen(p) < 900 && !strpbrk(p, "'\"\\$`");
}

static int generate_default(const fig_flags *f, const ms_model *model, const char *path, ms_err *err)
{
    ms_gen_params p;
    if (ms_gen_model_defaults(&p, model, err))
        return -1;
    p.seed = f->seed;
    p.requests = f->requests;
    ms_gen_summary sum;
    if (ms_gen_write(&p, model, path, &sum, err))
        return -1;
    printf("default trace %s: %s, %llu requests, %llu iterations, %llu layer-steps (seed %llu)\n", path,
           model->name, (unsigned long long)sum.requests, (unsigned long long)sum.iterations,
           (unsigned long long)sum.layer_steps, (unsigned long long)f->seed);
    return 0;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs and renders the selected figures; a figure whose needs the trace
 * lacks is skipped with a note. */
static int make_figures(const ms_fig_ctx *ctx, const int *sel, ms_err *err)
{
    double t_all = wall_s();
    int made = 0, skipped = 0;
    for (size_t i = 0; i < ms_n_figures; i++) {
        const ms_figure *f = &ms_figures[i];
        if (!sel[i])
            continue;
        const char *missing = ms_figure_missing(f, ctx->meta);
        if (missing) {
            printf("skipped %-20s the trace has %s\n", f->name, missing);
            skipped++;
            continue;
        }
        double t0 = wall_s();
        if (ms_figure_run(f, ctx, err) || ms_figure_render(f, ctx, err))
            return ms_fail_prefix(err, "figures: %s", f->name);
        printf("%-20s %-22s %6.1f s  %s/%s.png, .pdf\n", f->name, f->paper, wall_s() - t0, ctx->out_dir, f->name);
        fflush(stdout);
        made++;
    }
    printf("%d figure%s in %.1f s", made, made == 1 ? "" : "s", wall_s() - t_all);
    if (skipped)
        printf(" (%d skipped)", skipped);
    printf("\n");
    return 0;
}

int ms_cli_figures(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(figures_usage, stdout);
        return 0;
    }
    fig_flags f = {.out_dir = "moesim-figures", .platform = "rtx3090-pcie4", .seed = 42,
                   .requests = FIG_DEFAULT_REQUESTS};
    int sel[FIG_MAX_ONLY];
    int rc = parse_figures_flags(argc, argv, &f);
    if (rc || (rc = select_figures(f.only, sel)))
        return rc;
    if (f.list) {
        print_list();
        return 0;
    }
    if (!path_ok_for_gnuplot(f.out_dir))
        return ms_cli_usage("figures: --out %s: quotes, backslashes, $ and ` are not allowed (and at most 900 "
                            "characters)", f.out_dir);
    if (!f.trace && !f.model)
        f.model = "mixtral-8x7b";
    ms_err err;
    ms_model model;
    ms_platform plat;
    char trace[1024];
    if (!f.model && f.n_model_sets)
        return ms_cli_error("figures: --set model.KEY needs --model (with --trace the model is optional)");
    if (f.trace && ms_run_check_model_sets(f.model_sets, f.n_model_sets, &err)) /* without: the trace is made from the model */
        return ms_cli_error(err.msg);
    if ((f.model && ms_model_load_set(f.model, f.model_sets, f.n_model_sets, &model, &err)) ||
        ms_platform_load_set(f.platform, f.platform_sets, f.n_platform_sets, &plat, &err) ||
        ms_out_make_dir("figures: --out", f.out_dir, &err))
        return ms_cli_error(err.msg);
    if (!f.trace) {
        snprintf(trace, sizeof trace, "%s/default-trace.h5", f.out_dir);
        if (generate_default(&f, &model, trace, &err))
            return ms_cli_error(err.msg);
        f.trace = trace;
    }
    ms_trace_reader *rd = ms_reader_open(f.trace, &err);
    if (!rd)
        return ms_cli_error(err.msg);
    ms_fig_ctx ctx = {.out_dir = f.out_dir, .trace = f.trace, .meta = ms_reader_meta(rd),
                      .model = f.model ? &model : NULL, .plat = &plat, .seed = f.seed};
    rc = make_figures(&ctx, sel, &err);
    ms_reader_close(rd);
    return rc ? ms_cli_error(err.msg) : 0;
}
