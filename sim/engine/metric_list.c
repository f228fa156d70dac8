/* The one list of a run's metrics: see metric_list.h. */
#include <math.h>
#include <string.h>

#include "sim/engine/metric_list.h"
#include "sim/engine/report.h"

#define GET(fn, expr) \
    static double fn(const ms_metrics *m) { return (double)(expr); }

GET(get_hit_rate, ms_metrics_hit_rate(&m->total))
GET(get_hits, m->total.hits)
GET(get_late, m->total.late)
GET(get_misses, m->total.misses)
GET(get_on_cpu, m->total.on_cpu)
GET(get_activations, ms_metrics_activations(&m->total))
GET(get_layer_steps, m->total.layer_steps)
GET(get_iterations, m->total.iterations)
GET(get_stall_s, m->total.stall_s)
GET(get_busy_s, m->total.busy_s)
GET(get_prefill_hit_rate, ms_metrics_hit_rate(&m->phase[MS_PHASE_PREFILL]))
GET(get_prefill_hits, m->phase[MS_PHASE_PREFILL].hits)
GET(get_prefill_late, m->phase[MS_PHASE_PREFILL].late)
GET(get_prefill_misses, m->phase[MS_PHASE_PREFILL].misses)
GET(get_prefill_on_cpu, m->phase[MS_PHASE_PREFILL].on_cpu)
GET(get_prefill_activations, ms_metrics_activations(&m->phase[MS_PHASE_PREFILL]))
GET(get_prefill_layer_steps, m->phase[MS_PHASE_PREFILL].layer_steps)
GET(get_prefill_iterations, m->phase[MS_PHASE_PREFILL].iterations)
GET(get_prefill_stall_s, m->phase[MS_PHASE_PREFILL].stall_s)
GET(get_prefill_busy_s, m->phase[MS_PHASE_PREFILL].busy_s)
GET(get_decode_hit_rate, ms_metrics_hit_rate(&m->phase[MS_PHASE_DECODE]))
GET(get_decode_hits, m->phase[MS_PHASE_DECODE].hits)
GET(get_decode_late, m->phase[MS_PHASE_DECODE].late)
GET(get_decode_misses, m->phase[MS_PHASE_DECODE].misses)
GET(get_decode_on_cpu, m->phase[MS_PHASE_DECODE].on_cpu)
GET(get_decode_activations, ms_metrics_activations(&m->phase[MS_PHASE_DECODE]))
GET(get_decode_layer_steps, m->phase[MS_PHASE_DECODE].layer_steps)
GET(get_decode_iterations, m->phase[MS_PHASE_DECODE].iterations)
GET(get_decode_stall_s, m->phase[MS_PHASE_DECODE].stall_s)
GET(get_decode_busy_s, m->phase[MS_PHASE_DECODE].busy_s)
GET(get_pcie_bytes, m->pcie_bytes)
GET(get_pcie_bytes_useful, m->pcie_bytes_useful)
GET(get_pcie_bytes_wasted, m->pcie_bytes_wasted)
GET(get_pcie_copies, m->pcie_copies)
GET(get_demand_copies, m->demand_copies)
GET(get_ssd_bytes, m->ssd_bytes)
GET(get_makespan_s, m->makespan_s)
GET(get_similarity_semantic_searches, m->policy_stats.sem_n)
GET(get_similarity_semantic_mean, ms_metrics_ratio(m->policy_stats.sem_sum, (double)m->policy_stats.sem_n))
GET(get_similarity_trajectory_searches, m->policy_stats.traj_n)
GET(get_similarity_trajectory_mean, ms_metrics_ratio(m->policy_stats.traj_sum, (double)m->policy_stats.traj_n))
GET(get_requests, m->requests)
GET(get_ttft_ms_mean, m->ttft_mean_s * 1e3)
GET(get_ttft_ms_p50, m->ttft_p50_s * 1e3)
GET(get_ttft_ms_p99, m->ttft_p99_s * 1e3)
GET(get_ttft_samples, m->ttft_samples)
GET(get_tpot_ms_mean, m->tpot_mean_s * 1e3)
GET(get_tpot_ms_p50, m->tpot_p50_s * 1e3)
GET(get_tpot_ms_p99, m->tpot_p99_s * 1e3)
GET(get_tpot_samples, m->tpot_samples)
GET(get_latency_ms_mean, m->latency_mean_s * 1e3)
GET(get_latency_ms_p50, m->latency_p50_s * 1e3)
GET(get_latency_ms_p90, m->latency_p90_s * 1e3)
GET(get_latency_ms_p99, m->latency_p99_s * 1e3)
GET(get_latency_samples, m->latency_samples)
GET(get_queue_ms_mean, m->queue_mean_s * 1e3)
GET(get_queue_ms_p50, m->queue_p50_s * 1e3)
GET(get_queue_ms_p99, m->queue_p99_s * 1e3)
GET(get_ttft_service_ms_mean, m->ttft_service_mean_s * 1e3)
GET(get_ttft_service_ms_p50, m->ttft_service_p50_s * 1e3)
GET(get_ttft_service_ms_p99, m->ttft_service_p99_s * 1e3)
GET(get_latency_service_ms_mean, m->latency_service_mean_s * 1e3)
GET(get_latency_service_ms_p50, m->latency_service_p50_s * 1e3)
GET(get_latency_service_ms_p99, m->latency_service_p99_s * 1e3)
GET(get_arrival_rate, m->arrival_rate)
GET(get_service_rate, m->service_rate)
GET(get_offered_load, m->offered_load)
GET(get_gpu_cache_capacity_bytes, m->gpu_cache_capacity_bytes)
GET(get_gpu_cache_peak_bytes, m->gpu_cache_peak_bytes)
GET(get_host_mem_bytes, m->host_bytes)
GET(get_policy_sync_s, m->policy_sync_s)
GET(get_policy_async_s, m->policy_async_s)
GET(get_policy_state_bytes, m->policy_state_bytes)
GET(get_prefetch_issued, m->prefetch_issued)
GET(get_prefetch_copied, m->prefetch_copied)
GET(get_prefetch_useful, m->prefetch_useful)
GET(get_prefetch_late, m->prefetch_late)
GET(get_prefetch_wasted, m->prefetch_wasted)
GET(get_prefetch_cancelled, m->prefetch_cancelled)
GET(get_prefetch_dropped, m->prefetch_dropped)
GET(get_prefetch_evicted_unused, m->prefetch_evicted_unused)
GET(get_prefetch_target_passed, m->prefetch_target_passed)
GET(get_prefetch_precision, ms_metrics_ratio((double)m->prefetch_useful, (double)m->prefetch_copied))
GET(get_prefetch_recall, ms_metrics_ratio((double)m->prefetch_useful, (double)ms_metrics_activations(&m->total)))
/* the papers' hit definitions (docs/metrics.md) */
GET(get_hit_rate_resident, ms_metrics_hit_def(m, MS_HIT_RESIDENT, -1))
GET(get_hit_rate_in_time, ms_metrics_hit_def(m, MS_HIT_IN_TIME, -1))
GET(get_hit_rate_cached, ms_metrics_hit_def(m, MS_HIT_CACHED, -1))
GET(get_hit_rate_issued, ms_metrics_hit_def(m, MS_HIT_ISSUED, -1))
GET(get_prefetch_recall_moeinf, ms_metrics_hit_def(m, MS_HIT_RECALL_MOEINF, -1))
GET(get_prefill_hit_rate_resident, ms_metrics_hit_def(m, MS_HIT_RESIDENT, MS_PHASE_PREFILL))
GET(get_prefill_hit_rate_in_time, ms_metrics_hit_def(m, MS_HIT_IN_TIME, MS_PHASE_PREFILL))
GET(get_prefill_hit_rate_cached, ms_metrics_hit_def(m, MS_HIT_CACHED, MS_PHASE_PREFILL))
GET(get_prefill_hit_rate_issued, ms_metrics_hit_def(m, MS_HIT_ISSUED, MS_PHASE_PREFILL))
GET(get_prefill_prefetch_recall_moeinf, ms_metrics_hit_def(m, MS_HIT_RECALL_MOEINF, MS_PHASE_PREFILL))
GET(get_decode_hit_rate_resident, ms_metrics_hit_def(m, MS_HIT_RESIDENT, MS_PHASE_DECODE))
GET(get_decode_hit_rate_in_time, ms_metrics_hit_def(m, MS_HIT_IN_TIME, MS_PHASE_DECODE))
GET(get_decode_hit_rate_cached, ms_metrics_hit_def(m, MS_HIT_CACHED, MS_PHASE_DECODE))
GET(get_decode_hit_rate_issued, ms_metrics_hit_def(m, MS_HIT_ISSUED, MS_PHASE_DECODE))
GET(get_decode_prefetch_recall_moeinf, ms_metrics_hit_def(m, MS_HIT_RECALL_MOEINF, MS_PHASE_DECODE))
GET(get_recorded_decode_cells, m->recorded_rows)
GET(get_recorded_agree, m->recorded_agree)
GET(get_recorded_agreement, ms_metrics_ratio((double)m->recorded_agree, (double)m->recorded_rows))
GET(get_recorded_prefill_cells, m->recorded_prefill_rows)
GET(get_recorded_prefill_agree, m->recorded_prefill_agree)
GET(get_recorded_prefill_agreement,
    ms_metrics_ratio((double)m->recorded_prefill_agree, (double)m->recorded_prefill_rows))
GET(get_train_frac, m->train_frac)
GET(get_train_requests, m->train_requests)
GET(get_train_iterations, m->train_iters)
GET(get_train_by_iteration, m->train_by_iteration)
GET(get_next_use_exact, m->has_future ? (double)m->future_exact : NAN)

static int has_policy_stats(const ms_metrics *m) { return m->has_policy_stats; }
static int recorded_rows(const ms_metrics *m) { return m->recorded_rows > 0; }
static int has_future(const ms_metrics *m) { return m->has_future; }

/* In the order of the sweep CSV's columns; a JSON group object sits where
 * its first member is. */
const ms_metric_def ms_metric_list[] = {
    {"hit_rate", "hit_rate", MS_MT_REAL, 1, get_hit_rate, NULL},
    {"hits", "hits", MS_MT_COUNT, 1, get_hits, NULL},
    {"late", "late", MS_MT_COUNT, 1, get_late, NULL},
    {"misses", "misses", MS_MT_COUNT, 1, get_misses, NULL},
    {"on_cpu", "on_cpu", MS_MT_COUNT, 1, get_on_cpu, NULL},
    {"activations", "activations", MS_MT_COUNT, 1, get_activations, NULL},
    {"layer_steps", "layer_steps", MS_MT_COUNT, 1, get_layer_steps, NULL},
    {"iterations", "iterations", MS_MT_COUNT, 1, get_iterations, NULL},
    {"stall_s", "stall_s", MS_MT_REAL, 1, get_stall_s, NULL},
    {"busy_s", "busy_s", MS_MT_REAL, 1, get_busy_s, NULL},
    {"prefill_hit_rate", "phases.prefill.hit_rate", MS_MT_REAL, 1, get_prefill_hit_rate, NULL},
    {"prefill_hits", "phases.prefill.hits", MS_MT_COUNT, 1, get_prefill_hits, NULL},
    {"prefill_late", "phases.prefill.late", MS_MT_COUNT, 1, get_prefill_late, NULL},
    {"prefill_misses", "phases.prefill.misses", MS_MT_COUNT, 1, get_prefill_misses, NULL},
    {"prefill_on_cpu", "phases.prefill.on_cpu", MS_MT_COUNT, 1, get_prefill_on_cpu, NULL},
    {"prefill_activations", "phases.prefill.activations", MS_MT_COUNT, 0, get_prefill_activations, NULL},
    {"prefill_layer_steps", "phases.prefill.layer_steps", MS_MT_COUNT, 0, get_prefill_layer_steps, NULL},
    {"prefill_iterations", "phases.prefill.iterations", MS_MT_COUNT, 0, get_prefill_iterations, NULL},
    {"prefill_stall_s", "phases.prefill.stall_s", MS_MT_REAL, 1, get_prefill_stall_s, NULL},
    {"prefill_busy_s", "phases.prefill.busy_s", MS_MT_REAL, 0, get_prefill_busy_s, NULL},
    {"decode_hit_rate", "phases.decode.hit_rate", MS_MT_REAL, 1, get_decode_hit_rate, NULL},
    {"decode_hits", "phases.decode.hits", MS_MT_COUNT, 1, get_decode_hits, NULL},
    {"decode_late", "phases.decode.late", MS_MT_COUNT, 1, get_decode_late, NULL},
    {"decode_misses", "phases.decode.misses", MS_MT_COUNT, 1, get_decode_misses, NULL},
    {"decode_on_cpu", "phases.decode.on_cpu", MS_MT_COUNT, 1, get_decode_on_cpu, NULL},
    {"decode_activations", "phases.decode.activations", MS_MT_COUNT, 0, get_decode_activations, NULL},
    {"decode_layer_steps", "phases.decode.layer_steps", MS_MT_COUNT, 0, get_decode_layer_steps, NULL},
    {"decode_iterations", "phases.decode.iterations", MS_MT_COUNT, 0, get_decode_iterations, NULL},
    {"decode_stall_s", "phases.decode.stall_s", MS_MT_REAL, 1, get_decode_stall_s, NULL},
    {"decode_busy_s", "phases.decode.busy_s", MS_MT_REAL, 0, get_decode_busy_s, NULL},
    {"pcie_bytes", "pcie_bytes", MS_MT_REAL, 1, get_pcie_bytes, NULL},
    {"pcie_bytes_useful", "pcie_bytes_useful", MS_MT_REAL, 1, get_pcie_bytes_useful, NULL},
    {"pcie_bytes_wasted", "pcie_bytes_wasted", MS_MT_REAL, 1, get_pcie_bytes_wasted, NULL},
    {"pcie_copies", "pcie_copies", MS_MT_COUNT, 1, get_pcie_copies, NULL},
    {"demand_copies", "demand_copies", MS_MT_COUNT, 1, get_demand_copies, NULL},
    {"ssd_bytes", "ssd_bytes", MS_MT_REAL, 1, get_ssd_bytes, NULL},
    {"makespan_s", "makespan_s", MS_MT_REAL, 1, get_makespan_s, NULL},
    {"similarity_semantic_searches", "similarity.semantic_searches", MS_MT_COUNT, 0, get_similarity_semantic_searches, has_policy_stats},
    {"similarity_semantic_mean", "similarity.semantic_mean", MS_MT_REAL, 0, get_similarity_semantic_mean, has_policy_stats},
    {"similarity_trajectory_searches", "similarity.trajectory_searches", MS_MT_COUNT, 0, get_similarity_trajectory_searches, has_policy_stats},
    {"similarity_trajectory_mean", "similarity.trajectory_mean", MS_MT_REAL, 0, get_similarity_trajectory_mean, has_policy_stats},
    {"requests", "requests", MS_MT_COUNT, 1, get_requests, NULL},
    {"ttft_ms_mean", "ttft_ms_mean", MS_MT_REAL, 1, get_ttft_ms_mean, NULL},
    {"ttft_ms_p50", "ttft_ms_p50", MS_MT_REAL, 1, get_ttft_ms_p50, NULL},
    {"ttft_ms_p99", "ttft_ms_p99", MS_MT_REAL, 1, get_ttft_ms_p99, NULL},
    {"ttft_samples", "ttft_samples", MS_MT_COUNT, 0, get_ttft_samples, NULL},
    {"tpot_ms_mean", "tpot_ms_mean", MS_MT_REAL, 1, get_tpot_ms_mean, NULL},
    {"tpot_ms_p50", "tpot_ms_p50", MS_MT_REAL, 1, get_tpot_ms_p50, NULL},
    {"tpot_ms_p99", "tpot_ms_p99", MS_MT_REAL, 1, get_tpot_ms_p99, NULL},
    {"tpot_samples", "tpot_samples", MS_MT_COUNT, 0, get_tpot_samples, NULL},
    {"latency_ms_mean", "latency_ms_mean", MS_MT_REAL, 1, get_latency_ms_mean, NULL},
    {"latency_ms_p50", "latency_ms_p50", MS_MT_REAL, 1, get_latency_ms_p50, NULL},
    {"latency_ms_p90", "latency_ms_p90", MS_MT_REAL, 1, get_latency_ms_p90, NULL},
    {"latency_ms_p99", "latency_ms_p99", MS_MT_REAL, 1, get_latency_ms_p99, NULL},
    {"latency_samples", "latency_samples", MS_MT_COUNT, 0, get_latency_samples, NULL},
    {"queue_ms_mean", "queue_ms_mean", MS_MT_REAL, 1, get_queue_ms_mean, NULL},
    {"queue_ms_p50", "queue_ms_p50", MS_MT_REAL, 1, get_queue_ms_p50, NULL},
    {"queue_ms_p99", "queue_ms_p99", MS_MT_REAL, 1, get_queue_ms_p99, NULL},
    {"ttft_service_ms_mean", "ttft_service_ms_mean", MS_MT_REAL, 1, get_ttft_service_ms_mean, NULL},
    {"ttft_service_ms_p50", "ttft_service_ms_p50", MS_MT_REAL, 1, get_ttft_service_ms_p50, NULL},
    {"ttft_service_ms_p99", "ttft_service_ms_p99", MS_MT_REAL, 1, get_ttft_service_ms_p99, NULL},
    {"latency_service_ms_mean", "latency_service_ms_mean", MS_MT_REAL, 1, get_latency_service_ms_mean, NULL},
    {"latency_service_ms_p50", "latency_service_ms_p50", MS_MT_REAL, 1, get_latency_service_ms_p50, NULL},
    {"latency_service_ms_p99", "latency_service_ms_p99", MS_MT_REAL, 1, get_latency_service_ms_p99, NULL},
    {"arrival_rate", "load.arrival_rate", MS_MT_REAL, 1, get_arrival_rate, NULL},
    {"service_rate", "load.service_rate", MS_MT_REAL, 1, get_service_rate, NULL},
    {"offered_load", "load.offered_load", MS_MT_REAL, 1, get_offered_load, NULL},
    {"gpu_cache_capacity_bytes", "gpu_cache_capacity_bytes", MS_MT_REAL, 1, get_gpu_cache_capacity_bytes, NULL},
    {"gpu_cache_peak_bytes", "gpu_cache_peak_bytes", MS_MT_REAL, 1, get_gpu_cache_peak_bytes, NULL},
    {"host_mem_bytes", "host_bytes", MS_MT_REAL, 1, get_host_mem_bytes, NULL},
    {"policy_sync_s", "policy_sync_s", MS_MT_REAL, 1, get_policy_sync_s, NULL},
    {"policy_async_s", "policy_async_s", MS_MT_REAL, 1, get_policy_async_s, NULL},
    {"policy_state_bytes", "policy_state_bytes", MS_MT_REAL, 1, get_policy_state_bytes, NULL},
    {"prefetch_issued", "prefetch.issued", MS_MT_COUNT, 1, get_prefetch_issued, NULL},
    {"prefetch_copied", "prefetch.copied", MS_MT_COUNT, 1, get_prefetch_copied, NULL},
    {"prefetch_useful", "prefetch.useful", MS_MT_COUNT, 1, get_prefetch_useful, NULL},
    {"prefetch_late", "prefetch.late", MS_MT_COUNT, 1, get_prefetch_late, NULL},
    {"prefetch_wasted", "prefetch.wasted", MS_MT_COUNT, 1, get_prefetch_wasted, NULL},
    {"prefetch_cancelled", "prefetch.cancelled", MS_MT_COUNT, 1, get_prefetch_cancelled, NULL},
    {"prefetch_dropped", "prefetch.dropped", MS_MT_COUNT, 1, get_prefetch_dropped, NULL},
    {"prefetch_evicted_unused", "prefetch.evicted_unused", MS_MT_COUNT, 1, get_prefetch_evicted_unused, NULL},
    {"prefetch_target_passed", "prefetch.target_passed", MS_MT_COUNT, 1, get_prefetch_target_passed, NULL},
    {"prefetch_precision", "prefetch.precision", MS_MT_REAL, 1, get_prefetch_precision, NULL},
    {"prefetch_recall", "prefetch.recall", MS_MT_REAL, 1, get_prefetch_recall, NULL},
    {"hit_rate_resident", "hit_rate_resident", MS_MT_REAL, 1, get_hit_rate_resident, NULL},
    {"hit_rate_in_time", "hit_rate_in_time", MS_MT_REAL, 1, get_hit_rate_in_time, NULL},
    {"hit_rate_cached", "hit_rate_cached", MS_MT_REAL, 1, get_hit_rate_cached, NULL},
    {"hit_rate_issued", "hit_rate_issued", MS_MT_REAL, 1, get_hit_rate_issued, NULL},
    {"prefetch_recall_moeinf", "prefetch_recall_moeinf", MS_MT_REAL, 1, get_prefetch_recall_moeinf, NULL},
    {"prefill_hit_rate_resident", "hit_definitions_by_phase.prefill.hit_rate_resident", MS_MT_REAL, 0, get_prefill_hit_rate_resident, NULL},
    {"prefill_hit_rate_in_time", "hit_definitions_by_phase.prefill.hit_rate_in_time", MS_MT_REAL, 0, get_prefill_hit_rate_in_time, NULL},
    {"prefill_hit_rate_cached", "hit_definitions_by_phase.prefill.hit_rate_cached", MS_MT_REAL, 0, get_prefill_hit_rate_cached, NULL},
    {"prefill_hit_rate_issued", "hit_definitions_by_phase.prefill.hit_rate_issued", MS_MT_REAL, 0, get_prefill_hit_rate_issued, NULL},
    {"prefill_prefetch_recall_moeinf", "hit_definitions_by_phase.prefill.prefetch_recall_moeinf", MS_MT_REAL, 0, get_prefill_prefetch_recall_moeinf, NULL},
    {"decode_hit_rate_resident", "hit_definitions_by_phase.decode.hit_rate_resident", MS_MT_REAL, 0, get_decode_hit_rate_resident, NULL},
    {"decode_hit_rate_in_time", "hit_definitions_by_phase.decode.hit_rate_in_time", MS_MT_REAL, 0, get_decode_hit_rate_in_time, NULL},
    {"decode_hit_rate_cached", "hit_definitions_by_phase.decode.hit_rate_cached", MS_MT_REAL, 0, get_decode_hit_rate_cached, NULL},
    {"decode_hit_rate_issued", "hit_definitions_by_phase.decode.hit_rate_issued", MS_MT_REAL, 0, get_decode_hit_rate_issued, NULL},
    {"decode_prefetch_recall_moeinf", "hit_definitions_by_phase.decode.prefetch_recall_moeinf", MS_MT_REAL, 0, get_decode_prefetch_recall_moeinf, NULL},
    {"recorded_decode_cells", "recorded_residency.decode_cells", MS_MT_COUNT, 0, get_recorded_decode_cells, recorded_rows},
    {"recorded_agree", "recorded_residency.agree", MS_MT_COUNT, 0, get_recorded_agree, recorded_rows},
    {"recorded_agreement", "recorded_residency.agreement", MS_MT_REAL, 0, get_recorded_agreement, recorded_rows},
    {"recorded_prefill_cells", "recorded_residency.prefill_cells", MS_MT_COUNT, 0, get_recorded_prefill_cells, recorded_rows},
    {"recorded_prefill_agree", "recorded_residency.prefill_agree", MS_MT_COUNT, 0, get_recorded_prefill_agree, recorded_rows},
    {"recorded_prefill_agreement", "recorded_residency.prefill_agreement", MS_MT_REAL, 0,
     get_recorded_prefill_agreement, recorded_rows},
    {"train_frac", NULL, MS_MT_REAL, 1, get_train_frac, NULL},
    {"train_requests", NULL, MS_MT_COUNT, 1, get_train_requests, NULL},
    {"train_iterations", NULL, MS_MT_COUNT, 1, get_train_iterations, NULL},
    {"train_by_iteration", NULL, MS_MT_COUNT, 1, get_train_by_iteration, NULL},
    {"next_use_exact", "next_use_exact", MS_MT_BOOL, 1, get_next_use_exact, has_future},
};
const size_t ms_metric_count = sizeof ms_metric_list / sizeof ms_metric_list[0];

/* The object at a dotted path's parent ("phases.prefill.hits": metrics ->
 * phases -> prefill), made on first use; *key gets the last part. */
static cJSON *group_of(cJSON *root, const char *path, char *key, size_t n)
{
    cJSON *o = root;
    const char *p = path, *dot;
    while ((dot = strchr(p, '.'))) {
        char part[64];
        snprintf(part, sizeof part, "%.*s", (int)(dot - p), p);
        cJSON *sub = cJSON_GetObjectItemCaseSensitive(o, part);
        o = sub ? sub : cJSON_AddObjectToObject(o, part);
        p = dot + 1;
    }
    snprintf(key, n, "%s", p);
    return o;
}

static void add_value(cJSON *o, const char *key, ms_metric_type type, double v)
{
    if (type == MS_MT_BOOL)
        cJSON_AddBoolToObject(o, key, v != 0);
    else if (isnan(v))
        cJSON_AddNullToObject(o, key); /* no samples: null, never 0 */
    else
        cJSON_AddNumberToObject(o, key, v);
}

static cJSON *counts_json(const ms_counts *c)
{
    cJSON *o = cJSON_CreateObject();
    add_value(o, "hit_rate", MS_MT_REAL, ms_metrics_hit_rate(c));
    cJSON_AddNumberToObject(o, "hits", (double)c->hits);
    cJSON_AddNumberToObject(o, "late", (double)c->late);
    cJSON_AddNumberToObject(o, "misses", (double)c->misses);
    cJSON_AddNumberToObject(o, "on_cpu", (double)c->on_cpu);
    cJSON_AddNumberToObject(o, "activations", (double)ms_metrics_activations(c));
    cJSON_AddNumberToObject(o, "layer_steps", (double)c->layer_steps);
    cJSON_AddNumberToObject(o, "iterations", (double)c->iterations);
    cJSON_AddNumberToObject(o, "stall_s", c->stall_s);
    cJSON_AddNumberToObject(o, "busy_s", c->busy_s);
    return o;
}

static void add_value_real(cJSON *o, const char *key, double v)
{
    add_value(o, key, MS_MT_REAL, v);
}

static double ratio(double a, double b)
{
    return ms_metrics_ratio(a, b);
}

/* per GPU, in a run on several (ms_metrics.gpu) */
static cJSON *gpus_json(const ms_metrics *m)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t g = 0; g < m->gpus; g++) {
        const ms_gpu_metrics *k = &m->gpu[g];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "gpu", g);
        cJSON_AddNumberToObject(o, "experts", (double)k->experts);
        uint64_t act = k->hits + k->late + k->misses;
        add_value_real(o, "hit_rate", ratio((double)k->hits, (double)act));
        cJSON_AddNumberToObject(o, "hits", (double)k->hits);
        cJSON_AddNumberToObject(o, "late", (double)k->late);
        cJSON_AddNumberToObject(o, "misses", (double)k->misses);
        cJSON_AddNumberToObject(o, "copies", (double)k->copies);
        cJSON_AddNumberToObject(o, "demand_copies", (double)k->demand_copies);
        cJSON_AddNumberToObject(o, "pcie_bytes", k->pcie_bytes);
        cJSON_AddNumberToObject(o, "link_busy_s", k->link_busy_s);
        cJSON_AddNumberToObject(o, "compute_busy_s", k->compute_busy_s);
        cJSON_AddNumberToObject(o, "stall_s", k->stall_s);
        cJSON_AddNumberToObject(o, "dispatch_combine_s", k->dispatch_s);
        cJSON_AddNumberToObject(o, "cache_capacity", k->cache_capacity);
        cJSON_AddNumberToObject(o, "streamed", (double)k->streamed);
        cJSON_AddNumberToObject(o, "cache_peak_bytes", k->cache_peak_bytes);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

cJSON *ms_metric_json(const ms_metrics *m)
{
    cJSON *root = cJSON_CreateObject();
    for (size_t i = 0; i < ms_metric_count; i++) {
        const ms_metric_def *d = &ms_metric_list[i];
        if (!d->json || (d->present && !d->present(m)))
            continue;
        char key[64];
        cJSON *o = group_of(root, d->json, key, sizeof key);
        add_value(o, key, d->type, d->get(m));
    }
    /* per layer: the same counts as the totals and each phase */
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (uint32_t l = 0; l < m->L; l++)
        cJSON_AddItemToArray(layers, counts_json(&m->layer[l]));
    if (m->gpu)
        cJSON_AddItemToObject(root, "gpus", gpus_json(m));
    return root;
}
