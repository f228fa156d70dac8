/* moesim trace fit TRACE -o PARAMS.ini [--seed N] [--trial-seeds N]
 * [--passes N]: fits the generator's knobs to a trace (traces/synth/fit.h) and
 * writes a params file for `moesim trace gen --params`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/cli/cli_trace_common.h"
#include "traces/synth/fit.h"
#include "traces/synth/fit_targets.h"

static const char fit_help[] =
    "usage: moesim trace fit TRACE -o PARAMS.ini [--seed N] [--trial-seeds N] [--passes N]\n"
    "                        [--decode-phases N]\n"
    "       moesim trace fit --against MODEL -o ROUTING.ini [--seed N] [--trial-seeds N]\n"
    "                        [--trial-requests N] [--max-evals N]\n"
    "\n"
    "Estimates generator parameters from TRACE (recorded or synthetic) and\n"
    "writes them, with the trace's shape (L, J, K, per-layer bytes) and\n"
    "per-layer expert popularity, to PARAMS.ini; then\n"
    "  moesim trace gen --params PARAMS.ini -o TWIN.h5 [--requests N]\n"
    "writes any amount of traffic shaped like TRACE.  Copied: shape, probs\n"
    "kind, embeddings, speculative depth, token ids, request count and lengths\n"
    "(a list, up to 4096 requests).  Measured: per-layer popularity of prompt\n"
    "rows and, on one request, of each half of the decode steps (or of N\n"
    "phases, --decode-phases; smoothed to the source's distinct-expert\n"
    "coverage); lognormal lengths; arrival rate;\n"
    "per request, the period of a looping decode routing and its repeat\n"
    "probability ([periods], by moments from the exact-lag reuse profile, only\n"
    "where the multiples of the period stand out by two standard errors).\n"
    "Estimated (two or more requests): pref_alpha from h_trace - h_req.\n"
    "Searched (GSL Brent on small seeded trial generations), knob -> statistic\n"
    "of moesim trace stats: gate_alpha -> h_req (request entropy), weight_power\n"
    "-> hw_iter (weighted iteration entropy), decode_reuse / decode_mix ->\n"
    "reuse_prev (previous decode step), decode_recall -> reuse_w8 (last 8 decode\n"
    "steps), layer_corr -> mi_top1 (layer l -> l+1 top-1 MI), token_repeat ->\n"
    "xreq_overlap (two or more requests: mean best overlap of a decode step\n"
    "with the decode steps of earlier requests).  token_noise is not fitted: the\n"
    "output prints its statistic xreq_exact (share of those steps found whole)\n"
    "for source and twin (docs/traces.md \"Near repeats\").  Calibrated (no\n"
    "decode popularities, i.e. several requests): the popularity, once, by the\n"
    "source / twin activation share of each expert, kept only when the twin's\n"
    "shares come closer.  The output lists\n"
    "each knob with its statistic (source / twin), knobs at a bound of their\n"
    "range, and what was not fitted and why.  Deterministic: same TRACE and\n"
    "flags, same file.\n"
    "\n"
    "  -o, --output P.ini  params file to write (required)\n"
    "  --seed N            seed written to the params (trials use N+1..), default 1\n"
    "  --trial-seeds N     trial generations averaged per evaluation, 1..16 (default 2)\n"
    "  --passes N          rounds of coordinate search, 1..8 (default 2)\n"
    "  --decode-phases N   one-request TRACE: measure the decode popularity in N\n"
    "                      phases of the generation, 1..16 (default 2, the halves;\n"
    "                      docs/traces.md \"Decode phases\")\n"
    "\n"
    "--against MODEL fits the routing knobs of model profile MODEL to its\n"
    "published locality targets (sim/profiles/targets/MODEL.ini; moesim trace\n"
    "stats --against): pref_alpha, decode_reuse / decode_mix (one locality knob,\n"
    "as above) and decode_recall together, by GSL's Nelder-Mead simplex on\n"
    "seeded trial generations of the model's default lengths, minimising the\n"
    "squared errors in units of each target's tolerance; writes the [routing]\n"
    "section and its [source] lines for the profile (traces/synth/fit_targets.h,\n"
    "docs/generator.md \"Per-model routing\").\n"
    "  --trial-requests N  requests per trial generation, 1..4096 (default 16)\n"
    "  --max-evals N       objective evaluations at most, 1..1000 (default 80)\n";

static int parse_count(const char *flag, const char *v, unsigned long long lo, unsigned long long hi,
                       unsigned long long *out)
{
    if (ms_parse_u64(v, out) || *out < lo || *out > hi)
        return ms_cli_usage("trace fit: %s '%s' is not an integer in [%llu, %llu]", flag, v, lo, hi);
    return 0;
}

/* trace fit --against MODEL: the model's routing knobs to its targets. */
static int fit_against(const char *model, const char *in, const char *out, int trace_only,
                       const ms_fit_targets_options *o)
{
    if (in)
        return ms_cli_usage("trace fit: --against MODEL fits a profile to its targets: no TRACE ('%s')", in);
    if (trace_only)
        return ms_cli_usage("trace fit: --passes and --decode-phases go with a TRACE, not --against");
    if (!out || !*out)
        return ms_cli_usage("trace fit: missing -o ROUTING.ini");
    ms_err err;
    ms_model m;
    ms_targets *ts = ms_xcalloc(1, sizeof *ts);
    if (ms_model_load(model, &m, &err) || ms_targets_load(m.name, ts, &err)) {
        free(ts);
        return ms_cli_error(err.msg);
    }
    /* the profile and the targets are inputs: -o may name neither (checked before minutes of fitting) */
    ms_out_input(m.file);
    ms_out_input(ts->file);
    if (ms_out_check("-o", out, &err)) {
        free(ts);
        return ms_cli_error(err.msg);
    }
    ms_fit_targets_result *r = ms_xcalloc(1, sizeof *r);
    int rc = ms_fit_targets(&m, ts, o, r, &err) || ms_fit_targets_write(&m, ts, o, r, out, &err);
    if (!rc) {
        printf("wrote %s: %s, %d targets, %u evaluations, %u trial generations; cost %.4g -> %.4g\n", out, m.name,
               ts->n, r->evals, r->generations, r->start_cost, r->cost);
        for (int i = 0; i < ts->n; i++)
            printf("  %-22s target %.3f  start %.3f  fitted %.3f\n", ts->t[i].name, ts->t[i].value,
                   r->start_measured[i], r->measured[i]);
        printf("  pref_alpha %.4g, decode_reuse %.4g, decode_mix %.4g, decode_recall %.4g\n", r->p.pref_alpha,
               r->p.decode_reuse, r->p.decode_mix, r->p.decode_recall);
    }
    free(ts);
    free(r);
    return rc ? ms_cli_error(err.msg) : 0;
}

int ms_cli_trace_fit(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *against = NULL;
    ms_fit_options o;
    ms_fit_default_options(&o);
    ms_fit_targets_options to;
    ms_fit_targets_default_options(&to);
    int trace_only = 0, against_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            fputs(fit_help, stdout);
            return 0;
        }
        int valued = !strcmp(f, "-o") || !strcmp(f, "--output") || !strcmp(f, "--seed") ||
                     !strcmp(f, "--trial-seeds") || !strcmp(f, "--passes") || !strcmp(f, "--decode-phases") ||
                     !strcmp(f, "--against") || !strcmp(f, "--trial-requests") || !strcmp(f, "--max-evals");
        if (!valued) {
            if (f[0] == '-' && f[1])
                return ms_cli_usage("trace fit: unknown option '%s' (see moesim trace fit --help)", f);
            if (in)
                return ms_cli_usage("trace fit: more than one TRACE ('%s' and '%s')", in, f);
            in = f;
            continue;
        }
        if (i + 1 >= argc)
            return ms_cli_usage("trace fit: %s needs a value", f);
        const char *v = argv[++i];
        unsigned long long n;
        int rc = 0;
        if (!strcmp(f, "-o") || !strcmp(f, "--output")) {
            if (out)
                return ms_cli_usage("trace fit: -o given twice");
            out = v;
        } else if (!strcmp(f, "--against")) {
            if (against)
                return ms_cli_usage("trace fit: --against given twice");
            against = v;
        } else if (!strcmp(f, "--seed")) {
            if (!(rc = parse_count(f, v, 0, 4294967294ull - 64, &n)))
                o.seed = to.seed = n;
        } else if (!strcmp(f, "--trial-seeds")) {
            if (!(rc = parse_count(f, v, 1, 16, &n)))
                o.trial_seeds = to.trial_seeds = (uint32_t)n;
        } else if (!strcmp(f, "--decode-phases")) {
            trace_only = 1;
            if (!(rc = parse_count(f, v, 1, MS_GEN_MAX_PHASES, &n)))
                o.decode_phases = (uint32_t)n;
        } else if (!strcmp(f, "--trial-requests")) {
            against_only = 1;
            if (!(rc = parse_count(f, v, 1, 4096, &n)))
                to.trial_requests = n;
        } else if (!strcmp(f, "--max-evals")) {
            against_only = 1;
            if (!(rc = parse_count(f, v, 1, 1000, &n)))
                to.max_evals = (uint32_t)n;
        } else if (!(rc = parse_count(f, v, 1, 8, &n))) {
            trace_only = 1;
            o.passes = (uint32_t)n;
        }
        if (rc)
            return rc;
    }
    if (against)
        return fit_against(against, in, out, trace_only, &to);
    if (against_only)
        return ms_cli_usage("trace fit: --trial-requests and --max-evals go with --against MODEL");
    if (!in)
        return ms_cli_usage("trace fit: missing TRACE (usage: moesim trace fit TRACE -o PARAMS.ini)");
    if (!out || !*out)
        return ms_cli_usage("trace fit: missing -o PARAMS.ini");
    ms_err err;
    /* the output is checked before minutes of fitting */
    ms_out_input(in);
    if (ms_out_check("-o", out, &err))
        return ms_cli_error(err.msg);
    ms_fit_result r;
    if (ms_fit_trace(in, &o, &r, &err))
        return ms_cli_error(err.msg);
    int rc = ms_fit_write(&r, in, out, &err);
    if (rc == 0) {
        printf("wrote %s: L %u, J %u, K %u, %llu requests; %u trial generations\n", out, r.model.moe_layers,
               r.model.experts, r.model.top_k, (unsigned long long)r.p.requests, r.trials);
        ms_fit_print(&r, stdout);
        ms_trace_cli_note_v1_file(in);
    }
    ms_fit_free(&r);
    return rc ? ms_cli_error(err.msg) : 0;
}
