/* Discrete-event replay engine: ms_run (sim/engine/engine.h).  The
 * semantics are in docs/engine.md; the parts are listed in state.h. */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/state.h"

static int replay(ms_view *v, ms_trace_reader *rd)
{
    ms_batcher b;
    ms_batcher_init(&b, rd, v->cfg->max_batch, v->cfg->offline);
    ms_batcher_skip(&b, v->env.split.train_requests, v->env.split.train_iters);
    v->batch = &b;
    int rc;
    while ((rc = ms_batcher_next(&b, &v->now, v->err)) == 1) {
        v->clock = v->now;
        double t_start = v->now;
        v->gate_epoch = ++v->gate_epochs; /* the batch is fixed until the iteration ends */
        int failed = eng_run_iteration(v);
        v->gate_epoch = 0;
        if (failed) {
            rc = -1;
            break;
        }
        v->served_s += v->now - t_start;
        ms_batcher_complete(&b, v->now, eng_request_done, v);
        v->iter++;
        if (eng_check_outputs(v)) { /* a full disk stops the run at its first failed write */
            rc = -1;
            break;
        }
    }
    ms_batcher_free(&b);
    v->batch = NULL;
    return rc;
}

int ms_run(const ms_run_config *cfg, ms_metrics *out, ms_err *err)
{
    memset(out, 0, sizeof *out);
    char word[32];
    if (cfg->max_batch < 1)
        return ms_fail(err, "%s must be at least 1", ms_runkey_word(MS_RK_BATCH, cfg->keys_as_ini, word, sizeof word));
    ms_trace_reader *rd = ms_reader_open(cfg->trace_path, err);
    if (!rd)
        return -1;
    ms_reader_trace_digest(rd, &out->trace);
    ms_view *v = ms_xcalloc(1, sizeof *v);
    v->ops = &eng_view_ops;
    v->cfg = cfg;
    v->err = err;
    v->m = out;
    v->meta = ms_reader_meta(rd);
    v->L = v->meta->L;
    v->J = v->meta->J;
    v->K = v->meta->K;
    v->NX = v->L * v->J;
    v->act_memo = ms_reader_snapshot(rd);
    v->env = (ms_policy_env){.meta = v->meta, .trace_path = cfg->trace_path, .reader = rd, .platform = cfg->platform,
                             .model = cfg->model, .distance = cfg->distance, .seed = cfg->seed,
                             .topk_fill = cfg->topk_fill == MS_FILL_EVEN ? MS_FILL_EVEN : MS_FILL_ZERO};
    v->G = cfg->gpus ? cfg->gpus : cfg->platform->gpus ? cfg->platform->gpus : 1;
    eng_alloc_state(v);
    int rc = -1;
    if (eng_check_model(v) || eng_setup_layer_sizes(v) || eng_check_capacity(v) || eng_resolve_split(v) ||
        eng_gpus_setup(v) || eng_resolve_copies(v))
        goto done;
    if (eng_load_policy(v, MS_KIND_PREFETCH, cfg->prefetch_spec, &v->pf, &v->pf_st) ||
        eng_load_policy(v, MS_KIND_CACHE, cfg->cache_spec, &v->cache, &v->cache_st) ||
        eng_load_policy(v, MS_KIND_SCHED, cfg->sched_spec, &v->sched, &v->sched_st))
        goto done;
    eng_note_unused(v);
    ms_reader_select(rd, 0); /* the next-use pre-pass reads top-k ids only */
    if ((v->pf->needs_future || v->cache->needs_future || v->sched->needs_future) && eng_build_future(v, rd))
        goto done;
    eng_init_host_tier(v);
    if (eng_open_outputs(v) || eng_open_executor(v))
        goto done;
    eng_load_step_rules(v);
    v->parts = eng_replay_parts(v);
    ms_reader_select(rd, v->parts);
    eng_preload_cache(v);
    if (eng_start_executor(v) || replay(v, rd))
        goto done;
    if (v->G > 1)
        eng_links_finish(v);
    out->makespan_s = v->now;
    if (v->pf->prefetch->state_bytes)
        out->policy_state_bytes = v->pf->prefetch->state_bytes(v->pf_st);
    out->has_policy_stats = v->pf->prefetch->stats != NULL;
    eng_policy_stats_now(v, &out->policy_stats);
    eng_summarise(&v->ttft, &out->ttft_samples, &out->ttft_mean_s, &out->ttft_p50_s, NULL, &out->ttft_p99_s);
    eng_summarise(&v->tpot, &out->tpot_samples, &out->tpot_mean_s, &out->tpot_p50_s, NULL, &out->tpot_p99_s);
    eng_summarise(&v->latency, &out->latency_samples, &out->latency_mean_s, &out->latency_p50_s, &out->latency_p90_s,
              &out->latency_p99_s);
    eng_summarise_service(v);
    rc = 0;
done:
    rc = eng_close_outputs(v, rc);
    if (v->exec == &v->own_exec)
        ms_exec_destroy(&v->own_exec);
    eng_free_state(v);
    free(v);
    ms_reader_close(rd);
    if (rc)
        ms_metrics_free(out);
    return rc;
}

void ms_metrics_free(ms_metrics *m)
{
    free(m->layer);
    m->layer = NULL;
    free(m->gpu);
    m->gpu = NULL;
}
