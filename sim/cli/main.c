/* moesim: command-line entry; dispatches to the subcommands of sim/cli/cli.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/version.h"

int ms_cli_error(const char *msg)
{
    fprintf(stderr, "moesim: %s\n", msg);
    return 1;
}

int ms_cli_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("moesim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static const char usage[] =
    "usage: moesim <command> [options]\n"
    "\n"
    "  run            replay a trace through prefetch x cache x scheduler policies\n"
    "  list           policies with their parameters, models and platforms\n"
    "  serverless     serverless MoE deployment: cost model, predictors, ODS, BO (seed 002)\n"
    "  sweep          run a sweep spec (INI): many simulations, one CSV row each\n"
    "  demo           generate a Mixtral-shaped trace and compare every policy combination\n"
    "  regress        replay a golden file's points and fail on hit-rate regressions\n"
    "  calibrate      measure a real backend (host, cuda) and fit a platform profile to it\n"
    "  validate       run a trace's policies on the simulator and a real backend at once; compare\n"
    "  figures        regenerate the papers' figures (PNG + PDF) from a trace or a synthetic one\n"
    "  claims         check the seed papers' quantitative claims on their testbeds\n"
    "  published      the timing model against published measurements of real offloading systems\n"
    "  trace info     metadata of a trace file\n"
    "  trace validate check every value of a trace file\n"
    "  trace import   convert a routing dump (route-csv, jsonl, dense-csv, npy) to trace format v2\n"
    "  trace workload set request arrivals from the Azure LLM trace or a Poisson process\n"
    "  trace stats    entropy, reuse, co-activation and skew of a trace\n"
    "  trace gen      write a seeded synthetic trace\n"
    "  trace fit      fit the generator's knobs to a trace (params for trace gen --params)\n"
    "  trace upgrade  rewrite a trace as format v2 (checksummed), values unchanged\n"
    "  version        the version and the git commit this binary was built from (also --version)\n"
    "\n"
    "`moesim <command> --help` describes each command.\n";

static int dispatch(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        if (argc > 2)
            return ms_cli_usage("%s: unexpected argument '%s'", cmd, argv[2]);
        printf("moesim %s (commit %s)\n", ms_version(), ms_commit());
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return ms_cli_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "list"))
        return ms_cli_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "serverless"))
        return ms_cli_serverless(argc - 1, argv + 1);
    if (!strcmp(cmd, "sweep"))
        return ms_cli_sweep(argc - 1, argv + 1);
    if (!strcmp(cmd, "demo"))
        return ms_cli_demo(argc - 1, argv + 1);
    if (!strcmp(cmd, "regress"))
        return ms_cli_regress(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate"))
        return ms_cli_calibrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate"))
        return ms_cli_validate(argc - 1, argv + 1);
    if (!strcmp(cmd, "claims"))
        return ms_cli_claims(argc - 1, argv + 1);
    if (!strcmp(cmd, "published"))
        return ms_cli_published(argc - 1, argv + 1);
    if (!strcmp(cmd, "figures"))
        return ms_cli_figures(argc - 1, argv + 1);
    if (!strcmp(cmd, "trace")) {
        if (argc < 3)
            return ms_cli_usage("trace: missing subcommand (info, validate, import, stats, gen, fit, workload, upgrade)");
        const char *sub = argv[2];
        if (!strcmp(sub, "info"))
            return ms_cli_trace_info(argc - 2, argv + 2);
        if (!strcmp(sub, "validate"))
            return ms_cli_trace_validate(argc - 2, argv + 2);
        if (!strcmp(sub, "import"))
            return ms_cli_trace_import(argc - 2, argv + 2);
        if (!strcmp(sub, "stats"))
            return ms_cli_trace_stats(argc - 2, argv + 2);
        if (!strcmp(sub, "gen"))
            return ms_cli_trace_gen(argc - 2, argv + 2);
        if (!strcmp(sub, "workload"))
            return ms_cli_trace_workload(argc - 2, argv + 2);
        if (!strcmp(sub, "fit"))
            return ms_cli_trace_fit(argc - 2, argv + 2);
        if (!strcmp(sub, "upgrade"))
            return ms_cli_trace_upgrade(argc - 2, argv + 2);
        return ms_cli_usage("trace: unknown subcommand '%s' (info, validate, import, stats, gen, fit, workload, upgrade)", sub);
    }
    return ms_cli_usage("unknown command '%s' (run `moesim --help`)", cmd);
}

/* Every command's standard output is checked at exit: a table or JSON that
 * could not be written (a full disk, a closed pipe) is an error, not exit 0. */
int main(int argc, char **argv)
{
    /* Results to a file or pipe go out in large blocks, so a write error is
     * usually met at exit with its errno intact (ms_out_stdout_close). */
    static char stdout_buf[1 << 20];
    if (!isatty(STDOUT_FILENO))
        setvbuf(stdout, stdout_buf, _IOFBF, sizeof stdout_buf);
    int rc = dispatch(argc, argv);
    ms_err err;
    /* one line: a command that already failed has said why */
    if (ms_out_stdout_close(&err) && rc == 0) {
        fprintf(stderr, "moesim: %s\n", err.msg);
        return 1;
    }
    return rc;
}
