/* Subcommand entry points.  Each takes argv after the subcommand words
 * (argv[0] is the subcommand name) and returns the process exit code;
 * errors are printed as one line "moesim: ..." on stderr. */
#ifndef MS_CLI_H
#define MS_CLI_H

int ms_cli_run(int argc, char **argv);
int ms_cli_list(int argc, char **argv);
int ms_cli_demo(int argc, char **argv);
int ms_cli_regress(int argc, char **argv);
int ms_cli_sweep(int argc, char **argv);
int ms_cli_figures(int argc, char **argv);
int ms_cli_trace_info(int argc, char **argv);
int ms_cli_trace_validate(int argc, char **argv);
int ms_cli_trace_import(int argc, char **argv);
int ms_cli_trace_stats(int argc, char **argv);
int ms_cli_trace_gen(int argc, char **argv);
int ms_cli_trace_workload(int argc, char **argv);
int ms_cli_trace_fit(int argc, char **argv);
int ms_cli_serverless(int argc, char **argv);

/* Prints "moesim: <msg>\n" to stderr and returns 1 (the error exit code). */
int ms_cli_error(const char *msg);
/* Prints "moesim: <fmt...>\n" and returns 2 (usage error). */
int ms_cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
