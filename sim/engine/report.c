#include <math.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/core/digest.h"
#include "sim/engine/report.h"
#include "sim/core/version.h"

uint64_t ms_metrics_activations(const ms_counts *c)
{
    return c->hits + c->late + c->misses;
}

double ms_metrics_hit_rate(const ms_counts *c)
{
    uint64_t n = ms_metrics_activations(c);
    return n ? (double)c->hits / (double)n : NAN;
}

double ms_metrics_ratio(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

static double ratio(double a, double b)
{
    return ms_metrics_ratio(a, b);
}

/* A metric without samples (NaN) is null, never 0. */
static void add_num(cJSON *o, const char *key, double v)
{
    if (isnan(v))
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddNumberToObject(o, key, v);
}

cJSON *ms_report_policy(int kind, const char *spec)
{
    char name[64];
    const char *kv;
    ms_err err;
    ms_params p;
    if (ms_spec_split(spec, name, sizeof name, &kv, &err))
        return NULL;
    const ms_policy_desc *d = ms_policy_find((ms_policy_kind)kind, name);
    if (!d || ms_params_parse(d->params, kv, name, &p, &err))
        return NULL;
    cJSON *o = cJSON_CreateObject(), *params = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    for (int i = 0; i < p.n; i++)
        cJSON_AddStringToObject(params, p.spec[i]->name, p.str[i]);
    cJSON_AddItemToObject(o, "params", params);
    return o;
}

cJSON *ms_report_config(const ms_run_config *cfg)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "trace", cfg->trace_path);
    if (cfg->model)
        cJSON_AddStringToObject(c, "model", cfg->model->name);
    else
        cJSON_AddNullToObject(c, "model");
    cJSON_AddStringToObject(c, "platform", cfg->platform->name);
    if (cfg->n_model_sets || cfg->n_platform_sets) {
        cJSON *o = cJSON_AddObjectToObject(c, "overrides");
        char key[96];
        for (int i = 0; i < cfg->n_model_sets; i++) {
            snprintf(key, sizeof key, "model.%s", cfg->model_sets[i].key);
            cJSON_AddStringToObject(o, key, cfg->model_sets[i].value);
        }
        for (int i = 0; i < cfg->n_platform_sets; i++) {
            snprintf(key, sizeof key, "platform.%s", cfg->platform_sets[i].key);
            cJSON_AddStringToObject(o, key, cfg->platform_sets[i].value);
        }
    }
    cJSON_AddItemToObject(c, "prefetch", ms_report_policy(MS_KIND_PREFETCH, cfg->prefetch_spec));
    cJSON_AddItemToObject(c, "cache", ms_report_policy(MS_KIND_CACHE, cfg->cache_spec));
    cJSON_AddItemToObject(c, "sched", ms_report_policy(MS_KIND_SCHED, cfg->sched_spec));
    if (cfg->cap_kind == MS_CAP_EXPERTS)
        cJSON_AddNumberToObject(c, "cache_experts", cfg->cap_value);
    else
        cJSON_AddNumberToObject(c, "cache_bytes", cfg->cap_value);
    cJSON_AddNumberToObject(c, "distance", cfg->distance);
    cJSON_AddNumberToObject(c, "batch", cfg->max_batch);
    cJSON_AddNumberToObject(c, "host_bytes", cfg->host_bytes);
    cJSON_AddBoolToObject(c, "offline", cfg->offline);
    cJSON_AddNumberToObject(c, "seed", (double)cfg->seed);
    cJSON_AddStringToObject(c, "topk_fill", cfg->topk_fill == MS_FILL_EVEN ? "even" : "zero");
    return c;
}

static cJSON *counts_json(const ms_counts *k)
{
    cJSON *o = cJSON_CreateObject();
    add_num(o, "hit_rate", ms_metrics_hit_rate(k));
    cJSON_AddNumberToObject(o, "hits", (double)k->hits);
    cJSON_AddNumberToObject(o, "late", (double)k->late);
    cJSON_AddNumberToObject(o, "misses", (double)k->misses);
    cJSON_AddNumberToObject(o, "on_cpu", (double)k->on_cpu);
    cJSON_AddNumberToObject(o, "activations", (double)ms_metrics_activations(k));
    cJSON_AddNumberToObject(o, "layer_steps", (double)k->layer_steps);
    cJSON_AddNumberToObject(o, "iterations", (double)k->iterations);
    cJSON_AddNumberToObject(o, "stall_s", k->stall_s);
    cJSON_AddNumberToObject(o, "busy_s", k->busy_s);
    return o;
}

cJSON *ms_report_metrics(const ms_metrics *m)
{
    cJSON *o = counts_json(&m->total);
    double copied = (double)m->prefetch_copied;
    uint64_t act = ms_metrics_activations(&m->total);
    cJSON_AddNumberToObject(o, "pcie_bytes", m->pcie_bytes);
    cJSON_AddNumberToObject(o, "pcie_bytes_useful", m->pcie_bytes_useful);
    cJSON_AddNumberToObject(o, "pcie_bytes_wasted", m->pcie_bytes_wasted);
    cJSON_AddNumberToObject(o, "pcie_copies", (double)m->pcie_copies);
    cJSON_AddNumberToObject(o, "demand_copies", (double)m->demand_copies);
    cJSON_AddNumberToObject(o, "ssd_bytes", m->ssd_bytes);
    cJSON_AddNumberToObject(o, "makespan_s", m->makespan_s);
    cJSON_AddNumberToObject(o, "policy_state_bytes", m->policy_state_bytes);
    if (m->has_policy_stats) {
        const ms_policy_stats *ps = &m->policy_stats;
        cJSON *sim = cJSON_AddObjectToObject(o, "similarity");
        cJSON_AddNumberToObject(sim, "semantic_searches", (double)ps->sem_n);
        add_num(sim, "semantic_mean", ratio(ps->sem_sum, (double)ps->sem_n));
        cJSON_AddNumberToObject(sim, "trajectory_searches", (double)ps->traj_n);
        add_num(sim, "trajectory_mean", ratio(ps->traj_sum, (double)ps->traj_n));
    }
    cJSON_AddNumberToObject(o, "requests", (double)m->requests);
    add_num(o, "ttft_ms_mean", m->ttft_mean_s * 1e3);
    add_num(o, "ttft_ms_p50", m->ttft_p50_s * 1e3);
    add_num(o, "ttft_ms_p99", m->ttft_p99_s * 1e3);
    cJSON_AddNumberToObject(o, "ttft_samples", (double)m->ttft_samples);
    add_num(o, "tpot_ms_mean", m->tpot_mean_s * 1e3);
    add_num(o, "tpot_ms_p50", m->tpot_p50_s * 1e3);
    add_num(o, "tpot_ms_p99", m->tpot_p99_s * 1e3);
    cJSON_AddNumberToObject(o, "tpot_samples", (double)m->tpot_samples);
    add_num(o, "latency_ms_mean", m->latency_mean_s * 1e3);
    add_num(o, "latency_ms_p50", m->latency_p50_s * 1e3);
    add_num(o, "latency_ms_p90", m->latency_p90_s * 1e3);
    add_num(o, "latency_ms_p99", m->latency_p99_s * 1e3);
    cJSON_AddNumberToObject(o, "latency_samples", (double)m->latency_samples);
    cJSON_AddNumberToObject(o, "gpu_cache_capacity_bytes", m->gpu_cache_capacity_bytes);
    cJSON_AddNumberToObject(o, "gpu_cache_peak_bytes", m->gpu_cache_peak_bytes);
    cJSON_AddNumberToObject(o, "host_bytes", m->host_bytes);
    cJSON_AddNumberToObject(o, "policy_sync_s", m->policy_sync_s);
    cJSON_AddNumberToObject(o, "policy_async_s", m->policy_async_s);
    cJSON *pf = cJSON_AddObjectToObject(o, "prefetch");
    cJSON_AddNumberToObject(pf, "issued", (double)m->prefetch_issued);
    cJSON_AddNumberToObject(pf, "copied", copied);
    cJSON_AddNumberToObject(pf, "useful", (double)m->prefetch_useful);
    cJSON_AddNumberToObject(pf, "late", (double)m->prefetch_late);
    cJSON_AddNumberToObject(pf, "wasted", (double)m->prefetch_wasted);
    cJSON_AddNumberToObject(pf, "cancelled", (double)m->prefetch_cancelled);
    cJSON_AddNumberToObject(pf, "dropped", (double)m->prefetch_dropped);
    cJSON_AddNumberToObject(pf, "evicted_unused", (double)m->prefetch_evicted_unused);
    cJSON_AddNumberToObject(pf, "target_passed", (double)m->prefetch_target_passed);
    add_num(pf, "precision", ratio((double)m->prefetch_useful, copied));
    add_num(pf, "recall", ratio((double)m->prefetch_useful, (double)act));
    cJSON *ph = cJSON_AddObjectToObject(o, "phases");
    cJSON_AddItemToObject(ph, "prefill", counts_json(&m->phase[MS_PHASE_PREFILL]));
    cJSON_AddItemToObject(ph, "decode", counts_json(&m->phase[MS_PHASE_DECODE]));
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (uint32_t l = 0; l < m->L; l++)
        cJSON_AddItemToArray(layers, counts_json(&m->layer[l]));
    if (m->recorded_rows) {
        cJSON *r = cJSON_AddObjectToObject(o, "recorded_residency");
        cJSON_AddNumberToObject(r, "decode_cells", (double)m->recorded_rows);
        cJSON_AddNumberToObject(r, "agree", (double)m->recorded_agree);
        add_num(r, "agreement", ratio((double)m->recorded_agree, (double)m->recorded_rows));
        cJSON_AddNumberToObject(r, "prefill_cells", (double)m->recorded_prefill_rows);
        cJSON_AddNumberToObject(r, "prefill_agree", (double)m->recorded_prefill_agree);
        add_num(r, "prefill_agreement", ratio((double)m->recorded_prefill_agree, (double)m->recorded_prefill_rows));
    }
    cJSON_AddBoolToObject(o, "next_use_exact", m->future_exact);
    return o;
}

void ms_report_split(cJSON *config, const ms_metrics *m)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "frac", m->train_frac);
    cJSON_AddStringToObject(t, "by", m->train_frac == 0 ? "none" : m->train_by_iteration ? "iteration" : "request");
    cJSON_AddNumberToObject(t, "requests", (double)m->train_requests);
    cJSON_AddNumberToObject(t, "iterations", m->train_iters);
    cJSON_AddItemToObject(config, "train", t);
}

/* {"path": ..., "sha256": ...}; the digest is null when the file cannot be read. */
static cJSON *input_json(const char *path, const char *sha256)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    if (sha256 && *sha256)
        cJSON_AddStringToObject(o, "sha256", sha256);
    else
        cJSON_AddNullToObject(o, "sha256");
    return o;
}

static const char *trace_sha256(const char *path, char hex[MS_DIGEST_HEX])
{
    ms_err err;
    return ms_digest_file_cached(path, hex, &err) ? "" : hex;
}

cJSON *ms_report_provenance_base(void)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "moesim", ms_version());
    cJSON_AddStringToObject(o, "commit", ms_commit());
    return o;
}

void ms_report_provenance_add(cJSON *prov, const char *role, const char *path, const char *sha256)
{
    char hex[MS_DIGEST_HEX];
    if (!path || !*path)
        return;
    if (!sha256)
        sha256 = trace_sha256(path, hex);
    cJSON_AddItemToObject(prov, role, input_json(path, sha256));
}

cJSON *ms_report_provenance(const ms_run_config *cfg)
{
    cJSON *o = ms_report_provenance_base();
    ms_report_provenance_add(o, "trace", cfg->trace_path, NULL);
    if (cfg->model)
        ms_report_provenance_add(o, "model", cfg->model->file, cfg->model->sha256);
    if (cfg->platform)
        ms_report_provenance_add(o, "platform", cfg->platform->file, cfg->platform->sha256);
    return o;
}

void ms_report_provenance_line(FILE *f, const ms_run_config *cfg)
{
    char hex[MS_DIGEST_HEX];
    fprintf(f, "# moesim %s commit %s; trace %s sha256 %s", ms_version(), ms_commit(), cfg->trace_path,
            trace_sha256(cfg->trace_path, hex));
    if (cfg->model && *cfg->model->file)
        fprintf(f, "; model %s sha256 %s", cfg->model->file, cfg->model->sha256);
    if (cfg->platform && *cfg->platform->file)
        fprintf(f, "; platform %s sha256 %s", cfg->platform->file, cfg->platform->sha256);
    fputc('\n', f);
}

cJSON *ms_report_json(const ms_run_config *cfg, const ms_metrics *m)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "provenance", ms_report_provenance(cfg));
    cJSON *c = ms_report_config(cfg);
    ms_report_split(c, m);
    cJSON_AddItemToObject(root, "config", c);
    cJSON_AddItemToObject(root, "metrics", ms_report_metrics(m));
    return root;
}

/* A value for a table: printf's fmt of v, or "n/a" when v is undefined. */
const char *ms_report_fmt(char *buf, size_t n, const char *fmt, double v)
{
    if (isnan(v))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, fmt, v);
    return buf;
}

static void table_counts(FILE *out, const char *name, const ms_counts *c)
{
    char hr[32];
    fprintf(out, "  %-8s %10llu %10llu %10llu %10llu %9s %12.3f\n", name,
            (unsigned long long)ms_metrics_activations(c), (unsigned long long)c->hits,
            (unsigned long long)c->late, (unsigned long long)c->misses,
            ms_report_fmt(hr, sizeof hr, "%8.2f%%", 100.0 * ms_metrics_hit_rate(c)), c->stall_s);
}

void ms_report_table(FILE *out, const ms_run_config *cfg, const ms_metrics *m)
{
    fprintf(out, "trace %s  platform %s  prefetch %s  cache %s  sched %s  distance %u  batch %u\n", cfg->trace_path,
            cfg->platform->name, cfg->prefetch_spec, cfg->cache_spec, cfg->sched_spec, cfg->distance, cfg->max_batch);
    fprintf(out, "  %-8s %10s %10s %10s %10s %9s %12s\n", "phase", "experts", "hits", "late", "misses", "hit rate",
            "stall (s)");
    table_counts(out, "prefill", &m->phase[MS_PHASE_PREFILL]);
    table_counts(out, "decode", &m->phase[MS_PHASE_DECODE]);
    table_counts(out, "total", &m->total);
    char a[32], b[32], c[32], d[32];
    fprintf(out, "  PCIe %.3f GB (useful prefetch %.3f GB, wasted %.3f GB)  prefetch precision %s\n",
            m->pcie_bytes / 1e9, m->pcie_bytes_useful / 1e9, m->pcie_bytes_wasted / 1e9,
            ms_report_fmt(a, sizeof a, "%.3f", ratio((double)m->prefetch_useful, (double)m->prefetch_copied)));
    fprintf(out, "  requests %llu  TTFT mean %s  TPOT mean %s (p99 %s)  makespan %.3f s\n",
            (unsigned long long)m->requests, ms_report_fmt(b, sizeof b, "%.2f ms", m->ttft_mean_s * 1e3),
            ms_report_fmt(c, sizeof c, "%.2f ms", m->tpot_mean_s * 1e3),
            ms_report_fmt(d, sizeof d, "%.2f", m->tpot_p99_s * 1e3), m->makespan_s);
    if (m->prefetch_copied)
        fprintf(out, "  prefetch: %llu copied, %llu useful, %llu wasted; %llu evicted before their layer ran, %llu passed "
                     "by it unused\n",
                (unsigned long long)m->prefetch_copied, (unsigned long long)m->prefetch_useful,
                (unsigned long long)m->prefetch_wasted, (unsigned long long)m->prefetch_evicted_unused,
                (unsigned long long)m->prefetch_target_passed);
    if (m->recorded_rows)
        fprintf(out, "  recorded residency: %llu of %llu decode cells agree (%.3f %%)\n",
                (unsigned long long)m->recorded_agree, (unsigned long long)m->recorded_rows,
                100.0 * ratio((double)m->recorded_agree, (double)m->recorded_rows));
    if (m->recorded_prefill_rows)
        fprintf(out, "  recorded residency: %llu of %llu prefill cells agree (%.3f %%)\n",
                (unsigned long long)m->recorded_prefill_agree, (unsigned long long)m->recorded_prefill_rows,
                100.0 * ratio((double)m->recorded_prefill_agree, (double)m->recorded_prefill_rows));
}
