/* The sweep recipes as data (figures_recipe.h fig_sweep) and their one
 * runner: fMoE Fig. 4, 11, 12a, 12b and MoE-Infinity Fig. 10, 11, 12. */
#include <stdio.h>
#include <string.h>

#include "sim/apps/figures_recipe.h"
#include "sim/engine/report.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The systems of fMoE's evaluation as this simulator models them. */
static const fig_system fmoe_systems[] = {
    {"DeepSpeed-Inference (none+lru)", "none", "lru", "gpu"},
    {"Mixtral-Offloading (speculative+lru)", "speculative", "lru", "gpu"},
    {"ProMoE (transition+lru)", "transition", "lru", "gpu"},
    {"MoE-Infinity (eam+eam)", "eam", "eam", "gpu"},
    {"fMoE (fmoe+fmoe)", "fmoe", "fmoe", "gpu"},
};
/* in Mixtral experts (fig_cache scales them) */
static const double cache_sweep[] = {16, 24, 32, 48, 64};

/* fMoE Fig. 4: hit rate vs prefetch distance */
static const fig_system hit_distance_systems[] = {
    {"oracle+lru (perfect prediction)", "oracle", "lru", "gpu"},
    {"fmoe+fmoe (fine)", "fmoe", "fmoe", "gpu"},
    {"fmoe:track=hitcount+fmoe (coarse)", "fmoe:track=hitcount", "fmoe", "gpu"},
    {"eam+eam (MoE-Infinity; coarse)", "eam", "eam", "gpu"},
    {"speculative+lru", "speculative", "lru", "gpu"},
    {"transition+lru", "transition", "lru", "gpu"},
    {"traced-topk+lru", "traced-topk", "lru", "gpu"},
};
static const double distances_1_5[] = {1, 2, 3, 4, 5};
const fig_sweep fig_sweep_hit_distance = {
    .file = "hit_distance.csv", .header = "system,distance,hit_rate,recall",
    .systems = hit_distance_systems, .n_systems = N(hit_distance_systems),
    .axis = FIG_AX_DISTANCE, .values = distances_1_5, .n_values = N(distances_1_5),
    .cols = {FIG_COL_HIT_RATE, FIG_COL_RECALL}, .n_cols = 2};

/* fMoE Fig. 11: TPOT vs expert-cache budget */
const fig_sweep fig_sweep_tpot_cache = {
    .file = "tpot_cache.csv", .header = "system,cache_experts,cache_gb,tpot_ms,hit_rate",
    .systems = fmoe_systems, .n_systems = N(fmoe_systems),
    .axis = FIG_AX_CACHE, .values = cache_sweep, .n_values = N(cache_sweep),
    .cols = {FIG_COL_CACHE_GB, FIG_COL_TPOT_MS, FIG_COL_HIT_RATE}, .n_cols = 3};

/* fMoE Fig. 12a: hit rate by pattern-tracking method */
static const fig_system tracking_systems[] = {
    {"Speculate", "speculative", "fmoe", "gpu"},
    {"Hit count", "fmoe:track=hitcount", "fmoe", "gpu"},
    {"Map (T)", "fmoe:track=traj", "fmoe", "gpu"},
    {"Map (T+S)", "fmoe:track=traj+sem", "fmoe", "gpu"},
    {"Map (T+S+delta)", "fmoe:track=full", "fmoe", "gpu"},
};
static const double distances_1_3[] = {1, 2, 3};
const fig_sweep fig_sweep_ablation_tracking = {
    .file = "ablation_tracking.csv", .header = "method", .wide_prefix = "d",
    .systems = tracking_systems, .n_systems = N(tracking_systems),
    .axis = FIG_AX_DISTANCE, .values = distances_1_3, .n_values = N(distances_1_3),
    .cols = {FIG_COL_HIT_RATE}, .n_cols = 1};

/* fMoE Fig. 12b: fMoE's prefetching with three caches */
static const fig_system cache_systems[] = {
    {"LRU", "fmoe", "lru", "gpu"},
    {"LFU", "fmoe", "lfu", "gpu"},
    {"fMoE cache", "fmoe", "fmoe", "gpu"},
};
static const double cache_16_32_64[] = {16, 32, 64};
const fig_sweep fig_sweep_ablation_cache = {
    .file = "ablation_cache.csv", .header = "method", .wide_prefix = "c",
    .systems = cache_systems, .n_systems = N(cache_systems),
    .axis = FIG_AX_CACHE, .values = cache_16_32_64, .n_values = N(cache_16_32_64),
    .cols = {FIG_COL_HIT_RATE}, .n_cols = 1};

/* MoE-Infinity Fig. 11: cache hit ratio vs cache size against Belady */
static const fig_system moeinf_cache_systems[] = {
    {"LRU", "none", "lru", "gpu"},
    {"LFU", "none", "lfu", "gpu"},
    {"Neighbor-aware", "none", "neighbor", "gpu"},
    {"MoE-Infinity (eam+eam)", "eam", "eam", "gpu"},
    {"Belady (oracle)", "none", "belady", "gpu"},
};
const fig_sweep fig_sweep_moeinf_hit_cache = {
    .file = "moeinf_hit_cache.csv", .header = "system,cache_experts,cache_gb,hit_rate",
    .systems = moeinf_cache_systems, .n_systems = N(moeinf_cache_systems),
    .axis = FIG_AX_CACHE, .values = cache_sweep, .n_values = N(cache_sweep), .distance = 1,
    .cols = {FIG_COL_CACHE_GB, FIG_COL_HIT_RATE}, .n_cols = 2};

/* MoE-Infinity Fig. 10: prefetch recall (in time) vs PCIe bandwidth */
static const fig_system recall_systems[] = {
    {"TopK (topk-id)", "topk-id", "lru", "gpu"},
    {"Traced-TopK (traced-topk)", "traced-topk", "lru", "gpu"},
    {"MoE-Infinity (eam)", "eam", "lru", "gpu"},
};
static const double bandwidths[] = {8, 16, 32, 64, 128};
const fig_sweep fig_sweep_moeinf_recall_bw = {
    .file = "moeinf_recall_bw.csv", .header = "system,bandwidth_gbs,recall",
    .systems = recall_systems, .n_systems = N(recall_systems),
    .axis = FIG_AX_BANDWIDTH, .values = bandwidths, .n_values = N(bandwidths), .distance = 1,
    .cols = {FIG_COL_RECALL_IN_TIME}, .n_cols = 1};

/* MoE-Infinity Fig. 12: TPOT and recall vs EAMC capacity; the collection
 * never holds more EAMs than training sequences (requests) */
static const double eamc_capacities[] = {1, 2, 3, 4, 6, 8, 16};
const fig_sweep fig_sweep_moeinf_latency_eamc = {
    .file = "moeinf_latency_eamc.csv", .header = "capacity,tpot_ms,recall",
    .prefetch_fmt = "eam:capacity=%u", .cache = "eam",
    .axis = FIG_AX_PREFETCH, .values = eamc_capacities, .n_values = N(eamc_capacities), .distance = 1,
    .cols = {FIG_COL_TPOT_MS, FIG_COL_RECALL}, .n_cols = 2};

/* ---- the runner ---- */

static void print_col(FILE *f, fig_col col, const ms_metrics *m)
{
    switch (col) {
    case FIG_COL_HIT_RATE: fprintf(f, ",%.6f", ms_metrics_hit_rate(&m->total)); break;
    case FIG_COL_RECALL: fprintf(f, ",%.6f", fig_recall(m)); break;
    case FIG_COL_RECALL_IN_TIME: fprintf(f, ",%.6f", fig_recall_in_time(m)); break;
    case FIG_COL_TPOT_MS: fprintf(f, ",%.4f", m->tpot_mean_s * 1e3); break;
    case FIG_COL_CACHE_GB: fprintf(f, ",%.3f", m->gpu_cache_capacity_bytes / 1e9); break;
    }
}

/* The axis value as the CSV shows it: a scaled cache in the trace's experts. */
static double shown_value(const ms_fig_ctx *c, const fig_sweep *s, size_t k)
{
    return s->axis == FIG_AX_CACHE ? fig_cache(c, (uint32_t)s->values[k]) : s->values[k];
}

/* Runs one point; *skip when the system cannot run there (no bar). */
static int run_point(const ms_fig_ctx *c, const fig_sweep *s, const fig_system *sys, size_t k, ms_metrics *m,
                     int *skip, ms_err *err)
{
    ms_run_config cfg = sys ? fig_system_cfg(c, sys) : fig_base_cfg(c);
    ms_platform plat = *c->plat;
    char spec[64];
    if (s->distance)
        cfg.distance = s->distance;
    switch (s->axis) {
    case FIG_AX_DISTANCE: cfg.distance = (uint32_t)s->values[k]; break;
    case FIG_AX_CACHE: cfg.cap_value = fig_cache(c, (uint32_t)s->values[k]); break;
    case FIG_AX_BANDWIDTH:
        plat.h2d_bw = s->values[k] * 1e9;
        cfg.platform = &plat;
        break;
    case FIG_AX_PREFETCH:
        snprintf(spec, sizeof spec, s->prefetch_fmt, (unsigned)s->values[k]);
        cfg.prefetch_spec = spec;
        cfg.cache_spec = s->cache;
        break;
    }
    /* as in the paper figures: only a distance sweep leaves out points past the speculative gates */
    *skip = sys && s->axis == FIG_AX_DISTANCE && fig_beyond_spec(sys, cfg.distance, c->meta);
    return *skip ? 0 : fig_run(&cfg, m, err);
}

static int sweep_wide(const ms_fig_ctx *c, const fig_sweep *s, FILE *f, ms_err *err)
{
    for (size_t i = 0; i < s->n_systems; i++) {
        fprintf(f, "%s", s->systems[i].label);
        for (size_t k = 0; k < s->n_values; k++) {
            ms_metrics m;
            int skip;
            if (run_point(c, s, &s->systems[i], k, &m, &skip, err))
                return -1;
            if (skip) {
                fputc(',', f); /* no bar: the trace's speculative gates stop earlier */
                continue;
            }
            print_col(f, s->cols[0], &m);
            ms_metrics_free(&m);
        }
        fputc('\n', f);
    }
    return 0;
}

static int sweep_long(const ms_fig_ctx *c, const fig_sweep *s, FILE *f, ms_err *err)
{
    size_t n_sys = s->systems ? s->n_systems : 1;
    for (size_t i = 0; i < n_sys; i++)
        for (size_t k = 0; k < s->n_values; k++) {
            const fig_system *sys = s->systems ? &s->systems[i] : NULL;
            ms_metrics m;
            int skip;
            if (run_point(c, s, sys, k, &m, &skip, err))
                return -1;
            if (skip)
                continue;
            if (sys)
                fprintf(f, "%s,", sys->label);
            fprintf(f, "%g", shown_value(c, s, k));
            for (size_t j = 0; j < s->n_cols; j++)
                print_col(f, s->cols[j], &m);
            fputc('\n', f);
            ms_metrics_free(&m);
        }
    return 0;
}

int fig_run_sweep(const ms_fig_ctx *c, const fig_sweep *s, ms_err *err)
{
    char header[256];
    snprintf(header, sizeof header, "%s", s->header);
    for (size_t k = 0; s->wide_prefix && k < s->n_values; k++) {
        size_t n = strlen(header);
        snprintf(header + n, sizeof header - n, ",%s%g", s->wide_prefix, shown_value(c, s, k));
    }
    FILE *f = fig_open_csv(c, s->file, header, err);
    if (!f)
        return -1;
    int rc = s->wide_prefix ? sweep_wide(c, s, f, err) : sweep_long(c, s, f, err);
    return fig_close_csv(f, c, s->file, rc, err);
}
