/* `moesim claims`: checks the seed papers' quantitative claims on their
 * testbeds (sim/apps/claims.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "sim/apps/claims.h"
#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"

static const char claims_usage[] =
    "usage: moesim claims [--only ID|PAPER[,...]] [--out DIR] [--trace FILE [--model M]] [--platform P]\n"
    "                     [--requests N] [--seed N] [--no-sensitivity] [--jobs N] [--json] [--list]\n"
    "\n"
    "Runs every quantitative claim of the seed papers (fMoE, MoE-Infinity, HybriMoE, serverless MoE)\n"
    "that moesim can check, on the paper's testbed profile and model, and says whether it holds\n"
    "(within the stated tolerance), holds in direction only, or does not hold.  A claim that does not\n"
    "fully hold is re-run with the H2D bandwidth, the cache size or the prefetch distance changed, one\n"
    "at a time, to show where it would flip (the serverless claim: its latency target).  Each model's\n"
    "trace is a seeded synthetic trace shaped like the paper's workload (semantic clusters; ShareGPT\n"
    "prompt and output lengths), DIR/claims-<model>.h5; --trace replays the given trace for every\n"
    "claim instead (its own model; --model names the profile of that model, for the sizes the trace\n"
    "lacks).  Writes DIR/claims.csv, DIR/claims_values.csv and DIR/claims.png\n"
    "(paper vs moesim).  docs/claims.md holds each claim's source and the measured table.\n"
    "Defaults: --out moesim-claims --requests 8 --seed 1; each claim's testbed (--platform replaces it;\n"
    "the serverless claim keeps its serverless profile and says so).\n"
    "--jobs N runs N claims at once, each in its own worker process (default 1); the traces are made\n"
    "first, and the table, JSON and files are byte-identical at any N.\n";

typedef struct {
    ms_claims_opts o;
    int json, list;
} claims_flags;

static int parse_u(const char *flag, const char *val, unsigned long long lo, unsigned long long hi, unsigned *out)
{
    unsigned long long u;
    if (ms_parse_u64(val, &u) || u < lo || u > hi)
        return ms_cli_usage("claims: %s %s: expected a whole number in [%llu, %llu]", flag, val, lo, hi);
    *out = (unsigned)u;
    return 0;
}

static int parse_claims_flags(int argc, char **argv, claims_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(claims_usage, stdout);
            exit(0);
        }
        if (!strcmp(a, "--json") || !strcmp(a, "--list") || !strcmp(a, "--no-sensitivity")) {
            f->json |= !strcmp(a, "--json");
            f->list |= !strcmp(a, "--list");
            if (!strcmp(a, "--no-sensitivity"))
                f->o.sensitivity = 0;
            continue;
        }
        if (i + 1 >= argc)
            return ms_cli_usage("claims: %s needs a value (see moesim claims --help)", a);
        const char *val = argv[++i];
        if (!strcmp(a, "--only"))
            f->o.only = val;
        else if (!strcmp(a, "--out"))
            f->o.out_dir = val;
        else if (!strcmp(a, "--trace"))
            f->o.trace = val;
        else if (!strcmp(a, "--platform"))
            f->o.platform = val;
        else if (!strcmp(a, "--model"))
            f->o.model = val;
        else if (!strcmp(a, "--requests")) {
            if (parse_u(a, val, 4, 100000, &f->o.requests)) /* 4: the 7:3 split leaves one to replay */
                return 2;
        } else if (!strcmp(a, "--jobs") || !strcmp(a, "-j")) {
            unsigned jobs = 1;
            if (parse_u(a, val, 1, 4096, &jobs))
                return 2;
            f->o.jobs = (int)jobs;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u(a, val, 0, 4294967294ULL, &f->o.seed))
                return 2;
        } else
            return ms_cli_usage("claims: unknown option '%s' (see moesim claims --help)", a);
    }
    if (f->o.model && !f->o.trace)
        return ms_cli_usage("claims: --model %s needs --trace (without it each claim runs its paper's model)",
                            f->o.model);
    return 0;
}

int ms_cli_claims(int argc, char **argv)
{
    claims_flags f = {.o = {.out_dir = "moesim-claims", .requests = 8, .seed = 1, .sensitivity = 1, .jobs = 1}};
    int rc = parse_claims_flags(argc, argv, &f);
    if (rc)
        return rc;
    if (f.list) {
        ms_claims_list(stdout);
        return 0;
    }
    ms_err err;
    if (f.o.trace)
        ms_out_input(f.o.trace); /* never written over by DIR/claims*.csv, .png */
    if (f.o.platform)
        ms_out_input(f.o.platform);
    if (ms_out_make_dir("claims: --out", f.o.out_dir, &err))
        return ms_cli_error(err.msg);
    /* the outputs are checked before any run (an input, a device, a folder) */
    static const char *const outs[] = {"claims.csv", "claims_values.csv", "claims.png"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", f.o.out_dir, outs[i]);
        if (ms_out_check("claims", p, &err))
            return ms_cli_error(err.msg);
    }
    if (isatty(STDERR_FILENO))
        f.o.progress = stderr;
    ms_claim_result *r;
    size_t n;
    if (ms_claims_run(&f.o, &r, &n, &err) || ms_claims_write(&f.o, r, n, &err)) {
        return ms_cli_error(err.msg);
    }
    if (f.json) {
        cJSON *j = ms_claims_json(r, n);
        char *s = cJSON_Print(j);
        puts(s);
        free(s);
        cJSON_Delete(j);
    } else {
        ms_claims_table(stdout, r, n);
    }
    free(r);
    return 0;
}
