/* `moesim published`: the timing model against published measurements of
 * real offloading systems (docs/published.md).
 *
 * Each row (published_rows.h) runs its system's preset
 * (published_presets.h) on its model and platform over a workload: the
 * row's trace, or a synthetic trace of the model (its routing defaults,
 * `requests` requests of exactly prompt_len / output_len tokens, `seed`),
 * made once per (model, sets, lengths, requests, seed) in the output folder
 * before any run.  Rows with the same run (trace, policies, capacity,
 * platform, framework, batch, bits, seed) share one; the distinct runs are
 * jobs of the sweep pool (sweep_pool.h), so the results are the same bytes at
 * any --jobs.  The metric of a row:
 *   tpot_ms       the mean time between two output tokens of a request
 *   decode_tok_s  1000 / tpot_ms
 *   ttft_ms       the mean prefill service time (start of a request's first
 *                 iteration to its first token; no queueing)
 *   e2e_tok_s     output_len / the mean service time of a request (first
 *                 iteration to last token)
 * --fit (published_fit.c) fits the framework profiles' layer_s and
 * iteration_s on the calibration rows only. */
#ifndef MS_PUBLISHED_H
#define MS_PUBLISHED_H

#include <stdio.h>

#include <cJSON.h>

#include "sim/apps/published_rows.h"
#include "sim/core/err.h"
#include "sim/core/profile.h"

typedef struct {
    const char *out_dir;        /* traces, published.csv, published.json, published.png */
    const char *only;           /* NULL, or a system: only its rows */
    int jobs;                   /* runs at once (worker processes); <= 1: this process */
    FILE *progress;             /* a line per finished run, or NULL */
    /* frameworks replacing the profiles of the same name (the fit's), NULL / 0: none */
    const ms_framework *frameworks;
    int n_frameworks;
    int reuse_traces;           /* 1: a generated trace already in out_dir is not made again (the fit's
                                 * evaluations after its first) */
} ms_pub_opts;

typedef struct {
    double predicted;           /* NaN when the row could not run */
    double ratio;               /* predicted / measured */
    char error[1024];            /* why the row could not run, else "" */
    long run;                   /* the run it shares with rows of the same run (0, 1, ...), -1: none */
    char setup[800];            /* what the preset made of the row: "PREFETCH + CACHE + SCHED, cache N experts
                                 * (or G GB), framework F", "" when it has none */
} ms_pub_result;

/* Runs the rows (every row of *rows; --only filters before).  res[i] is
 * row i's.  0, or -1 with err for a failure of the whole command (a trace
 * that cannot be written); a row that cannot run has its own error. */
int ms_published_run(const ms_pub_opts *o, const ms_pub_rows *rows, ms_pub_result *res, ms_err *err);
/* The per-row table and the summary (median and worst |ln ratio| by role,
 * and by system and role). */
void ms_published_table(FILE *out, const ms_pub_rows *rows, const ms_pub_result *res);
cJSON *ms_published_json(const ms_pub_rows *rows, const ms_pub_result *res);
/* DIR/published.csv, published.json and published.png (gnuplot). */
int ms_published_write(const ms_pub_opts *o, const ms_pub_rows *rows, const ms_pub_result *res, ms_err *err);

/* The fit (published_fit.c): the fitted keys (published_fit.c fit_keys:
 * host costs and dequantisation rates) of every framework the calibration
 * rows use, each framework on its own rows (its presets' rows only move with
 * it) by Nelder-Mead on the mean squared ln ratio (log-scaled parameters
 * from the profiles' values).  fw[i] is fitted framework i, provenance[i]
 * its provenance (the command, the fit, its rows). */
typedef struct {
    ms_framework *fw;
    char **provenance;
    unsigned *fitted;           /* bit k: fit key k fitted (else kept: no row could move it) */
    int n;
} ms_pub_fit;

int ms_published_fit(const ms_pub_opts *o, const ms_pub_rows *rows, const char *command, ms_pub_fit *fit, FILE *log,
                     ms_err *err);
void ms_published_fit_free(ms_pub_fit *fit);
/* Writes DIR/frameworks/NAME.ini for each fitted framework: its provenance
 * as comment lines, each fitted key's [source] citing it. */
int ms_published_write_frameworks(const char *dir, const ms_pub_fit *fit, ms_err *err);

#endif
