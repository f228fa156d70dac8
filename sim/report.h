/* Results of one run as JSON (config + metrics), as a readable table, and as
 * one CSV row; every field that determined a result goes into `config`. */
#ifndef MS_REPORT_H
#define MS_REPORT_H

#include <stdio.h>

#include <cJSON.h>

#include "engine.h"

/* The policy spec with every parameter resolved to its value, e.g.
 * {"name": "lfu", "params": {"reset": "1"}}; NULL when the spec is invalid. */
cJSON *ms_report_policy(int kind, const char *spec);
cJSON *ms_report_config(const ms_run_config *cfg);
cJSON *ms_report_metrics(const ms_metrics *m);
/* Adds the resolved training split ("train": {frac, by, requests,
 * iterations}) to a config object. */
void ms_report_split(cJSON *config, const ms_metrics *m);
/* {"config": ..., "metrics": ...} */
cJSON *ms_report_json(const ms_run_config *cfg, const ms_metrics *m);
void ms_report_table(FILE *out, const ms_run_config *cfg, const ms_metrics *m);

double ms_metrics_hit_rate(const ms_counts *c);
uint64_t ms_metrics_activations(const ms_counts *c);

#endif
