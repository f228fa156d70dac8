/* Golden files of `moesim regress`: a committed set of (trace, policy, cache
 * size) points with the counts they are expected to give.
 *
 * Format: text, one record a line, fields separated by ';' (policy specs and
 * generator sources contain commas), surrounding blanks trimmed.  Lines that
 * are empty or start with '#' are comments, kept verbatim by --update.  The
 * first other line is the header naming the columns, in any order:
 *   required  trace prefetch cache sched distance train
 *             one or more of cache_experts cache_bytes cache_gb
 *             hits late misses on_cpu hit_rate
 *   optional  model (profile name or .ini; empty = none, sizes from the trace)
 *             platform (default rtx3090-pcie4)
 * An unknown or repeated column name is an error.  Every data line has one
 * field per column.
 *
 * trace: a trace file (format v1), `route-csv:PATH` (imported into a temp
 * dir before the runs), or `gen:model=NAME[,knob=value...]` (a synthetic
 * trace generated into the temp dir with `moesim trace gen`'s knobs).  PATH
 * may hold ${VAR} (from the environment, e.g. ${MOESIM_SHARED}); a relative
 * PATH is relative to the golden file's folder.
 * The columns are the run configuration's keys (sim/engine/runkeys.h: the key
 * cache_experts is the flag --cache-experts and the sweep key
 * cache_experts), with their values checked by the same rules.
 * cache_experts / cache_bytes / cache_gb: exactly one filled per line: a
 * whole number of experts (`64`), bytes with a unit (`4000MiB`, `3GB`), or
 * 1e9 bytes.  (cache_size, the column of golden files written before the
 * run keys, is still read: a whole number of experts or bytes with a unit;
 * the committed goldens use the key columns.)
 * distance: whole number.  train: `auto` or a fraction
 * in [0, 1).  hits, late, misses, on_cpu: whole numbers (on_cpu: the
 * activations of the three that ran on the CPU); hit_rate: the fraction
 * hits / (hits + late + misses) at 6 decimals (checked against the counts;
 * on_cpu <= hits + late + misses is checked too).  The result fields may be empty only when loading for
 * --update.
 *
 * ms_golden_load validates everything that can be checked without a
 * simulation: columns, numbers, policy names and parameters, models,
 * platforms, generator knobs, that every trace file is readable.  Errors are
 * one line "FILE:LINE: field F: ... 'VALUE' ...". */
#ifndef MS_GOLDEN_H
#define MS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "traces/synth/gen.h"
#include "sim/engine/engine.h"
#include "sim/core/err.h"
#include "sim/core/profile.h"

typedef enum {
    MS_GCOL_TRACE, MS_GCOL_MODEL, MS_GCOL_PLATFORM, MS_GCOL_PREFETCH, MS_GCOL_CACHE, MS_GCOL_SCHED,
    MS_GCOL_CACHE_EXPERTS, MS_GCOL_CACHE_BYTES, MS_GCOL_CACHE_GB, MS_GCOL_CACHE_SIZE, MS_GCOL_DISTANCE, MS_GCOL_TRAIN, MS_GCOL_HITS, MS_GCOL_LATE, MS_GCOL_MISSES,
    MS_GCOL_ON_CPU, MS_GCOL_HIT_RATE, MS_GCOL_N
} ms_golden_col;

typedef enum { MS_SRC_H5, MS_SRC_ROUTECSV, MS_SRC_GEN } ms_golden_src_kind;

/* One distinct trace source (points naming the same source share it). */
typedef struct {
    ms_golden_src_kind kind;
    char *spec;            /* the trace field as written */
    char *input;           /* H5 / ROUTECSV: the resolved path; GEN: NULL */
    ms_gen_params gen;     /* GEN: the knobs */
    ms_model gen_model;    /* GEN: the model */
    char *h5;              /* the trace to replay: input for H5; set by the caller for the others */
} ms_golden_source;

typedef struct {
    uint64_t hits, late, misses, on_cpu;
    double hit_rate;
} ms_golden_result;

typedef struct {
    uint32_t line;
    char **field;          /* [ncols] trimmed text, in the file's column order */
    size_t source;         /* index into ms_golden.srcs */
    const char *prefetch, *cache, *sched, *cache_size, *train; /* the fields' text (cache_size: the
                                                                 * capacity cell that is filled) */
    int has_model;
    ms_model model;
    ms_platform platform;
    ms_cap_kind cap_kind;
    double cap_value;
    uint32_t distance;
    int train_set;
    double train_frac;
    int has_expected;      /* 0 only for rows with empty results (--update) */
    ms_golden_result expected;
} ms_golden_point;

typedef struct {
    char *path;
    char **lines;          /* every line, without its newline */
    size_t n_lines;
    size_t ncols;
    int col[MS_GCOL_N];    /* position of each column, -1 when absent */
    ms_golden_point *pts;
    size_t n_pts;
    ms_golden_source *srcs;
    size_t n_srcs;
} ms_golden;

extern const char *const ms_golden_col_names[MS_GCOL_N];

/* Reads and validates path.  allow_empty_results: rows may leave all five
 * result fields empty (--update fills them).  Free with ms_golden_free, also
 * after an error.  0 ok, -1 with err. */
int ms_golden_load(const char *path, int allow_empty_results, ms_golden *g, ms_err *err);
void ms_golden_free(ms_golden *g);

/* The result of a run as the golden stores it (hit rate rounded to 6 decimals). */
ms_golden_result ms_golden_result_of(const ms_counts *c);

/* How a run compares with its golden point.  Hit rates are compared at the
 * file's 6 decimals: below golden - hit_tol is a regression, above golden +
 * hit_tol an improvement; within it, any of hits / late / misses / on_cpu off
 * by more than count_tol is a change. */
typedef enum { MS_CMP_SAME, MS_CMP_REGRESSED, MS_CMP_IMPROVED, MS_CMP_CHANGED } ms_golden_cmp;
ms_golden_cmp ms_golden_compare(const ms_golden_result *want, const ms_golden_result *got, double hit_tol,
                                uint64_t count_tol);

/* Rewrites g->path with results[i] in place of point i's result fields;
 * comments, header and the other fields are kept as they are.  Atomic: a
 * temp file in the same folder renamed over the original.  0 ok, -1 with err. */
int ms_golden_write(const ms_golden *g, const ms_golden_result *results, ms_err *err);

#endif
