/* Paper-figure recipes: see figures.h.  Every recipe replays the context's
 * trace with one training split (FIG_TRAIN of the requests, or of the
 * iterations of a single-request trace) for every run, offline arrivals
 * (except latency-cdf, which serves the trace's arrivals), batch 1, prefetch
 * distance FIG_DISTANCE (fMoE's evaluation setting) and a cache of
 * FIG_CACHE experts unless the figure sweeps that knob.
 *
 * Cache sizes are written for Mixtral-8x7B, whose L x J = 32 x 8 = 256
 * experts FIG_REF_EXPERTS stands for; fig_cache() scales them to the same
 * fraction of the trace's L x J (16, 32, 64 are 1/16, 1/8, 1/4), so a
 * Qwen3-30B-A3B trace (48 x 128) replays with 384, 768, 1536.
 *
 * Layers are numbered from 0 in every CSV, as in traces, --events and
 * `trace stats`. */
#include "sim/apps/figures.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "traces/synth/gen.h"
#include "traces/stats/stats.h"
#include "sim/core/digest.h"
#include "sim/engine/engine.h"
#include "sim/core/out.h"
#include "sim/core/paths.h"
#include "sim/engine/report.h"
#include "sim/core/version.h"

#define FIG_TRAIN 0.5
#define FIG_DISTANCE 3
#define FIG_CACHE 32
#define FIG_REF_EXPERTS 256

typedef struct {
    const char *label, *prefetch, *cache, *sched;
} fig_system;

/* The systems of fMoE's evaluation as this simulator models them. */
static const fig_system fmoe_systems[] = {
    {"DeepSpeed-Inference (none+lru)", "none", "lru", "gpu"},
    {"Mixtral-Offloading (speculative+lru)", "speculative", "lru", "gpu"},
    {"ProMoE (transition+lru)", "transition", "lru", "gpu"},
    {"MoE-Infinity (eam+eam)", "eam", "eam", "gpu"},
    {"fMoE (fmoe+fmoe)", "fmoe", "fmoe", "gpu"},
};
#define N_FMOE_SYSTEMS (sizeof fmoe_systems / sizeof fmoe_systems[0])

/* A cache of `mixtral` experts scaled to the trace's model: the same
 * fraction of its L x J experts as `mixtral` is of Mixtral's 256, rounded,
 * at least 1 (the identity on a Mixtral-shaped trace). */
static uint32_t fig_cache(const ms_fig_ctx *c, uint32_t mixtral)
{
    long n = lround((double)mixtral * c->meta->L * c->meta->J / FIG_REF_EXPERTS);
    return n < 1 ? 1 : (uint32_t)n;
}

static ms_run_config base_cfg(const ms_fig_ctx *c)
{
    return (ms_run_config){.trace_path = c->trace, .model = c->model, .platform = c->plat,
                           .prefetch_spec = "none", .cache_spec = "lru", .sched_spec = "gpu",
                           .cap_kind = MS_CAP_EXPERTS, .cap_value = fig_cache(c, FIG_CACHE), .distance = FIG_DISTANCE,
                           .max_batch = 1, .offline = 1, .seed = 1, .train_set = 1, .train_frac = FIG_TRAIN};
}

static ms_run_config system_cfg(const ms_fig_ctx *c, const fig_system *s)
{
    ms_run_config cfg = base_cfg(c);
    cfg.prefetch_spec = s->prefetch;
    cfg.cache_spec = s->cache;
    cfg.sched_spec = s->sched;
    return cfg;
}

static int run_sim(const ms_run_config *cfg, ms_metrics *m, ms_err *err)
{
    if (ms_run(cfg, m, err))
        return ms_fail_prefix(err, "%s+%s+%s at %g %s, distance %u", cfg->prefetch_spec, cfg->cache_spec,
                              cfg->sched_spec, cfg->cap_value, cfg->cap_kind == MS_CAP_EXPERTS ? "experts" : "bytes",
                              cfg->distance);
    return 0;
}

static void fig_path(const ms_fig_ctx *c, const char *file, char *out, size_t cap)
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

static FILE *open_csv(const ms_fig_ctx *c, const char *file, const char *header, ms_err *err)
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
    char hex[MS_DIGEST_HEX];
    ms_err derr;
    fprintf(f, "# moesim %s commit %s; trace %s sha256 %s; platform %s sha256 %s\n", ms_version(), ms_commit(),
            c->trace, ms_digest_file_cached(c->trace, hex, &derr) ? "unknown" : hex, c->plat->file,
            c->plat->sha256);
    fprintf(f, "%s\n", header);
    open_csvs[slot].f = f;
    open_csvs[slot].o = o;
    return f;
}

/* Commits the CSV when rc is 0, else removes it; returns rc or -1. */
static int close_csv(FILE *f, const ms_fig_ctx *c, const char *file, int rc, ms_err *err)
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
static int beyond_spec(const fig_system *s, uint32_t d, const ms_trace_meta *meta)
{
    return !strncmp(s->prefetch, "speculative", 11) && d > meta->spec_depth;
}

/* Activated experts whose prefetch arrived before the gate. */
static double recall_in_time(const ms_metrics *m)
{
    uint64_t act = ms_metrics_activations(&m->total);
    return act ? (double)(m->prefetch_useful - m->prefetch_late) / (double)act : 0.0;
}

static double recall_of(const ms_metrics *m)
{
    uint64_t act = ms_metrics_activations(&m->total);
    return act ? (double)m->prefetch_useful / (double)act : 0.0;
}

/* ---- fMoE Fig. 4: hit rate vs prefetch distance ---- */

static int fig_hit_distance(const ms_fig_ctx *c, ms_err *err)
{
    static const fig_system sys[] = {
        {"oracle+lru (perfect prediction)", "oracle", "lru", "gpu"},
        {"fmoe+fmoe (fine)", "fmoe", "fmoe", "gpu"},
        {"fmoe:track=hitcount+fmoe (coarse)", "fmoe:track=hitcount", "fmoe", "gpu"},
        {"eam+eam (MoE-Infinity; coarse)", "eam", "eam", "gpu"},
        {"speculative+lru", "speculative", "lru", "gpu"},
        {"transition+lru", "transition", "lru", "gpu"},
        {"traced-topk+lru", "traced-topk", "lru", "gpu"},
    };
    FILE *f = open_csv(c, "hit_distance.csv", "system,distance,hit_rate,recall", err);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t s = 0; s < sizeof sys / sizeof sys[0] && !rc; s++)
        for (uint32_t d = 1; d <= 5 && !rc; d++) {
            if (beyond_spec(&sys[s], d, c->meta))
                continue;
            ms_run_config cfg = system_cfg(c, &sys[s]);
            cfg.distance = d;
            ms_metrics m;
            if ((rc = run_sim(&cfg, &m, err)))
                break;
            fprintf(f, "%s,%u,%.6f,%.6f\n", sys[s].label, d, ms_metrics_hit_rate(&m.total), recall_of(&m));
            ms_metrics_free(&m);
        }
    return close_csv(f, c, "hit_distance.csv", rc, err);
}

/* ---- fMoE Fig. 11: TPOT vs expert-cache budget ---- */

/* in Mixtral experts (fig_cache scales them) */
static const uint32_t cache_sweep[] = {16, 24, 32, 48, 64};
#define N_CACHE_SWEEP (sizeof cache_sweep / sizeof cache_sweep[0])

static int fig_tpot_cache(const ms_fig_ctx *c, ms_err *err)
{
    FILE *f = open_csv(c, "tpot_cache.csv", "system,cache_experts,cache_gb,tpot_ms,hit_rate", err);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t s = 0; s < N_FMOE_SYSTEMS && !rc; s++)
        for (size_t k = 0; k < N_CACHE_SWEEP && !rc; k++) {
            ms_run_config cfg = system_cfg(c, &fmoe_systems[s]);
            uint32_t n = fig_cache(c, cache_sweep[k]);
            cfg.cap_value = n;
            ms_metrics m;
            if ((rc = run_sim(&cfg, &m, err)))
                break;
            fprintf(f, "%s,%u,%.3f,%.4f,%.6f\n", fmoe_systems[s].label, n,
                    m.gpu_cache_capacity_bytes / 1e9, m.tpot_mean_s * 1e3, ms_metrics_hit_rate(&m.total));
            ms_metrics_free(&m);
        }
    return close_csv(f, c, "tpot_cache.csv", rc, err);
}

/* ---- fMoE Fig. 12a/b: ablations ---- */

static int fig_ablation_tracking(const ms_fig_ctx *c, ms_err *err)
{
    static const fig_system sys[] = {
        {"Speculate", "speculative", "fmoe", "gpu"},
        {"Hit count", "fmoe:track=hitcount", "fmoe", "gpu"},
        {"Map (T)", "fmoe:track=traj", "fmoe", "gpu"},
        {"Map (T+S)", "fmoe:track=traj+sem", "fmoe", "gpu"},
        {"Map (T+S+delta)", "fmoe:track=full", "fmoe", "gpu"},
    };
    FILE *f = open_csv(c, "ablation_tracking.csv", "method,d1,d2,d3", err);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t s = 0; s < sizeof sys / sizeof sys[0] && !rc; s++) {
        fprintf(f, "%s", sys[s].label);
        for (uint32_t d = 1; d <= 3 && !rc; d++) {
            if (beyond_spec(&sys[s], d, c->meta)) {
                fputc(',', f); /* no bar: the trace's speculative gates stop earlier */
                continue;
            }
            ms_run_config cfg = system_cfg(c, &sys[s]);
            cfg.distance = d;
            ms_metrics m;
            if ((rc = run_sim(&cfg, &m, err)))
                break;
            fprintf(f, ",%.6f", ms_metrics_hit_rate(&m.total));
            ms_metrics_free(&m);
        }
        fputc('\n', f);
    }
    return close_csv(f, c, "ablation_tracking.csv", rc, err);
}

static int fig_ablation_cache(const ms_fig_ctx *c, ms_err *err)
{
    static const fig_system sys[] = {
        {"LRU", "fmoe", "lru", "gpu"},
        {"LFU", "fmoe", "lfu", "gpu"},
        {"fMoE cache", "fmoe", "fmoe", "gpu"},
    };
    static const uint32_t mixtral_sizes[] = {16, 32, 64};
    uint32_t sizes[3];
    char header[96];
    for (size_t k = 0; k < 3; k++)
        sizes[k] = fig_cache(c, mixtral_sizes[k]);
    snprintf(header, sizeof header, "method,c%u,c%u,c%u", sizes[0], sizes[1], sizes[2]);
    FILE *f = open_csv(c, "ablation_cache.csv", header, err);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t s = 0; s < sizeof sys / sizeof sys[0] && !rc; s++) {
        fprintf(f, "%s", sys[s].label);
        for (size_t k = 0; k < 3 && !rc; k++) {
            ms_run_config cfg = system_cfg(c, &sys[s]);
            cfg.cap_value = sizes[k];
            ms_metrics m;
            if ((rc = run_sim(&cfg, &m, err)))
                break;
            fprintf(f, ",%.6f", ms_metrics_hit_rate(&m.total));
            ms_metrics_free(&m);
        }
        fputc('\n', f);
    }
    return close_csv(f, c, "ablation_cache.csv", rc, err);
}

/* ---- fMoE Fig. 3: trace statistics and heatmaps ---- */

static ms_stats *trace_stats(const ms_fig_ctx *c, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(c->trace, err);
    if (!rd)
        return NULL;
    ms_stats *s = ms_stats_new(ms_reader_meta(rd), err);
    ms_request req = {0};
    int rc = s ? 1 : -1;
    while (rc == 1 && (rc = ms_reader_next(rd, &req, err)) == 1)
        if (ms_stats_add(s, &req, err))
            rc = -1;
    ms_request_free(&req);
    ms_reader_close(rd);
    if (rc) {
        ms_stats_free(s);
        return NULL;
    }
    ms_stats_finish(s);
    return s;
}

static int fig_entropy_layer(const ms_fig_ctx *c, ms_err *err)
{
    ms_stats *s = trace_stats(c, err);
    if (!s)
        return -1;
    const ms_stats_report *r = ms_stats_report_get(s);
    FILE *f = open_csv(c, "entropy_layer.csv", "layer,iteration,request,trace,h_max", err);
    int rc = f ? 0 : -1;
    for (uint32_t l = 0; f && l < r->L; l++)
        fprintf(f, "%u,%.6f,%.6f,%.6f,%.6f\n", l, r->h_iter[l], r->h_req[l], r->h_trace[l], r->h_max);
    if (f)
        rc = close_csv(f, c, "entropy_layer.csv", rc, err);
    ms_stats_free(s);
    return rc;
}

static int fig_entropy_iters(const ms_fig_ctx *c, ms_err *err)
{
    ms_stats *s = trace_stats(c, err);
    if (!s)
        return -1;
    const ms_stats_report *r = ms_stats_report_get(s);
    FILE *f = open_csv(c, "entropy_iters.csv", "iterations,all,decode,requests,h_max", err);
    int rc = f ? 0 : -1;
    for (uint32_t i = 0; f && i < r->curve.len; i++) {
        fprintf(f, "%u,%.6f,", i + 1, r->curve.mean[i]);
        if (i < r->curve_decode.len)
            fprintf(f, "%.6f", r->curve_decode.mean[i]);
        fprintf(f, ",%llu,%.6f\n", (unsigned long long)r->curve.requests[i], r->h_max);
    }
    if (f)
        rc = close_csv(f, c, "entropy_iters.csv", rc, err);
    ms_stats_free(s);
    return rc;
}

/* Routed gate weight per (layer, expert), summed over rows [r0, r1) of req. */
static void routed_weight(const ms_trace_meta *m, const ms_request *req, uint32_t r0, uint32_t r1, double *w)
{
    memset(w, 0, (size_t)m->L * m->J * sizeof *w);
    for (uint32_t r = r0; r < r1; r++)
        for (uint32_t l = 0; l < m->L; l++)
            for (uint32_t k = 0; k < m->K; k++) {
                size_t i = ms_topk_index(m, r, l) + k;
                if (req->topk_ids[i] >= 0)
                    w[(size_t)l * m->J + (uint32_t)req->topk_ids[i]] += req->topk_w[i] / (double)(r1 - r0);
            }
}

static void write_heat(FILE *f, const char *panel, const ms_trace_meta *m, const double *w)
{
    for (uint32_t l = 0; l < m->L; l++)
        for (uint32_t e = 0; e < m->J; e++)
            fprintf(f, "%s,%u,%u,%.5f\n", panel, l, e, w[(size_t)l * m->J + e]);
}

/* Request 0: two consecutive decode iterations and the whole request. */
static int fig_heatmap(const ms_fig_ctx *c, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(c->trace, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    ms_request req = {0};
    int rc = ms_reader_next(rd, &req, err) == 1 ? 0 : -1;
    if (rc == 0 && req.n_iters < 3)
        rc = ms_fail(err, "heatmap: request 0 of %s has fewer than 3 iterations", c->trace);
    FILE *f = rc ? NULL : open_csv(c, "heatmap.csv", "panel,layer,expert,weight", err);
    if (rc == 0 && !f)
        rc = -1;
    if (f) {
        double *w = malloc((size_t)m->L * m->J * sizeof *w);
        uint32_t it = req.n_iters / 2 < 1 ? 1 : req.n_iters / 2;
        char name[64];
        for (uint32_t i = it; i < it + 2 && i < req.n_iters; i++) {
            const ms_iteration *x = &req.iters[i];
            routed_weight(m, &req, x->row0, x->row0 + x->n_rows, w);
            snprintf(name, sizeof name, "iteration %u", i);
            write_heat(f, name, m, w);
        }
        routed_weight(m, &req, 0, req.n_rows, w);
        write_heat(f, "request", m, w);
        free(w);
        rc = close_csv(f, c, "heatmap.csv", rc, err);
    }
    ms_request_free(&req);
    ms_reader_close(rd);
    return rc;
}

/* ---- fMoE Fig. 14a, 8, 16: the map store ---- */

static int fig_similarity_capacity(const ms_fig_ctx *c, ms_err *err)
{
    static const uint32_t caps[] = {16, 32, 64, 128, 256, 512, 1024};
    FILE *f = open_csv(c, "similarity_capacity.csv", "capacity,semantic,trajectory,hit_rate", err);
    if (!f)
        return -1;
    int rc = 0;
    char spec[64];
    for (size_t k = 0; k < sizeof caps / sizeof caps[0] && !rc; k++) {
        ms_run_config cfg = base_cfg(c);
        snprintf(spec, sizeof spec, "fmoe:capacity=%u", caps[k]);
        cfg.prefetch_spec = spec;
        cfg.cache_spec = "fmoe";
        ms_metrics m;
        if ((rc = run_sim(&cfg, &m, err)))
            break;
        const ms_policy_stats *p = &m.policy_stats;
        fprintf(f, "%u,%.6f,%.6f,%.6f\n", caps[k], p->sem_n ? p->sem_sum / (double)p->sem_n : NAN,
                p->traj_n ? p->traj_sum / (double)p->traj_n : NAN, ms_metrics_hit_rate(&m.total));
        ms_metrics_free(&m);
    }
    return close_csv(f, c, "similarity_capacity.csv", rc, err);
}

/* Reads the engine's iterations CSV back: decode rows with both scores. */
static int read_iteration_samples(const char *path, double **sem, double **traj, double **hit, size_t *n, ms_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ms_fail(err, "cannot read %s", path);
    char line[4096];
    size_t cap = 1024;
    *n = 0;
    *sem = malloc(cap * sizeof **sem);
    *traj = malloc(cap * sizeof **traj);
    *hit = malloc(cap * sizeof **hit);
    while (fgets(line, sizeof line, f)) {
        unsigned long long it, h, la, mi;
        char phase[16];
        double hr, s, t;
        if (sscanf(line, "%llu,%15[a-z],%llu,%llu,%llu,%lf,%lf,%lf", &it, phase, &h, &la, &mi, &hr, &s, &t) != 8 ||
            strcmp(phase, "decode"))
            continue; /* prefill, or an iteration without both searches */
        if (*n == cap) {
            cap *= 2;
            *sem = realloc(*sem, cap * sizeof **sem);
            *traj = realloc(*traj, cap * sizeof **traj);
            *hit = realloc(*hit, cap * sizeof **hit);
        }
        (*sem)[*n] = s;
        (*traj)[*n] = t;
        (*hit)[(*n)++] = hr;
    }
    fclose(f);
    return 0;
}

static int fig_pearson(const ms_fig_ctx *c, ms_err *err)
{
    char ipath[1200];
    fig_path(c, "pearson_iterations.csv", ipath, sizeof ipath);
    ms_run_config cfg = base_cfg(c);
    cfg.prefetch_spec = "fmoe";
    cfg.cache_spec = "fmoe";
    cfg.iterations_path = ipath;
    ms_metrics m;
    if (run_sim(&cfg, &m, err))
        return -1;
    ms_metrics_free(&m);
    double *sem = NULL, *traj = NULL, *hit = NULL;
    size_t n = 0;
    if (read_iteration_samples(ipath, &sem, &traj, &hit, &n, err))
        return -1;
    int rc = n < 3 ? ms_fail(err, "pearson: only %zu decode iterations with both similarity scores", n) : 0;
    FILE *f = rc ? NULL : open_csv(c, "pearson.csv", "score,pearson,iterations", err);
    if (!rc && !f)
        rc = -1;
    if (f) {
        fprintf(f, "semantic,%.6f,%zu\n", gsl_stats_correlation(sem, 1, hit, 1, n), n);
        fprintf(f, "trajectory,%.6f,%zu\n", gsl_stats_correlation(traj, 1, hit, 1, n), n);
        rc = close_csv(f, c, "pearson.csv", rc, err);
    }
    free(sem);
    free(traj);
    free(hit);
    return rc;
}

static const char *const mapstore_models[] = {"mixtral-8x7b", "qwen1.5-moe-a2.7b", "phi-3.5-moe"};

/* One side trace per model: mapstore_<model>.h5, enough training iterations
 * to fill the largest store. */
static int mapstore_trace(const ms_fig_ctx *c, const ms_model *model, const char *path, ms_err *err)
{
    ms_gen_params p;
    ms_gen_defaults(&p);
    p.seed = c->seed;
    p.requests = 8; /* about 1,700 iterations; 6 requests train: more than the largest store */
    (void)model;
    ms_gen_summary sum;
    return ms_gen_write(&p, model, path, &sum, err);
}

static int fig_mapstore_memory(const ms_fig_ctx *c, ms_err *err)
{
    static const uint32_t caps[] = {125, 250, 500, 1000};
    FILE *f = open_csv(c, "mapstore_memory.csv", "model,capacity,state_mb", err);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < 3 && !rc; i++) {
        ms_model model;
        char trace[1200], spec[64];
        snprintf(trace, sizeof trace, "%s/mapstore_%s.h5", c->out_dir, mapstore_models[i]);
        if ((rc = ms_model_load(mapstore_models[i], &model, err)) || (rc = mapstore_trace(c, &model, trace, err)))
            break;
        for (size_t k = 0; k < sizeof caps / sizeof caps[0] && !rc; k++) {
            ms_run_config cfg = base_cfg(c);
            cfg.trace_path = trace;
            cfg.model = &model;
            cfg.train_frac = 0.75;
            cfg.cap_value = 2 * model.experts; /* room for a prefill; the store does not depend on it */
            snprintf(spec, sizeof spec, "fmoe:capacity=%u", caps[k]);
            cfg.prefetch_spec = spec;
            ms_metrics m;
            if ((rc = run_sim(&cfg, &m, err)))
                break;
            fprintf(f, "%s,%u,%.4f\n", mapstore_models[i], caps[k], m.policy_state_bytes / 1048576.0);
            ms_metrics_free(&m);
        }
        remove(trace);
    }
    return close_csv(f, c, "mapstore_memory.csv", rc, err);
}

/* ---- fMoE Fig. 15: latency breakdown of one iteration ---- */

enum { BK_DENSE, BK_GPU, BK_CPU, BK_DEMAND, BK_PREFETCH, BK_N };

/* Sums the decode-phase intervals of an --events CSV by kind. */
static int sum_events(const char *path, double sums[BK_N], ms_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ms_fail(err, "cannot read %s", path);
    char line[4096], kind[32], phase[16]; /* long enough for the provenance line */
    double t0, t1;
    memset(sums, 0, BK_N * sizeof *sums);
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%31[a-z_],%lf,%lf,%*[^,],%*[^,],%*[^,],%15[a-z]", kind, &t0, &t1, phase) != 4 &&
            sscanf(line, "%31[a-z_],%lf,%lf,%*[^,],%*[^,],,%15[a-z]", kind, &t0, &t1, phase) != 4)
            continue;
        if (strcmp(phase, "decode"))
            continue;
        int k = !strcmp(kind, "dense")           ? BK_DENSE
                : !strcmp(kind, "compute_gpu")   ? BK_GPU
                : !strcmp(kind, "compute_cpu")   ? BK_CPU
                : !strcmp(kind, "copy_demand")   ? BK_DEMAND
                : !strcmp(kind, "copy_prefetch") ? BK_PREFETCH
                                                 : -1;
        if (k >= 0)
            sums[k] += t1 - t0;
    }
    fclose(f);
    return 0;
}

static int fig_breakdown(const ms_fig_ctx *c, ms_err *err)
{
    char ev[1200];
    fig_path(c, "breakdown_events.csv", ev, sizeof ev);
    ms_run_config cfg = base_cfg(c);
    cfg.prefetch_spec = "fmoe";
    cfg.cache_spec = "fmoe";
    cfg.events_path = ev;
    ms_metrics m;
    if (run_sim(&cfg, &m, err))
        return -1;
    double sums[BK_N];
    int rc = sum_events(ev, sums, err);
    remove(ev);
    const ms_counts *d = &m.phase[MS_PHASE_DECODE];
    double n = d->iterations ? (double)d->iterations : 1.0, ms = 1e3 / n;
    double match = (m.policy_sync_s + m.policy_async_s) * 1e3 / (double)(m.total.iterations ? m.total.iterations : 1);
    FILE *f = rc ? NULL : open_csv(c, "breakdown.csv", "operation,ms,async", err);
    if (!rc && !f)
        rc = -1;
    if (f) {
        fprintf(f, "iteration (end to end),%.4f,0\n", d->busy_s * ms);
        fprintf(f, "non-expert compute,%.4f,0\n", sums[BK_DENSE] * ms);
        fprintf(f, "expert compute (GPU),%.4f,0\n", sums[BK_GPU] * ms);
        fprintf(f, "waiting for weights (stall),%.4f,0\n", d->stall_s * ms);
        fprintf(f, "on-demand loading (PCIe),%.4f,0\n", sums[BK_DEMAND] * ms);
        fprintf(f, "expert prefetching (PCIe; async),%.4f,1\n", sums[BK_PREFETCH] * ms);
        fprintf(f, "map matching and update (async),%.4f,1\n", match);
        rc = close_csv(f, c, "breakdown.csv", rc, err);
    }
    ms_metrics_free(&m);
    return rc;
}

/* ---- fMoE Fig. 10: request-latency CDF in online serving ---- */

static int append_cdf(FILE *out, const char *label, const char *path, ms_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ms_fail(err, "cannot read %s", path);
    char line[4096];
    size_t n = 0, cap = 256;
    double *lat = malloc(cap * sizeof *lat);
    while (fgets(line, sizeof line, f)) {
        const char *last = strrchr(line, ',');
        if (!last || line[0] < '0' || line[0] > '9')
            continue; /* the provenance line, the header */
        if (n == cap)
            lat = realloc(lat, (cap *= 2) * sizeof *lat);
        lat[n++] = strtod(last + 1, NULL);
    }
    fclose(f);
    gsl_sort(lat, 1, n);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s,%.6f,%.6f\n", label, lat[i], (double)(i + 1) / (double)n);
    free(lat);
    remove(path);
    return 0;
}

static int fig_latency_cdf(const ms_fig_ctx *c, ms_err *err)
{
    /* online: empty learnt state (fmoe store=online, transition online, no training split) */
    static const fig_system sys[] = {
        {"DeepSpeed-Inference (none+lru)", "none", "lru", "gpu"},
        {"Mixtral-Offloading (speculative+lru)", "speculative", "lru", "gpu"},
        {"ProMoE (transition:online=1+lru)", "transition:online=1", "lru", "gpu"},
        {"MoE-Infinity (eam+eam)", "eam", "eam", "gpu"},
        {"fMoE (fmoe:store=online+fmoe)", "fmoe:store=online", "fmoe", "gpu"},
    };
    FILE *f = open_csv(c, "latency_cdf.csv", "system,latency_s,cdf", err);
    if (!f)
        return -1;
    int rc = 0;
    char rp[1200];
    fig_path(c, "latency_cdf_requests.csv", rp, sizeof rp);
    for (size_t s = 0; s < sizeof sys / sizeof sys[0] && !rc; s++) {
        ms_run_config cfg = system_cfg(c, &sys[s]);
        cfg.offline = 0;
        cfg.max_batch = 4;
        cfg.train_frac = 0;
        cfg.requests_path = rp;
        ms_metrics m;
        if ((rc = run_sim(&cfg, &m, err)))
            break;
        ms_metrics_free(&m);
        rc = append_cdf(f, sys[s].label, rp, err);
    }
    return close_csv(f, c, "latency_cdf.csv", rc, err);
}

/* ---- MoE-Infinity Fig. 10, 11, 12 ---- */

static int fig_moeinf_hit_cache(const ms_fig_ctx *c, ms_err *err)
{
    static const fig_system sys[] = {
        {"LRU", "none", "lru", "gpu"},          {"LFU", "none", "lfu", "gpu"},
        {"Neighbor-aware", "none", "neighbor", "gpu"}, {"MoE-Infinity (eam+eam)", "eam", "eam", "gpu"},
        {"Belady (oracle)", "none", "belady", "gpu"},
    };
    FILE *f = open_csv(c, "moeinf_hit_cache.csv", "system,cache_experts,cache_gb,hit_rate", err);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t s = 0; s < sizeof sys / sizeof sys[0] && !rc; s++)
        for (size_t k = 0; k < N_CACHE_SWEEP && !rc; k++) {
            ms_run_config cfg = system_cfg(c, &sys[s]);
            uint32_t n = fig_cache(c, cache_sweep[k]);
            cfg.cap_value = n;
            cfg.distance = 1;
            ms_metrics m;
            if ((rc = run_sim(&cfg, &m, err)))
                break;
            fprintf(f, "%s,%u,%.3f,%.6f\n", sys[s].label, n, m.gpu_cache_capacity_bytes / 1e9,
                    ms_metrics_hit_rate(&m.total));
            ms_metrics_free(&m);
        }
    return close_csv(f, c, "moeinf_hit_cache.csv", rc, err);
}

static int fig_moeinf_recall_bw(const ms_fig_ctx *c, ms_err *err)
{
    static const fig_system sys[] = {
        {"TopK (topk-id)", "topk-id", "lru", "gpu"},
        {"Traced-TopK (traced-topk)", "traced-topk", "lru", "gpu"},
        {"MoE-Infinity (eam)", "eam", "lru", "gpu"},
    };
    static const double bws[] = {8, 16, 32, 64, 128};
    FILE *f = open_csv(c, "moeinf_recall_bw.csv", "system,bandwidth_gbs,recall", err);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t s = 0; s < sizeof sys / sizeof sys[0] && !rc; s++)
        for (size_t k = 0; k < sizeof bws / sizeof bws[0] && !rc; k++) {
            ms_platform plat = *c->plat;
            plat.h2d_bw = bws[k] * 1e9;
            ms_run_config cfg = system_cfg(c, &sys[s]);
            cfg.platform = &plat;
            cfg.distance = 1;
            ms_metrics m;
            if ((rc = run_sim(&cfg, &m, err)))
                break;
            fprintf(f, "%s,%g,%.6f\n", sys[s].label, bws[k], recall_in_time(&m));
            ms_metrics_free(&m);
        }
    return close_csv(f, c, "moeinf_recall_bw.csv", rc, err);
}

static int fig_moeinf_latency_eamc(const ms_fig_ctx *c, ms_err *err)
{
    /* the collection never holds more EAMs than training sequences (requests) */
    static const uint32_t caps[] = {1, 2, 3, 4, 6, 8, 16};
    FILE *f = open_csv(c, "moeinf_latency_eamc.csv", "capacity,tpot_ms,recall", err);
    if (!f)
        return -1;
    int rc = 0;
    char spec[64];
    for (size_t k = 0; k < sizeof caps / sizeof caps[0] && !rc; k++) {
        ms_run_config cfg = base_cfg(c);
        snprintf(spec, sizeof spec, "eam:capacity=%u", caps[k]);
        cfg.prefetch_spec = spec;
        cfg.cache_spec = "eam";
        cfg.distance = 1;
        ms_metrics m;
        if ((rc = run_sim(&cfg, &m, err)))
            break;
        fprintf(f, "%u,%.4f,%.6f\n", caps[k], m.tpot_mean_s * 1e3, recall_of(&m));
        ms_metrics_free(&m);
    }
    return close_csv(f, c, "moeinf_latency_eamc.csv", rc, err);
}

/* ---- HybriMoE: CPU / GPU / PCIe timeline of one layer ---- */

typedef struct {
    char kind[24];
    double t0, t1;
    unsigned long long it;
    int layer, expert;
} fig_event;

/* The second prefill iteration of an --events CSV (the first when there
 * is one only; 0 when none): a warm cache and many experts per layer. */
static unsigned long long pick_prefill_iteration(FILE *f)
{
    char line[256], phase[16];
    unsigned long long it, first = ULLONG_MAX;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "layer,%*f,%*f,%llu,%*u,,%15[a-z]", &it, phase) == 2 && !strcmp(phase, "prefill")) {
            if (first == ULLONG_MAX)
                first = it;
            else if (it != first)
                return it;
        }
    return first == ULLONG_MAX ? 0 : first;
}

/* The events of iteration `it` of an --events CSV (at most cap). */
static size_t load_iteration_events(FILE *f, unsigned long long it, fig_event *ev, size_t cap)
{
    char line[4096]; /* long enough for the provenance line */
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        fig_event e = {.expert = -1};
        char rest[128] = "";
        if (sscanf(line, "%23[a-z_],%lf,%lf,%llu,%d,%127s", e.kind, &e.t0, &e.t1, &e.it, &e.layer, rest) < 5 ||
            e.it != it)
            continue;
        if (rest[0] != ',')
            e.expert = atoi(rest);
        ev[n++] = e;
    }
    return n;
}

/* The layer of the iteration with the most lanes busy (GPU expert, CPU
 * expert, copies), then the most intervals. */
static int busiest_layer(const fig_event *ev, size_t n, int L)
{
    int best = 0, best_score = -1;
    for (int l = 0; l < L; l++) {
        int cpu = 0, copies = 0;
        for (size_t i = 0; i < n; i++) {
            if (ev[i].layer != l)
                continue;
            cpu += !strcmp(ev[i].kind, "compute_cpu");
            copies += !strncmp(ev[i].kind, "copy_", 5);
        }
        int gpu = 0;
        for (size_t i = 0; i < n; i++)
            gpu += ev[i].layer == l && !strcmp(ev[i].kind, "compute_gpu");
        int score = ((cpu > 0) + (gpu > 0) + (copies > 0)) * 1000 + cpu + gpu + copies;
        if (score > best_score) {
            best_score = score;
            best = l;
        }
    }
    return best;
}

static int fig_hybrimoe_timeline(const ms_fig_ctx *c, ms_err *err)
{
    char ev[1200];
    fig_path(c, "timeline_events.csv", ev, sizeof ev);
    ms_run_config cfg = base_cfg(c);
    cfg.prefetch_spec = "hybrimoe";
    cfg.cache_spec = "mrs";
    cfg.sched_spec = "hybrid";
    cfg.events_path = ev;
    ms_metrics m;
    if (run_sim(&cfg, &m, err))
        return -1;
    ms_metrics_free(&m);
    FILE *in = fopen(ev, "r");
    if (!in)
        return ms_fail(err, "cannot read %s", ev);
    unsigned long long it = pick_prefill_iteration(in);
    rewind(in);
    size_t cap = 65536;
    fig_event *e = malloc(cap * sizeof *e);
    size_t n = load_iteration_events(in, it, e, cap);
    fclose(in);
    remove(ev);
    int l = busiest_layer(e, n, (int)c->meta->L);
    double t0 = 0, t1 = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].layer == l && !strcmp(e[i].kind, "layer"))
            t0 = e[i].t0, t1 = e[i].t1;
    /* layer: the interval's own layer (a copy may be for a later one);
     * label: L<layer>/E<expert>, empty for non-expert compute;
     * shown_layer: the layer the GPU and CPU lanes show */
    FILE *f = open_csv(c, "hybrimoe_timeline.csv", "lane,start_ms,end_ms,kind,iteration,layer,expert,label,shown_layer",
                       err);
    int rc = f ? 0 : -1;
    for (size_t i = 0; f && i < n; i++) {
        const char *k = e[i].kind;
        int lane = !strcmp(k, "compute_gpu") || !strcmp(k, "dense") ? 2
                   : !strcmp(k, "compute_cpu")                      ? 1
                   : !strncmp(k, "copy_", 5)                        ? 0
                                                                    : -1;
        if (lane < 0 || e[i].t1 <= t0 || e[i].t0 >= t1 || (lane && e[i].layer != l))
            continue;
        char label[32] = "";
        if (e[i].expert >= 0)
            snprintf(label, sizeof label, "L%d/E%d", e[i].layer, e[i].expert);
        fprintf(f, "%d,%.4f,%.4f,%s,%llu,%d,%d,%s,%d\n", lane, (e[i].t0 - t0) * 1e3, (e[i].t1 - t0) * 1e3, k, it,
                e[i].layer, e[i].expert, label, l);
    }
    if (f)
        rc = close_csv(f, c, "hybrimoe_timeline.csv", rc, err);
    free(e);
    return rc;
}

/* ---- the table ---- */

const ms_figure ms_figures[] = {
    {"hit-distance", "Expert hit rate vs prefetch distance", "fMoE Fig. 4", MS_FIG_NEEDS_EMBED | MS_FIG_NEEDS_SPEC,
     fig_hit_distance},
    {"tpot-cache", "TPOT vs expert-cache budget", "fMoE Fig. 11", MS_FIG_NEEDS_SPEC, fig_tpot_cache},
    {"ablation-tracking", "Expert hit rate by pattern-tracking method", "fMoE Fig. 12a",
     MS_FIG_NEEDS_EMBED | MS_FIG_NEEDS_SPEC, fig_ablation_tracking},
    {"ablation-cache", "Expert hit rate of fMoE prefetching with three caches", "fMoE Fig. 12b", 0,
     fig_ablation_cache},
    {"entropy-layer", "Entropy of expert activations per layer, fine vs coarse grain", "fMoE Fig. 3b", 0,
     fig_entropy_layer},
    {"entropy-iters", "Entropy of expert activations through iterations", "fMoE Fig. 3c", 0, fig_entropy_iters},
    {"heatmap", "Expert activation heatmaps: iteration vs request level", "fMoE Fig. 3a", 0, fig_heatmap},
    {"similarity-capacity", "Mean similarity score vs Expert Map Store capacity", "fMoE Fig. 14a",
     MS_FIG_NEEDS_EMBED, fig_similarity_capacity},
    {"pearson", "Pearson correlation of similarity score and expert hit rate", "fMoE Fig. 8", MS_FIG_NEEDS_EMBED,
     fig_pearson},
    {"breakdown", "Latency breakdown of one fMoE decode iteration", "fMoE Fig. 15", 0, fig_breakdown},
    {"mapstore-memory", "Expert Map Store memory vs capacity", "fMoE Fig. 16", 0, fig_mapstore_memory},
    {"latency-cdf", "Request-latency CDF in online serving", "fMoE Fig. 10", MS_FIG_NEEDS_SPEC, fig_latency_cdf},
    {"moeinf-hit-cache", "Cache hit ratio vs cache size against Belady", "MoE-Infinity Fig. 11", 0,
     fig_moeinf_hit_cache},
    {"moeinf-recall-bw", "Prefetch recall vs PCIe bandwidth", "MoE-Infinity Fig. 10", 0, fig_moeinf_recall_bw},
    {"moeinf-latency-eamc", "TPOT and prefetch recall vs EAMC capacity", "MoE-Infinity Fig. 12", 0,
     fig_moeinf_latency_eamc},
    {"hybrimoe-timeline", "CPU / GPU / PCIe timeline of one layer", "HybriMoE scheduling", 0,
     fig_hybrimoe_timeline},
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
