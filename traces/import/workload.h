/* Request workloads for online-serving replays (fMoE section 6.3): arrival
 * times from the Azure LLM inference trace 2023 (Splitwise release) or a
 * Poisson process, written onto an existing trace's requests.
 *
 * Azure CSV: header `TIMESTAMP,ContextTokens,GeneratedTokens`, rows
 * `YYYY-MM-DD HH:MM:SS[.fraction]`, integer, integer (CRLF accepted).
 * Every row is validated (column count, timestamp syntax and calendar
 * ranges, timestamps non-decreasing, counts non-negative integers); the
 * rows start .. start+n-1 (0-based data rows) give the arrivals
 * arrival_i = time_scale * (t_{start+i} - t_start) and the lengths.
 *
 * Lengths: a trace's routing fixes its prompt and output lengths, so the
 * trace's lengths are kept and only arrivals are taken; the workload's
 * lengths of the rows used are reported (means) next to the trace's.
 *
 * Poisson: exponential inter-arrival gaps with mean 1/rate from
 * gsl_rng_mt19937 seeded by `seed` (the first request arrives after one
 * gap, as in `moesim trace gen`).  No host clock is read. */
#ifndef MS_WORKLOAD_H
#define MS_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/err.h"

typedef struct {
    uint64_t n;
    double *arrival_s;   /* [n], non-decreasing, first 0 for Azure */
    uint32_t *prompt;    /* [n] ContextTokens, NULL for Poisson */
    uint32_t *output;    /* [n] GeneratedTokens, NULL for Poisson */
    uint64_t rows_total; /* data rows in the CSV (all validated) */
    char what[512];      /* e.g. "AzureLLMInferenceTrace_code.csv rows 0..3, time x1" */
} ms_workload;

/* "code" / "conv" name the shared Azure 2023 traces, in $MOESIM_WORKLOAD_DIR/azure-llm-2023/
 * (written into buf; NULL with err when that variable is unset); anything else is a path. */
const char *ms_workload_azure_path(const char *name_or_path, char *buf, size_t cap, ms_err *err);

int ms_workload_azure(const char *path, uint64_t start, uint64_t n, double time_scale, ms_workload *w, ms_err *err);
int ms_workload_poisson(uint64_t n, double rate, uint64_t seed, ms_workload *w, ms_err *err);
void ms_workload_free(ms_workload *w);

typedef struct {
    uint64_t requests;
    double span_s;                      /* last arrival */
    double trace_prompt_mean, trace_output_mean;
    double work_prompt_mean, work_output_mean; /* -1 without lengths */
} ms_workload_report;

/* Copies trace in_path to out_path with request i arriving at
 * w->arrival_s[i]; w->n must be at least the trace's request count (only
 * the first N are used).  The `source` attribute gets "; arrivals: <what>". */
int ms_workload_apply(const char *in_path, const char *out_path, ms_workload *w, ms_workload_report *rep,
                      ms_err *err);
/* Number of requests of a trace (opens it). */
int ms_workload_trace_requests(const char *path, uint64_t *n, ms_err *err);

#endif
