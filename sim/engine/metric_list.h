/* The one list of a run's metrics (issue 14.3): each metric's flat name
 * (the sweep CSV column), where it sits in `run --json`'s "metrics" object,
 * its type and how to read it from ms_metrics.  The JSON object and the
 * sweep CSV's metric columns are both written by walking this list in
 * order; a metric added here appears in both (or in the one its row says).
 * The table of `moesim run` is a layout over a few of these values. */
#ifndef MS_METRIC_LIST_H
#define MS_METRIC_LIST_H

#include <stddef.h>

#include <cJSON.h>

#include "sim/engine/engine.h"

typedef enum {
    MS_MT_COUNT, /* a whole number: JSON number, CSV "%.0f" */
    MS_MT_REAL,  /* a real, NaN without samples: JSON null, CSV empty */
    MS_MT_BOOL,  /* JSON true/false, CSV 0/1 */
} ms_metric_type;

typedef struct {
    const char *name;   /* flat name: the sweep CSV column */
    const char *json;   /* "key", "group.key" or "group.sub.key" in run --json's metrics; NULL: CSV only */
    ms_metric_type type;
    int in_csv;         /* a sweep CSV column */
    double (*get)(const ms_metrics *m);
    int (*present)(const ms_metrics *m); /* JSON: NULL = always; else only when it holds */
} ms_metric_def;

extern const ms_metric_def ms_metric_list[];
extern const size_t ms_metric_count;

/* The "metrics" object of run --json (the list, then the per-layer counts). */
cJSON *ms_metric_json(const ms_metrics *m);

#endif
