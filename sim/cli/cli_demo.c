/* `moesim demo`: the main job.  Generates a seeded synthetic trace for a
 * Mixtral-8x7B-shaped model, replays it through every policy combination
 * worth comparing at four GPU expert-cache sizes, prints a table, and writes
 * the results as CSV plus one gnuplot figure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "traces/synth/gen.h"
#include "sim/cli/cli.h"
#include "sim/engine/engine.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "sim/engine/report.h"

typedef struct {
    const char *prefetch, *cache, *sched;
} combo;

/* Baseline caches on demand loading, then prefetchers over LRU, the papers'
 * systems as designed, then the bounds (oracle prefetch; Belady eviction). */
static const combo combos[] = {
    {"none", "fifo", "gpu"},        {"none", "lru", "gpu"},         {"none", "lfu", "gpu"},
    {"none", "static", "gpu"},      {"topk-id", "lru", "gpu"},      {"traced-topk", "lru", "gpu"},
    {"speculative", "lru", "gpu"},  {"fmoe", "fmoe", "gpu"},        {"eam", "eam", "gpu"},
    {"hybrimoe", "mrs", "hybrid"},  {"none", "belady", "gpu"},      {"oracle", "belady", "gpu"},
};

/* "prefetch+cache", plus "+sched" when it is not the default gpu. */
static void combo_name(const combo *c, char *out, size_t cap)
{
    snprintf(out, cap, "%s+%s%s%s", c->prefetch, c->cache, strcmp(c->sched, "gpu") ? "+" : "",
             strcmp(c->sched, "gpu") ? c->sched : "");
}
#define N_COMBOS (sizeof combos / sizeof combos[0])
static const uint32_t cache_sizes[] = {16, 32, 48, 64};
#define N_SIZES (sizeof cache_sizes / sizeof cache_sizes[0])
#define DEMO_TRAIN 0.5 /* training split for the policies that learn offline */

static const char demo_usage[] =
    "usage: moesim demo [--out DIR] [--seed N] [--requests N] [--platform NAME]\n"
    "\n"
    "Generates a seeded synthetic trace for mixtral-8x7b (DIR/mixtral-synthetic.h5), replays it\n"
    "through every policy combination at GPU expert caches of 16, 32, 48 and 64 experts\n"
    "(5.6 to 22.5 GB of Mixtral experts), prints a table, and writes DIR/demo.csv and\n"
    "DIR/demo.png (gnuplot).  The first half of the requests is the training split of the policies\n"
    "that learn offline (--train 0.5 for every run).  Every run is offline (all requests waiting at\n"
    "t = 0, served one at a time): hit rate and TPOT do not depend on arrivals at batch 1, and\n"
    "demo.csv's ttft_service_ms is the prefill's service time, without the queueing behind earlier\n"
    "requests.  Defaults: --out moesim-demo --seed 42 --requests 32 --platform rtx3090-pcie4.\n";

typedef struct {
    const char *out_dir, *platform;
    uint64_t seed, requests;
} demo_flags;

static int parse_demo_flags(int argc, char **argv, demo_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            return ms_cli_usage("demo: %s needs a value (see moesim demo --help)", a);
        const char *val = argv[++i];
        unsigned long long u;
        if (!strcmp(a, "--out"))
            f->out_dir = val;
        else if (!strcmp(a, "--platform"))
            f->platform = val;
        else if (!strcmp(a, "--seed") || !strcmp(a, "--requests")) {
            if (ms_parse_u64(val, &u) || (!strcmp(a, "--requests") && (u < 1 || u > 100000)))
                return ms_cli_usage("demo: %s %s: expected a whole number%s", a, val,
                                    strcmp(a, "--requests") ? "" : " in [1, 100000]");
            if (!strcmp(a, "--seed"))
                f->seed = u;
            else
                f->requests = u;
        } else
            return ms_cli_usage("demo: unknown option '%s' (see moesim demo --help)", a);
    }
    return 0;
}

static int generate_trace(const demo_flags *f, const ms_model *model, const char *path, ms_err *err)
{
    ms_gen_params p;
    if (ms_gen_model_defaults(&p, model, err)) /* the model's fitted routing (docs/generator.md) */
        return -1;
    p.seed = f->seed;
    p.requests = f->requests;
    ms_gen_summary sum;
    if (ms_gen_write(&p, model, path, &sum, err))
        return -1;
    printf("generated %s: %llu requests, %llu iterations, %llu layer-steps (seed %llu)\n", path,
           (unsigned long long)sum.requests, (unsigned long long)sum.iterations,
           (unsigned long long)sum.layer_steps, (unsigned long long)f->seed);
    return 0;
}

static void csv_row(FILE *csv, const combo *c, uint32_t size, const ms_metrics *m)
{
    char name[96];
    combo_name(c, name, sizeof name);
    fprintf(csv, "%s,%s,%s,%s,%u,%.6f,%llu,%llu,%llu,%.6f,%.6f,%.4f,%.4f,%.6f,%.6f\n", name, c->prefetch,
            c->cache, c->sched, size, ms_metrics_hit_rate(&m->total), (unsigned long long)m->total.hits,
            (unsigned long long)m->total.late, (unsigned long long)m->total.misses, m->total.stall_s,
            m->pcie_bytes / 1e9, m->ttft_service_mean_s * 1e3, m->tpot_mean_s * 1e3,
            ms_metrics_hit_rate(&m->phase[MS_PHASE_PREFILL]), ms_metrics_hit_rate(&m->phase[MS_PHASE_DECODE]));
}

static int run_all(const char *trace, const ms_model *model, const ms_platform *plat, FILE *csv,
                   double hit[N_COMBOS][N_SIZES], double tpot[N_COMBOS][N_SIZES], ms_err *err)
{
    fputs("combo,prefetch,cache,sched,cache_experts,hit_rate,hits,late,misses,stall_s,pcie_gb,ttft_service_ms,tpot_ms,"
          "prefill_hit_rate,decode_hit_rate\n",
          csv);
    for (size_t c = 0; c < N_COMBOS; c++)
        for (size_t s = 0; s < N_SIZES; s++) {
            ms_run_config cfg = {.trace_path = trace, .model = model, .platform = plat,
                                 .prefetch_spec = combos[c].prefetch, .cache_spec = combos[c].cache,
                                 .sched_spec = combos[c].sched, .cap_kind = MS_CAP_EXPERTS,
                                 .cap_value = cache_sizes[s],
                                 /* offline on purpose: at batch 1 the requests run one after another
                                  * whatever their arrivals, which would only add queueing (the
                                  * generator's rate is more than this setup serves) */
                                 .distance = 1, .max_batch = 1, .offline = 1, .seed = 1,
                                 /* one split for all, so every combination replays the same requests */
                                 .train_set = 1, .train_frac = DEMO_TRAIN};
            ms_metrics m;
            if (ms_run(&cfg, &m, err))
                return ms_fail_prefix(err, "demo: %s+%s+%s at %u experts", combos[c].prefetch, combos[c].cache,
                                      combos[c].sched, cache_sizes[s]);
            csv_row(csv, &combos[c], cache_sizes[s], &m);
            hit[c][s] = ms_metrics_hit_rate(&m.total);
            tpot[c][s] = m.tpot_mean_s * 1e3;
            ms_metrics_free(&m);
        }
    return 0;
}

static void print_table(const ms_platform *plat, double hit[N_COMBOS][N_SIZES], double tpot[N_COMBOS][N_SIZES])
{
    printf("\nmixtral-8x7b on %s, batch 1, offline, prefetch distance 1; the first %.0f %% of the requests\n"
           "train the policies that learn offline and every combination replays the rest\n",
           plat->name, 100 * DEMO_TRAIN);
    printf("%-24s %33s   %33s\n", "", "expert hit rate (%) by cache size", "TPOT (ms) by cache size");
    printf("%-24s", "prefetch+cache[+sched]");
    for (int pass = 0; pass < 2; pass++) {
        for (size_t s = 0; s < N_SIZES; s++)
            printf(" %7u", cache_sizes[s]);
        printf("   ");
    }
    printf("\n");
    for (size_t c = 0; c < N_COMBOS; c++) {
        char name[96];
        combo_name(&combos[c], name, sizeof name);
        printf("%-24s", name);
        for (size_t s = 0; s < N_SIZES; s++)
            printf(" %7.2f", 100 * hit[c][s]);
        printf("   ");
        for (size_t s = 0; s < N_SIZES; s++)
            printf(" %7.1f", tpot[c][s]);
        printf("\n");
    }
    printf("hit rate: weights already on the GPU at the gate; a prefetch copy still in flight is 'late'\n"
           "(demo.csv), not a hit.  none+lru: at batch 1 every token visits its L x K (layer, expert) pairs in\n"
           "the same order, so a global LRU with fewer slots evicts exactly the pair needed next (near 0 %%\n"
           "until the cache holds them all).  oracle+belady can sit below none+belady: its copies at distance\n"
           "1 take longer than a layer's compute and land after the gate (late, not hit), and each evicts when\n"
           "it starts, ahead of the need.\n");
}

static int render_figure(const char *csv, const char *png, const ms_platform *plat, ms_err *err)
{
    char combos_str[1024] = "", cmd[8192], plots[4096];
    if (ms_path_plots(plots, sizeof plots, err))
        return -1;
    for (size_t c = 0; c < N_COMBOS; c++) {
        char name[96];
        combo_name(&combos[c], name, sizeof name);
        size_t u = strlen(combos_str);
        snprintf(combos_str + u, sizeof combos_str - u, "%s%s", c ? " " : "", name);
    }
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"csv='%s'; out='@OUT@'; combos='%s'; title_text='mixtral-8x7b (synthetic trace) on %s'\" "
             "'%s/demo.gp'",
             csv, combos_str, plat->name, plots);
    if (ms_out_from_command("demo", png, cmd, err))
        return ms_fail_prefix(err, "gnuplot (is gnuplot installed? apt-get install gnuplot-nox)");
    return 0;
}

int ms_cli_demo(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(demo_usage, stdout);
        return 0;
    }
    demo_flags f = {.out_dir = "moesim-demo", .platform = "rtx3090-pcie4", .seed = 42, .requests = 32};
    int rc = parse_demo_flags(argc, argv, &f);
    if (rc)
        return rc;
    ms_err err;
    ms_model model;
    ms_platform plat;
    char trace[1024], csv_path[1024], png[1024];
    if (strlen(f.out_dir) > 900)
        return ms_cli_usage("demo: --out path too long");
    snprintf(trace, sizeof trace, "%s/mixtral-synthetic.h5", f.out_dir);
    snprintf(csv_path, sizeof csv_path, "%s/demo.csv", f.out_dir);
    snprintf(png, sizeof png, "%s/demo.png", f.out_dir);
    if (ms_model_load("mixtral-8x7b", &model, &err) || ms_platform_load(f.platform, &plat, &err) ||
        ms_out_make_dir("demo: --out", f.out_dir, &err) || generate_trace(&f, &model, trace, &err))
        return ms_cli_error(err.msg);
    ms_out *out = ms_out_open("demo", csv_path, &err);
    if (!out)
        return ms_cli_error(err.msg);
    FILE *csv = ms_out_fp(out);
    ms_report_provenance_line_head(csv, trace);
    fprintf(csv, "; model %s sha256 %s; platform %s sha256 %s\n", model.file, model.sha256, plat.file, plat.sha256);
    double hit[N_COMBOS][N_SIZES], tpot[N_COMBOS][N_SIZES];
    rc = run_all(trace, &model, &plat, csv, hit, tpot, &err);
    if (rc)
        ms_out_abort(out);
    else
        rc = ms_out_commit(out, &err);
    if (rc)
        return ms_cli_error(err.msg);
    print_table(&plat, hit, tpot);
    if (render_figure(csv_path, png, &plat, &err))
        return ms_cli_error(err.msg);
    printf("\nwrote %s and %s\n", csv_path, png);
    return 0;
}
