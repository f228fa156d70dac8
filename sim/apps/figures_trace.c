/* Figure recipes over the trace itself and the fMoE map store: fMoE Fig. 3
 * (entropies, heatmaps), 14a, 8 and 16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_statistics_double.h>

#include "sim/apps/figures_recipe.h"
#include "sim/engine/report.h"
#include "traces/stats/stats.h"
#include "traces/synth/gen.h"

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

int fig_entropy_layer(const ms_fig_ctx *c, ms_err *err)
{
    ms_stats *s = trace_stats(c, err);
    if (!s)
        return -1;
    const ms_stats_report *r = ms_stats_report_get(s);
    FILE *f = fig_open_csv(c, "entropy_layer.csv", "layer,iteration,request,trace,h_max", err);
    int rc = f ? 0 : -1;
    for (uint32_t l = 0; f && l < r->L; l++)
        fprintf(f, "%u,%.6f,%.6f,%.6f,%.6f\n", l, r->h_iter[l], r->h_req[l], r->h_trace[l], r->h_max);
    if (f)
        rc = fig_close_csv(f, c, "entropy_layer.csv", rc, err);
    ms_stats_free(s);
    return rc;
}

int fig_entropy_iters(const ms_fig_ctx *c, ms_err *err)
{
    ms_stats *s = trace_stats(c, err);
    if (!s)
        return -1;
    const ms_stats_report *r = ms_stats_report_get(s);
    FILE *f = fig_open_csv(c, "entropy_iters.csv", "iterations,all,decode,requests,h_max", err);
    int rc = f ? 0 : -1;
    for (uint32_t i = 0; f && i < r->curve.len; i++) {
        fprintf(f, "%u,%.6f,", i + 1, r->curve.mean[i]);
        if (i < r->curve_decode.len)
            fprintf(f, "%.6f", r->curve_decode.mean[i]);
        fprintf(f, ",%llu,%.6f\n", (unsigned long long)r->curve.requests[i], r->h_max);
    }
    if (f)
        rc = fig_close_csv(f, c, "entropy_iters.csv", rc, err);
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
int fig_heatmap(const ms_fig_ctx *c, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(c->trace, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    ms_request req = {0};
    int rc = ms_reader_next(rd, &req, err) == 1 ? 0 : -1;
    if (rc == 0 && req.n_iters < 3)
        rc = ms_fail(err, "heatmap: request 0 of %s has fewer than 3 iterations", c->trace);
    FILE *f = rc ? NULL : fig_open_csv(c, "heatmap.csv", "panel,layer,expert,weight", err);
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
        rc = fig_close_csv(f, c, "heatmap.csv", rc, err);
    }
    ms_request_free(&req);
    ms_reader_close(rd);
    return rc;
}

/* ---- fMoE Fig. 14a, 8, 16: the map store ---- */

int fig_similarity_capacity(const ms_fig_ctx *c, ms_err *err)
{
    static const uint32_t caps[] = {16, 32, 64, 128, 256, 512, 1024};
    FILE *f = fig_open_csv(c, "similarity_capacity.csv", "capacity,semantic,trajectory,hit_rate", err);
    if (!f)
        return -1;
    int rc = 0;
    char spec[64];
    for (size_t k = 0; k < sizeof caps / sizeof caps[0] && !rc; k++) {
        ms_run_config cfg = fig_base_cfg(c);
        snprintf(spec, sizeof spec, "fmoe:capacity=%u", caps[k]);
        cfg.prefetch_spec = spec;
        cfg.cache_spec = "fmoe";
        ms_metrics m;
        if ((rc = fig_run(&cfg, &m, err)))
            break;
        const ms_policy_stats *p = &m.policy_stats;
        fprintf(f, "%u,%.6f,%.6f,%.6f\n", caps[k], p->sem_n ? p->sem_sum / (double)p->sem_n : NAN,
                p->traj_n ? p->traj_sum / (double)p->traj_n : NAN, ms_metrics_hit_rate(&m.total));
        ms_metrics_free(&m);
    }
    return fig_close_csv(f, c, "similarity_capacity.csv", rc, err);
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

int fig_pearson(const ms_fig_ctx *c, ms_err *err)
{
    char ipath[1200];
    fig_path(c, "pearson_iterations.csv", ipath, sizeof ipath);
    ms_run_config cfg = fig_base_cfg(c);
    cfg.prefetch_spec = "fmoe";
    cfg.cache_spec = "fmoe";
    cfg.iterations_path = ipath;
    ms_metrics m;
    if (fig_run(&cfg, &m, err))
        return -1;
    ms_metrics_free(&m);
    double *sem = NULL, *traj = NULL, *hit = NULL;
    size_t n = 0;
    if (read_iteration_samples(ipath, &sem, &traj, &hit, &n, err))
        return -1;
    int rc = n < 3 ? ms_fail(err, "pearson: only %zu decode iterations with both similarity scores", n) : 0;
    FILE *f = rc ? NULL : fig_open_csv(c, "pearson.csv", "score,pearson,iterations", err);
    if (!rc && !f)
        rc = -1;
    if (f) {
        fprintf(f, "semantic,%.6f,%zu\n", gsl_stats_correlation(sem, 1, hit, 1, n), n);
        fprintf(f, "trajectory,%.6f,%zu\n", gsl_stats_correlation(traj, 1, hit, 1, n), n);
        rc = fig_close_csv(f, c, "pearson.csv", rc, err);
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
    if (ms_gen_model_defaults(&p, model, err))
        return -1;
    p.seed = c->seed;
    p.requests = 8; /* about 1,700 iterations; 6 requests train: more than the largest store */
    (void)model;
    ms_gen_summary sum;
    return ms_gen_write(&p, model, path, &sum, err);
}

int fig_mapstore_memory(const ms_fig_ctx *c, ms_err *err)
{
    static const uint32_t caps[] = {125, 250, 500, 1000};
    FILE *f = fig_open_csv(c, "mapstore_memory.csv", "model,capacity,state_mb", err);
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
            ms_run_config cfg = fig_base_cfg(c);
            cfg.trace_path = trace;
            cfg.model = &model;
            cfg.train_frac = 0.75;
            cfg.cap_value = 2 * model.experts; /* room for a prefill; the store does not depend on it */
            snprintf(spec, sizeof spec, "fmoe:capacity=%u", caps[k]);
            cfg.prefetch_spec = spec;
            ms_metrics m;
            if ((rc = fig_run(&cfg, &m, err)))
                break;
            fprintf(f, "%s,%u,%.4f\n", mapstore_models[i], caps[k], m.policy_state_bytes / 1048576.0);
            ms_metrics_free(&m);
        }
        remove(trace);
    }
    return fig_close_csv(f, c, "mapstore_memory.csv", rc, err);
}
