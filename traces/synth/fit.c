/* Fitting the generator to a trace: see fit.h for what is copied, measured
 * and searched. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/out.h"
#include "traces/synth/fit.h"
#include "traces/synth/fit_search.h"
#include "traces/synth/gen_params.h"
#include "traces/stats/repeats.h"

#define FIT_ONE_REQUEST_CONC 1e6 /* request_conc with one request: requests = the popularity */
#define FIT_MAX_CLUSTERS 8       /* clusters with several requests (the generator's default) */

void ms_fit_default_options(ms_fit_options *o)
{
    o->seed = 1;
    o->trial_seeds = 2;
    o->passes = 2;
    o->decode_phases = 0;
}

/* ------------------------------------------------------------ statistics */

void ms_fit_stats_from_report(const ms_stats_report *rep, ms_fit_stats *out)
{
    const ms_stats_means *m = &rep->mean;
    out->hw_iter = m->hw_iter;
    out->h_req = m->h_req;
    out->h_trace = m->h_trace;
    out->reuse_prev = m->reuse_prev;
    out->reuse_w8 = m->reuse_w8;
    out->reuse_half = m->reuse_half;
    out->succ_hit = m->succ_hit;
    out->mi_top1 = m->mi_top1;
    out->h_iter = m->h_iter;
    out->gini = m->gini;
    out->xreq = NAN;
    out->xreq_exact = NAN;
}

double *ms_fit_expert_shares(const ms_stats_report *rep)
{
    size_t J = rep->J;
    double *out = ms_xcalloc((size_t)rep->L * J, sizeof *out);
    for (uint32_t l = 0; l < rep->L; l++) {
        const uint64_t *c = rep->expert_counts + l * J;
        uint64_t total = 0;
        for (size_t j = 0; j < J; j++)
            total += c[j];
        for (size_t j = 0; total && j < J; j++)
            out[l * J + j] = (double)c[j] / (double)total;
    }
    return out;
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

static int emit_to_both(const ms_request *req, const ms_gen_info *info, void *ctx)
{
    (void)info;
    void **c = ctx;
    if (c[2])
        ms_xreq_add((ms_xreq *)c[2], req);
    return ms_stats_add((ms_stats *)c[0], req, (ms_err *)c[1]) ? -1 : 0;
}

int ms_fit_measure_gen(const ms_gen_params *p, const ms_model *model, int with_xreq, ms_fit_stats *out,
                       double *shares, ms_err *err)
{
    ms_trace_meta meta;
    if (ms_gen_meta(p, model, &meta, err))
        return -1;
    ms_stats *s = ms_stats_new(&meta, err);
    ms_xreq *x = with_xreq ? ms_xreq_new(&meta) : NULL;
    int rc = -1;
    if (s) {
        void *ctx[3] = {s, err, x};
        if (ms_gen_run(p, model, &meta, emit_to_both, ctx, NULL, err) == 0) {
            ms_stats_finish(s);
            ms_fit_stats_from_report(ms_stats_report_get(s), out);
            if (shares) {
                double *one = ms_fit_expert_shares(ms_stats_report_get(s));
                memcpy(shares, one, (size_t)model->moe_layers * model->experts * sizeof *one);
                free(one);
            }
            if (x) {
                out->xreq = ms_xreq_mean(x);
                out->xreq_exact = ms_xreq_exact(x);
            }
            rc = 0;
        }
    }
    ms_stats_free(s);
    ms_xreq_free(x);
    ms_trace_meta_free(&meta);
    return rc;
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
    } else {
        p->clusters = m->n_requests < FIT_MAX_CLUSTERS ? (uint32_t)m->n_requests : FIT_MAX_CLUSTERS;
    }
    fit_lengths(m->req_prompt_len, m->n_requests, &p->prompt_median, &p->prompt_sigma, &p->prompt_min,
                &p->prompt_max, 1);
    fit_lengths(m->req_output_len, m->n_requests, &p->output_median, &p->output_sigma, &p->output_min,
                &p->output_max, 1);
    if (m->n_requests <= MS_FIT_MAX_LENGTHS) { /* the lengths themselves: exact iteration counts */
        r->prompt_lens = ms_xcalloc(m->n_requests, sizeof *r->prompt_lens);
        r->output_lens = ms_xcalloc(m->n_requests, sizeof *r->output_lens);
        for (uint64_t i = 0; i < m->n_requests; i++) {
            r->prompt_lens[i] = m->req_prompt_len[i];
            r->output_lens[i] = m->req_output_len[i];
        }
        p->prompt_lens = r->prompt_lens;
        p->output_lens = r->output_lens;
        p->n_lens = (uint32_t)m->n_requests;
    }
    double span = m->n_requests > 1 ? m->req_arrival_s[m->n_requests - 1] - m->req_arrival_s[0] : 0;
    p->arrival_rate = span > 0 ? (double)(m->n_requests - 1) / span : 0;
}

/* Expected distinct experts among n draws from p. */
static double expected_distinct(const double *p, uint32_t J, double n)
{
    double d = 0;
    for (uint32_t j = 0; j < J; j++)
        d += 1 - pow(1 - p[j], n);
    return d;
}

static void smooth_with(const double *c, uint32_t J, double n, double a, double *out)
{
    for (uint32_t j = 0; j < J; j++)
        out[j] = (c[j] + a) / (n + a * J);
}

double ms_fit_coverage_smooth(const double *c, uint32_t J, double *out)
{
    double n = 0;
    uint32_t seen = 0;
    for (uint32_t j = 0; j < J; j++) {
        n += c[j];
        seen += c[j] > 0;
    }
    if (!(n > 0)) {
        for (uint32_t j = 0; j < J; j++)
            out[j] = 1.0 / J;
        return 0;
    }
    smooth_with(c, J, n, 0, out);
    if (expected_distinct(out, J, n) >= seen)
        return 0;
    /* E[distinct] grows with a towards J (1 - (1 - 1/J)^n) at a -> inf */
    double lo = 0, hi = n / J;
    for (int i = 0; i < 60; i++) {
        smooth_with(c, J, n, hi, out);
        if (expected_distinct(out, J, n) >= seen)
            break;
        lo = hi;
        hi *= 4;
    }
    for (int i = 0; i < 60; i++) {
        double mid = 0.5 * (lo + hi);
        smooth_with(c, J, n, mid, out);
        if (expected_distinct(out, J, n) < seen)
            lo = mid;
        else
            hi = mid;
    }
    smooth_with(c, J, n, hi, out);
    return hi;
}

/* Activation counts of prompt and decode rows per layer, the decode rows by
 * phase (dec: [want][L][J]; *phases of them: on a one-request trace `want`,
 * at most the request's decode steps; else 1); token ids' range. */
static int count_activations(const char *path, uint32_t want, double *pre, double *dec, uint32_t *phases,
                             uint64_t *n_pre, uint64_t *n_dec, uint32_t *max_token, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(path, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    uint32_t L = m->L, J = m->J, K = m->K;
    size_t LJ = (size_t)L * J;
    ms_request req;
    memset(&req, 0, sizeof req);
    int rc;
    *max_token = 0;
    *n_dec = *n_pre = 0;
    *phases = 1;
    while ((rc = ms_reader_next(rd, &req, err)) == 1) {
        uint32_t steps = 0, d = 0;
        for (uint32_t it = 0; it < req.n_iters; it++)
            steps += req.iters[it].phase == MS_PHASE_DECODE;
        if (m->n_requests == 1)
            *phases = want < steps ? want : steps ? steps : 1;
        for (uint32_t it = 0; it < req.n_iters; it++) {
            const ms_iteration *iter = &req.iters[it];
            int decode = iter->phase == MS_PHASE_DECODE;
            d += decode;
            double *cnt = !decode ? pre : dec + ms_gen_decode_phase(d, steps, *phases) * LJ;
            *(decode ? n_dec : n_pre) += iter->n_rows;
            for (size_t c = (size_t)iter->row0 * L * K; c < (size_t)(iter->row0 + iter->n_rows) * L * K; c++) {
                int32_t e = req.topk_ids[c];
                if (e >= 0)
                    cnt[(c / K) % L * J + (uint32_t)e] += 1;
            }
        }
        for (uint32_t t = 0; req.token_ids && t < req.n_tokens; t++)
            if (req.token_ids[t] >= 0 && (uint32_t)req.token_ids[t] >= *max_token)
                *max_token = (uint32_t)req.token_ids[t] + 1;
    }
    ms_request_free(&req);
    ms_reader_close(rd);
    return rc < 0 ? -1 : 0;
}

/* Repeated tokens (repeats.h): each request's decode routing period and
 * repeat probability ([periods] when a request loops and the source has at
 * most MS_FIT_MAX_LENGTHS requests), and the source's xreq_overlap. */
static int measure_repeats(const char *path, ms_fit_result *r, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(path, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    uint64_t n = m->n_requests;
    int lists = n <= MS_FIT_MAX_LENGTHS;
    uint32_t *per = lists ? ms_xcalloc(n ? n : 1, sizeof *per) : NULL;
    double *rep = lists ? ms_xcalloc(n ? n : 1, sizeof *rep) : NULL;
    ms_xreq *x = ms_xreq_new(m);
    ms_request req;
    memset(&req, 0, sizeof req);
    int rc;
    uint64_t i = 0;
    while ((rc = ms_reader_next(rd, &req, err)) == 1) {
        ms_xreq_add(x, &req);
        ms_period pd;
        if (lists && i < n) {
            ms_period_of_request(m, &req, &pd);
            per[i] = pd.period;
            rep[i] = pd.repeat;
            r->n_loops += pd.period > 0 && pd.repeat > 0;
        }
        i++;
    }
    r->source.xreq = ms_xreq_mean(x);
    r->source.xreq_exact = ms_xreq_exact(x);
    ms_xreq_free(x);
    ms_request_free(&req);
    ms_reader_close(rd);
    if (rc == 0 && r->n_loops) {
        r->periods = per;
        r->period_repeats = rep;
        r->p.periods = per;
        r->p.period_repeats = rep;
        r->p.n_periods = (uint32_t)n;
    } else {
        free(per);
        free(rep);
    }
    return rc < 0 ? -1 : 0;
}

static void popularities(ms_fit_result *r, double *pre, const double *dec, uint32_t phases, const double *all_dec,
                         uint64_t n_pre_rows);

/* Popularity of prompt rows and (when the trace has decode rows and prompt
 * rows) of decode rows, each coverage-smoothed per layer.  A layer whose
 * prompt cells are mostly missing (fewer than half of prompt rows x K valid,
 * as the last layer of both real route-csv traces) takes its prompt
 * popularity from all its rows: smoothing a handful of counts towards the
 * coverage of a few cells would make it nearly uniform. */
static int measure_popularity(const char *path, uint32_t want_phases, ms_fit_result *r, uint32_t *max_token,
                              ms_err *err)
{
    uint32_t L = r->model.moe_layers, J = r->model.experts;
    size_t LJ = (size_t)L * J;
    uint32_t want = want_phases ? want_phases : MS_FIT_DECODE_PHASES;
    double *pre = ms_xcalloc(LJ, sizeof *pre), *dec = ms_xcalloc(want * LJ, sizeof *dec);
    double *all_dec = ms_xcalloc(LJ, sizeof *all_dec);
    uint64_t n_pre_rows, n_dec;
    uint32_t phases = 1;
    int rc = count_activations(path, want, pre, dec, &phases, &n_pre_rows, &n_dec, max_token, err);
    int every_phase = 1; /* each phase has activations (missing cells may empty one) */
    for (uint32_t k = 0; k < phases; k++) {
        double n = 0;
        for (size_t i = 0; i < LJ; i++) {
            all_dec[i] += dec[k * LJ + i];
            n += dec[k * LJ + i];
        }
        every_phase &= n > 0;
    }
    if (rc == 0)
        popularities(r, pre, dec, n_dec && every_phase ? phases : 1, all_dec, n_pre_rows);
    free(pre);
    free(dec);
    free(all_dec);
    return rc;
}

/* The smoothed popularities from the counts (see measure_popularity). */
static void popularities(ms_fit_result *r, double *pre, const double *dec, uint32_t phases, const double *all_dec,
                         uint64_t n_pre_rows)
{
    uint32_t L = r->model.moe_layers, J = r->model.experts;
    size_t LJ = (size_t)L * J;
    double n_pre = 0, n_dec = 0;
    for (size_t i = 0; i < LJ; i++) {
        n_pre += pre[i];
        n_dec += all_dec[i];
    }
    /* several requests: their clusters carry the structure, and a trace-wide
     * tilt (the ratio of two noisy trace-wide estimates) would multiply every
     * request's preference by sampling noise */
    int decode_pop = n_pre > 0 && n_dec > 0 && r->p.requests == 1;
    if (!(n_pre > 0)) /* no prompt activations: the decode rows are the popularity */
        memcpy(pre, all_dec, LJ * sizeof *pre);
    r->popularity = ms_xcalloc(LJ, sizeof *r->popularity);
    if (decode_pop)
        r->decode_popularity = ms_xcalloc(phases * LJ, sizeof *r->decode_popularity);
    for (uint32_t l = 0; l < L; l++) {
        size_t at = (size_t)l * J;
        double *c = pre + at, have = 0;
        for (uint32_t j = 0; j < J; j++)
            have += c[j];
        if (decode_pop && have < 0.5 * (double)n_pre_rows * r->model.top_k)
            for (uint32_t j = 0; j < J; j++)
                c[j] += all_dec[at + j];
        ms_fit_coverage_smooth(c, J, r->popularity + at);
        for (uint32_t k = 0; decode_pop && k < phases; k++)
            ms_fit_coverage_smooth((phases > 1 ? dec + k * LJ : all_dec) + at, J, r->decode_popularity + k * LJ + at);
    }
    r->p.popularity = r->popularity;
    r->p.decode_popularity = r->decode_popularity;
    r->p.decode_phases = decode_pop ? phases : 0;
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
    r->source_freq = ms_fit_expert_shares(ms_stats_report_get(s));
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
    if (o->decode_phases && r->p.requests != 1) {
        ms_fail(err, "trace fit: --decode-phases %u: %s has %llu requests; decode phases are fitted on "
                     "one-request traces only", o->decode_phases, path, (unsigned long long)r->p.requests);
        goto fail;
    }
    if (measure_popularity(path, o->decode_phases, r, &max_token, err) || measure_repeats(path, r, err))
        goto fail;
    if (r->p.token_ids) {
        uint32_t need = max_token > r->p.clusters ? max_token : r->p.clusters;
        r->model.vocab = need > r->model.vocab ? need : r->model.vocab;
    }
    if (r->p.spec_depth >= r->model.moe_layers)
        r->p.spec_depth = 0;
    if (ms_gen_validate(&r->p, &r->model, err) || ms_fit_search(r, o, err))
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
    char comment[2048];
    const ms_fit_stats *s = &r->source, *t = &r->fitted;
    snprintf(comment, sizeof comment,
             "moesim trace fit of %s (%llu requests)\n"
             "statistic (mean over layers): source / fitted trial generations\n"
             "  hw_iter %.4f / %.4f bits, h_req %.4f / %.4f bits, h_trace %.4f / %.4f bits\n"
             "  reuse_prev %.4f / %.4f, reuse_w8 %.4f / %.4f\n"
             "  mi_top1 %.4f / %.4f bits, succ_hit %.4f / %.4f\n"
             "generate: moesim trace gen --params %s -o TWIN.h5 [--requests N] [--seed N]",
             source_path, (unsigned long long)r->p.requests, s->hw_iter, t->hw_iter, s->h_req, t->h_req,
             s->h_trace, t->h_trace, s->reuse_prev, t->reuse_prev, s->reuse_w8, t->reuse_w8, s->mi_top1,
             t->mi_top1, s->succ_hit, t->succ_hit, out_path);
    ms_gen_file_write(ms_out_fp(o), comment, &r->model, r->expert_bytes, r->dense_bytes, &r->p);
    return ms_out_commit(o, err);
}

void ms_fit_print(const ms_fit_result *r, FILE *out)
{
    const ms_gen_params *p = &r->p;
    fprintf(out, "  copied: shape, probs kind, embeddings, speculative depth, token ids, %llu requests, %s\n",
            (unsigned long long)p->requests, p->n_lens ? "their lengths (list)" : "lognormal lengths");
    fprintf(out, "  measured: popularity of prompt rows%s (coverage-smoothed), arrival rate %.4g/s\n",
            p->decode_phases > 1 ? ", of decode rows by phase of the generation"
            : r->decode_popularity ? " and of decode rows" : "", p->arrival_rate);
    if (r->calibrated)
        fprintf(out, "  %s: popularity x source / twin activation share per expert, once (activation shares' "
                     "distance, mean over layers: %.4f before, %.4f after%s)\n",
                r->calibrated > 0 ? "calibrated" : "not calibrated", r->calib_tv[0], r->calib_tv[1],
                r->calibrated > 0 ? "" : ": not kept");
    if (p->decode_phases > 1)
        fprintf(out, "  measured: %u decode phases (--decode-phases, default %d: the halves)\n", p->decode_phases,
                MS_FIT_DECODE_PHASES);
    if (r->n_loops) {
        fprintf(out, "  measured: looping decode routing in %u of %llu requests (period:repeat by moments of the "
                     "exact-lag reuse):", r->n_loops, (unsigned long long)p->requests);
        for (uint32_t i = 0; i < p->n_periods && i < 16; i++)
            fprintf(out, " %u:%.2f", p->periods[i], p->period_repeats[i]);
        fprintf(out, "%s\n", p->n_periods > 16 ? " ..." : "");
    } else {
        fprintf(out, "  measured: no looping decode routing (periods not used)\n");
    }
    fprintf(out, "  %-26s %10s  %-16s %9s %9s\n", "searched knob", "value", "statistic", "source", "twin");
    for (uint32_t i = 0; i < r->n_searched; i++) {
        const ms_fit_knob *k = &r->searched[i];
        if (k->skipped) {
            fprintf(out, "  %-26s %10s  %-16s not fitted: %s\n", k->knob, "-", k->statistic, k->why);
            continue;
        }
        fprintf(out, "  %-26s %10.4g  %-16s %9.4f %9.4f%s\n", k->knob, k->value, k->statistic,
                k->source_value, k->fitted_value,
                k->at_bound < 0 ? "  (at the low end of its range)" : k->at_bound > 0 ? "  (at the high end of its range)" : "");
    }
    if (!isnan(r->source.xreq_exact))
        fprintf(out, "  token_noise                         -  xreq_exact       %9.4f %9.4f  not fitted: "
                     "docs/traces.md \"Near repeats\" (default 0: copies are whole)\n",
                r->source.xreq_exact, r->fitted.xreq_exact);
    fprintf(out, "  not fitted (defaults): cluster_skew, request_conc%s, balance, pref_drift (trace fit --against), "
                 "spec_noise, embed_req_noise, embed_tok_noise, token_affinity; clusters = %u\n",
            p->requests < 2 ? " (10^6: one request)" : "", p->clusters);
}

void ms_fit_free(ms_fit_result *r)
{
    free(r->popularity);
    free(r->decode_popularity);
    free(r->source_freq);
    free(r->prompt_lens);
    free(r->output_lens);
    free(r->periods);
    free(r->period_repeats);
    r->periods = NULL;
    r->period_repeats = NULL;
    r->p.periods = NULL;
    r->p.period_repeats = NULL;
    r->p.n_periods = 0;
    free(r->expert_bytes);
    free(r->dense_bytes);
    r->popularity = r->decode_popularity = r->source_freq = NULL;
    r->prompt_lens = r->output_lens = NULL;
    r->expert_bytes = r->dense_bytes = NULL;
    r->p.popularity = r->p.decode_popularity = NULL;
    r->p.decode_phases = 0;
    r->p.prompt_lens = r->p.output_lens = NULL;
    r->p.n_lens = 0;
    r->p.layer_expert_bytes = r->p.layer_dense_bytes = NULL;
}
