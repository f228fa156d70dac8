/* Paper-figure recipes: see figures.h; what the recipes share, and the
 * settings every run starts from, are in figures_recipe.h.  This file holds
 * the common run and outputs, the table of figures, and the gnuplot step. */
#include "sim/apps/figures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/apps/figures_recipe.h"
#include "traces/format/trace.h"
#include "sim/core/out.h"
#include "sim/core/paths.h"
#include "sim/engine/report.h"

/* A cache of `mixtral` experts scaled to the trace's model: the same
 * fraction of its L x J experts as `mixtral` is of Mixtral's 256, rounded,
 * at least 1 (the identity on a Mixtral-shaped trace). */
uint32_t fig_cache(const ms_fig_ctx *c, uint32_t mixtral)
{
    long n = lround((double)mixtral * c->meta->L * c->meta->J / FIG_REF_EXPERTS);
    return n < 1 ? 1 : (uint32_t)n;
}

ms_run_config fig_base_cfg(const ms_fig_ctx *c)
{
    return (ms_run_config){.trace_path = c->trace, .model = c->model, .platform = c->plat,
                           .prefetch_spec = "none", .cache_spec = "lru", .sched_spec = "gpu",
                           .cap_kind = MS_CAP_EXPERTS, .cap_value = fig_cache(c, FIG_CACHE), .distance = FIG_DISTANCE,
                           .max_batch = 1, .offline = 1, .seed = 1, .train_set = 1, .train_frac = FIG_TRAIN};
}

ms_run_config fig_system_cfg(const ms_fig_ctx *c, const fig_system *s)
{
    ms_run_config cfg = fig_base_cfg(c);
    cfg.prefetch_spec = s->prefetch;
    cfg.cache_spec = s->cache;
    cfg.sched_spec = s->sched;
    return cfg;
}

int fig_run(const ms_run_config *cfg, ms_metrics *m, ms_err *err)
{
    if (ms_run(cfg, m, err))
        return ms_fail_prefix(err, "%s+%s+%s at %g %s, distance %u", cfg->prefetch_spec, cfg->cache_spec,
                              cfg->sched_spec, cfg->cap_value, cfg->cap_kind == MS_CAP_EXPERTS ? "experts" : "bytes",
                              cfg->distance);
    return 0;
}

void fig_path(const ms_fig_ctx *c, const char *file, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", c->out_dir, file);
}

/* A figure's data CSVs go through sim/core/out.h; open ones are remembered by
 * their FILE so the recipes keep their open/close shape. */
#define MAX_OPEN_CSVS 8
static struct {
    FILE *f;
    ms_out *o;
} open_csvs[MAX_OPEN_CSVS];

FILE *fig_open_csv(const ms_fig_ctx *c, const char *file, const char *header, ms_err *err)
{
    char p[1200];
    fig_path(c, file, p, sizeof p);
    int slot = -1;
    for (int i = 0; i < MAX_OPEN_CSVS && slot < 0; i++)
        if (!open_csvs[i].f)
            slot = i;
    if (slot < 0) {
        ms_fail(err, "figures: more than %d data files open at once", MAX_OPEN_CSVS);
        return NULL;
    }
    ms_out *o = ms_out_open("figures", p, err);
    if (!o)
        return NULL;
    FILE *f = ms_out_fp(o);
    ms_report_provenance_line_head(f, c->trace);
    fprintf(f, "; platform %s sha256 %s\n", c->plat->file, c->plat->sha256);
    fprintf(f, "%s\n", header);
    open_csvs[slot].f = f;
    open_csvs[slot].o = o;
    return f;
}

/* Commits the CSV when rc is 0, else removes it; returns rc or -1. */
int fig_close_csv(FILE *f, const ms_fig_ctx *c, const char *file, int rc, ms_err *err)
{
    (void)c;
    (void)file;
    for (int i = 0; i < MAX_OPEN_CSVS; i++)
        if (open_csvs[i].f == f) {
            ms_out *o = open_csvs[i].o;
            open_csvs[i].f = NULL;
            open_csvs[i].o = NULL;
            if (rc) {
                ms_out_abort(o);
                return rc;
            }
            return ms_out_commit(o, err);
        }
    return rc ? rc : ms_fail(err, "figures: %s was not opened", file);
}

/* The speculative baseline needs the trace's speculative gates up to d. */
int fig_beyond_spec(const fig_system *s, uint32_t d, const ms_trace_meta *meta)
{
    return !strncmp(s->prefetch, "speculative", 11) && d > meta->spec_depth;
}

/* Activated experts whose prefetch arrived before the gate. */
double fig_recall_in_time(const ms_metrics *m)
{
    uint64_t act = ms_metrics_activations(&m->total);
    return act ? (double)(m->prefetch_useful - m->prefetch_late) / (double)act : 0.0;
}

double fig_recall(const ms_metrics *m)
{
    uint64_t act = ms_metrics_activations(&m->total);
    return act ? (double)m->prefetch_useful / (double)act : 0.0;
}

/* ---- the table: one row per figure; a sweep recipe is data (figures_sweeps.c) ---- */

const ms_figure ms_figures[] = {
    {"hit-distance", "Expert hit rate vs prefetch distance", "fMoE Fig. 4", MS_FIG_NEEDS_EMBED | MS_FIG_NEEDS_SPEC,
     NULL, &fig_sweep_hit_distance},
    {"tpot-cache", "TPOT vs expert-cache budget", "fMoE Fig. 11", MS_FIG_NEEDS_SPEC, NULL, &fig_sweep_tpot_cache},
    {"ablation-tracking", "Expert hit rate by pattern-tracking method", "fMoE Fig. 12a",
     MS_FIG_NEEDS_EMBED | MS_FIG_NEEDS_SPEC, NULL, &fig_sweep_ablation_tracking},
    {"ablation-cache", "Expert hit rate of fMoE prefetching with three caches", "fMoE Fig. 12b", 0,
     NULL, &fig_sweep_ablation_cache},
    {"entropy-layer", "Entropy of expert activations per layer, fine vs coarse grain", "fMoE Fig. 3b", 0,
     fig_entropy_layer, NULL},
    {"entropy-iters", "Entropy of expert activations through iterations", "fMoE Fig. 3c", 0, fig_entropy_iters, NULL},
    {"heatmap", "Expert activation heatmaps: iteration vs request level", "fMoE Fig. 3a", 0, fig_heatmap, NULL},
    {"similarity-capacity", "Mean similarity score vs Expert Map Store capacity", "fMoE Fig. 14a",
     MS_FIG_NEEDS_EMBED, fig_similarity_capacity, NULL},
    {"pearson", "Pearson correlation of similarity score and expert hit rate", "fMoE Fig. 8", MS_FIG_NEEDS_EMBED,
     fig_pearson, NULL},
    {"breakdown", "Latency breakdown of one fMoE decode iteration", "fMoE Fig. 15", 0, fig_breakdown, NULL},
    {"mapstore-memory", "Expert Map Store memory vs capacity", "fMoE Fig. 16", 0, fig_mapstore_memory, NULL},
    {"latency-cdf", "Request-latency CDF in online serving", "fMoE Fig. 10", MS_FIG_NEEDS_SPEC, fig_latency_cdf, NULL},
    {"moeinf-hit-cache", "Cache hit ratio vs cache size against Belady", "MoE-Infinity Fig. 11", 0,
     NULL, &fig_sweep_moeinf_hit_cache},
    {"moeinf-recall-bw", "Prefetch recall vs PCIe bandwidth", "MoE-Infinity Fig. 10", 0, NULL, &fig_sweep_moeinf_recall_bw},
    {"moeinf-latency-eamc", "TPOT and prefetch recall vs EAMC capacity", "MoE-Infinity Fig. 12", 0,
     NULL, &fig_sweep_moeinf_latency_eamc},
    {"hybrimoe-timeline", "CPU / GPU / PCIe timeline of one layer", "HybriMoE scheduling", 0,
     fig_hybrimoe_timeline, NULL},
};
const size_t ms_n_figures = sizeof ms_figures / sizeof ms_figures[0];

const ms_figure *ms_figure_find(const char *name)
{
    for (size_t i = 0; i < ms_n_figures; i++)
        if (!strcmp(ms_figures[i].name, name))
            return &ms_figures[i];
    return NULL;
}

const char *ms_figure_missing(const ms_figure *f, const ms_trace_meta *meta)
{
    if ((f->needs & MS_FIG_NEEDS_EMBED) && !meta->embed_dim)
        return "no semantic embeddings (fMoE's semantic search needs them)";
    if ((f->needs & MS_FIG_NEEDS_SPEC) && !meta->spec_depth)
        return "no speculative gate outputs (the speculative baseline needs them)";
    return NULL;
}

/* A name from a trace or a profile as it goes into the gnuplot command line,
 * inside '...' inside "...": the characters those quotes cannot carry
 * (' " \ $ `) and control characters become '?'.  The rest is kept as it
 * is; the scripts print it literally (lit() in plots/fig_common.gp escapes
 * gnuplot's enhanced-text markup: _ ^ { } @ & ~). */
static void gnuplot_safe(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (; *in && n + 1 < cap; in++, n++) {
        unsigned char ch = (unsigned char)*in;
        out[n] = ch < 0x20 || ch == 0x7f || strchr("'\"\\$`", ch) ? '?' : (char)ch;
    }
    out[n] = 0;
}

/* One gnuplot run; term is "png" or "pdf". */
static int gnuplot(const ms_figure *f, const ms_fig_ctx *c, const char *term, ms_err *err)
{
    char cmd[8192], name[64], plots[4096];
    if (ms_path_plots(plots, sizeof plots, err))
        return -1;
    snprintf(name, sizeof name, "%s", f->name);
    for (char *p = name; *p; p++)
        if (*p == '-')
            *p = '_';
    char model[MS_NAME_MAX], platform[256];
    gnuplot_safe(c->meta->model_name[0] ? c->meta->model_name : "trace", model, sizeof model);
    gnuplot_safe(c->plat->name, platform, sizeof platform);
    /* gnuplot writes a temporary beside the figure, renamed when whole */
    char out[1200];
    snprintf(out, sizeof out, "%s/%s.%s", c->out_dir, f->name, term);
    if (snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"dir='%s'; out='@OUT@'; term='%s'; plots='%s'; "
                 "heading='%s (%s)'; subtitle='%s on %s'; model='%s'; platform='%s'\" '%s/fig_%s.gp'",
                 c->out_dir, term, plots, f->title, f->paper, model, platform, model, platform,
                 plots, name) >= (int)sizeof cmd)
        return ms_fail(err, "figures: the gnuplot command for %s is longer than %zu bytes", f->name, sizeof cmd - 1);
    if (ms_out_from_command("figures", out, cmd, err))
        return ms_fail_prefix(err, "gnuplot on plots/fig_%s.gp%s", name,
                              strstr(err->msg, "the command failed") ? " (is gnuplot installed? apt-get install gnuplot-nox)"
                                                                     : "");
    return 0;
}

int ms_figure_render(const ms_figure *f, const ms_fig_ctx *c, ms_err *err)
{
    return gnuplot(f, c, "png", err) || gnuplot(f, c, "pdf", err) ? -1 : 0;
}

int ms_figure_run(const ms_figure *f, const ms_fig_ctx *c, ms_err *err)
{
    return f->sweep ? fig_run_sweep(c, f->sweep, err) : f->run(c, err);
}
