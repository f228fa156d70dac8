/* The one list of metrics (sim/engine/metric_list.h): names and JSON paths
 * are unique, the JSON object is built from the list (groups, nulls for
 * metrics without samples, members present only when they mean something),
 * and the sweep CSV's header is exactly the list's CSV names, in order. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "sim/apps/sweep_csv.h"
#include "sim/engine/metric_list.h"

static double num_at(cJSON *root, const char *a, const char *b, const char *c)
{
    cJSON *o = cJSON_GetObjectItemCaseSensitive(root, a);
    if (b)
        o = cJSON_GetObjectItemCaseSensitive(o, b);
    if (c)
        o = cJSON_GetObjectItemCaseSensitive(o, c);
    return cJSON_IsNumber(o) ? o->valuedouble : cJSON_IsNull(o) ? -1.0 : -2.0;
}

int main(void)
{
    for (size_t i = 0; i < ms_metric_count; i++)
        for (size_t j = i + 1; j < ms_metric_count; j++) {
            CHECK(strcmp(ms_metric_list[i].name, ms_metric_list[j].name) != 0);
            if (ms_metric_list[i].json && ms_metric_list[j].json)
                CHECK(strcmp(ms_metric_list[i].json, ms_metric_list[j].json) != 0);
        }
    ms_counts layer = {.hits = 1, .misses = 1};
    ms_metrics m = {.total = {.hits = 3, .late = 1, .misses = 4, .iterations = 2},
                    .phase = {[MS_PHASE_DECODE] = {.hits = 3, .late = 1, .misses = 4}},
                    .prefetch_copied = 4, .prefetch_useful = 2, .tpot_mean_s = NAN, .layer = &layer, .L = 1};
    cJSON *j = ms_metric_json(&m);
    CHECK_NEAR(num_at(j, "hit_rate", NULL, NULL), 3.0 / 8.0, 1e-12);
    CHECK_NEAR(num_at(j, "phases", "decode", "hits"), 3, 0);
    CHECK_NEAR(num_at(j, "phases", "prefill", "hit_rate"), -1, 0); /* 0 activations: null */
    CHECK_NEAR(num_at(j, "tpot_ms_mean", NULL, NULL), -1, 0);       /* NaN: null */
    CHECK_NEAR(num_at(j, "prefetch", "precision", NULL), 0.5, 1e-12);
    CHECK_NEAR(num_at(j, "prefetch", "recall", NULL), 0.25, 1e-12);
    CHECK_NEAR(num_at(j, "layers", NULL, NULL), -2, 0); /* an array */
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "layers")) == 1);
    /* present only when meaningful */
    CHECK(!cJSON_GetObjectItemCaseSensitive(j, "next_use_exact"));
    CHECK(!cJSON_GetObjectItemCaseSensitive(j, "similarity"));
    CHECK(!cJSON_GetObjectItemCaseSensitive(j, "recorded_residency"));
    cJSON_Delete(j);
    m.has_future = 1;
    m.future_exact = 1;
    m.has_policy_stats = 1;
    m.policy_stats.sem_n = 2;
    m.policy_stats.sem_sum = 1.5;
    j = ms_metric_json(&m);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "next_use_exact")));
    CHECK_NEAR(num_at(j, "similarity", "semantic_mean", NULL), 0.75, 1e-12);
    CHECK_NEAR(num_at(j, "similarity", "trajectory_mean", NULL), -1, 0);
    cJSON_Delete(j);
    /* the sweep CSV header: the point columns, then the list's CSV names in order */
    const char *h = ms_sweep_csv_header();
    const char *p = strstr(h, ",hit_rate,");
    CHECK(p != NULL);
    for (size_t i = 0; p && i < ms_metric_count; i++) {
        if (!ms_metric_list[i].in_csv)
            continue;
        size_t n = strlen(ms_metric_list[i].name);
        CHECK(p[0] == ',' && !strncmp(p + 1, ms_metric_list[i].name, n) && (p[n + 1] == ',' || p[n + 1] == '\n'));
        p += n + 1;
    }

    CHECK_DONE();
}
