/* `moesim run` and `moesim list`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/cli/cli.h"
#include "sim/engine/engine.h"
#include "sim/core/out.h"
#include "sim/core/paths.h"
#include "sim/engine/report.h"
#include "sim/engine/runkeys.h"

static const char run_usage[] =
    "usage: moesim run --trace FILE (--cache-experts N | --cache-bytes B | --cache-gb G) [options]\n"
    "\n"
    "  --trace FILE        trace (format v2, or v1 without checksums; see docs/trace-format.md)\n"
    "  --model NAME|INI    model profile (checks L and J; FLOPs of expert compute); default: none,\n"
    "                      sizes come from the trace and FLOPs assume 2 bytes per parameter\n"
    "  --platform NAME|INI platform profile (default rtx3090-pcie4)\n"
    "  --prefetch X[:k=v]  prefetch policy (default none)\n"
    "  --cache Y[:k=v]     cache policy (default lru)\n"
    "  --sched Z[:k=v]     scheduler (default gpu)\n"
    "  --cache-experts N   GPU expert cache holds N experts\n"
    "  --cache-bytes B     ... or B bytes (suffixes KB MB GB, KiB MiB GiB) charged per layer's expert size\n"
    "  --cache-gb G        ... or G * 1e9 bytes\n"
    "  --distance D        prefetch distance in layers (default 1)\n"
    "  --batch B           continuous-batching limit in requests (default 1)\n"
    "  --host-bytes B      host-memory expert tier; experts beyond it are read from SSD (default 0: all in host)\n"
    "  --h2d-gbps G        host-to-GPU link in GB/s (the same as --set platform.h2d_bw=GGB/s)\n"
    "  --expert-bits B     bits per weight of the routed experts, scales included (quantised: bytes =\n"
    "                      expert_params x B / 8); default: the trace's bytes\n"
    "  --dense-bits B      the same for each layer's dense weights\n"
    "  --offline           ignore arrival times (every request arrives at t = 0)\n"
    "  --events FILE       CSV of every copy, hit, miss and compute interval\n"
    "  --seed N            seed handed to policies (default 1)\n"
    "  --train F|auto      training split: the first F of the requests (of the iterations, for a\n"
    "                      one-request trace) are learnt from offline and not replayed; auto = 0.7\n"
    "                      when a chosen policy learns offline (fmoe, eam, transition, static), else 0\n"
    "  --topk-fill zero|even  top-k-only traces: probability outside the top-k is 0 (default) or\n"
    "                      the mass the top-k leaves, spread evenly\n"
    "  --gpus N            GPUs with expert parallelism (default: the platform's gpus, else 1)\n"
    "  --placement P       experts on GPUs: round-robin (default), layer, balanced, or a CSV file\n"
    "                      of layer,expert,gpu lines (docs/engine.md \"Several GPUs\")\n"
    "  --cache-per-gpu 0|1 1: the cache size is every GPU's; 0 (default): the total, split evenly\n"
    "  --framework NAME    serving framework's host costs per layer and iteration (hf-eager, vllm,\n"
    "                      llama-cpp; none); default: the platform's [platform] framework, else none\n"
    "  --set platform.KEY=VALUE, --set model.KEY=VALUE\n"
    "                      override one key of the profile (any [section]; e.g. gpu_mem_bytes=48GiB,\n"
    "                      h2d_bw=64GB/s), validated like the file; repeatable; echoed in --json config\n"
    "  --json              print {\"config\": ..., \"metrics\": ...} instead of the table\n"
    "\n"
    "Each flag is a key of the run configuration (docs/engine.md): the flag --cache-experts is the key\n"
    "cache_experts of a sweep spec and the column of a regress golden file.\n";

static int need_value(const char *cmd, int i, int argc, char **argv)
{
    if (i + 1 >= argc)
        return ms_cli_usage("%s: %s needs a value", cmd, argv[i]);
    return 0;
}


int ms_cli_parse_set(const char *cmd, const char *val, ms_profile_set *model_sets, int *n_model,
                     ms_profile_set *platform_sets, int *n_platform)
{
    const char *dot = strchr(val, '.'), *eq = strchr(val, '=');
    int is_model = !strncmp(val, "model.", 6), is_platform = !strncmp(val, "platform.", 9);
    if (!dot || !eq || eq < dot || eq == dot + 1 || (!is_model && !is_platform))
        return ms_cli_usage("%s: --set %s: expected platform.KEY=VALUE or model.KEY=VALUE", cmd, val);
    ms_profile_set *sets = is_model ? model_sets : platform_sets;
    int *n = is_model ? n_model : n_platform;
    if (*n == MS_CLI_MAX_SETS)
        return ms_cli_usage("%s: --set %s: more than %d overrides of one profile", cmd, val, MS_CLI_MAX_SETS);
    /* the key is copied into a static pool: flags live as long as the process */
    static char keys[2 * MS_CLI_MAX_SETS][64];
    static int used;
    size_t klen = (size_t)(eq - dot - 1);
    if (klen >= sizeof keys[0] || used == 2 * MS_CLI_MAX_SETS)
        return ms_cli_usage("%s: --set %s: key too long", cmd, val);
    memcpy(keys[used], dot + 1, klen);
    keys[used][klen] = '\0';
    for (int i = 0; i < *n; i++)
        if (!strcmp(sets[i].key, keys[used]))
            return ms_cli_usage("%s: --set %s: %s.%s is set twice", cmd, val, is_model ? "model" : "platform",
                                keys[used]);
    sets[(*n)++] = (ms_profile_set){keys[used++], eq + 1, NULL};
    return 0;
}

int ms_cli_load_profiles(ms_run_flags *f, ms_run_config *cfg, ms_model *model, ms_platform *platform, ms_err *err)
{
    if (!f->model && f->n_model_sets)
        return ms_fail(err, "--set model.%s: needs --model", f->model_sets[0].key);
    if (ms_run_check_model_sets(f->model_sets, f->n_model_sets, err))
        return -1;
    if (f->model && ms_model_load_set(f->model, f->model_sets, f->n_model_sets, model, err))
        return -1;
    if (ms_platform_load_set(f->platform, f->platform_sets, f->n_platform_sets, platform, err))
        return -1;
    int have_fw;
    if (ms_framework_resolve(f->framework, &f->fw, &have_fw, err))
        return ms_fail_prefix(err, "--framework");
    cfg->framework = have_fw ? &f->fw : NULL;
    cfg->model = f->model ? model : NULL;
    cfg->platform = platform;
    cfg->model_sets = f->model_sets;
    cfg->n_model_sets = f->n_model_sets;
    cfg->platform_sets = f->platform_sets;
    cfg->n_platform_sets = f->n_platform_sets;
    return 0;
}

/* One key of the run configuration from its flag (runkeys.h): 0 or 2. */
static int set_run_key(ms_run_config *cfg, ms_run_flags *f, int id, const char *flag, const char *val)
{
    double x;
    char why[128];
    if (id == MS_RK_OFFLINE) /* a flag without a value: handled before */
        return ms_cli_usage("%s: %s takes no value", f->cmd, flag);
    int rc = ms_runkey_apply(cfg, id, val, &x, why, sizeof why);
    if (rc < 0)
        return ms_cli_usage("%s: %s %s: %s", f->cmd, flag, val, why);
    if (id == MS_RK_CACHE_EXPERTS || id == MS_RK_CACHE_BYTES || id == MS_RK_CACHE_GB)
        f->cap_flags++;
    if (rc == 0)
        return 0;
    switch ((ms_runkey_id)id) { /* the keys that are not fields of ms_run_config */
    case MS_RK_MODEL: f->model = val; break;
    case MS_RK_PLATFORM: f->platform = val; break;
    case MS_RK_FRAMEWORK: f->framework = val; break;
    case MS_RK_H2D_GBPS: {
        /* the platform's link, as the sweep key does: an override of h2d_bw */
        static char bw[64];
        snprintf(bw, sizeof bw, "%.17gGB/s", x);
        if (f->n_platform_sets == MS_CLI_MAX_SETS)
            return ms_cli_usage("%s: %s: too many platform overrides", f->cmd, flag);
        f->platform_sets[f->n_platform_sets++] = (ms_profile_set){"h2d_bw", bw, NULL};
        break;
    }
    default:
        return ms_cli_usage("%s: %s takes no value", f->cmd, flag);
    }
    return 0;
}

int ms_cli_parse_run_flags(int argc, char **argv, ms_run_config *cfg, ms_run_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            f->json = 1;
            continue;
        }
        if (!strcmp(a, "--offline")) {
            cfg->offline = 1;
            continue;
        }
        if (strncmp(a, "--", 2))
            return ms_cli_usage("%s: unexpected argument '%s' (see moesim %s --help)", f->cmd, a, f->cmd);
        if (need_value(f->cmd, i, argc, argv))
            return 2;
        const char *val = argv[++i];
        int extra = f->extra ? f->extra(f->ctx, a, val) : 0;
        if (extra == 1)
            continue;
        if (extra)
            return 2;
        if (!strcmp(a, "--set")) {
            if (ms_cli_parse_set(f->cmd, val, f->model_sets, &f->n_model_sets, f->platform_sets, &f->n_platform_sets))
                return 2;
            continue;
        }
        int id = ms_runkey_find_flag(a);
        if (id < 0)
            return ms_cli_usage("%s: unknown option '%s' (see moesim %s --help)", f->cmd, a, f->cmd);
        if (set_run_key(cfg, f, id, a, val))
            return 2;
    }
    if (!cfg->trace_path)
        return ms_cli_usage("%s: --trace FILE is required", f->cmd);
    ms_out_input(cfg->trace_path);
    if (f->cap_flags != 1)
        return ms_cli_usage("%s: give exactly one of --cache-experts, --cache-bytes, --cache-gb", f->cmd);
    return 0;
}

int ms_cli_run(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(run_usage, stdout);
            return 0;
        }
    ms_run_config cfg = {.prefetch_spec = "none", .cache_spec = "lru", .sched_spec = "gpu",
                         .distance = 1, .max_batch = 1, .seed = 1};
    ms_run_flags f = {.cmd = "run", .platform = "rtx3090-pcie4"};
    int rc = ms_cli_parse_run_flags(argc, argv, &cfg, &f);
    if (rc)
        return rc;
    ms_err err;
    ms_model model;
    ms_platform platform;
    if (ms_cli_load_profiles(&f, &cfg, &model, &platform, &err))
        return ms_cli_error(err.msg);
    if (cfg.events_path && !strcmp(cfg.events_path, "-")) /* the CSV and the result would mix */
        return ms_cli_usage("run: --events -: the run prints its %s to standard output; write the events to a file",
                            f.json ? "JSON" : "table");
    if (cfg.events_path && ms_out_check("--events", cfg.events_path, &err))
        return ms_cli_error(err.msg);
    ms_metrics m;
    if (ms_run(&cfg, &m, &err))
        return ms_cli_error(err.msg);
    for (uint32_t i = 0; i < m.n_warnings; i++)
        fprintf(stderr, "moesim: warning: %s\n", m.warnings[i]);
    if (f.json) {
        cJSON *j = ms_report_json(&cfg, &m);
        char *s = cJSON_Print(j);
        puts(s);
        free(s);
        cJSON_Delete(j);
    } else {
        ms_report_table(stdout, &cfg, &m);
    }
    ms_metrics_free(&m);
    return 0;
}

static void print_params(const ms_param_spec *p)
{
    for (int i = 0; p && p[i].name; i++) {
        if (p[i].type == MS_PARAM_ENUM)
            printf("      %-12s = %-8s %s (%s)\n", p[i].name, p[i].def, p[i].help, p[i].choices);
        else
            printf("      %-12s = %-8s %s [%g, %g]\n", p[i].name, p[i].def, p[i].help, p[i].min, p[i].max);
    }
}

/* " x 6" after a platform's GPU memory when it has several GPUs ("" else). */
static const char *gpus_note(const ms_platform *p)
{
    static char note[16];
    note[0] = '\0';
    if (p->gpus > 1)
        snprintf(note, sizeof note, " x %u", p->gpus);
    return note;
}

static int list_profiles(const char *kind)
{
    char **names;
    int n;
    ms_err err;
    char dir[4096];
    if (ms_path_profiles(dir, sizeof dir, &err) || ms_profile_list(kind, &names, &n, &err))
        return ms_cli_error(err.msg);
    printf("%s (%s/%s):\n", kind, dir, kind);
    for (int i = 0; i < n; i++) {
        ms_model mo;
        ms_platform pl;
        ms_framework fw;
        if (!strcmp(kind, "models") && !ms_model_load(names[i], &mo, &err))
            printf("  %-20s L=%-3u J=%-4u K=%-2u %-6s %8.2f MB/expert  %s\n", names[i], mo.moe_layers, mo.experts,
                   mo.top_k, mo.dtype, mo.expert_bytes / 1e6, mo.description);
        else if (!strcmp(kind, "platforms") && !ms_platform_load(names[i], &pl, &err))
            printf("  %-20s H2D %6.1f GB/s  GPU %6.1f GB%s  %s\n", names[i], pl.h2d_bw / 1e9, pl.gpu_mem_bytes / 1e9,
                   gpus_note(&pl), pl.description);
        else if (!strcmp(kind, "frameworks") && !ms_framework_load(names[i], &fw, &err))
            printf("  %-20s %.3g ms per layer, %.3g ms per iteration  %s\n", names[i], fw.layer_s * 1e3,
                   fw.iteration_s * 1e3, fw.description);
        else
            printf("  %-20s (invalid: %s)\n", names[i], err.msg);
    }
    ms_profile_list_free(names, n);
    return 0;
}

int ms_cli_list(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        puts("usage: moesim list\n\nPrints every registered policy with its parameters and defaults,\n"
             "then every model, platform and framework profile.");
        return 0;
    }
    if (argc > 1)
        return ms_cli_usage("list: unexpected argument '%s'", argv[1]);
    for (int kind = MS_KIND_PREFETCH; kind <= MS_KIND_SCHED; kind++) {
        printf("%s policies (--%s NAME[:k=v,...]):\n", ms_policy_kind_name(kind), ms_policy_kind_name(kind));
        for (int i = 0; ms_policy_registry[i]; i++) {
            const ms_policy_desc *d = ms_policy_registry[i];
            if ((int)d->kind != kind)
                continue;
            printf("  %-14s %s\n", d->name, d->summary);
            print_params(d->params);
        }
    }
    return list_profiles("models") || list_profiles("platforms") || list_profiles("frameworks");
}
