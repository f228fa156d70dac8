/* `moesim trace workload TRACE.h5 -o OUT.h5 (--azure CSV|code|conv [--start N]
 * [--time-scale X] | --poisson RATE [--seed S])`: rewrites a trace's request
 * arrivals (traces/import/workload.h) and prints what it did. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/cli/cli_trace_common.h"
#include "traces/import/workload.h"
#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"

#define WL_USAGE "moesim trace workload TRACE.h5 -o OUT.h5 (--azure CSV|code|conv [--start N] [--time-scale X] | --poisson RATE [--seed S]) [--force]"

static void print_usage(void)
{
    puts("usage: " WL_USAGE "\n"
         "\n"
         "Sets the arrival time of every request of TRACE.h5 and writes OUT.h5.\n"
         "The trace's prompt / output lengths are kept (its routing fixes them);\n"
         "the Azure rows' lengths are reported next to the trace's.\n"
         "\n"
         "  --azure CSV        Azure LLM inference trace 2023 CSV (TIMESTAMP,ContextTokens,\n"
         "                     GeneratedTokens); `code` / `conv` name the shared copies\n"
         "                     in $MOESIM_WORKLOAD_DIR/azure-llm-2023/\n"
         "  --start N          first data row used (0-based, default 0); arrivals are\n"
         "                     relative to it\n"
         "  --time-scale X     multiply the Azure inter-arrival times by X (default 1;\n"
         "                     0.5 = twice the request rate)\n"
         "  --poisson RATE     Poisson arrivals, RATE requests per second (fallback)\n"
         "  --seed S           seed of the Poisson draws (default 0)\n"
         "  -o OUT.h5          output trace (format v2; through a temporary file beside\n"
         "                     it; not TRACE.h5, a device or a folder)\n"
         "  --force            write even when OUT's file system has less free space\n"
         "                     than TRACE.h5's size");
}

static int need_value(int argc, char **argv, int i)
{
    if (i + 1 >= argc)
        return ms_cli_usage("trace workload: %s needs a value", argv[i]);
    return 0;
}

int ms_cli_trace_workload(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *azure = NULL;
    double rate = 0, scale = 1;
    unsigned long long start = 0, seed = 0;
    int have_poisson = 0, have_start = 0, have_scale = 0, have_seed = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage();
            return 0;
        }
        if (!strcmp(a, "--force")) {
            force = 1;
            continue;
        }
        int is_opt = !strcmp(a, "-o") || !strcmp(a, "--azure") || !strcmp(a, "--start") ||
                     !strcmp(a, "--time-scale") || !strcmp(a, "--poisson") || !strcmp(a, "--seed");
        if (is_opt && need_value(argc, argv, i))
            return 2;
        const char *v = is_opt ? argv[++i] : NULL;
        if (!strcmp(a, "-o"))
            out = v;
        else if (!strcmp(a, "--azure"))
            azure = v;
        else if (!strcmp(a, "--start")) {
            if (ms_parse_u64(v, &start))
                return ms_cli_usage("trace workload: --start: '%s' is not a non-negative integer", v);
            have_start = 1;
        } else if (!strcmp(a, "--time-scale")) {
            if (ms_parse_double(v, &scale) || !(scale > 0) || scale > 1e9)
                return ms_cli_usage("trace workload: --time-scale: '%s' is not a number in (0, 1e9]", v);
            have_scale = 1;
        } else if (!strcmp(a, "--poisson")) {
            if (ms_parse_double(v, &rate) || !(rate > 0) || rate > 1e9)
                return ms_cli_usage("trace workload: --poisson: '%s' is not a rate in (0, 1e9] requests/s", v);
            have_poisson = 1;
        } else if (!strcmp(a, "--seed")) {
            if (ms_parse_u64(v, &seed) || seed > 4294967294ull)
                return ms_cli_usage("trace workload: --seed: '%s' is not an integer in [0, 4294967294]", v);
            have_seed = 1;
        } else if (a[0] == '-' && a[1])
            return ms_cli_usage("trace workload: unknown option '%s' (see `moesim trace workload --help`)", a);
        else if (!in)
            in = a;
        else
            return ms_cli_usage("trace workload: unexpected argument '%s' (usage: %s)", a, WL_USAGE);
    }
    if (!in || !out)
        return ms_cli_usage("trace workload: missing %s (usage: %s)", in ? "-o OUT.h5" : "TRACE.h5", WL_USAGE);
    if (!!azure + have_poisson != 1)
        return ms_cli_usage("trace workload: give exactly one of --azure CSV and --poisson RATE");
    if (azure && have_seed)
        return ms_cli_usage("trace workload: --seed goes with --poisson, not --azure");
    if (have_poisson && (have_start || have_scale))
        return ms_cli_usage("trace workload: --start / --time-scale go with --azure, not --poisson");

    ms_err err = {{0}};
    ms_out_input(in);
    ms_out_input(azure);
    if (ms_out_check("-o", out, &err))
        return ms_cli_error(err.msg);
    struct stat st;
    uint64_t in_bytes = stat(in, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (ms_trace_cli_space("-o", out, in_bytes + ((uint64_t)1 << 20), "about TRACE.h5's size", force, &err))
        return ms_cli_error(err.msg);
    uint64_t n;
    if (ms_workload_trace_requests(in, &n, &err))
        return ms_cli_error(err.msg);
    ms_workload w;
    char path[4096];
    const char *azure_path = azure ? ms_workload_azure_path(azure, path, sizeof path, &err) : NULL;
    if (azure && !azure_path)
        return ms_cli_error(err.msg);
    ms_out_input(azure_path); /* a named shared copy too; the writer checks OUT against it */
    int rc = azure ? ms_workload_azure(azure_path, start, n, scale, &w, &err)
                   : ms_workload_poisson(n, rate, seed, &w, &err);
    if (rc)
        return ms_cli_error(err.msg);
    ms_workload_report rep;
    ms_trace_cli_progress_begin("trace workload", n);
    rc = ms_workload_apply(in, out, &w, &rep, &err);
    ms_trace_cli_progress_end();
    if (rc == 0) {
        printf("workload %s: %llu requests over %.6g s (%.4g req/s)", w.what, (unsigned long long)rep.requests,
               rep.span_s, rep.span_s > 0 ? (double)rep.requests / rep.span_s : 0.0);
        printf("; lengths kept from the trace: prompt mean %.1f, output mean %.1f", rep.trace_prompt_mean,
               rep.trace_output_mean);
        if (rep.work_prompt_mean >= 0)
            printf(" (workload rows: prompt mean %.1f, output mean %.1f)", rep.work_prompt_mean,
                   rep.work_output_mean);
        printf("\nwrote %s\n", out);
        ms_trace_cli_note_v1_file(in);
    }
    ms_workload_free(&w);
    return rc ? ms_cli_error(err.msg) : 0;
}
