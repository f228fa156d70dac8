/* What the figure recipes share (internal to sim/apps/figures*.c): the run
 * every recipe starts from, checked CSV outputs, and the sweep recipes as
 * data.
 *
 * Every recipe replays the context's trace with one training split
 * (FIG_TRAIN of the requests, or of the iterations of a single-request
 * trace), offline arrivals (except latency-cdf, which serves the trace
 * re-timed at a rate every system can serve), batch 1, prefetch distance FIG_DISTANCE (fMoE's evaluation
 * setting) and a cache of FIG_CACHE experts unless the figure sweeps that
 * knob.  Cache sizes are written for Mixtral-8x7B, whose L x J = 32 x 8 = 256
 * experts FIG_REF_EXPERTS stands for; fig_cache() scales them to the same
 * fraction of the trace's L x J (16, 32, 64 are 1/16, 1/8, 1/4), so a
 * Qwen3-30B-A3B trace (48 x 128) replays with 384, 768, 1536.  Layers are
 * numbered from 0 in every CSV, as in traces, --events and `trace stats`. */
#ifndef MS_FIGURES_RECIPE_H
#define MS_FIGURES_RECIPE_H

#include <stdio.h>

#include "sim/apps/figures.h"
#include "sim/engine/engine.h"

#define FIG_TRAIN 0.5
#define FIG_DISTANCE 3
#define FIG_CACHE 32
#define FIG_REF_EXPERTS 256

typedef struct {
    const char *label, *prefetch, *cache, *sched;
} fig_system;

/* ---- the common run and outputs (figures.c) ---- */
/* A cache of `mixtral` experts scaled to the trace's model (at least 1). */
uint32_t fig_cache(const ms_fig_ctx *c, uint32_t mixtral);
ms_run_config fig_base_cfg(const ms_fig_ctx *c);
ms_run_config fig_system_cfg(const ms_fig_ctx *c, const fig_system *s);
/* ms_run with the point named in the error. */
int fig_run(const ms_run_config *cfg, ms_metrics *m, ms_err *err);
void fig_path(const ms_fig_ctx *c, const char *file, char *out, size_t cap);
/* A data CSV in the output folder through sim/core/out.h, with the
 * provenance line and header written; fig_close_csv commits it when rc is 0,
 * else removes it, and returns rc or -1. */
FILE *fig_open_csv(const ms_fig_ctx *c, const char *file, const char *header, ms_err *err);
int fig_close_csv(FILE *f, const ms_fig_ctx *c, const char *file, int rc, ms_err *err);
/* The speculative baseline needs the trace's speculative gates up to d. */
int fig_beyond_spec(const fig_system *s, uint32_t d, const ms_trace_meta *meta);
/* Activated experts whose prefetch arrived before the gate, and all whose
 * prefetch was useful, per activation. */
double fig_recall_in_time(const ms_metrics *m);
double fig_recall(const ms_metrics *m);

/* ---- sweep recipes as data (figures_sweeps.c) ----
 * A sweep recipe runs every system at every value of one axis and writes
 * one CSV, long (a row per point: system, the axis value, the columns) or
 * wide (a row per system: its label, then one cell per axis value). */
typedef enum {
    FIG_AX_DISTANCE,   /* prefetch distance */
    FIG_AX_CACHE,      /* cache in Mixtral experts, scaled by fig_cache */
    FIG_AX_BANDWIDTH,  /* H2D bandwidth, GB/s */
    FIG_AX_PREFETCH,   /* the prefetch spec printf'd with the value (sprintf %u) */
} fig_axis;

typedef enum { FIG_COL_HIT_RATE, FIG_COL_RECALL, FIG_COL_RECALL_IN_TIME, FIG_COL_TPOT_MS, FIG_COL_CACHE_GB } fig_col;

typedef struct fig_sweep {
    const char *file;            /* <out_dir>/file */
    const char *header;          /* long: the CSV header; wide: the first column's name */
    const char *wide_prefix;     /* wide: a value's column is prefix + value; NULL: long */
    const fig_system *systems;   /* NULL: one unnamed system from base (no system column) */
    size_t n_systems;
    const char *prefetch_fmt;    /* FIG_AX_PREFETCH; with the unnamed system */
    const char *cache;           /* the unnamed system's cache */
    fig_axis axis;
    const double *values;
    size_t n_values;
    uint32_t distance;           /* 0: FIG_DISTANCE (unless the axis is the distance) */
    fig_col cols[4];
    size_t n_cols;
} fig_sweep;

int fig_run_sweep(const ms_fig_ctx *c, const fig_sweep *s, ms_err *err);
extern const fig_sweep fig_sweep_hit_distance, fig_sweep_tpot_cache, fig_sweep_ablation_tracking,
    fig_sweep_ablation_cache, fig_sweep_moeinf_hit_cache, fig_sweep_moeinf_recall_bw, fig_sweep_moeinf_latency_eamc;

/* ---- recipes of the trace itself (figures_trace.c) ---- */
int fig_entropy_layer(const ms_fig_ctx *c, ms_err *err);
int fig_entropy_iters(const ms_fig_ctx *c, ms_err *err);
int fig_heatmap(const ms_fig_ctx *c, ms_err *err);
int fig_similarity_capacity(const ms_fig_ctx *c, ms_err *err);
int fig_pearson(const ms_fig_ctx *c, ms_err *err);
int fig_mapstore_memory(const ms_fig_ctx *c, ms_err *err);

/* ---- recipes over a run's per-event or per-request CSVs (figures_events.c) ---- */
int fig_breakdown(const ms_fig_ctx *c, ms_err *err);
int fig_latency_cdf(const ms_fig_ctx *c, ms_err *err);
int fig_hybrimoe_timeline(const ms_fig_ctx *c, ms_err *err);

#endif
