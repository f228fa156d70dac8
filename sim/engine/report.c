#include <math.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/core/digest.h"
#include "sim/engine/metric_list.h"
#include "sim/engine/report.h"
#include "sim/core/version.h"
#include "traces/format/trace.h"

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


cJSON *ms_report_policy(int kind, const char *spec)
{
    char name[64];
    const char *kv;
    ms_err err;
    ms_params p;
    const ms_policy_desc *d = ms_policy_lookup((ms_policy_kind)kind, spec, name, sizeof name, &kv, &err);
    if (!d || ms_params_parse(d->params, kv, name, &p, &err))
        return NULL;
    cJSON *o = cJSON_CreateObject(), *params = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    for (int i = 0; i < p.n; i++)
        cJSON_AddStringToObject(params, p.spec[i]->name, p.str[i]);
    cJSON_AddItemToObject(o, "params", params);
    if (!strncmp(spec, "plugin:path=", 12)) { /* an out-of-tree policy: its file and the digest of its bytes */
        char path[4096], hex[MS_DIGEST_HEX];
        snprintf(path, sizeof path, "%.*s", (int)strcspn(spec + 12, ","), spec + 12);
        cJSON *f = cJSON_AddObjectToObject(o, "plugin");
        cJSON_AddStringToObject(f, "path", path);
        if (ms_digest_file_cached(path, hex, &err))
            cJSON_AddNullToObject(f, "sha256");
        else
            cJSON_AddStringToObject(f, "sha256", hex);
    }
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
    uint32_t gpus = cfg->gpus ? cfg->gpus : cfg->platform->gpus ? cfg->platform->gpus : 1;
    if (gpus > 1) { /* one GPU: the config as before */
        cJSON_AddNumberToObject(c, "gpus", gpus);
        cJSON_AddStringToObject(c, "placement", cfg->placement ? cfg->placement : "round-robin");
        cJSON_AddBoolToObject(c, "cache_per_gpu", cfg->cache_per_gpu);
    }
    if (cfg->framework || cfg->platform->framework[0]) /* none anywhere: the config as before */
        cJSON_AddStringToObject(c, "framework", cfg->framework ? cfg->framework->name : cfg->platform->framework);
    return c;
}

const char *const ms_hit_def_names[MS_HIT_DEFS] = {
    "hit_rate_resident", "hit_rate_in_time", "hit_rate_cached", "hit_rate_issued", "prefetch_recall_moeinf",
};

double ms_metrics_hit_def(const ms_metrics *m, ms_hit_def d, int phase)
{
    const ms_counts *c = phase < 0 ? &m->total : &m->phase[phase];
    double act = (double)ms_metrics_activations(c);
    uint64_t in_time = phase < 0 ? m->late_in_time : m->late_in_time_phase[phase];
    uint64_t queued = phase < 0 ? m->queued_at_gate : m->queued_at_gate_phase[phase];
    uint64_t covered = phase < 0 ? m->prefetch_covered : m->prefetch_covered_phase[phase];
    switch (d) {
    case MS_HIT_RESIDENT: return ratio((double)c->hits, act);
    case MS_HIT_IN_TIME: return ratio((double)(c->hits + in_time), act);
    case MS_HIT_CACHED: return ratio((double)(c->hits + c->late), act);
    case MS_HIT_ISSUED: return ratio((double)(c->hits + c->late + queued), act);
    case MS_HIT_RECALL_MOEINF: return ratio((double)covered, act);
    default: return NAN;
    }
}

cJSON *ms_report_metrics(const ms_metrics *m)
{
    return ms_metric_json(m);
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

/* {"path": ..., key: hex}; the digest is null when the file cannot be read. */
static cJSON *input_json(const char *path, const char *key, const char *hex)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    if (hex && *hex)
        cJSON_AddStringToObject(o, key, hex);
    else
        cJSON_AddNullToObject(o, key);
    return o;
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
    ms_err err;
    if (!path || !*path)
        return;
    if (!sha256)
        sha256 = ms_digest_file_cached(path, hex, &err) ? "" : hex;
    cJSON_AddItemToObject(prov, role, input_json(path, "sha256", sha256));
}

int ms_report_trace_digest(const char *path, const ms_trace_digest *taken, ms_trace_digest *d)
{
    ms_err err;
    if (!taken || !taken->hex[0])
        return ms_trace_digest_of(path, d, &err);
    *d = *taken;
    return 0;
}

static void add_trace(cJSON *prov, const char *role, const char *path, const ms_trace_digest *taken)
{
    ms_trace_digest d;
    if (!path || !*path)
        return;
    ms_report_trace_digest(path, taken, &d);
    cJSON *o = input_json(path, ms_trace_digest_name(&d), d.hex);
    /* a v2 digest is the one stored in the file, which only `trace validate` checks against its content */
    cJSON_AddBoolToObject(o, "verified", !d.content && d.hex[0]);
    cJSON_AddItemToObject(prov, role, o);
}

void ms_report_provenance_add_trace(cJSON *prov, const char *role, const char *path)
{
    add_trace(prov, role, path, NULL);
}

cJSON *ms_report_provenance(const ms_run_config *cfg, const ms_trace_digest *trace)
{
    cJSON *o = ms_report_provenance_base();
    add_trace(o, "trace", cfg->trace_path, trace);
    if (cfg->model)
        ms_report_provenance_add(o, "model", cfg->model->file, cfg->model->sha256);
    if (cfg->platform)
        ms_report_provenance_add(o, "platform", cfg->platform->file, cfg->platform->sha256);
    return o;
}

/* The start of the line, up to the trace's digest: the one a run took at
 * its open (taken), else the file's now; "unknown" when it cannot be read. */
static void write_line_head(FILE *f, const char *trace_path, const ms_trace_digest *taken)
{
    ms_trace_digest d;
    int known = ms_report_trace_digest(trace_path, taken, &d) == 0;
    fprintf(f, "# moesim %s commit %s; trace %s %s %s%s", ms_version(), ms_commit(), trace_path,
            ms_trace_digest_name(&d), known ? d.hex : "unknown", known && d.content ? " (stored, unverified)" : "");
}

void ms_report_provenance_line_head(FILE *f, const char *trace_path)
{
    write_line_head(f, trace_path, NULL);
}

void ms_report_provenance_line(FILE *f, const ms_run_config *cfg, const ms_trace_digest *trace)
{
    write_line_head(f, cfg->trace_path, trace);
    if (cfg->model && *cfg->model->file)
        fprintf(f, "; model %s sha256 %s", cfg->model->file, cfg->model->sha256);
    if (cfg->platform && *cfg->platform->file)
        fprintf(f, "; platform %s sha256 %s", cfg->platform->file, cfg->platform->sha256);
    fputc('\n', f);
}

cJSON *ms_report_json(const ms_run_config *cfg, const ms_metrics *m)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "provenance", ms_report_provenance(cfg, &m->trace));
    cJSON *c = ms_report_config(cfg);
    ms_report_split(c, m);
    cJSON_AddItemToObject(root, "config", c);
    cJSON_AddItemToObject(root, "metrics", ms_report_metrics(m));
    cJSON *w = cJSON_AddArrayToObject(root, "warnings");
    for (uint32_t i = 0; i < m->n_warnings; i++)
        cJSON_AddItemToArray(w, cJSON_CreateString(m->warnings[i]));
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
    char e[32], g[32];
    fprintf(out, "  requests %llu  TTFT mean %s (service %s, queueing %s)  TPOT mean %s (p99 %s)  makespan %.3f s\n",
            (unsigned long long)m->requests, ms_report_fmt(b, sizeof b, "%.2f ms", m->ttft_mean_s * 1e3),
            ms_report_fmt(e, sizeof e, "%.2f ms", m->ttft_service_mean_s * 1e3),
            ms_report_fmt(g, sizeof g, "%.2f ms", m->queue_mean_s * 1e3),
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
