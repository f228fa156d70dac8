/* Fitting the generator to a trace: see fit.h for what is copied, measured
 * and searched. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>

#include "sim/core/out.h"
#include "traces/synth/fit.h"
#include "traces/synth/gen_params.h"

#define FIT_POP_PSEUDO 0.01      /* pseudo-count mass, as a share of a layer's activations */
#define FIT_ONE_REQUEST_CONC 1e6 /* request_conc with one request: requests = the popularity */
#define FIT_MAX_ITERS 12         /* Brent iterations per knob and pass */
#define FIT_DECODE_MIX 0.4       /* decode_mix for locality t >= 0 (the generator's default) */
#define FIT_MAX_LAYER_CORR 0.9   /* above, the pure transition tilt starves experts the maps rarely reach */

void ms_fit_default_options(ms_fit_options *o)
{
    o->seed = 1;
    o->trial_seeds = 2;
    o->passes = 2;
}

/* ------------------------------------------------------------ statistics */

static double nan_to(double v, double fallback)
{
    return isnan(v) ? fallback : v;
}

void ms_fit_stats_from_report(const ms_stats_report *rep, ms_fit_stats *out)
{
    const ms_stats_means *m = &rep->mean;
    out->hw_iter = m->hw_iter;
    out->h_req = m->h_req;
    out->h_trace = m->h_trace;
    out->reuse_prev = m->reuse_prev;
    out->mi_top1 = m->mi_top1;
    out->h_iter = m->h_iter;
    out->gini = m->gini;
}

ms_stats *ms_fit_stats_of_trace(const char *path, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(path, err);
    if (!rd)
        return NULL;
    ms_stats *s = ms_stats_new(ms_reader_meta(rd), err);
    ms_request req;
    memset(&req, 0, sizeof req);
    int rc = s ? 1 : -1;
    while (rc == 1 && (rc = ms_reader_next(rd, &req, err)) == 1)
        if (ms_stats_add(s, &req, err))
            rc = -1;
    ms_request_free(&req);
    ms_reader_close(rd);
    if (rc < 0) {
        ms_stats_free(s);
        return NULL;
    }
    ms_stats_finish(s);
    return s;
}

static int emit_to_stats(const ms_request *req, const ms_gen_info *info, void *ctx)
{
    (void)info;
    void **c = ctx;
    return ms_stats_add((ms_stats *)c[0], req, (ms_err *)c[1]) ? -1 : 0;
}

ms_stats *ms_fit_stats_of_gen(const ms_gen_params *p, const ms_model *model, ms_err *err)
{
    ms_trace_meta meta;
    if (ms_gen_meta(p, model, &meta, err))
        return NULL;
    ms_stats *s = ms_stats_new(&meta, err);
    if (s) {
        void *ctx[2] = {s, err};
        if (ms_gen_run(p, model, &meta, emit_to_stats, ctx, NULL, err)) {
            ms_stats_free(s);
            s = NULL;
        } else {
            ms_stats_finish(s);
        }
    }
    ms_trace_meta_free(&meta);
    return s;
}

/* ------------------------------------------------------- copied / measured */

static void shape_from_meta(const ms_trace_meta *m, ms_fit_result *r)
{
    ms_model *mo = &r->model;
    memset(mo, 0, sizeof *mo);
    size_t n = 0;
    for (const char *s = m->model_name; *s && *s != ' ' && *s != '(' && n + 5 < sizeof mo->name; s++)
        mo->name[n++] = (isalnum((unsigned char)*s) || strchr(".-_", *s)) ? *s : '_';
    snprintf(mo->name + n, sizeof mo->name - n, "%s", n ? "-fit" : "fit");
    snprintf(mo->description, sizeof mo->description, "shape of a fitted trace");
    snprintf(mo->dtype, sizeof mo->dtype, "bf16");
    mo->layers = mo->moe_layers = m->L;
    mo->experts = m->J;
    mo->top_k = m->K;
    mo->shared_experts = m->shared_experts;
    mo->hidden = m->hidden_size;
    mo->expert_matrices = 3;
    mo->vocab = 32000;
    r->expert_bytes = ms_xcalloc(m->L, sizeof *r->expert_bytes);
    r->dense_bytes = ms_xcalloc(m->L, sizeof *r->dense_bytes);
    for (uint32_t l = 0; l < m->L; l++) {
        r->expert_bytes[l] = m->expert_bytes[l];
        r->dense_bytes[l] = m->dense_bytes[l];
    }
    mo->expert_bytes = r->expert_bytes[0];
    mo->dense_bytes = r->dense_bytes[0];
}

/* Lognormal fit of lengths: median = geometric mean, sigma = sd of logs;
 * the clip range is widened to the observed one. */
static void fit_lengths(const uint32_t *len, uint64_t n, double *median, double *sigma, uint32_t *lo, uint32_t *hi,
                        uint32_t floor_len)
{
    double s = 0, s2 = 0;
    uint32_t mn = UINT32_MAX, mx = 0;
    for (uint64_t i = 0; i < n; i++) {
        double x = log(len[i] > floor_len ? len[i] : (floor_len ? floor_len : 1));
        s += x;
        s2 += x * x;
        mn = len[i] < mn ? len[i] : mn;
        mx = len[i] > mx ? len[i] : mx;
    }
    double mean = s / (double)n;
    double var = n > 1 ? (s2 - s * mean) / (double)(n - 1) : 0;
    *median = exp(mean);
    if (*median < 1)
        *median = 1;
    *sigma = var > 0 ? sqrt(var) : 0;
    if (*sigma > 4)
        *sigma = 4;
    if (n == 1) { /* one sample: exactly its length */
        *lo = *hi = len[0];
        *median = len[0] > 0 ? len[0] : 1;
        return;
    }
    *lo = mn < *lo ? mn : *lo;
    *hi = mx > *hi ? mx : *hi;
}

static void copy_knobs(const ms_trace_meta *m, ms_fit_result *r)
{
    ms_gen_params *p = &r->p;
    p->requests = m->n_requests;
    p->layer_steps = 0;
    p->embed_dim = m->embed_dim;
    p->spec_depth = m->spec_depth;
    p->token_ids = (uint32_t)(m->has_token_ids != 0);
    p->probs = (int)m->probs_kind;
    p->balance = 1;
    if (m->n_requests == 1) {
        p->clusters = 1;
        p->request_conc = FIT_ONE_REQUEST_CONC;
    } else if (p->clusters > m->n_requests) {
        p->clusters = (uint32_t)m->n_requests;
    }
    fit_lengths(m->req_prompt_len, m->n_requests, &p->prompt_median, &p->prompt_sigma, &p->prompt_min,
                &p->prompt_max, 1);
    fit_lengths(m->req_output_len, m->n_requests, &p->output_median, &p->output_sigma, &p->output_min,
                &p->output_max, 1);
    double span = m->n_requests > 1 ? m->req_arrival_s[m->n_requests - 1] - m->req_arrival_s[0] : 0;
    p->arrival_rate = span > 0 ? (double)(m->n_requests - 1) / span : 0;
}

/* Popularity: per-layer activation counts plus a pseudo-count. */
static int measure_popularity(const char *path, ms_fit_result *r, uint32_t *max_token, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(path, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    uint32_t L = m->L, J = m->J, K = m->K;
    r->popularity = ms_xcalloc((size_t)L * J, sizeof *r->popularity);
    ms_request req;
    memset(&req, 0, sizeof req);
    int rc;
    *max_token = 0;
    while ((rc = ms_reader_next(rd, &req, err)) == 1) {
        for (size_t c = 0; c < (size_t)req.n_rows * L * K; c++) {
            int32_t e = req.topk_ids[c];
            if (e >= 0)
                r->popularity[(c / K) % L * J + (uint32_t)e] += 1;
        }
        for (uint32_t t = 0; req.token_ids && t < req.n_tokens; t++)
            if (req.token_ids[t] >= 0 && (uint32_t)req.token_ids[t] >= *max_token)
                *max_token = (uint32_t)req.token_ids[t] + 1;
    }
    ms_request_free(&req);
    ms_reader_close(rd);
    if (rc < 0)
        return -1;
    for (uint32_t l = 0; l < L; l++) {
        double *row = r->popularity + (size_t)l * J, total = 0;
        for (uint32_t j = 0; j < J; j++)
            total += row[j];
        double pseudo = total > 0 ? FIT_POP_PSEUDO * total / J : 1.0;
        for (uint32_t j = 0; j < J; j++)
            row[j] = (row[j] + pseudo) / (total + pseudo * J);
    }
    r->p.popularity = r->popularity;
    return 0;
}

/* ------------------------------------------------------------- searching */

typedef enum { KNOB_GATE, KNOB_LOCALITY, KNOB_LAYER, KNOB_WEIGHT, N_SEARCH } search_knob;

typedef struct {
    ms_fit_result *r;
    const ms_fit_options *o;
    search_knob knob;
    double target;
    ms_fit_stats last;      /* statistics of the last evaluation */
    int failed;
    ms_err *err;
} search_ctx;

static void set_search_knob(ms_gen_params *p, search_knob k, double x)
{
    switch (k) {
    case KNOB_GATE: p->gate_alpha = exp(x); break;
    case KNOB_LOCALITY:
        p->decode_reuse = x >= 0 ? x : 0;
        p->decode_mix = x >= 0 ? FIT_DECODE_MIX : FIT_DECODE_MIX * (1 + x);
        break;
    case KNOB_LAYER: p->layer_corr = x; break;
    default: p->weight_power = exp(x); break;
    }
}

static double stat_of(const ms_fit_stats *s, search_knob k)
{
    switch (k) {
    case KNOB_GATE: return s->h_req;
    case KNOB_LOCALITY: return s->reuse_prev;
    case KNOB_LAYER: return s->mi_top1;
    default: return s->hw_iter;
    }
}

/* Mean statistics over the trial seeds at the current knobs. */
static int evaluate(search_ctx *c, ms_fit_stats *out)
{
    ms_gen_params p = c->r->p;
    ms_fit_stats sum = {0, 0, 0, 0, 0, 0, 0};
    for (uint32_t t = 0; t < c->o->trial_seeds; t++) {
        p.seed = c->o->seed + 1 + t;
        ms_stats *s = ms_fit_stats_of_gen(&p, &c->r->model, c->err);
        if (!s)
            return -1;
        ms_fit_stats one;
        ms_fit_stats_from_report(ms_stats_report_get(s), &one);
        ms_stats_free(s);
        sum.hw_iter += nan_to(one.hw_iter, 0);
        sum.h_req += nan_to(one.h_req, 0);
        sum.h_trace += nan_to(one.h_trace, 0);
        sum.reuse_prev += nan_to(one.reuse_prev, 0);
        sum.mi_top1 += nan_to(one.mi_top1, 0);
        sum.h_iter += nan_to(one.h_iter, 0);
        sum.gini += nan_to(one.gini, 0);
        c->r->trials++;
    }
    double n = c->o->trial_seeds;
    *out = (ms_fit_stats){sum.hw_iter / n, sum.h_req / n, sum.h_trace / n, sum.reuse_prev / n,
                          sum.mi_top1 / n, sum.h_iter / n, sum.gini / n};
    return 0;
}

static double objective(double x, void *arg)
{
    search_ctx *c = arg;
    if (c->failed)
        return 0;
    set_search_knob(&c->r->p, c->knob, x);
    if (evaluate(c, &c->last)) {
        c->failed = 1;
        return 0;
    }
    return stat_of(&c->last, c->knob) - c->target;
}

/* Root of stat(x) = target on [lo, hi] by Brent's method; the nearer end
 * when the target is out of reach.  Leaves the knob set to the answer. */
static int search_one(search_ctx *c, search_knob k, double lo, double hi)
{
    c->knob = k;
    c->target = stat_of(&c->r->source, k);
    if (isnan(c->target))
        return 0; /* nothing to match (e.g. no decode steps) */
    double f_lo = objective(lo, c), f_hi = objective(hi, c);
    if (c->failed)
        return -1;
    if (f_lo * f_hi > 0) {
        set_search_knob(&c->r->p, k, fabs(f_lo) < fabs(f_hi) ? lo : hi);
        return 0;
    }
    gsl_function F = {objective, c};
    gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    gsl_root_fsolver_set(s, &F, lo, hi);
    double x = 0.5 * (lo + hi);
    double tol_f = 0.005 * fabs(c->target) + 1e-4;
    for (int it = 0; it < FIT_MAX_ITERS && !c->failed; it++) {
        if (gsl_root_fsolver_iterate(s))
            break;
        x = gsl_root_fsolver_root(s);
        if (fabs(stat_of(&c->last, k) - c->target) < tol_f)
            break;
        if (gsl_root_test_interval(gsl_root_fsolver_x_lower(s), gsl_root_fsolver_x_upper(s), 1e-3, 1e-3) == GSL_SUCCESS)
            break;
    }
    gsl_root_fsolver_free(s);
    set_search_knob(&c->r->p, k, x);
    return c->failed ? -1 : 0;
}

static int search_knobs(ms_fit_result *r, const ms_fit_options *o, ms_err *err)
{
    search_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.o = o;
    c.err = err;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int rc = 0;
    for (uint32_t pass = 0; pass < o->passes && rc == 0; pass++) {
        rc |= search_one(&c, KNOB_GATE, log(0.01), log(1000));
        if (!rc)
            rc |= search_one(&c, KNOB_LOCALITY, -1, 1);
        if (!rc && r->model.moe_layers > 1)
            rc |= search_one(&c, KNOB_LAYER, 0, FIT_MAX_LAYER_CORR);
        if (!rc && r->p.probs != MS_PROBS_TOPK_IDS) /* ids only: no weights to match */
            rc |= search_one(&c, KNOB_WEIGHT, log(0.05), log(20));
    }
    if (!rc)
        rc = evaluate(&c, &r->fitted);
    gsl_set_error_handler(old);
    return rc;
}

int ms_fit_trace(const char *path, const ms_fit_options *o, ms_fit_result *r, ms_err *err)
{
    memset(r, 0, sizeof *r);
    if (o->trial_seeds < 1 || o->passes < 1)
        return ms_fail(err, "trace fit: trial seeds and passes must be at least 1");
    ms_stats *s = ms_fit_stats_of_trace(path, err);
    if (!s)
        return -1;
    ms_fit_stats_from_report(ms_stats_report_get(s), &r->source);
    ms_stats_free(s);

    ms_trace_reader *rd = ms_reader_open(path, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    ms_gen_defaults(&r->p);
    r->p.seed = o->seed;
    shape_from_meta(m, r);
    copy_knobs(m, r);
    ms_reader_close(rd);
    r->p.layer_expert_bytes = r->expert_bytes;
    r->p.layer_dense_bytes = r->dense_bytes;
    uint32_t max_token;
    if (measure_popularity(path, r, &max_token, err))
        goto fail;
    if (r->p.token_ids) {
        uint32_t need = max_token > r->p.clusters ? max_token : r->p.clusters;
        r->model.vocab = need > r->model.vocab ? need : r->model.vocab;
    }
    if (r->p.spec_depth >= r->model.moe_layers)
        r->p.spec_depth = 0;
    if (ms_gen_validate(&r->p, &r->model, err) || search_knobs(r, o, err))
        goto fail;
    r->p.seed = o->seed;
    return 0;
fail:
    ms_fail_prefix(err, "trace fit: %s", path);
    ms_fit_free(r);
    return -1;
}

int ms_fit_write(const ms_fit_result *r, const char *source_path, const char *out_path, ms_err *err)
{
    ms_out *o = ms_out_open("trace fit -o", out_path, err);
    if (!o)
        return -1;
    char comment[1024];
    const ms_fit_stats *s = &r->source, *t = &r->fitted;
    snprintf(comment, sizeof comment,
             "moesim trace fit of %s (%llu requests)\n"
             "statistic (mean over layers): source / fitted trial generations\n"
             "  hw_iter %.4f / %.4f bits, h_req %.4f / %.4f bits, h_trace %.4f / %.4f bits\n"
             "  reuse_prev %.4f / %.4f, mi_top1 %.4f / %.4f bits\n"
             "generate: moesim trace gen --params %s -o TWIN.h5 [--requests N] [--seed N]",
             source_path, (unsigned long long)r->p.requests, s->hw_iter, t->hw_iter, s->h_req, t->h_req,
             s->h_trace, t->h_trace, s->reuse_prev, t->reuse_prev, s->mi_top1, t->mi_top1, out_path);
    ms_gen_file_write(ms_out_fp(o), comment, &r->model, r->expert_bytes, r->dense_bytes, &r->p);
    return ms_out_commit(o, err);
}

void ms_fit_free(ms_fit_result *r)
{
    free(r->popularity);
    free(r->expert_bytes);
    free(r->dense_bytes);
    r->popularity = NULL;
    r->expert_bytes = r->dense_bytes = NULL;
    r->p.popularity = NULL;
    r->p.layer_expert_bytes = r->p.layer_dense_bytes = NULL;
}
