/* TEMPORARY while the core is assembled: weak placeholders replaced by the
 * real subcommands as their files land.  Removed before the first commit
 * that ships.  */
#include "cli.h"

__attribute__((weak)) int ms_cli_trace_info(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("trace info: not built yet"); }
__attribute__((weak)) int ms_cli_trace_validate(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("trace validate: not built yet"); }
__attribute__((weak)) int ms_cli_trace_import(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("trace import: not built yet"); }
__attribute__((weak)) int ms_cli_trace_stats(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("trace stats: not built yet"); }
__attribute__((weak)) int ms_cli_trace_gen(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("trace gen: not built yet"); }
__attribute__((weak)) int ms_cli_run(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("run: not built yet"); }
__attribute__((weak)) int ms_cli_list(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("list: not built yet"); }
__attribute__((weak)) int ms_cli_demo(int argc, char **argv) { (void)argc; (void)argv; return ms_cli_error("demo: not built yet"); }
