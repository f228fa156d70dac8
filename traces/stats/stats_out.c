/* Trace statistics printed (stats_parts.h): `trace stats --json` and the
 * table. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "traces/stats/stats_parts.h"

/* ---------- JSON ---------- */

static cJSON *json_number(double v)
{
    return isnan(v) || isinf(v) ? cJSON_CreateNull() : cJSON_CreateNumber(v);
}

static cJSON *json_doubles(const double *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, json_number(v[i]));
    return a;
}

static cJSON *json_counts(const uint64_t *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

/* One metric: per-layer (or per-pair) array and its mean over layers. */
static void json_metric(cJSON *per, cJSON *mean, const char *name, const double *v, uint32_t n, double m)
{
    cJSON_AddItemToObject(per, name, json_doubles(v, n));
    cJSON_AddItemToObject(mean, name, json_number(m));
}

static cJSON *json_curve(const ms_stats_curve *c, uint32_t L)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "cap", MS_STATS_CURVE_MAX);
    cJSON_AddItemToObject(o, "mean", json_doubles(c->mean, c->len));
    cJSON_AddItemToObject(o, "requests", json_counts(c->requests, c->len));
    cJSON *layers = cJSON_AddArrayToObject(o, "per_layer");
    for (uint32_t l = 0; l < L; l++)
        cJSON_AddItemToArray(layers, json_doubles(c->layer + (size_t)l * c->len, c->len));
    return o;
}

cJSON *ms_stats_to_json(const ms_stats *s)
{
    const ms_stats_report *rp = ms_stats_report_get(s);
    if (!rp)
        return NULL;
    const ms_stats_means *m = &rp->mean;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON_AddNumberToObject(o, "L", rp->L);
    cJSON_AddNumberToObject(o, "J", rp->J);
    cJSON_AddNumberToObject(o, "K", rp->K);
    cJSON_AddNumberToObject(o, "requests", (double)rp->n_requests);
    cJSON_AddNumberToObject(o, "iterations", (double)rp->n_iterations);
    cJSON_AddNumberToObject(o, "decode_steps", (double)rp->n_decode_steps);
    cJSON_AddNumberToObject(o, "rows", (double)rp->n_rows);
    cJSON_AddNumberToObject(o, "activations", (double)rp->activations_total);
    cJSON_AddNumberToObject(o, "missing_cells", (double)rp->missing_total);
    cJSON_AddNumberToObject(o, "entropy_max", rp->h_max);
    cJSON_AddNumberToObject(o, "top10_experts", rp->top10_n);

    cJSON *per = cJSON_AddObjectToObject(o, "per_layer");
    cJSON *mean = cJSON_AddObjectToObject(o, "mean");
    cJSON_AddItemToObject(per, "activations", json_counts(rp->activations, rp->L));
    cJSON_AddItemToObject(per, "missing_cells", json_counts(rp->missing, rp->L));
    json_metric(per, mean, "entropy_iteration", rp->h_iter, rp->L, m->h_iter);
    json_metric(per, mean, "entropy_request", rp->h_req, rp->L, m->h_req);
    json_metric(per, mean, "entropy_trace", rp->h_trace, rp->L, m->h_trace);
    json_metric(per, mean, "entropy_weighted_iteration", rp->hw_iter, rp->L, m->hw_iter);
    json_metric(per, mean, "entropy_weighted_request", rp->hw_req, rp->L, m->hw_req);
    json_metric(per, mean, "entropy_weighted_trace", rp->hw_trace, rp->L, m->hw_trace);
    json_metric(per, mean, "reuse_prev_step", rp->reuse_prev, rp->L, m->reuse_prev);
    json_metric(per, mean, "reuse_last_8_steps", rp->reuse_w8, rp->L, m->reuse_w8);
    json_metric(per, mean, "reuse_second_half", rp->reuse_half, rp->L, m->reuse_half);
    json_metric(per, mean, "reuse_any_earlier", rp->reuse_any, rp->L, m->reuse_any);
    json_metric(per, mean, "top10_share", rp->top10_share, rp->L, m->top10_share);
    json_metric(per, mean, "topk_share", rp->topk_share, rp->L, m->topk_share);
    json_metric(per, mean, "gini", rp->gini, rp->L, m->gini);
    json_metric(per, mean, "max_mean_ratio", rp->max_mean, rp->L, m->max_mean);

    cJSON *pairs = cJSON_AddObjectToObject(o, "layer_pairs");
    json_metric(pairs, mean, "mi_top1", rp->mi_top1, rp->n_pairs, m->mi_top1);
    json_metric(pairs, mean, "nmi_top1", rp->nmi_top1, rp->n_pairs, m->nmi_top1);
    json_metric(pairs, mean, "successor_hit", rp->succ_hit, rp->n_pairs, m->succ_hit);
    json_metric(pairs, mean, "successor_baseline", rp->succ_base, rp->n_pairs, m->succ_base);

    cJSON_AddItemToObject(o, "entropy_curve", json_curve(&rp->curve, rp->L));
    cJSON_AddItemToObject(o, "entropy_curve_decode", json_curve(&rp->curve_decode, rp->L));
    cJSON_AddItemToObject(o, "locality", ms_locality_to_json(s->loc));
    cJSON_AddItemToObject(o, "segment", ms_segment_to_json(s->seg));
    return o;
}

/* ---------- table ---------- */

static void print_cell(FILE *out, double v, int width, int prec)
{
    if (isnan(v))
        fprintf(out, " %*s", width, "-");
    else
        fprintf(out, " %*.*f", width, prec, v);
}

static void print_header(FILE *out)
{
    fprintf(out, "%5s %8s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s\n",
            "layer", "acts", "miss", "H_it", "H_req", "H_tr", "Hw_it", "Hw_req", "Hw_tr", "reuseP", "reuseA",
            "MI1", "NMI1", "succ", "base", "top10%", "topK", "gini", "max/mn");
}

static void print_metrics(FILE *out, const double *v, int n)
{
    for (int i = 0; i < n; i++)
        print_cell(out, v[i], 6, 3);
    fputc('\n', out);
}

/* Points i = 1, 2, 4, ... and the last one. */
static void print_curve(FILE *out, const char *label, const ms_stats_curve *c)
{
    fprintf(out, "%s:", label);
    for (uint32_t i = 1; i <= c->len; i *= 2)
        fprintf(out, " i=%u %.3f", i, c->mean[i - 1]);
    if (c->len && (c->len & (c->len - 1)))
        fprintf(out, " i=%u %.3f", c->len, c->mean[c->len - 1]);
    if (!c->len)
        fprintf(out, " -");
    fputc('\n', out);
}

void ms_stats_print(const ms_stats *s, FILE *out)
{
    const ms_stats_report *rp = ms_stats_report_get(s);
    if (!rp)
        return;
    fprintf(out, "model %s: L=%u J=%u K=%u; %llu requests, %llu iterations (%llu decode), %llu rows\n",
            s->model_name[0] ? s->model_name : "(unnamed)", rp->L, rp->J, rp->K,
            (unsigned long long)rp->n_requests, (unsigned long long)rp->n_iterations,
            (unsigned long long)rp->n_decode_steps, (unsigned long long)rp->n_rows);
    fprintf(out, "entropy in bits (max log2(J) = %.3f); H = activation counts, Hw = router weights;\n"
                 "MI1/NMI1/succ/base compare layer l with l+1; top10%% = share of the top %u experts\n\n",
            rp->h_max, rp->top10_n);
    print_header(out);
    for (uint32_t l = 0; l < rp->L; l++) {
        int has_pair = l < rp->n_pairs;
        double v[] = {rp->h_iter[l], rp->h_req[l], rp->h_trace[l], rp->hw_iter[l], rp->hw_req[l],
                      rp->hw_trace[l], rp->reuse_prev[l], rp->reuse_any[l],
                      has_pair ? rp->mi_top1[l] : NAN, has_pair ? rp->nmi_top1[l] : NAN,
                      has_pair ? rp->succ_hit[l] : NAN, has_pair ? rp->succ_base[l] : NAN,
                      rp->top10_share[l], rp->topk_share[l], rp->gini[l], rp->max_mean[l]};
        fprintf(out, "%5u %8llu %6llu", l, (unsigned long long)rp->activations[l],
                (unsigned long long)rp->missing[l]);
        print_metrics(out, v, (int)(sizeof v / sizeof v[0]));
    }
    const ms_stats_means *m = &rp->mean;
    double v[] = {m->h_iter, m->h_req, m->h_trace, m->hw_iter, m->hw_req, m->hw_trace, m->reuse_prev,
                  m->reuse_any, m->mi_top1, m->nmi_top1, m->succ_hit, m->succ_base, m->top10_share,
                  m->topk_share, m->gini, m->max_mean};
    fprintf(out, "%5s %8llu %6llu", "mean", (unsigned long long)rp->activations_total,
            (unsigned long long)rp->missing_total);
    print_metrics(out, v, (int)(sizeof v / sizeof v[0]));

    fprintf(out, "\nmean over layers: entropy iteration %.3f, request %.3f, trace %.3f bits (max %.3f)\n",
            m->h_iter, m->h_req, m->h_trace, rp->h_max);
    fprintf(out, "reuse: previous decode step %.3f, any earlier iteration %.3f, last %d decode steps %.3f, "
                 "second half of the decode steps from the first %.3f\n",
            m->reuse_prev, m->reuse_any, MS_STATS_REUSE_WINDOW, m->reuse_w8, m->reuse_half);
    fprintf(out, "layer l -> l+1: top-1 MI %.3f bits, NMI %.3f; most frequent successor hit %.3f (baseline %.3f)\n",
            m->mi_top1, m->nmi_top1, m->succ_hit, m->succ_base);
    fprintf(out, "skew: top 10%% (%u experts) share %.3f, top K (%u) share %.3f, gini %.3f, max/mean %.3f\n", rp->top10_n,
            m->top10_share, rp->K, m->topk_share, m->gini, m->max_mean);
    fprintf(out, "missing cells: %llu of %llu (%.2f%%)\n", (unsigned long long)rp->missing_total,
            (unsigned long long)(rp->missing_total + rp->activations_total),
            rp->missing_total + rp->activations_total
                ? 100.0 * (double)rp->missing_total / (double)(rp->missing_total + rp->activations_total)
                : 0.0);
    fprintf(out, "entropy of a request's first i iterations (mean over requests, then layers):\n");
    print_curve(out, "  all iterations (i=1 prefill)", &rp->curve);
    print_curve(out, "  decode steps only", &rp->curve_decode);
    ms_locality_print(s->loc, out);
    ms_segment_print(s->seg, out);
}
