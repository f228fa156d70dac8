/* Figure recipes that read a run's --events or --requests CSV back: fMoE
 * Fig. 15 (latency breakdown), Fig. 10 (request-latency CDF) and HybriMoE's
 * CPU / GPU / PCIe timeline of one layer. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>

#include "sim/apps/figures_recipe.h"
#include "sim/engine/report.h"
#include "traces/import/workload.h"

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

int fig_breakdown(const ms_fig_ctx *c, ms_err *err)
{
    char ev[1200];
    fig_path(c, "breakdown_events.csv", ev, sizeof ev);
    ms_run_config cfg = fig_base_cfg(c);
    cfg.prefetch_spec = "fmoe";
    cfg.cache_spec = "fmoe";
    cfg.events_path = ev;
    ms_metrics m;
    if (fig_run(&cfg, &m, err))
        return -1;
    double sums[BK_N];
    int rc = sum_events(ev, sums, err);
    remove(ev);
    const ms_counts *d = &m.phase[MS_PHASE_DECODE];
    double n = d->iterations ? (double)d->iterations : 1.0, ms = 1e3 / n;
    double match = (m.policy_sync_s + m.policy_async_s) * 1e3 / (double)(m.total.iterations ? m.total.iterations : 1);
    FILE *f = rc ? NULL : fig_open_csv(c, "breakdown.csv", "operation,ms,async", err);
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
        rc = fig_close_csv(f, c, "breakdown.csv", rc, err);
    }
    ms_metrics_free(&m);
    return rc;
}

/* ---- fMoE Fig. 10: request-latency CDF in online serving ---- */

#define CDF_BATCH 4
#define CDF_LOAD 0.5 /* arrivals at this fraction of the slowest system's offline throughput */

/* One request's latency_s (the 5th field of a --requests row: arrival to
 * last token); 0 for the provenance line and the header. */
static int requests_row_latency(const char *line, double *lat)
{
    if (line[0] < '0' || line[0] > '9')
        return 0;
    const char *p = line;
    for (int f = 0; f < 4 && p; f++)
        p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
    if (!p)
        return 0;
    *lat = strtod(p, NULL);
    return 1;
}

static int append_cdf(FILE *out, const char *label, const char *path, ms_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ms_fail(err, "cannot read %s", path);
    char line[4096];
    size_t n = 0, cap = 256;
    double *lat = malloc(cap * sizeof *lat);
    while (fgets(line, sizeof line, f)) {
        if (n == cap)
            lat = realloc(lat, (cap *= 2) * sizeof *lat);
        n += (size_t)requests_row_latency(line, &lat[n]);
    }
    fclose(f);
    gsl_sort(lat, 1, n);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s,%.6f,%.6f\n", label, lat[i], (double)(i + 1) / (double)n);
    free(lat);
    remove(path);
    return 0;
}

/* The latency-cdf run of system s: batch CDF_BATCH, learnt state starting
 * empty, on `trace` (offline or with its arrivals). */
static ms_run_config cdf_cfg(const ms_fig_ctx *c, const fig_system *s, const char *trace, int offline)
{
    ms_run_config cfg = fig_system_cfg(c, s);
    cfg.trace_path = trace;
    cfg.offline = offline;
    cfg.max_batch = CDF_BATCH;
    cfg.train_frac = 0;
    return cfg;
}

/* The context's trace with Poisson arrivals (seed c->seed) at CDF_LOAD of
 * the lowest throughput any of the n systems reaches offline (every request
 * waiting at 0, full batches): a rate every system can serve, so the CDF
 * shows serving, not a queue that grows for as long as the trace lasts
 * (the trace's own arrivals may be far faster than this setup serves).  The
 * draws are scaled so that their own rate, (n - 1) / (last - first arrival),
 * is that rate: a few requests' draws can be several times faster than the
 * mean they were drawn with. */
static int servable_trace(const ms_fig_ctx *c, const fig_system *sys, size_t n, const char *path, ms_err *err)
{
    double rate = INFINITY;
    for (size_t s = 0; s < n; s++) {
        ms_run_config cfg = cdf_cfg(c, &sys[s], c->trace, 1);
        ms_metrics m;
        if (fig_run(&cfg, &m, err))
            return -1;
        if (m.makespan_s > 0)
            rate = fmin(rate, CDF_LOAD * (double)m.requests / m.makespan_s);
        ms_metrics_free(&m);
    }
    uint64_t reqs;
    ms_workload w;
    ms_workload_report rep;
    if (!isfinite(rate) || ms_workload_trace_requests(c->trace, &reqs, err) ||
        ms_workload_poisson(reqs, rate, c->seed, &w, err))
        return isfinite(rate) ? -1 : ms_fail(err, "latency-cdf: no throughput to derive an arrival rate from");
    double span = reqs > 1 ? w.arrival_s[reqs - 1] - w.arrival_s[0] : 0;
    for (uint64_t i = 0; span > 0 && i < reqs; i++)
        w.arrival_s[i] *= (double)(reqs - 1) / span / rate;
    int rc = ms_workload_apply(c->trace, path, &w, &rep, err);
    ms_workload_free(&w);
    return rc;
}

int fig_latency_cdf(const ms_fig_ctx *c, ms_err *err)
{
    /* online: empty learnt state (fmoe store=online, transition online, no training split) */
    static const fig_system sys[] = {
        {"DeepSpeed-Inference (none+lru)", "none", "lru", "gpu"},
        {"Mixtral-Offloading (speculative+lru)", "speculative", "lru", "gpu"},
        {"ProMoE (transition:online=1+lru)", "transition:online=1", "lru", "gpu"},
        {"MoE-Infinity (eam+eam)", "eam", "eam", "gpu"},
        {"fMoE (fmoe:store=online+fmoe)", "fmoe:store=online", "fmoe", "gpu"},
    };
    size_t n = sizeof sys / sizeof sys[0];
    char rp[1200], tp[1200];
    fig_path(c, "latency_cdf_requests.csv", rp, sizeof rp);
    fig_path(c, "latency_cdf_trace.h5", tp, sizeof tp);
    if (servable_trace(c, sys, n, tp, err))
        return -1;
    FILE *f = fig_open_csv(c, "latency_cdf.csv", "system,latency_s,cdf", err);
    int rc = f ? 0 : -1;
    for (size_t s = 0; s < n && !rc; s++) {
        ms_run_config cfg = cdf_cfg(c, &sys[s], tp, 0);
        cfg.requests_path = rp;
        ms_metrics m;
        if ((rc = fig_run(&cfg, &m, err)))
            break;
        ms_metrics_free(&m);
        rc = append_cdf(f, sys[s].label, rp, err);
    }
    remove(tp);
    return f ? fig_close_csv(f, c, "latency_cdf.csv", rc, err) : -1;
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

int fig_hybrimoe_timeline(const ms_fig_ctx *c, ms_err *err)
{
    char ev[1200];
    fig_path(c, "timeline_events.csv", ev, sizeof ev);
    ms_run_config cfg = fig_base_cfg(c);
    cfg.prefetch_spec = "hybrimoe";
    cfg.cache_spec = "mrs";
    cfg.sched_spec = "hybrid";
    cfg.events_path = ev;
    ms_metrics m;
    if (fig_run(&cfg, &m, err))
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
    FILE *f = fig_open_csv(c, "hybrimoe_timeline.csv", "lane,start_ms,end_ms,kind,iteration,layer,expert,label,shown_layer",
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
        rc = fig_close_csv(f, c, "hybrimoe_timeline.csv", rc, err);
    free(e);
    return rc;
}
