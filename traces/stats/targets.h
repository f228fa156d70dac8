/* Published routing-locality targets of a model, and a trace's statistics
 * against them (`moesim trace stats --against MODEL`; docs/generator.md
 * "Locality targets").
 *
 * A targets file (sim/profiles/targets/MODEL.ini, or any path ending in
 * .ini) has a [model] section naming the model and one [target NAME] section
 * per published number:
 *
 *   statistic   lru_hit | lru_miss: hit (miss) rate of an LRU expert cache,
 *                 with granularity = layer | global, scope = decode | all,
 *                 reset = request | none (locality.h) and the cache size as
 *                 slots = N (experts per layer for layer, (layer, expert)
 *                 pairs for global) or fraction = F (of J, resp. L*J);
 *               reuse_prev: fraction of a decode step's experts also chosen
 *                 at that layer by the previous step (stats.h);
 *               reuse_w8: the same within the last 8 steps (stats.h);
 *               h_req | h_iter | h_trace: entropies in bits (stats.h);
 *               h_req_decode: a request's decode-step entropy (locality.h);
 *               srp: best segment-router F1 with window = m rows
 *                 (segment.h; m = 4, 16, 64 or 256);
 *               sch: hit rate of the global future-count cache of
 *                 rho * K * L entries with window = m (segment.h;
 *                 rho = 2, m as srp).
 *   value       the published figure (a rate as a fraction 0..1)
 *   tolerance   optional: an absolute difference, or "N%" relative; default
 *               0.05 absolute for cache hit / miss rates (lru_*, sch), 10 %
 *               relative otherwise
 *   source      paper + table/figure/section, or repository@commit + path
 *   read        text | table | plot
 *   workload    what the source measured on (dataset, prompts, lengths)
 *   note        optional: setup differences, conversions
 *
 * Every key is required but tolerance and note; unknown keys, sections or
 * values are one-line errors naming file, line and key. */
#ifndef MS_TARGETS_H
#define MS_TARGETS_H

#include <stdint.h>
#include <stdio.h>

#include "sim/core/err.h"
#include "traces/stats/locality.h"
#include "traces/stats/stats.h"

#define MS_TARGETS_MAX 64

typedef enum {
    MS_TGT_LRU_HIT,
    MS_TGT_LRU_MISS,
    MS_TGT_REUSE_PREV,
    MS_TGT_REUSE_W8,
    MS_TGT_H_REQ,
    MS_TGT_H_ITER,
    MS_TGT_H_TRACE,
    MS_TGT_H_REQ_DECODE,
    MS_TGT_SRP,
    MS_TGT_SCH,
} ms_target_stat;

typedef struct {
    char name[64];
    int line;                 /* of its [target NAME] line */
    ms_target_stat stat;
    ms_loc_granularity gran;  /* lru_* only */
    ms_loc_scope scope;
    ms_loc_reset reset;
    double slots;             /* > 0: entries; else fraction is used */
    double fraction;
    double window;            /* srp / sch: m */
    double rho;               /* sch only */
    double value;
    double tolerance;         /* absolute, or relative when tol_relative */
    int tol_relative;
    char source[400];
    char read[8];
    char workload[300];
    char note[300];
} ms_target;

typedef struct {
    char model[128];
    char file[1024];
    int n;
    ms_target t[MS_TARGETS_MAX];
} ms_targets;

/* Loads a targets file: a model name (sim/profiles/targets/NAME.ini under the
 * profile directory, paths.h) or a path ending in ".ini".  0, or -1 + err
 * (FILE:LINE: [target NAME] key = value: why). */
int ms_targets_load(const char *name_or_path, ms_targets *out, ms_err *err);

/* The trace's value of target t (NaN when undefined, e.g. no decode step). */
double ms_target_measure(const ms_target *t, const ms_stats *s);
/* 1 when measured is within t's tolerance of its value (NaN never is). */
int ms_target_met(const ms_target *t, double measured);
/* The cache entries of an lru_* target for a model of L layers x J experts. */
uint64_t ms_target_entries(const ms_target *t, uint32_t L, uint32_t J);
/* "lru_hit layer decode reset=request 8 slots" and the like. */
void ms_target_describe(const ms_target *t, uint32_t L, uint32_t J, char *buf, size_t cap);

/* One row per target (target, trace, difference, ok / MISS) and a last line
 * "N of M targets met"; returns the number of targets missed. */
int ms_targets_print(const ms_targets *ts, const ms_stats *s, FILE *out);

#endif
