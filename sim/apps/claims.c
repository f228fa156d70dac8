/* `moesim claims`: the runner over claims_table.c (see claims.h). */
#include "sim/apps/claims.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim/apps/claims_table.h"
#include "sim/apps/claims_serverless.h"
#include "sim/apps/claims_verdict.h"
#include "sim/apps/sweep_pool.h"
#include "sim/core/profile.h"
#include "sim/engine/engine.h"
#include "sim/engine/report.h"
#include "traces/stats/stats.h"
#include "traces/synth/gen.h"

/* ShareGPT turn lengths (../shared/workloads/sharegpt-lengths, 30,731 rows,
 * Llama-2 tokenizer): median prefill 1,730 and decode 415 tokens, log-space
 * standard deviations 1.63 and 1.00.  The synthetic traces take these as the
 * generator's lognormal lengths (docs/claims.md). */
#define SHAREGPT_PROMPT_MEDIAN "1730"
#define SHAREGPT_PROMPT_SIGMA "1.63"
#define SHAREGPT_OUTPUT_MEDIAN "415"
#define SHAREGPT_OUTPUT_SIGMA "1.0"
/* MoE-Infinity's requests (BIGBench, FLAN, MMLU mixed, seed 004 §8) are
 * question answering; the paper gives no lengths.  Estimate: prompts of
 * median 128 tokens, answers of 32, log-space deviation 0.5. */
#define QA_PROMPT_MEDIAN "128"
#define QA_OUTPUT_MEDIAN "32"
#define QA_SIGMA "0.5"
#define CLAIMS_TRAIN 0.7 /* fMoE's 7:3 split of the prompts (§6.1), for every claim */

/* ---- one run, memoised: claims share most of their runs ---- */

typedef struct {
    const char *trace;
    const ms_model *model;   /* NULL: sizes from the trace */
    const ms_platform *plat; /* the testbed */
    double bw_gbps;          /* 0: the testbed's */
    double cache_frac, cache_gb;
    uint32_t distance;
    uint32_t gpus;           /* 0: the testbed's */
    uint32_t batch;          /* 0: 1 */
    double capacity;         /* > 0: the prefetch spec's capacity= (MoE-Infinity's EAMC, fMoE's store) */
} cl_setting;

typedef struct {
    char key[1024];
    double v[CL_M_N];
} memo_entry;

typedef struct {
    const ms_claims_opts *o;
    memo_entry *memo;
    size_t nmemo, capmemo;
    char traces[16][1200];
    char trace_models[16][MS_NAME_MAX + 32];
    int ntraces;
    ms_err *err;
} cl_ctx;

static double metric_of(const ms_metrics *m, cl_metric k)
{
    uint64_t act = ms_metrics_activations(&m->total);
    switch (k) {
    case CL_M_HIT_RATE: return ms_metrics_hit_rate(&m->total);
    case CL_M_TPOT_MS: return m->tpot_mean_s * 1e3;
    case CL_M_TTFT_MS: /* the prefill iteration's latency: the replay is offline, batch 1, so a request's
                        * TTFT would also hold its wait for every earlier request */
        return m->phase[MS_PHASE_PREFILL].iterations
                   ? m->phase[MS_PHASE_PREFILL].busy_s * 1e3 / (double)m->phase[MS_PHASE_PREFILL].iterations
                   : NAN;
    case CL_M_RECALL_IN_TIME: return act ? (double)(m->prefetch_useful - m->prefetch_late) / (double)act : NAN;
    case CL_M_RECALL_MOEINF: return ms_metrics_hit_def(m, MS_HIT_RECALL_MOEINF, -1);
    case CL_M_SIM_SEMANTIC: return ms_metrics_ratio(m->policy_stats.sem_sum, (double)m->policy_stats.sem_n);
    case CL_M_SIM_TRAJECTORY: return ms_metrics_ratio(m->policy_stats.traj_sum, (double)m->policy_stats.traj_n);
    case CL_M_N: break;
    }
    return NAN;
}

static const char *metric_name(cl_metric k)
{
    static const char *const names[CL_M_N] = {"hit rate", "TPOT", "TTFT", "prefetch recall in time",
                                              "MoE-Infinity's prefetch recall", "semantic similarity",
                                              "trajectory similarity"};
    return k < CL_M_N ? names[k] : "?";
}

static uint32_t cache_experts(const ms_trace_meta *meta, double frac)
{
    long n = lround(frac * meta->L * meta->J);
    return n < 1 ? 1 : (uint32_t)n;
}

/* Runs sys under s (memoised); the value of metric k in *v. */
static int run_system(cl_ctx *c, const cl_setting *s, const cl_system *sys, uint32_t claim_distance, cl_metric k,
                      const ms_trace_meta *meta, double *v)
{
    uint32_t d = sys->distance ? sys->distance : s->distance ? s->distance : claim_distance;
    char key[1024], prefetch[256];
    if (s->capacity > 0) /* capacity= appended to the prefetcher's own parameters */
        snprintf(prefetch, sizeof prefetch, "%s%scapacity=%g", sys->prefetch, strchr(sys->prefetch, ':') ? "," : ":",
                 s->capacity);
    else
        snprintf(prefetch, sizeof prefetch, "%s", sys->prefetch);
    uint32_t batch = s->batch ? s->batch : 1;
    snprintf(key, sizeof key, "%s|%s|%s|%g|%g|%g|%s|%s|%s|%u|%u|%u", s->trace, s->model ? s->model->name : "-",
             s->plat->name, s->bw_gbps, s->cache_frac, s->cache_gb, prefetch, sys->cache, sys->sched, d, s->gpus, batch);
    for (size_t i = 0; i < c->nmemo; i++)
        if (!strcmp(c->memo[i].key, key)) {
            *v = c->memo[i].v[k];
            return 0;
        }
    ms_platform plat = *s->plat;
    if (s->bw_gbps > 0)
        plat.h2d_bw = s->bw_gbps * 1e9;
    ms_run_config cfg = {.trace_path = s->trace, .model = s->model, .platform = &plat,
                         .prefetch_spec = prefetch, .cache_spec = sys->cache, .sched_spec = sys->sched,
                         .distance = d, .max_batch = batch, .offline = 1, .seed = 1, .train_set = 1,
                         .train_frac = CLAIMS_TRAIN, .gpus = s->gpus};
    if (s->cache_gb > 0) {
        cfg.cap_kind = MS_CAP_BYTES;
        cfg.cap_value = s->cache_gb * 1e9;
    } else {
        cfg.cap_kind = MS_CAP_EXPERTS;
        cfg.cap_value = cache_experts(meta, s->cache_frac);
    }
    ms_metrics m;
    if (ms_run(&cfg, &m, c->err))
        return ms_fail_prefix(c->err, "%s (%s+%s+%s)", sys->label, prefetch, sys->cache, sys->sched);
    if (c->nmemo == c->capmemo) {
        c->capmemo = c->capmemo ? 2 * c->capmemo : 64;
        c->memo = ms_xrealloc(c->memo, c->capmemo, sizeof *c->memo);
    }
    memo_entry *e = &c->memo[c->nmemo++];
    snprintf(e->key, sizeof e->key, "%s", key);
    for (int i = 0; i < CL_M_N; i++)
        e->v[i] = metric_of(&m, (cl_metric)i);
    ms_metrics_free(&m);
    *v = e->v[k];
    return 0;
}

/* ---- the trace statistics claim ---- */

static int entropy_verdict(cl_ctx *c, const char *trace, ms_claim_result *r, ms_verdict *vd)
{
    ms_trace_reader *rd = ms_reader_open(trace, c->err);
    if (!rd)
        return -1;
    ms_stats *s = ms_stats_new(ms_reader_meta(rd), c->err);
    ms_request req = {0};
    int rc = s ? 1 : -1;
    while (rc == 1 && (rc = ms_reader_next(rd, &req, c->err)) == 1)
        if (ms_stats_add(s, &req, c->err))
            rc = -1;
    ms_request_free(&req);
    uint32_t L = ms_reader_meta(rd)->L;
    ms_reader_close(rd);
    if (rc) {
        ms_stats_free(s);
        return -1;
    }
    ms_stats_finish(s);
    const ms_stats_report *sr = ms_stats_report_get(s);
    double hi = 0, hr = 0;
    uint32_t below = 0;
    for (uint32_t l = 0; l < L; l++) {
        hi += sr->h_iter[l] / L;
        hr += sr->h_req[l] / L;
        below += sr->h_iter[l] < sr->h_req[l];
    }
    ms_stats_free(s);
    r->n = 2;
    r->paper[0] = r->paper[1] = NAN;
    r->moesim[0] = hi;
    r->moesim[1] = hr;
    snprintf(r->value_text, sizeof r->value_text, "mean %.2f < %.2f bits; below at %u of %u layers", hi, hr, below, L);
    *vd = below == L ? MS_VERDICT_HOLDS : hi < hr ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
    return 0;
}

/* Evaluates claim cl under setting s: its values into r, the verdict in *vd. */
static int evaluate(cl_ctx *c, const cl_claim *cl, const cl_setting *s, const ms_trace_meta *meta,
                    ms_claim_result *r, ms_verdict *vd)
{
    r->value_text[0] = 0;
    if (cl->kind == CL_ENTROPY)
        return entropy_verdict(c, s->trace, r, vd);
    if (cl->kind == CL_STORE_MB) {
        cl_store_verdict(cl, meta, r, vd);
        return 0;
    }
    double v[MS_CLAIM_MAX_VALUES * 2];
    size_t nx = cl->axis == CL_AX_NONE ? 1 : cl->naxis;
    for (size_t i = 0; i < cl->nsys; i++)
        for (size_t a = 0; a < nx; a++) {
            cl_setting t = *s;
            if (cl->axis == CL_AX_DISTANCE)
                t.distance = (uint32_t)cl->axis_vals[a];
            else if (cl->axis == CL_AX_BW_GBPS)
                t.bw_gbps = cl->axis_vals[a];
            else if (cl->axis == CL_AX_CAPACITY)
                t.capacity = cl->axis_vals[a];
            else if (cl->axis == CL_AX_BATCH)
                t.batch = (uint32_t)cl->axis_vals[a];
            if (run_system(c, &t, &cl->sys[i], cl->distance, cl->metric, meta, &v[i * nx + a]))
                return -1;
        }
    for (size_t i = 0; i < cl->nsys * nx; i++)
        if (isnan(v[i])) { /* e.g. TTFT without a replayed prefill, similarity without embeddings */
            snprintf(r->value_text, sizeof r->value_text, "%s (%s) is undefined on this trace",
                     cl->sys[i / nx].label, metric_name(cl->metric));
            *vd = MS_VERDICT_SKIPPED;
            return 0;
        }
    *vd = cl_values_verdict(cl, v, nx, r);
    return 0;
}

/* ---- traces and settings ---- */

/* The claim's synthetic trace (one per model and request shape, shared by
 * the claims that ask for the same): ShareGPT lengths and --requests, or, for
 * a claim with short_requests, QA-like short requests and requests_x times
 * as many (docs/claims.md). */
/* Its name: the model, with -qa<N> or -r<N> when the request shape is not
 * --requests ShareGPT-like requests. */
static void trace_name(const cl_ctx *c, const char *model, const cl_claim *cl, char *name, size_t cap)
{
    unsigned n = c->o->requests * (cl->requests_x ? cl->requests_x : 1);
    if (cl->short_requests)
        snprintf(name, cap, "%s-qa%u", model, n);
    else if (n != c->o->requests)
        snprintf(name, cap, "%s-r%u", model, n);
    else
        snprintf(name, cap, "%s", model);
}

static int synthetic_trace(cl_ctx *c, const ms_model *model, const cl_claim *cl, const char **path)
{
    char name[MS_NAME_MAX + 32];
    unsigned n = c->o->requests * (cl->requests_x ? cl->requests_x : 1);
    trace_name(c, model->name, cl, name, sizeof name);
    for (int i = 0; i < c->ntraces; i++)
        if (!strcmp(c->trace_models[i], name)) {
            *path = c->traces[i];
            return 0;
        }
    if (c->ntraces == 16)
        return ms_fail(c->err, "claims: more than 16 traces");
    int i = c->ntraces++;
    snprintf(c->trace_models[i], sizeof c->trace_models[i], "%s", name);
    snprintf(c->traces[i], sizeof c->traces[i], "%s/claims-%s.h5", c->o->out_dir, name);
    ms_gen_params p;
    if (ms_gen_model_defaults(&p, model, c->err)) /* the model's fitted routing (docs/generator.md) */
        return -1;
    char num[32];
    snprintf(num, sizeof num, "%u", n);
    int qa = cl->short_requests;
    const char *set[][2] = {{"prompt_median", qa ? QA_PROMPT_MEDIAN : SHAREGPT_PROMPT_MEDIAN},
                            {"prompt_sigma", qa ? QA_SIGMA : SHAREGPT_PROMPT_SIGMA},
                            {"prompt_max", "8192"},
                            {"output_median", qa ? QA_OUTPUT_MEDIAN : SHAREGPT_OUTPUT_MEDIAN},
                            {"output_sigma", qa ? QA_SIGMA : SHAREGPT_OUTPUT_SIGMA},
                            {"output_max", "1024"},
                            {"requests", num},
                            {"arrival_rate", "0"}};
    for (size_t k = 0; k < sizeof set / sizeof set[0]; k++)
        if (ms_gen_set(&p, set[k][0], set[k][1], c->err))
            return -1;
    p.seed = c->o->seed;
    ms_gen_summary sum;
    if (ms_gen_write(&p, model, c->traces[i], &sum, c->err))
        return ms_fail_prefix(c->err, "claims: trace of %s", model->name);
    *path = c->traces[i];
    return 0;
}

static int selected(const ms_claims_opts *o, const cl_claim *cl)
{
    if (!o->only)
        return 1;
    size_t n = strlen(cl->id), p = strlen(cl->paper);
    for (const char *s = o->only; *s;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if ((len == n && !strncmp(s, cl->id, n)) || (len == p && !strncasecmp(s, cl->paper, p)))
            return 1;
        s += len + (e != NULL);
    }
    return 0;
}

/* Re-runs a claim that does not hold with one parameter changed at a time. */
static int sensitivity(cl_ctx *c, const cl_claim *cl, const cl_setting *s, const ms_trace_meta *meta,
                       ms_claim_result *r)
{
    static const double bws[] = {8, 16, 64, 128, 512};
    static const double fracs[] = {0.0625, 0.125, 0.5, 0.75};
    static const double dists[] = {1, 2, 4};
    struct {
        const char *what;
        const double *vals;
        size_t n;
        int kind;
    } axes[] = {{"H2D GB/s", bws, 5, 0}, {"cache fraction", fracs, 4, 1}, {"distance", dists, 3, 2}};
    size_t u = 0;
    r->sensitivity[0] = 0;
    if (cl->metric == CL_M_SIM_SEMANTIC || cl->metric == CL_M_SIM_TRAJECTORY) {
        snprintf(r->sensitivity, sizeof r->sensitivity, "none applies: the matched similarity depends on the "
                 "trace and the store, not on bandwidth, cache or distance");
        return 0;
    }
    for (size_t a = 0; a < 3; a++) {
        if ((axes[a].kind == 0 && cl->axis == CL_AX_BW_GBPS) || (axes[a].kind == 2 && cl->axis == CL_AX_DISTANCE) ||
            (axes[a].kind == 1 && cl->cache_gb > 0))
            continue;
        /* the EAMC's capacity decides what is predicted; bandwidth and distance only when the
         * prefetches land, so the cache (how much a prediction can matter) is the one to vary */
        if (cl->kind == CL_PLATEAU && axes[a].kind != 1)
            continue;
        double flip = NAN;
        int unrunnable = 0;
        for (size_t i = 0; i < axes[a].n && isnan(flip); i++) {
            cl_setting t = *s;
            if (axes[a].kind == 0)
                t.bw_gbps = axes[a].vals[i];
            else if (axes[a].kind == 1)
                t.cache_frac = axes[a].vals[i];
            else
                t.distance = (uint32_t)axes[a].vals[i];
            ms_claim_result tmp = *r;
            ms_verdict vd;
            if (evaluate(c, cl, &t, meta, &tmp, &vd)) {
                unrunnable++; /* e.g. a cache larger than the testbed's GPU memory */
                continue;
            }
            if (vd == MS_VERDICT_HOLDS)
                flip = axes[a].vals[i];
        }
        if (u < sizeof r->sensitivity)
            u += isnan(flip) ? (size_t)snprintf(r->sensitivity + u, sizeof r->sensitivity - u, "%sno %s flips it%s",
                                                u ? "; " : "", axes[a].what,
                                                unrunnable ? " (some values cannot run here)" : "")
                             : (size_t)snprintf(r->sensitivity + u, sizeof r->sensitivity - u, "%sholds at %s %g",
                                                u ? "; " : "", axes[a].what, flip);
    }
    return 0;
}

/* A run this trace cannot make (a cache too small, a missing dataset): the
 * claim is skipped, with the error, cut to the note's room, as its note. */
static void skip_with(ms_claim_result *r, const ms_err *run_err)
{
    r->verdict = MS_VERDICT_SKIPPED;
    size_t len = strnlen(run_err->msg, sizeof r->note - 1);
    memcpy(r->note, run_err->msg, len);
    r->note[len] = 0;
}

/* The serverless claim: on its serverless profile (--platform names GPU
 * testbeds and does not apply; the note says so) and the claim's trace. */
static int run_serverless_claim(cl_ctx *c, const cl_claim *cl, ms_claim_result *r)
{
    const char *trace;
    ms_model model;
    if (c->o->trace)
        trace = c->o->trace;
    else if (ms_model_load(cl->model, &model, c->err) || synthetic_trace(c, &model, cl, &trace))
        return ms_fail_prefix(c->err, "claim %s", cl->id);
    ms_err run_err;
    ms_verdict vd;
    if (cl_serverless_evaluate(cl, trace, c->o->trace ? c->o->model : NULL, c->o->seed, c->o->sensitivity, r, &vd,
                               &run_err)) {
        skip_with(r, &run_err);
        return 0;
    }
    r->verdict = vd;
    snprintf(r->note, sizeof r->note, "%s%s%s%s", c->o->trace ? "on the given trace" : cl->model_note,
             c->o->platform ? "; on the serverless profile " : "", c->o->platform ? cl->platform : "",
             c->o->platform ? ", not --platform" : "");
    return 0;
}

static int run_claim(cl_ctx *c, const cl_claim *cl, ms_claim_result *r)
{
    memset(r, 0, sizeof *r);
    r->id = cl->id;
    ms_model model;
    ms_platform plat;
    if (cl->kind == CL_SERVERLESS)
        return run_serverless_claim(c, cl, r);
    if (cl->kind == CL_HOST_TIME) { /* not simulated: the simulation never reads the clock */
        r->verdict = MS_VERDICT_SKIPPED;
        snprintf(r->note, sizeof r->note, "%s", cl->host_note);
        return 0;
    }
    const char *plat_name = c->o->platform ? c->o->platform : cl->platform;
    if (ms_platform_load(plat_name, &plat, c->err))
        return ms_fail_prefix(c->err, "claim %s", cl->id);
    cl_setting s = {.plat = &plat, .cache_frac = cl->cache_frac, .cache_gb = cl->cache_gb, .gpus = cl->gpus};
    if (c->o->trace) {
        s.trace = c->o->trace;
        if (c->o->model) {
            if (ms_model_load(c->o->model, &model, c->err))
                return ms_fail_prefix(c->err, "claims: --model");
            s.model = &model;
        }
        snprintf(r->note, sizeof r->note, "on %s%s%s (the claim's model: %s)", c->o->trace,
                 c->o->model ? " as " : "", c->o->model ? c->o->model : "", cl->model);
    } else {
        if (ms_model_load(cl->model, &model, c->err))
            return ms_fail_prefix(c->err, "claim %s", cl->id);
        s.model = &model;
        if (synthetic_trace(c, &model, cl, &s.trace))
            return -1;
        if (cl->model_note)
            snprintf(r->note, sizeof r->note, "%s", cl->model_note);
    }
    ms_trace_reader *rd = ms_reader_open(s.trace, c->err);
    if (!rd)
        return -1;
    ms_trace_meta meta = *ms_reader_meta(rd);
    ms_verdict vd;
    ms_err run_err;
    ms_err *saved = c->err;
    c->err = &run_err;
    int rc = evaluate(c, cl, &s, &meta, r, &vd);
    if (!rc && vd != MS_VERDICT_HOLDS && vd != MS_VERDICT_SKIPPED && c->o->sensitivity && cl->kind != CL_ENTROPY && cl->kind != CL_STORE_MB)
        rc = sensitivity(c, cl, &s, &meta, r);
    c->err = saved;
    ms_reader_close(rd);
    if (rc) {
        skip_with(r, &run_err);
        return 0;
    }
    r->verdict = vd;
    return 0;
}

/* ---- the claims as jobs of a worker pool (sweep_pool.h) ---- */

/* Every synthetic trace the selected claims use, made before any claim
 * runs: workers then only read them (no two write one file), and a claim's
 * trace is the same file whichever process runs it. */
static int prepare_traces(cl_ctx *c, const size_t *idx, size_t n)
{
    if (c->o->trace)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const cl_claim *cl = &cl_claims[idx[i]];
        if (cl->kind == CL_HOST_TIME)
            continue;
        ms_model model;
        const char *path;
        if (ms_model_load(cl->model, &model, c->err))
            return ms_fail_prefix(c->err, "claim %s", cl->id);
        if (synthetic_trace(c, &model, cl, &path))
            return cl->kind == CL_SERVERLESS ? ms_fail_prefix(c->err, "claim %s", cl->id) : -1;
    }
    return 0;
}

/* The group of a claim: claims on the same trace and testbed share most of
 * their runs (the memo), so they run in one process, one after the other;
 * groups run in parallel.  The serverless and host-time claims run no
 * engine run: each is a group of its own.  Into key (cap bytes). */
static void group_key(const cl_ctx *c, const cl_claim *cl, char *key, size_t cap)
{
    if (cl->kind == CL_SERVERLESS || cl->kind == CL_HOST_TIME) {
        snprintf(key, cap, "claim %s", cl->id);
        return;
    }
    const char *trace = c->o->trace;
    char name[MS_NAME_MAX + 32];
    if (!trace) { /* the claim's synthetic trace */
        trace_name(c, cl->model, cl, name, sizeof name);
        trace = name;
    }
    snprintf(key, cap, "%s|%s", trace, c->o->platform ? c->o->platform : cl->platform);
}

typedef struct {
    cl_ctx *c;
    const size_t *idx;    /* the selected claims' indices in cl_claims, in table order */
    const size_t *group;  /* the group of each selected claim */
    size_t n;             /* selected claims */
    ms_claim_result *res; /* in table order */
    char **errs;          /* the error of a claim that could not run, else NULL */
    FILE *progress;
} cl_jobs;

/* Runs the claims of group `job` in table order, up to the first that
 * cannot run; one line per claim: "R" and the result struct's bytes in hex
 * (the processes are forks of one program: the same layout, and `id` points
 * into the same table), or "E" and the error. */
static char *claim_job(void *ctx, uint64_t job)
{
    cl_jobs *j = ctx;
    size_t cap = 64, len = 0;
    char *out = ms_xcalloc(cap, 1);
    for (size_t k = 0; k < j->n; k++) {
        if (j->group[k] != job)
            continue;
        ms_claim_result r;
        ms_err err;
        j->c->err = &err;
        int failed = run_claim(j->c, &cl_claims[j->idx[k]], &r) != 0;
        size_t need = len + (failed ? strlen(err.msg) : 2 * sizeof r) + 3;
        if (need > cap) {
            cap = 2 * need;
            out = ms_xrealloc(out, cap, 1);
        }
        out[len++] = failed ? 'E' : 'R';
        if (failed) {
            len += (size_t)sprintf(out + len, "%s", err.msg);
        } else {
            const unsigned char *b = (const unsigned char *)&r;
            for (size_t i = 0; i < sizeof r; i++)
                len += (size_t)sprintf(out + len, "%02x", b[i]);
        }
        out[len++] = '\n';
        out[len] = '\0';
        if (failed)
            break;
    }
    return out;
}

/* Takes group job's lines (the pool calls this in group order); the first
 * error in table order is reported once every group is done, as the claims
 * run one by one would report it. */
static int claim_sink(void *ctx, uint64_t job, const char *row, size_t len, ms_err *err)
{
    cl_jobs *j = ctx;
    const char *p = row, *end = row + len;
    for (size_t k = 0; k < j->n && p < end; k++) {
        if (j->group[k] != job)
            continue;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        if (*p == 'E') {
            j->errs[k] = ms_xcalloc((size_t)(nl - p), 1);
            memcpy(j->errs[k], p + 1, (size_t)(nl - p - 1));
            return 0;
        }
        ms_claim_result *r = &j->res[k];
        unsigned char *b = (unsigned char *)r;
        if (*p != 'R' || (size_t)(nl - p) != 1 + 2 * sizeof *r)
            return ms_fail(err, "claims: a worker sent a malformed result for claim %s", cl_claims[j->idx[k]].id);
        for (size_t i = 0; i < sizeof *r; i++) {
            unsigned v;
            if (sscanf(p + 1 + 2 * i, "%2x", &v) != 1)
                return ms_fail(err, "claims: a worker sent a malformed result for claim %s", cl_claims[j->idx[k]].id);
            b[i] = (unsigned char)v;
        }
        if (j->progress)
            fprintf(j->progress, "claims: %s done\n", r->id);
        p = nl + 1;
    }
    return 0;
}

/* Numbers the groups in order of their first claim; returns how many. */
static size_t make_groups(const cl_ctx *c, const size_t *idx, size_t n, size_t *group)
{
    char (*keys)[1400] = ms_xcalloc(n ? n : 1, sizeof *keys);
    size_t ng = 0;
    for (size_t k = 0; k < n; k++) {
        char key[1400];
        group_key(c, &cl_claims[idx[k]], key, sizeof key);
        size_t g = 0;
        while (g < ng && strcmp(keys[g], key))
            g++;
        if (g == ng)
            memcpy(keys[ng++], key, sizeof key);
        group[k] = g;
    }
    free(keys);
    return ng;
}

int ms_claims_run(const ms_claims_opts *o, ms_claim_result **res, size_t *n, ms_err *err)
{
    if (o->only)
        for (const char *s = o->only; *s;) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            int found = 0;
            for (size_t i = 0; i < cl_n_claims && !found; i++)
                found = (strlen(cl_claims[i].id) == len && !strncmp(s, cl_claims[i].id, len)) ||
                        (strlen(cl_claims[i].paper) == len && !strncasecmp(s, cl_claims[i].paper, len));
            if (!found)
                return ms_fail(err, "claims: --only %.*s: no such claim or paper (moesim claims --list)", (int)len, s);
            s += len + (e != NULL);
        }
    cl_ctx c = {.o = o, .err = err};
    size_t *idx = ms_xcalloc(cl_n_claims, sizeof *idx), *group = ms_xcalloc(cl_n_claims, sizeof *group), m = 0;
    for (size_t i = 0; i < cl_n_claims; i++)
        if (selected(o, &cl_claims[i]))
            idx[m++] = i;
    *res = ms_xcalloc(cl_n_claims, sizeof **res);
    *n = m;
    cl_jobs j = {.c = &c, .idx = idx, .group = group, .n = m, .res = *res,
                 .errs = ms_xcalloc(cl_n_claims, sizeof *j.errs), .progress = o->progress};
    ms_sweep_pool pool = {.ctx = &j, .job = claim_job, .sink = claim_sink};
    int rc = prepare_traces(&c, idx, m);
    if (rc == 0)
        rc = ms_sweep_pool_run(&pool, make_groups(&c, idx, m, group), o->jobs, err);
    for (size_t k = 0; k < m; k++)
        if (rc == 0 && j.errs[k])
            rc = ms_fail(err, "%s", j.errs[k]);
    for (size_t k = 0; k < m; k++)
        free(j.errs[k]);
    free(j.errs);
    free(c.memo); /* this process's; each worker had its own */
    free(idx);
    free(group);
    if (rc) {
        free(*res);
        *res = NULL;
        *n = 0;
    }
    return rc;
}

const char *ms_verdict_name(ms_verdict v)
{
    static const char *const names[] = {"holds", "direction only", "does not hold", "skipped"};
    return names[v];
}

void ms_claims_list(FILE *out)
{
    for (size_t i = 0; i < cl_n_claims; i++)
        fprintf(out, "%-22s %-13s %-22s %s\n", cl_claims[i].id, cl_claims[i].paper, cl_claims[i].where,
                cl_claims[i].statement);
}

const cl_claim *cl_find(const char *id)
{
    for (size_t i = 0; i < cl_n_claims; i++)
        if (!strcmp(cl_claims[i].id, id))
            return &cl_claims[i];
    return NULL;
}
