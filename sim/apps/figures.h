/* Paper-figure recipes (`moesim figures`).
 *
 * A recipe runs the sweep one figure needs (ms_run in-process, on the trace
 * of the context) and writes its data as CSV into ctx->out_dir
 * (<name>.csv, plus side files named <name>_*.csv); ms_figure_render then
 * runs plots/fig_<name>.gp through gnuplot twice, into <name>.png (pngcairo)
 * and <name>.pdf (pdfcairo).  The scripts read only those CSVs.
 *
 * Requirements: a recipe may need the trace's semantic embeddings
 * (MS_FIG_NEEDS_EMBED) or speculative gates (MS_FIG_NEEDS_SPEC); on a trace
 * without them ms_figure_missing() names what is missing and the caller
 * skips the figure.  Every simulation of a recipe is deterministic, so the
 * CSVs are byte-identical from run to run.
 *
 * Conventions: layers are numbered from 0 in every CSV and figure, as in
 * traces, --events and `trace stats`; cache sizes are fractions of the
 * trace's L x J experts (the fractions 16, 24, 32, 48 and 64 are of
 * Mixtral-8x7B's 256), so a --trace of another model gets caches of its
 * own scale. */
#ifndef MS_FIGURES_H
#define MS_FIGURES_H

#include <stddef.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"
#include "traces/format/trace.h"

enum { MS_FIG_NEEDS_EMBED = 1, MS_FIG_NEEDS_SPEC = 2 };

typedef struct {
    const char *out_dir;         /* CSV, PNG and PDF go here */
    const char *trace;           /* trace file every recipe replays */
    const ms_trace_meta *meta;   /* its metadata */
    const ms_model *model;       /* NULL: dimensions from the trace alone */
    const ms_platform *plat;
    uint64_t seed;               /* seed of generated side traces (mapstore-memory) */
} ms_fig_ctx;

typedef struct {
    const char *name;    /* --only NAME; plots/fig_<name>.gp */
    const char *title;   /* the figure's title */
    const char *paper;   /* the paper figure it reproduces */
    int needs;           /* MS_FIG_NEEDS_* */
    int (*run)(const ms_fig_ctx *ctx, ms_err *err); /* writes the CSVs; 0 or -1 + err; or */
    const struct fig_sweep *sweep;  /* a sweep recipe, as data (figures_recipe.h) */
} ms_figure;

extern const ms_figure ms_figures[];
extern const size_t ms_n_figures;

const ms_figure *ms_figure_find(const char *name);
/* Writes f's CSVs (its recipe or its sweep): 0 or -1 + err. */
int ms_figure_run(const ms_figure *f, const ms_fig_ctx *ctx, ms_err *err);
/* NULL when the trace has what f needs, else a short phrase ("no semantic
 * embeddings") naming what it lacks. */
const char *ms_figure_missing(const ms_figure *f, const ms_trace_meta *meta);
/* Renders <out_dir>/<name>.png and .pdf with plots/fig_<name>.gp (the script
 * gets dir, out, term, plots, heading, subtitle, model and platform through
 * gnuplot -e; the model and platform names as they are, but for the
 * characters the quoting cannot carry, ' " \ $ `, shown as ?). */
int ms_figure_render(const ms_figure *f, const ms_fig_ctx *ctx, ms_err *err);

#endif
