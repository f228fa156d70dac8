/* moesim trace gen (--model NAME | --params P.ini) -o OUT.h5 [...]: writes a
 * seeded synthetic trace (traces/synth/gen.h; every knob in docs/generator.md;
 * params files in traces/synth/gen_params.h). */
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/profile.h"
#include "sim/cli/cli_trace_common.h"
#include "traces/synth/gen.h"
#include "traces/synth/gen_params.h"

#define MAX_SETTINGS 128

static const char gen_usage[] =
    "usage: moesim trace gen --model NAME -o OUT.h5 [--params P.ini] [--seed N] [--requests N]\n"
    "                        [--layer-steps N] [--set KNOB=VALUE ...] [--force] [--help]\n"
    "       moesim trace gen --params P.ini -o OUT.h5 [...]   (P.ini has a [model] section)\n";

static const char gen_help[] =
    "\n"
    "Writes a seeded synthetic routing trace shaped like model NAME (a model\n"
    "profile name, or a path to a .ini).  Requests come from semantic clusters,\n"
    "each with skewed per-layer expert preferences that balance out over the\n"
    "whole trace; gates are Dirichlet draws around the preference, coupled to\n"
    "the previous layer's experts and to the previous decode step.  The same\n"
    "flags and seed always give the same file, byte for byte.\n"
    "\n"
    "  --model NAME        model profile (required unless the params file has [model])\n"
    "  --params P.ini      knobs ([gen]), shape ([model]) and per-layer popularity\n"
    "                      ([popularity]) from a params file, e.g. one written by\n"
    "                      moesim trace fit; flags and --set override its knobs\n"
    "  -o, --output OUT    trace file to write (required)\n"
    "  --seed N            same as --set seed=N\n"
    "  --requests N        same as --set requests=N\n"
    "  --layer-steps N     generate until iterations x L reaches about N (the\n"
    "                      request that crosses N is the last); without\n"
    "                      --requests, the request count is not capped\n"
    "  --set KNOB=VALUE    set one generator knob (repeatable; a knob once)\n"
    "  --force             write even when the estimated size is more than the free\n"
    "                      space of OUT's file system (on a terminal the estimate\n"
    "                      is printed first; a write that fills the disk still ends\n"
    "                      with one line and leaves no file)\n"
    "\n"
    "OUT is written as trace format v2 (checksummed, docs/trace-format.md) through a\n"
    "temporary file beside it, renamed into place at the end; OUT must not be an\n"
    "input, a device or a folder.  On a terminal, a progress line shows on stderr.\n"
    "\n"
    "knobs (docs/generator.md explains each and the statistic it controls):\n";

typedef struct {
    const char *model, *out, *params;
    const char *keys[MAX_SETTINGS], *values[MAX_SETTINGS];
    int n;
    int requests_given, layer_steps_given;
    int force;
} gen_args;

static int remember(gen_args *a, const char *key, const char *value, const char *flag)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->keys[i], key))
            return ms_cli_usage("trace gen: knob %s given twice (second time by %s)", key, flag);
    if (a->n == MAX_SETTINGS)
        return ms_cli_usage("trace gen: more than %d settings", MAX_SETTINGS);
    a->keys[a->n] = key;
    a->values[a->n++] = value;
    return 0;
}

/* "--set k=v": splits in place into key and value. */
static int remember_setting(gen_args *a, char *kv)
{
    char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return ms_cli_usage("trace gen: --set '%s' is not KNOB=VALUE", kv);
    *eq = '\0';
    return remember(a, kv, eq + 1, "--set");
}

/* Returns 0 when parsed, 1 for --help, or a usage exit code (error printed). */
static int parse_args(int argc, char **argv, gen_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h"))
            return 1;
        if (!strcmp(f, "--force")) {
            a->force = 1;
            continue;
        }
        int known = !strcmp(f, "--model") || !strcmp(f, "-o") || !strcmp(f, "--output") ||
                    !strcmp(f, "--seed") || !strcmp(f, "--requests") || !strcmp(f, "--layer-steps") ||
                    !strcmp(f, "--set") || !strcmp(f, "--params");
        if (!known)
            return ms_cli_usage("trace gen: unknown %s '%s' (see moesim trace gen --help)",
                                f[0] == '-' ? "option" : "argument", f);
        if (i + 1 >= argc)
            return ms_cli_usage("trace gen: %s needs a value", f);
        char *v = argv[++i];
        int rc = 0;
        if (!strcmp(f, "--model")) {
            if (a->model)
                return ms_cli_usage("trace gen: --model given twice");
            a->model = v;
        } else if (!strcmp(f, "-o") || !strcmp(f, "--output")) {
            if (a->out)
                return ms_cli_usage("trace gen: -o given twice");
            a->out = v;
        } else if (!strcmp(f, "--params")) {
            if (a->params)
                return ms_cli_usage("trace gen: --params given twice");
            a->params = v;
        } else if (!strcmp(f, "--seed")) {
            rc = remember(a, "seed", v, f);
        } else if (!strcmp(f, "--requests")) {
            rc = remember(a, "requests", v, f);
        } else if (!strcmp(f, "--layer-steps")) {
            rc = remember(a, "layer_steps", v, f);
        } else {
            rc = remember_setting(a, v);
        }
        if (rc)
            return rc;
    }
    for (int i = 0; i < a->n; i++) {
        a->requests_given |= !strcmp(a->keys[i], "requests");
        a->layer_steps_given |= !strcmp(a->keys[i], "layer_steps");
    }
    if (!a->model && !a->params)
        return ms_cli_usage("trace gen: missing --model NAME (or --params P.ini with a [model] section)");
    if (!a->out || !*a->out)
        return ms_cli_usage("trace gen: missing -o OUT.h5");
    return 0;
}

static int apply_settings(const gen_args *a, ms_gen_params *p)
{
    ms_err err;
    /* a layer-step budget alone means "as many requests as it takes" */
    if (a->layer_steps_given && !a->requests_given)
        p->requests = 0;
    for (int i = 0; i < a->n; i++)
        if (ms_gen_set(p, a->keys[i], a->values[i], &err))
            return ms_cli_usage("%s", err.msg);
    return 0;
}

/* E[min(max(X, lo), hi)] for X lognormal with median m and sigma s: the
 * mean length draw_length() gives (before rounding). */
static double clipped_lognormal_mean(double m, double s, double lo, double hi)
{
    if (!(s > 0))
        return m < lo ? lo : m > hi ? hi : m;
    double mu = log(m);
    double a = lo > 0 ? (log(lo) - mu) / s : -INFINITY, b = (log(hi) - mu) / s;
    double below = lo > 0 ? gsl_cdf_ugaussian_P(a) : 0, above = gsl_cdf_ugaussian_Q(b);
    double inside = exp(mu + s * s / 2) * (gsl_cdf_ugaussian_P(b - s) - (lo > 0 ? gsl_cdf_ugaussian_P(a - s) : 0));
    return lo * below + hi * above + inside;
}

uint64_t ms_trace_cli_gen_estimate(const ms_gen_params *p, const ms_trace_meta *m)
{
    double prompt = clipped_lognormal_mean(p->prompt_median, p->prompt_sigma, p->prompt_min, p->prompt_max);
    double output = clipped_lognormal_mean(p->output_median, p->output_sigma, p->output_min, p->output_max);
    if (p->n_lens) { /* a params file's length list: its means */
        prompt = output = 0;
        for (uint32_t i = 0; i < p->n_lens; i++) {
            prompt += p->prompt_lens[i] / (double)p->n_lens;
            output += p->output_lens[i] / (double)p->n_lens;
        }
    }
    double n = (double)p->requests;
    if (p->layer_steps) { /* generation stops once iterations x L reaches layer_steps */
        double by_steps = ceil((double)p->layer_steps / ((double)m->L * (1 + output)));
        n = p->requests && (double)p->requests < by_steps ? (double)p->requests : by_steps;
    }
    double row = (double)(ms_trace_request_bytes(m, 1, 0, 0, 0) - ms_trace_request_bytes(m, 0, 0, 0, 0));
    double iter = (double)(ms_trace_request_bytes(m, 0, 1, 0, 0) - ms_trace_request_bytes(m, 0, 0, 0, 0));
    double fixed = (double)ms_trace_request_bytes(m, 0, 0, 0, 0);
    double per = (prompt + output) * row + (1 + output) * iter + (p->token_ids ? prompt * 4 : 0) + fixed;
    double total = n * per + (double)(64 << 10);
    return total >= 1.8e19 ? UINT64_MAX : (uint64_t)total;
}

static void print_summary(const char *out, const ms_model *m, const ms_gen_params *p, const ms_gen_summary *s)
{
    struct stat st;
    double mib = stat(out, &st) == 0 ? (double)st.st_size / 1048576.0 : -1;
    printf("wrote %s: %llu requests, %llu iterations, %llu rows, %llu layer-steps, %.2f MiB (%s, seed %llu)\n",
           out, (unsigned long long)s->requests, (unsigned long long)s->iterations,
           (unsigned long long)s->rows, (unsigned long long)s->layer_steps, mib, m->name,
           (unsigned long long)p->seed);
}

int ms_cli_trace_gen(int argc, char **argv)
{
    gen_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc == 1) {
        fputs(gen_usage, stdout);
        fputs(gen_help, stdout);
        ms_gen_print_knobs(stdout);
        return 0;
    }
    if (rc)
        return rc;
    ms_err err;
    ms_out_input(a.params);
    if (ms_out_check("-o", a.out, &err))
        return ms_cli_error(err.msg);
    ms_model model;
    if (a.model && ms_model_load(a.model, &model, &err))
        return ms_cli_error(err.msg);
    ms_gen_file file;
    if (a.params) {
        if (ms_gen_file_load(a.params, a.model ? &model : NULL, &file, &err))
            return ms_cli_usage("%s", err.msg);
        if (!a.model && !file.has_model) {
            ms_gen_file_free(&file);
            return ms_cli_usage("trace gen: %s has no [model] section: pass --model NAME", a.params);
        }
        if (a.model) { /* the profile's shape and bytes win over [model] */
            file.p.layer_expert_bytes = NULL;
            file.p.layer_dense_bytes = NULL;
        } else {
            model = file.model;
        }
    } else { /* the defaults and the model's [routing] knobs (docs/generator.md) */
        memset(&file, 0, sizeof file);
        if (ms_gen_model_defaults(&file.p, &model, &err))
            return ms_cli_error(err.msg);
    }
    ms_gen_params p = file.p;
    if ((rc = apply_settings(&a, &p))) {
        ms_gen_file_free(&file);
        return rc;
    }
    /* the estimate needs the knobs checked and the trace's shape */
    ms_trace_meta meta;
    if (ms_gen_meta(&p, &model, &meta, &err)) { /* validates the knobs */
        ms_gen_file_free(&file);
        return ms_cli_error(err.msg);
    }
    uint64_t est = ms_trace_cli_gen_estimate(&p, &meta);
    ms_trace_meta_free(&meta);
    if (ms_trace_cli_space("-o", a.out, est, "uncompressed, from the knobs' expected lengths", a.force, &err)) {
        ms_gen_file_free(&file);
        return ms_cli_error(err.msg);
    }
    ms_gen_summary sum;
    ms_trace_cli_progress_begin("trace gen", p.requests);
    rc = ms_gen_write(&p, &model, a.out, &sum, &err);
    ms_trace_cli_progress_end();
    ms_gen_file_free(&file);
    if (rc)
        return ms_cli_error(err.msg);
    print_summary(a.out, &model, &p, &sum);
    return 0;
}
