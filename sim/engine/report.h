/* Results of one run as JSON (config + metrics), as a readable table, and as
 * one CSV row; every field that determined a result goes into `config`. */
#ifndef MS_REPORT_H
#define MS_REPORT_H

#include <stdio.h>

#include <cJSON.h>

#include "sim/engine/engine.h"

/* The policy spec with every parameter resolved to its value, e.g.
 * {"name": "lfu", "params": {"reset": "1"}}; NULL when the spec is invalid. */
cJSON *ms_report_policy(int kind, const char *spec);
cJSON *ms_report_config(const ms_run_config *cfg);
cJSON *ms_report_metrics(const ms_metrics *m);
/* Adds the resolved training split ("train": {frac, by, requests,
 * iterations}) to a config object. */
void ms_report_split(cJSON *config, const ms_metrics *m);
/* Provenance (docs/safety.md): {"moesim": version, "commit": ...,
 * "trace": {"path", "content_sha256", "verified"}, "model": {"path", "sha256"},
 * "platform": ...}: a digest of every input (null when unreadable); the
 * trace's is its stored content digest when it is format v2 ("verified":
 * false: the run does not recompute it, `trace validate` does), else the
 * SHA-256 of its bytes under "sha256" ("verified": true: moesim computed
 * it; false when null) (trace.h ms_trace_digest_of).  `trace`
 * is the digest the run took when it opened the trace (ms_metrics.trace),
 * so that a trace replaced since is not named for the result; NULL, or hex
 * "", digests the file now.  _base holds the version and commit only; _add
 * adds one input file under `role` with the SHA-256 of its bytes (sha256
 * NULL: digest the file now, remembered per file); _add_trace adds a trace
 * file as it is now.  The _line form is the first line of every CSV the
 * engine writes: "# moesim V commit C; trace P content_sha256 H (stored,
 * unverified); model P sha256 H; ..." ("trace P sha256 H" for a v1 trace).  _line_head writes
 * its start, up to the trace's digest (no newline), for every other CSV
 * that names a trace (figures, demo, serverless), with the file's digest
 * now; the digest is "unknown" when the trace cannot be read now, as the
 * JSON's null. */
cJSON *ms_report_provenance(const ms_run_config *cfg, const ms_trace_digest *trace);
cJSON *ms_report_provenance_base(void);
void ms_report_provenance_add(cJSON *prov, const char *role, const char *path, const char *sha256);
void ms_report_provenance_add_trace(cJSON *prov, const char *role, const char *path);
void ms_report_provenance_line(FILE *f, const ms_run_config *cfg, const ms_trace_digest *trace);
void ms_report_provenance_line_head(FILE *f, const char *trace_path);
/* The digest that names a run's trace: `taken`, the one the run took at
 * its open (ms_metrics.trace), when it has one; else (NULL or hex "") the
 * file's now (trace.h ms_trace_digest_of; -1 and hex "" when it cannot be
 * read).  Every result writer names the trace through this. */
int ms_report_trace_digest(const char *path, const ms_trace_digest *taken, ms_trace_digest *d);
/* {"provenance": ..., "config": ..., "metrics": ...} */
cJSON *ms_report_json(const ms_run_config *cfg, const ms_metrics *m);
void ms_report_table(FILE *out, const ms_run_config *cfg, const ms_metrics *m);

/* Metrics without samples are NaN here, null in JSON, empty in CSV and
 * "n/a" in tables (never 0): a hit rate over 0 activations, a ratio over a
 * zero denominator. */
double ms_metrics_hit_rate(const ms_counts *c);
double ms_metrics_ratio(double a, double b);
uint64_t ms_metrics_activations(const ms_counts *c);
/* The papers' hit definitions (docs/metrics.md), as run --json names them. */
typedef enum {
    MS_HIT_RESIDENT, MS_HIT_IN_TIME, MS_HIT_CACHED, MS_HIT_ISSUED, MS_HIT_RECALL_MOEINF, MS_HIT_DEFS
} ms_hit_def;
extern const char *const ms_hit_def_names[MS_HIT_DEFS];
/* Definition d over the run (phase -1) or one phase (MS_PHASE_*); NaN
 * without activations. */
double ms_metrics_hit_def(const ms_metrics *m, ms_hit_def d, int phase);
/* printf's fmt of v into buf, or "n/a" when v is NaN; returns buf. */
const char *ms_report_fmt(char *buf, size_t n, const char *fmt, double v);

#endif
