/* Subcommand entry points.  Each takes argv after the subcommand words
 * (argv[0] is the subcommand name) and returns the process exit code;
 * errors are printed as one line "moesim: ..." on stderr. */
#ifndef MS_CLI_H
#define MS_CLI_H

#include "sim/engine/engine.h"

int ms_cli_run(int argc, char **argv);
int ms_cli_list(int argc, char **argv);
int ms_cli_demo(int argc, char **argv);
int ms_cli_regress(int argc, char **argv);
int ms_cli_sweep(int argc, char **argv);
int ms_cli_figures(int argc, char **argv);
int ms_cli_claims(int argc, char **argv);
int ms_cli_published(int argc, char **argv);
int ms_cli_trace_info(int argc, char **argv);
int ms_cli_trace_validate(int argc, char **argv);
int ms_cli_trace_import(int argc, char **argv);
int ms_cli_trace_stats(int argc, char **argv);
int ms_cli_trace_gen(int argc, char **argv);
int ms_cli_trace_workload(int argc, char **argv);
int ms_cli_trace_fit(int argc, char **argv);
int ms_cli_trace_upgrade(int argc, char **argv);
int ms_cli_serverless(int argc, char **argv);
int ms_cli_calibrate(int argc, char **argv);
int ms_cli_validate(int argc, char **argv);

/* The flags of `moesim run` (see its --help), shared with `moesim validate`:
 * fills cfg and f; f->cmd names the command in messages; f->extra (or
 * NULL) sees every "--flag value" first and returns 1 when it took it, 0
 * when it is not its flag, 2 after printing a usage error.  Returns 0 or the
 * usage exit code 2. */
#define MS_CLI_MAX_SETS 32
typedef struct {
    const char *cmd;
    const char *model, *platform;
    /* --set model.KEY=VALUE / --set platform.KEY=VALUE (profile.h ms_profile_set) */
    ms_profile_set model_sets[MS_CLI_MAX_SETS], platform_sets[MS_CLI_MAX_SETS];
    int n_model_sets, n_platform_sets;
    int json;
    int cap_flags;
    const char *framework; /* --framework (NULL: the platform's) */
    ms_framework fw;       /* the resolved framework, when cfg->framework points here */
    int (*extra)(void *ctx, const char *flag, const char *val);
    void *ctx;
} ms_run_flags;
int ms_cli_parse_run_flags(int argc, char **argv, ms_run_config *cfg, ms_run_flags *f);
/* One "--set model.KEY=VALUE" or "--set platform.KEY=VALUE" into the model's
 * or the platform's list (MS_CLI_MAX_SETS each); 0, or 2 after a usage error
 * (cmd names the command). */
int ms_cli_parse_set(const char *cmd, const char *val, ms_profile_set *model_sets, int *n_model,
                     ms_profile_set *platform_sets, int *n_platform);
/* Loads f->model (when given) and f->platform with their --set overrides
 * into *model / *platform and points cfg at them; 0 or -1 with err. */
int ms_cli_load_profiles(ms_run_flags *f, ms_run_config *cfg, ms_model *model, ms_platform *platform, ms_err *err);

/* Prints "moesim: <msg>\n" to stderr and returns 1 (the error exit code). */
int ms_cli_error(const char *msg);
/* Prints "moesim: <fmt...>\n" and returns 2 (usage error). */
int ms_cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
