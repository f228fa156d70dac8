/* `moesim claims`: every quantitative claim of the seed papers that the
 * simulator can check, run on the paper's testbed profile and model, with a
 * verdict and, for a claim that does not hold, a one-parameter sensitivity.
 *
 * A claim is one row of data (claims_table.c): the paper, figure and
 * statement, the paper's value(s), the systems (prefetch + cache + sched
 * specs) to run, the kind of check, its tolerance, and the testbed.  The
 * runner (claims.c) replays a trace per model (a seeded synthetic trace
 * shaped like the paper's workload, or the caller's trace for every claim),
 * memoises runs shared by several claims, computes moesim's value(s) and
 * the verdict:
 *   holds           every value within the stated tolerance of the paper's
 *                   (or the stated ordering / trend exactly);
 *   direction only  the sign or ordering the paper reports, not its size;
 *   does not hold   neither.
 * A claim that does not hold fully is re-run with one parameter changed at a
 * time (the H2D bandwidth, the cache size, the prefetch distance); the
 * first value that makes it hold is reported, or that none does. */
#ifndef MS_CLAIMS_H
#define MS_CLAIMS_H

#include <stddef.h>
#include <stdio.h>

#include <cJSON.h>

#include "sim/core/err.h"

typedef enum { MS_VERDICT_HOLDS = 0, MS_VERDICT_DIRECTION = 1, MS_VERDICT_NO = 2, MS_VERDICT_SKIPPED = 3 } ms_verdict;

#define MS_CLAIM_MAX_VALUES 8

typedef struct {
    const char *id;
    ms_verdict verdict;
    size_t n;                               /* values compared */
    double paper[MS_CLAIM_MAX_VALUES];      /* NaN where the paper gives only an ordering */
    double moesim[MS_CLAIM_MAX_VALUES];
    char item[MS_CLAIM_MAX_VALUES][48];     /* what each value is ("vs DeepSpeed-Inference", "at 8 GB/s") */
    char value_text[256];                   /* moesim's values as the table shows them */
    char sensitivity[256];                  /* for a claim that does not fully hold */
    char note[160];                         /* why skipped, or the mapping used */
} ms_claim_result;

typedef struct {
    const char *out_dir;     /* synthetic traces, claims.csv, claims_values.csv, claims.png */
    const char *trace;       /* NULL: a synthetic trace per model; else this trace for every claim */
    const char *platform;    /* NULL: each claim's testbed */
    const char *model;       /* with trace: the model profile for its sizes (a route-csv import has no
                              * hidden size, which several GPUs need); NULL: the sizes in the trace */
    const char *only;        /* NULL, or comma-separated claim ids / paper names */
    unsigned requests;       /* requests of each synthetic trace */
    unsigned seed;
    int sensitivity;         /* 0: skip the sensitivity runs */
    FILE *progress;          /* a line per claim, or NULL */
    int jobs;                /* claims run at once, each in a worker process (sweep_pool.h); <= 1: in
                              * this process.  The results are the same bytes at any count */
} ms_claims_opts;

/* Names the claims, one per line: id, paper, where, statement. */
void ms_claims_list(FILE *out);
/* Runs the selected claims; *res (n of them, free with free()) in table
 * order.  0, or -1 with err (an unknown id, a failed run, an unwritable
 * output).  The synthetic traces are written first; then the groups of
 * claims on one trace and testbed (which share runs through a memo) run as
 * independent jobs (o->jobs workers), each worker on its own memo. */
int ms_claims_run(const ms_claims_opts *o, ms_claim_result **res, size_t *n, ms_err *err);
/* The table on a terminal, the JSON array, and the CSVs + figure in out_dir. */
void ms_claims_table(FILE *out, const ms_claim_result *r, size_t n);
cJSON *ms_claims_json(const ms_claim_result *r, size_t n);
int ms_claims_write(const ms_claims_opts *o, const ms_claim_result *r, size_t n, ms_err *err);
const char *ms_verdict_name(ms_verdict v);

#endif
