/* The run's outputs: the events CSV, the per-iteration and per-request
 * CSVs, and the summary statistics of TTFT, TPOT and latency. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "sim/engine/report.h"
#include "sim/engine/state.h"

/* the events CSV (state.h's inline eng_event* test v->ev first) */

/* `unused_prefetch` is set on evict rows only.  Runs with several GPUs add
 * a last column `gpu`: the expert's GPU (empty on the host's compute_cpu
 * rows and on layer rows; the home GPU 0 on dense rows). */
void eng_write_event(ms_view *v, const char *kind, double t0, double t1, uint32_t x, double bytes,
                     const char *unused_prefetch)
{
    fprintf(v->ev, "%s,%.9f,%.9f,%llu,%u,%u,%s,%.0f,%s", kind, t0, t1, (unsigned long long)v->iter,
            x / v->J, x % v->J, v->phase == MS_PHASE_PREFILL ? "prefill" : "decode", bytes, unused_prefetch);
    if (v->G > 1 && strcmp(kind, "compute_cpu"))
        fprintf(v->ev, ",%u", v->gpu_of[x]);
    else if (v->G > 1)
        fputc(',', v->ev);
    fputc('\n', v->ev);
}

void eng_write_event_layer(ms_view *v, const char *kind, double t0, double t1)
{
    fprintf(v->ev, "%s,%.9f,%.9f,%llu,%u,,%s,,%s\n", kind, t0, t1, (unsigned long long)v->iter, v->layer,
            v->phase == MS_PHASE_PREFILL ? "prefill" : "decode", v->G == 1 ? "" : strcmp(kind, "dense") ? "," : ",0");
}

/* Token dispatch or combine between the home GPU and `gpu` (several GPUs). */
void eng_write_event_gpu(ms_view *v, const char *kind, double t0, double t1, uint32_t gpu, double bytes)
{
    fprintf(v->ev, "%s,%.9f,%.9f,%llu,%u,,%s,%.0f,,%u\n", kind, t0, t1, (unsigned long long)v->iter, v->layer,
            v->phase == MS_PHASE_PREFILL ? "prefill" : "decode", bytes, gpu);
}

/* ------------------------------------------------------------------ */
/* set-up */

void eng_request_done(const ms_rslot *s, void *ctx)
{
    ms_view *v = ctx;
    uint32_t first_decode = s->first_iter > 1 ? s->first_iter : 1;
    uint32_t decodes = s->req.n_iters > first_decode ? s->req.n_iters - first_decode : 0;
    if (s->first_iter == 0) {
        ms_dvec_push(&v->ttft, s->first_token_s - s->arrival_s);
        ms_dvec_push(&v->ttft_svc, s->first_token_s - s->start_s);
    }
    if (decodes)
        ms_dvec_push(&v->tpot, (v->now - s->first_token_s) / decodes);
    ms_dvec_push(&v->latency, v->now - s->arrival_s);
    ms_dvec_push(&v->lat_svc, v->now - s->start_s);
    if (!v->queue.n || s->arrival_s < v->arrival_first)
        v->arrival_first = s->arrival_s;
    if (!v->queue.n || s->arrival_s > v->arrival_last)
        v->arrival_last = s->arrival_s;
    ms_dvec_push(&v->queue, s->start_s - s->arrival_s);
    v->m->requests++;
    if (v->req_csv) {
        fprintf(v->req_csv, "%llu,%.9f,", (unsigned long long)s->index, s->arrival_s);
        if (s->first_iter == 0)
            fprintf(v->req_csv, "%.9f", s->first_token_s - s->arrival_s);
        fputc(',', v->req_csv);
        if (decodes)
            fprintf(v->req_csv, "%.9f", (v->now - s->first_token_s) / decodes);
        fprintf(v->req_csv, ",%.9f,%.9f,", v->now - s->arrival_s, s->start_s - s->arrival_s);
        if (s->first_iter == 0)
            fprintf(v->req_csv, "%.9f", s->first_token_s - s->start_s);
        fprintf(v->req_csv, ",%.9f\n", v->now - s->start_s);
    }
}

/* The offered load (ms_metrics.offered_load) and, above 1, the run's
 * overload warning; NaN offline, with fewer than two requests or with every
 * arrival at one time (no rate to compare). */
static void note_offered_load(ms_view *v)
{
    ms_metrics *m = v->m;
    m->arrival_rate = m->service_rate = m->offered_load = NAN;
    double span = v->arrival_last - v->arrival_first;
    if (v->cfg->offline || v->queue.n < 2 || !(span > 0) || !(v->served_s > 0))
        return;
    m->arrival_rate = (double)(v->queue.n - 1) / span;
    m->service_rate = (double)v->queue.n / v->served_s;
    m->offered_load = m->arrival_rate / m->service_rate;
    char word[32];
    if (m->offered_load > 1)
        eng_warn(v,
                 "overloaded: requests arrive at %.3g/s, the run served %.3g/s while busy (offered load %.2f); "
                 "TTFT and latency include %.3g s of mean queueing (queue_ms_*; service alone: *_service_ms_*; "
                 "or replay %s)",
                 m->arrival_rate, m->service_rate, m->offered_load, m->queue_mean_s,
                 ms_runkey_word(MS_RK_OFFLINE, v->cfg->keys_as_ini, word, sizeof word));
}

void eng_summarise_service(ms_view *v)
{
    ms_metrics *m = v->m;
    eng_summarise(&v->queue, &m->queue_samples, &m->queue_mean_s, &m->queue_p50_s, NULL, &m->queue_p99_s);
    uint64_t n;
    eng_summarise(&v->ttft_svc, &n, &m->ttft_service_mean_s, &m->ttft_service_p50_s, NULL, &m->ttft_service_p99_s);
    eng_summarise(&v->lat_svc, &n, &m->latency_service_mean_s, &m->latency_service_p50_s, NULL,
                  &m->latency_service_p99_s);
    note_offered_load(v);
}

/* Next-use pre-pass: replays the batch order without time and records, per
 * expert, the iterations that activate it. */
void eng_summarise(ms_dvec *d, uint64_t *n, double *mean, double *p50, double *p90, double *p99)
{
    *n = d->n;
    if (!d->n) {
        *mean = NAN;
        if (p50)
            *p50 = NAN;
        if (p90)
            *p90 = NAN;
        if (p99)
            *p99 = NAN;
        return;
    }
    gsl_sort(d->v, 1, d->n);
    *mean = gsl_stats_mean(d->v, 1, d->n);
    if (p50)
        *p50 = gsl_stats_quantile_from_sorted_data(d->v, 1, d->n, 0.50);
    if (p90)
        *p90 = gsl_stats_quantile_from_sorted_data(d->v, 1, d->n, 0.90);
    if (p99)
        *p99 = gsl_stats_quantile_from_sorted_data(d->v, 1, d->n, 0.99);
}

/* Opens one optional CSV output through sim/out.h (a temporary renamed into
 * place at the end) and writes the provenance line and the header. */
static FILE *open_csv(ms_view *v, const char *what, const char *path, ms_out **o, const char *header)
{
    if (!path)
        return NULL;
    *o = ms_out_open(what, path, v->err);
    if (!*o)
        return NULL;
    FILE *f = ms_out_fp(*o);
    ms_report_provenance_line(f, v->cfg, &v->m->trace);
    fputs(header, f);
    return f;
}

int eng_open_outputs(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    char word[32];
    v->ev = open_csv(v, ms_runkey_word(MS_RK_EVENTS, c->keys_as_ini, word, sizeof word), c->events_path, &v->ev_out,
                     v->G > 1 ? "kind,start_s,end_s,iteration,layer,expert,phase,bytes,unused_prefetch,gpu\n"
                              : "kind,start_s,end_s,iteration,layer,expert,phase,bytes,unused_prefetch\n");
    if (c->events_path && !v->ev)
        return -1;
    v->iter_csv = open_csv(v, "iterations CSV", c->iterations_path, &v->iter_out,
                           "iteration,phase,hits,late,misses,hit_rate,sem_score,traj_score\n");
    if (c->iterations_path && !v->iter_csv)
        return -1;
    v->req_csv = open_csv(v, "requests CSV", c->requests_path, &v->req_out, "request,arrival_s,ttft_s,tpot_s,latency_s,queue_s,ttft_service_s,latency_service_s\n");
    if (c->requests_path && !v->req_csv)
        return -1;
    return 0;
}

/* Commits the CSV outputs when the run succeeded (rc 0), else removes them;
 * returns rc, or -1 when a commit failed. */
int eng_close_outputs(ms_view *v, int rc)
{
    ms_out **outs[] = {&v->ev_out, &v->iter_out, &v->req_out};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        if (!*outs[i])
            continue;
        if (rc == 0)
            rc = ms_out_commit(*outs[i], v->err);
        else
            ms_out_abort(*outs[i]);
        *outs[i] = NULL;
    }
    v->ev = v->iter_csv = v->req_csv = NULL;
    return rc;
}

int eng_check_outputs(ms_view *v)
{
    ms_out *outs[] = {v->ev_out, v->iter_out, v->req_out};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++)
        if (outs[i] && ms_out_check_writes(outs[i], v->err))
            return -1;
    return 0;
}
