/* Set-up of a run: layer sizes and capacity, the model check, the training
 * split, policy loading, the host tier, the preloaded cache, the executor,
 * and the state arrays. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/gate.h"
#include "sim/engine/budget.h"
#include "sim/engine/state.h"

static int spec_learns(ms_policy_kind kind, const char *spec)
{
    char name[64];
    const char *kv;
    ms_err ignored;
    const ms_policy_desc *d = ms_policy_lookup(kind, spec, name, sizeof name, &kv, &ignored);
    if (!d)
        return 0;
    ms_params p;
    if (d->learns && !ms_params_parse(d->params, kv, name, &p, &ignored))
        return d->learns(&p);
    return d->uses_training;
}

int eng_resolve_split(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    int learns = spec_learns(MS_KIND_PREFETCH, c->prefetch_spec) || spec_learns(MS_KIND_CACHE, c->cache_spec) ||
                 spec_learns(MS_KIND_SCHED, c->sched_spec);
    ms_split *s = &v->env.split;
    char word[32];
    if (ms_split_resolve(v->meta, c->train_set ? c->train_frac : -1.0, learns,
                         ms_runkey_word(MS_RK_TRAIN, c->keys_as_ini, word, sizeof word), s, v->err))
        return -1;
    v->m->train_frac = s->frac;
    v->m->train_by_iteration = s->by_iteration;
    v->m->train_requests = s->train_requests;
    v->m->train_iters = s->train_iters;
    return 0;
}

int eng_load_policy(ms_view *v, ms_policy_kind kind, const char *spec, const ms_policy_desc **desc, void **st)
{
    char name[64];
    const char *kv;
    *desc = ms_policy_lookup(kind, spec, name, sizeof name, &kv, v->err);
    if (!*desc && v->err->msg[0]) /* a malformed spec, a plugin that cannot be used */
        return -1;
    if (!*desc) {
        char known[512] = "";
        for (int i = 0; ms_policy_registry[i]; i++)
            if (ms_policy_registry[i]->kind == kind) {
                size_t u = strlen(known);
                snprintf(known + u, sizeof known - u, "%s%s", u ? ", " : "", ms_policy_registry[i]->name);
            }
        return ms_fail(v->err, "unknown %s policy '%s' (known: %s)", ms_policy_kind_name(kind), name, known);
    }
    if ((*desc)->needs_weights && v->meta->probs_kind == MS_PROBS_TOPK_IDS)
        return ms_fail(v->err, "%s policy '%s' reads router weights, but %s holds expert ids only (probs_kind "
                               "topk_ids: its source, %s, recorded no gate weights); policies that use only which "
                               "experts were chosen (lru, lfu, eam, ...) run on it",
                       ms_policy_kind_name(kind), name, v->cfg->trace_path, v->meta->source);
    ms_params params;
    char who[96];
    snprintf(who, sizeof who, "%s policy '%s'", ms_policy_kind_name(kind), name);
    if (ms_params_parse((*desc)->params, kv, who, &params, v->err))
        return -1;
    void *(*create)(const ms_params *, const ms_policy_env *, ms_err *) =
        kind == MS_KIND_PREFETCH ? (*desc)->prefetch->create
        : kind == MS_KIND_CACHE  ? (*desc)->cache->create
                                 : (*desc)->sched->create;
    *st = create ? create(&params, &v->env, v->err) : NULL;
    if (create && !*st)
        return ms_fail_prefix(v->err, "%s", who);
    return 0;
}

/* Per-layer sizes from the trace; FLOPs from the model profile when given
 * (quantised traces store fewer bytes than params), else bf16 (2 B/param). */
int eng_setup_layer_sizes(ms_view *v)
{
    const ms_model *model = v->cfg->model;
    v->layer_bytes = ms_xcalloc(v->L, sizeof(double));
    v->layer_params = ms_xcalloc(v->L, sizeof(double));
    v->dense_bytes = ms_xcalloc(v->L, sizeof(double));
    v->dense_params = ms_xcalloc(v->L, sizeof(double));
    double scale = v->cfg->work_scale > 0 ? v->cfg->work_scale : 1.0;
    for (uint32_t l = 0; l < v->L; l++) {
        v->layer_bytes[l] = (double)v->meta->expert_bytes[l];
        v->dense_bytes[l] = (double)v->meta->dense_bytes[l];
        v->layer_params[l] = model ? (double)model->expert_params : v->layer_bytes[l] / 2.0;
        v->dense_params[l] = model ? (double)model->dense_params : v->dense_bytes[l] / 2.0;
        if (scale != 1.0) {
            v->layer_bytes[l] *= scale;
            v->layer_params[l] *= scale;
            v->dense_bytes[l] *= scale;
            v->dense_params[l] *= scale;
        }
        if (v->cfg->expert_bits > 0) /* quantised weights: bytes from bits per weight */
            v->layer_bytes[l] = v->layer_params[l] * v->cfg->expert_bits / 8.0;
        if (v->cfg->dense_bits > 0)
            v->dense_bytes[l] = v->dense_params[l] * v->cfg->dense_bits / 8.0;
        if (v->layer_bytes[l] <= 0)
            return ms_fail(v->err, "%s: layer %u has expert_bytes 0", v->cfg->trace_path, l);
    }
    return 0;
}

/* The longest request's prompt + output tokens (0 when the trace lists no
 * request lengths). */
static double longest_context(const ms_trace_meta *m)
{
    double n = 0;
    for (uint64_t i = 0; m->req_prompt_len && m->req_output_len && i < m->n_requests; i++)
        n = ms_fmax(n, (double)m->req_prompt_len[i] + m->req_output_len[i]);
    return n;
}

/* One GPU: the cache must fit beside the dense weights, embeddings, the KV
 * cache and the framework's reserve (budget.h).  A KV figure the budget only
 * estimates (no kv_bytes_per_token: an upper bound) is not held against the
 * cache. */
static int eng_check_budget(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    ms_budget_in in = {.platform = c->platform, .model = c->model,
                       .framework = c->framework ? c->framework
                                    : c->platform->framework[0] ? &c->platform->framework_profile : NULL,
                       .batch = c->max_batch ? c->max_batch : 1, .context_tokens = longest_context(v->meta)};
    for (uint32_t l = 0; l < v->L; l++)
        in.dense_bytes += v->dense_bytes[l];
    ms_budget b;
    ms_budget_compute(&in, &b);
    int kv_estimated = c->model && !(c->model->kv_bytes_per_token > 0);
    if (v->m->gpu_cache_capacity_bytes <= ms_budget_cache_room(&b, c->model))
        return 0;
    return ms_fail(v->err, "GPU expert cache of %.0f bytes exceeds %s's GPU memory of %.0f bytes less the rest: %s%s",
                   v->m->gpu_cache_capacity_bytes, c->platform->name, c->platform->gpu_mem_bytes, b.assumed,
                   kv_estimated ? " (the KV estimate not counted against the cache)" : "");
}

int eng_check_capacity(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    double max_bytes = 0, total_bytes = 0;
    for (uint32_t l = 0; l < v->L; l++) {
        max_bytes = ms_fmax(max_bytes, v->layer_bytes[l]);
        total_bytes += v->layer_bytes[l] * v->J;
    }
    if (!(c->cap_value > 0) || !isfinite(c->cap_value))
        return ms_fail(v->err, "GPU expert cache size must be positive, got %g", c->cap_value);
    char word[32];
    if (c->cap_kind == MS_CAP_EXPERTS && c->cap_value != floor(c->cap_value))
        return ms_fail(v->err, "%s must be a whole number, got %g",
                       ms_runkey_word(MS_RK_CACHE_EXPERTS, c->keys_as_ini, word, sizeof word), c->cap_value);
    double need = c->cap_kind == MS_CAP_BYTES ? v->K * max_bytes : v->K;
    if (c->cap_value < need)
        return ms_fail(v->err,
                       "GPU expert cache (%g %s) is smaller than one layer's %u activated experts (needs at least %g)",
                       c->cap_value, c->cap_kind == MS_CAP_BYTES ? "bytes" : "experts", v->K, need);
    v->cap_units = c->cap_value;
    v->m->gpu_cache_capacity_bytes = c->cap_kind == MS_CAP_BYTES ? c->cap_value : c->cap_value * max_bytes;
    if (v->G == 1 && c->platform->gpu_mem_bytes > 0 && eng_check_budget(v))
        return -1;
    v->host_cap = c->host_bytes;
    v->m->host_bytes = c->host_bytes > 0 ? c->host_bytes : total_bytes;
    return 0;
}

/* Model keys a run does not take from the profile (ms_run_check_model_sets). */
static const struct {
    const char *key, *why;
} run_ignores[] = {
    {"moe_layers", "the trace decides the MoE layers (a run replays its routing)"},
    {"experts", "the trace decides the experts per layer (a run replays its routing)"},
    {"top_k", "the trace decides top-k (a run replays its routing; generate a trace with another top_k: "
              "trace gen --model FILE.ini)"},
    {"shared_experts", "the trace decides the shared experts"},
    {"expert_bytes", "the trace decides the expert bytes of every layer"},
    {"dense_bytes", "the trace decides the dense bytes of every layer"},
    {"bf16", "the trace decides the expert bytes ([bytes_per_expert] is not read by a run)"},
    {"fp32", "the trace decides the expert bytes ([bytes_per_expert] is not read by a run)"},
    {"fp8", "the trace decides the expert bytes ([bytes_per_expert] is not read by a run)"},
    {"mxfp4", "the trace decides the expert bytes ([bytes_per_expert] is not read by a run)"},
    {"layers", "a run reads no transformer layer count (the trace decides the MoE layers)"},
    {"vocab", "a run does not read the vocabulary size"},
    {"description", "a run does not read the description"},
};

int ms_run_check_model_sets(const ms_profile_set *sets, int n, ms_err *err)
{
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof run_ignores / sizeof run_ignores[0]; k++) {
            if (strcmp(sets[i].key, run_ignores[k].key))
                continue;
            if (sets[i].where)
                return ms_fail(err, "%s: %s, so the override would change nothing (keys a run reads: expert_params, "
                                    "dense_params, hidden, dtype, expert_ffn, expert_matrices, encoder_moe_layers)",
                               sets[i].where, run_ignores[k].why);
            return ms_fail(err, "--set model.%s=%s: %s, so the override would change nothing (keys a run reads: "
                                "expert_params, dense_params, hidden, dtype, expert_ffn, expert_matrices, "
                                "encoder_moe_layers)",
                           sets[i].key, sets[i].value, run_ignores[k].why);
        }
    return 0;
}

int eng_check_model(ms_view *v)
{
    if (ms_run_check_model_sets(v->cfg->model_sets, v->cfg->n_model_sets, v->err))
        return -1;
    const ms_model *m = v->cfg->model;
    if (!m)
        return 0;
    if (m->moe_layers != v->L || m->experts != v->J)
        return ms_fail(v->err, "%s has L=%u MoE layers and J=%u experts, but model '%s' has L=%u and J=%u",
                       v->cfg->trace_path, v->L, v->J, m->name, m->moe_layers, m->experts);
    v->enc_layers = m->encoder_moe_layers;
    return 0;
}

void eng_preload_cache(ms_view *v)
{
    if (!v->cache->cache->preload)
        return;
    uint32_t *ls = ms_xcalloc(v->NX, sizeof *ls), *es = ms_xcalloc(v->NX, sizeof *es);
    uint32_t n = v->cache->cache->preload(v->cache_st, v, v->NX, ls, es);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = ls[i] * v->J + es[i];
        if (ls[i] >= v->L || es[i] >= v->J || v->cached[x] || eng_over_capacity(v, x, eng_unit_of(v, x)))
            continue;
        eng_occupy(v, x);
        v->ready_t[x] = 0;
    }
    free(ls);
    free(es);
}

/* The experts resident before the run get their copies (a real backend
 * fills their slots), then the executor's clock starts: they are ready at 0. */
int eng_start_executor(ms_view *v)
{
    for (uint32_t x = 0; x < v->NX; x++) {
        if (!v->cached[x] || v->G > 1) /* several GPUs: links.c times copies, not the executor */
            continue;
        ms_op op = eng_expert_op(v, MS_OP_COPY, x);
        op.iteration = UINT64_MAX;
        ms_event ev;
        if (ms_exec_submit(v->exec, &op, &ev, v->err))
            return eng_exec_failed(v);
    }
    return ms_exec_begin(v->exec, v->err) ? eng_exec_failed(v) : 0;
}

/* The platform the simulated timeline times ops with: the run's, with the
 * scheduler's CPU threads (ms_sched_ops.cpu_threads) in place of cpu_cores
 * when it names some. */
static const ms_platform *timed_platform(ms_view *v)
{
    uint32_t threads = v->sched->sched->cpu_threads ? v->sched->sched->cpu_threads(v->sched_st) : 0;
    if (!threads)
        return v->cfg->platform;
    v->cpu_platform = *v->cfg->platform;
    v->cpu_platform.cpu_cores = threads;
    return &v->cpu_platform;
}

/* The framework's H2D calls per expert copy (0: the model's expert_matrices)
 * and the bandwidth copies run at (pageable_bw from pageable host memory). */
int eng_resolve_copies(ms_view *v)
{
    const ms_framework *fw = v->fw;
    const ms_platform *p = v->cfg->platform;
    v->copy_calls = 1;
    v->copy_bw = p->h2d_bw;
    v->surplus_stream = ms_framework_surplus_streams(fw);
    v->env.surplus_streams = v->surplus_stream;
    if (!fw)
        return 0;
    v->copy_calls = fw->copies_per_expert ? fw->copies_per_expert : 1;
    if (v->copy_calls == MS_COPIES_PER_MATRIX) {
        if (!v->cfg->model)
            return ms_fail(v->err, "framework '%s': copies_per_expert = 0 takes the model's expert_matrices, but the "
                                   "run has no model profile (give --model, or copies_per_expert >= 1)",
                           fw->name);
        v->copy_calls = v->cfg->model->expert_matrices;
    }
    v->copy_bw = ms_framework_pageable(fw) ? p->pageable_bw : p->h2d_bw;
    if (v->G > 1 && fw->writeback)
        return ms_fail(v->err, "framework '%s': writeback = 1 is modelled on one GPU only (the run has %u GPUs)",
                       fw->name, v->G);
    if (v->G > 1 && ms_framework_sync_copies(fw))
        return ms_fail(v->err, "framework '%s': copies = sync is modelled on one GPU only (the run has %u GPUs)",
                       fw->name, v->G);
    return 0;
}

int eng_open_executor(ms_view *v)
{
    if (v->cfg->exec) {
        v->exec = v->cfg->exec;
        return 0;
    }
    ms_sim_timing t = {.platform = timed_platform(v), .framework = v->fw, .copy_calls = v->copy_calls};
    if (ms_exec_sim_create_timed(&t, v->L, v->J, &v->own_exec, v->err))
        return -1;
    v->exec = &v->own_exec;
    return 0;
}

void eng_init_host_tier(ms_view *v)
{
    v->in_host = ms_xcalloc(v->NX, 1);
    v->host_used_at = ms_xcalloc(v->NX, sizeof *v->host_used_at);
    if (v->host_cap <= 0)
        return;
    for (uint32_t x = 0; x < v->NX; x++) {
        double b = v->layer_bytes[x / v->J];
        if (v->host_used + b > v->host_cap)
            break;
        v->in_host[x] = 1;
        v->host_used += b;
        eng_host_touch(v, x);
    }
}

void eng_alloc_state(ms_view *v)
{
    size_t nx = v->NX;
    v->cached = ms_xcalloc(nx, 1);
    v->transient = ms_xcalloc(nx, 1);
    v->from_prefetch = ms_xcalloc(nx, 1);
    v->queued = ms_xcalloc(nx, 1);
    v->outcome = ms_xcalloc(nx, 1);
    v->burst_x = ms_xcalloc(nx ? nx : 1, sizeof *v->burst_x);
    v->burst_seq = ms_xcalloc(nx ? nx : 1, sizeof *v->burst_seq);
    eng_qset_init(&v->q, v->NX);
    v->qissue = ms_xcalloc(nx, sizeof *v->qissue);
    v->ready_t = ms_xcalloc(nx, sizeof *v->ready_t);
    v->protect = ms_xcalloc(nx, sizeof *v->protect);
    v->mark = ms_xcalloc(nx, sizeof *v->mark);
    v->act_pos = ms_xcalloc(nx, sizeof *v->act_pos);
    v->act_tok = ms_xcalloc(nx, sizeof *v->act_tok);
    v->act_wsum = ms_xcalloc(nx, sizeof *v->act_wsum);
    v->score = ms_xcalloc(nx, sizeof *v->score);
    v->incoming = UINT32_MAX;
    for (size_t x = 0; x < nx; x++)
        v->score[x] = NAN;
    v->acts = ms_xcalloc(nx, sizeof *v->acts);
    v->n_acts = ms_xcalloc(v->L, sizeof *v->n_acts);
    size_t j = v->J ? v->J : 1;
    v->step_cached = ms_xcalloc(j, 1);
    v->step_on_cpu = ms_xcalloc(j, 1);
    v->step_seen = ms_xcalloc(j, 1);
    v->step_order = ms_xcalloc(j, sizeof *v->step_order);
    v->step_ready = ms_xcalloc(j, sizeof *v->step_ready);
    v->step_visit_cap = j;
    v->step_visit = ms_xcalloc(j, sizeof *v->step_visit);
    v->gate_mean = ms_xcalloc(nx ? nx : 1, sizeof *v->gate_mean);
    v->gate_mean_at = ms_xcalloc(v->L ? v->L : 1, sizeof *v->gate_mean_at);
    v->step_identity = ms_xcalloc(j, sizeof *v->step_identity);
    for (uint32_t i = 0; i < j; i++)
        v->step_identity[i] = i;
    v->m->L = v->L;
    v->m->layer = ms_xcalloc(v->L, sizeof *v->m->layer);
}

void eng_free_state(ms_view *v)
{
    if (v->pf && v->pf_st && v->pf->prefetch->destroy)
        v->pf->prefetch->destroy(v->pf_st);
    if (v->cache && v->cache_st && v->cache->cache->destroy)
        v->cache->cache->destroy(v->cache_st);
    if (v->sched && v->sched_st && v->sched->sched->destroy)
        v->sched->sched->destroy(v->sched_st);
    void *arrays[] = {v->cached, v->transient, v->from_prefetch, v->queued, v->outcome, v->burst_x, v->burst_seq, v->qissue, v->ready_t,
                      v->protect, v->mark, v->act_pos, v->act_tok, v->act_wsum, v->score, v->acts, v->n_acts, v->step_cached, v->step_on_cpu,
                      v->step_seen, v->step_order, v->step_ready, v->step_lanes, v->step_visit, v->step_identity, v->gate_mean,
                      v->gate_mean_at, v->layer_bytes, v->layer_params, v->dense_bytes,
                      v->dense_params, v->in_host, v->host_used_at, v->use_n, v->use_cap, v->use_cur,
                      v->ttft.v, v->tpot.v, v->latency.v, v->queue.v, v->ttft_svc.v, v->lat_svc.v, v->act_key, v->act_val};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
    if (v->use_it)
        for (uint32_t x = 0; x < v->NX; x++)
            free(v->use_it[x]);
    free(v->use_it);
    eng_qset_free(&v->q);
    eng_gpus_free(v);
}

/* Mean and quantiles of d; NaN each when d has no sample. */

void eng_warn(ms_view *v, const char *fmt, ...)
{
    if (v->m->n_warnings >= MS_RUN_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->m->warnings[v->m->n_warnings++], sizeof v->m->warnings[0], fmt, ap);
    va_end(ap);
}

/* What the run was given but cannot use, as warnings (ms_metrics.warnings):
 * a prefetch distance other than the default 1 when the prefetcher has none,
 * and a training split set to 0 for a policy that learns from it. */
void eng_note_unused(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    char word[32];
    if (c->distance != 1 && !v->pf->uses_distance)
        eng_warn(v, "%s %u is not used: prefetch %s has no prefetch distance",
             ms_runkey_word(MS_RK_DISTANCE, c->keys_as_ini, word, sizeof word), c->distance, v->pf->name);
    if (!c->train_set || v->env.split.frac != 0)
        return;
    const struct {
        ms_policy_kind kind;
        const char *spec;
        const ms_policy_desc *d;
    } ps[] = {{MS_KIND_PREFETCH, c->prefetch_spec, v->pf}, {MS_KIND_CACHE, c->cache_spec, v->cache},
              {MS_KIND_SCHED, c->sched_spec, v->sched}};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (spec_learns(ps[i].kind, ps[i].spec))
            eng_warn(v, "%s 0 leaves %s %s nothing to learn from: it learns from the training split",
                 ms_runkey_word(MS_RK_TRAIN, c->keys_as_ini, word, sizeof word), ms_policy_kind_name(ps[i].kind),
                 ps[i].d->name);
}
