/* The results CSV of a sweep: one header, then one row per point in point
 * order.  Columns: `point` (0-based index in the spec's expansion), `key`
 * (16 hex digits, FNV-1a of the parameter values: the point's identity for
 * --resume), every parameter of sweep_spec.h, every metric of ms_metrics
 * (totals, per phase, PCIe, prefetch, latency, memory, training split; a
 * metric without samples is an empty cell, never 0), the provenance
 * (`moesim_version`, `moesim_commit`, the trace's digest: `trace_sha256`,
 * the SHA-256 of its bytes, for a v1 trace, `trace_content_sha256`, its
 * stored content digest (the file's claim, not recomputed by the run), for a v2 trace (the other cell empty; taken when
 * the point's run opened the trace: trace.h ms_reader_trace_digest), and
 * the SHA-256 of the model and platform files:
 * `model_sha256`, `platform_sha256`), and
 * `error` (the one-line ms_run error of a point that failed; its metric
 * cells are then empty).  Fields holding a comma or a quote are quoted as in
 * RFC 4180; no field holds a newline.
 *
 * Crash safety: rows are appended with one write() each (fsync()ed by the
 * caller: `moesim sweep` syncs at most every 0.1 s and at the end); a
 * resumed file has its trailing partial line (if any) cut off and must be a
 * prefix of the rows this process would write. */
#ifndef MS_SWEEP_CSV_H
#define MS_SWEEP_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "sim/engine/engine.h"
#include "sim/core/err.h"
#include "sim/apps/sweep_spec.h"

/* The header line, with its '\n' (static storage). */
const char *ms_sweep_csv_header(void);
/* One row with its '\n' (malloc'd): metrics when m is non-NULL, else the
 * error message; cfg (may be NULL) gives the provenance cells, trace (may be
 * NULL) the trace's digest the run took at its open (ms_metrics.trace:
 * without it, the digest of the file at cfg's trace path now). */
char *ms_sweep_csv_row(uint64_t point, const ms_sweep_point *p, const ms_run_config *cfg,
                       const ms_trace_digest *trace, const ms_metrics *m, const char *error);
/* The key column of a point. */
void ms_sweep_csv_key(const ms_sweep_point *p, char out[17]);

/* Opens the output for appending, holding its lock (out.h ms_out_lock: a
 * second process on the same output ends with one line naming this one's
 * pid) until ms_sweep_csv_close.  Without resume the file must not exist:
 * it is created with the header.  With resume an existing file is checked:
 * its trailing partial line is truncated, its header must be ours, and its
 * rows must be, in order, the first rows of `points` (npoints indices into
 * the spec); *done gets how many there are.  A missing file is created.
 * Returns the fd or -1. */
int ms_sweep_csv_open(const char *path, int resume, const ms_sweep_spec *s, const uint64_t *points,
                      uint64_t npoints, uint64_t *done, ms_err *err);
/* Closes the output and releases its lock. */
void ms_sweep_csv_close(int fd, const char *path);
/* Appends one whole line with a single write() (a process killed at any
 * moment, kill -9 included, leaves whole lines only: the kernel has the row
 * once write() returns). */
int ms_sweep_csv_write(int fd, const char *path, const char *line, size_t len, ms_err *err);
/* fsync(): the rows survive a power cut too. */
int ms_sweep_csv_sync(int fd, const char *path, ms_err *err);
/* write() then fsync(). */
int ms_sweep_csv_append(int fd, const char *path, const char *line, size_t len, ms_err *err);

/* Merges shard CSVs into out (which must not exist; locked while written): same header in every
 * file, rows sorted by point, no point twice, no point missing from
 * 0..max. */
int ms_sweep_csv_merge(const char *out, char **inputs, int n, ms_err *err);

#endif
