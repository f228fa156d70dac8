/* What the `moesim trace ...` commands share on the CLI side (they may
 * print; the library below them never does): the note for v1 traces, the
 * output size estimate and free-space guard, and the progress line of long
 * writes on a terminal. */
#ifndef MS_CLI_TRACE_COMMON_H
#define MS_CLI_TRACE_COMMON_H

#include <stdint.h>

#include "traces/format/trace.h"
#include "traces/synth/gen.h"

/* Prints "moesim: note: PATH is trace format v1: no checksums ..." on
 * stderr when m says v1 (once per path and process). */
void ms_trace_cli_note_v1(const char *path, const ms_trace_meta *m);
/* The same for a trace file not otherwise opened by the CLI: opens it to
 * read its version (nothing printed when it cannot be opened: the command
 * itself reports that). */
void ms_trace_cli_note_v1_file(const char *path);

/* Before writing `out` (flag name `what`): refuses (-1, one line in err,
 * nothing printed) when the estimated size is more than the free space of
 * out's file system (statvfs, blocks available to this user), unless force;
 * else, when stderr is a terminal, prints one line "moesim: <what> OUT:
 * estimated output ..., ... free" (not otherwise: a failing command's
 * stderr stays its one error line).  `basis` says where the estimate comes
 * from, for the messages. */
int ms_trace_cli_space(const char *what, const char *out, uint64_t estimate, const char *basis, int force,
                       ms_err *err);

/* The uncompressed bytes a generated trace (`trace gen`, regress's gen:
 * sources) will hold, from the knobs' expected lengths and request count
 * (an upper bound of the file but for HDF5's few KiB of structure: zstd
 * only shrinks the data); m: ms_gen_meta's shape of it. */
uint64_t ms_trace_cli_gen_estimate(const ms_gen_params *p, const ms_trace_meta *m);

/* {"moesim": version, "commit": ..., "trace": {"path", "content_sha256"}}
 * for the JSON the trace commands print (docs/safety.md; "sha256", the
 * file's bytes, for a v1 trace: report.h ms_report_provenance_add_trace);
 * the digest is null when the file cannot be read. */
struct cJSON;
struct cJSON *ms_trace_cli_provenance(const char *path);

/* "12.3 MiB" into buf. */
const char *ms_trace_cli_bytes(uint64_t n, char *buf, size_t cap);

/* Progress of the trace writes that follow, on stderr when it is a
 * terminal (nothing otherwise): requests (of total when total > 0), rows
 * and bytes written, redrawn at most every 0.2 s; _end erases the line. */
void ms_trace_cli_progress_begin(const char *label, uint64_t total_requests);
void ms_trace_cli_progress_end(void);

#endif
