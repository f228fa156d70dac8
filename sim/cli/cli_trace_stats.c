/* moesim trace stats FILE [--json]: entropy, reuse, inter-layer co-activation
 * and popularity skew of a trace, in one streaming pass (traces/stats/stats.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cli/cli.h"
#include "sim/cli/cli_trace_common.h"
#include "traces/stats/stats.h"
#include "traces/stats/targets.h"

static const char stats_help[] =
    "usage: moesim trace stats FILE [--json] [--against MODEL|TARGETS.ini]\n"
    "\n"
    "Statistics of the routing in trace FILE, one row per MoE layer, then the\n"
    "means over layers (--json: one JSON object with every per-layer array,\n"
    "per-layer-pair array and mean).  An activation is one valid top-k cell\n"
    "(row, layer, slot); cells with id -1 are missing: skipped and counted.\n"
    "\n"
    "entropy (bits, max log2(J)) of the distribution of activation counts over\n"
    "the J experts of a layer (fMoE Fig. 3b); Hw uses summed router weights:\n"
    "  H_it   per iteration (all its rows), mean over iterations; a one-row\n"
    "         decode iteration with all K cells gives log2(K)\n"
    "  H_req  per request (all its iterations), mean over requests\n"
    "  H_tr   whole trace\n"
    "  curve  (fMoE Fig. 3c) for i = 1..min(longest request, 256): count entropy\n"
    "         of a request's first i iterations (i = 1 is the prefill), mean\n"
    "         over requests with >= i iterations, then over layers; the decode\n"
    "         curve does the same over decode steps only (prefill left out)\n"
    "reuse over decode iterations (a step's experts = union over its rows):\n"
    "  reuseP fraction of activations of decode step t >= 2 also active at the\n"
    "         same layer in step t-1 of the request\n"
    "  reuseA fraction of decode activations active at the same layer in any\n"
    "         earlier iteration of the request (prefill included)\n"
    "layer l -> l+1, over rows where both layers have activations:\n"
    "  MI1    mutual information (bits) of the top-1 experts (largest weight)\n"
    "  NMI1   MI1 normalised by the mean of the two entropies (0..1)\n"
    "  succ   fraction of (row, expert e at l) whose row activates e's most\n"
    "         frequent successor at l+1 (learnt on the same trace)\n"
    "  base   the same for the single most frequent expert of l+1\n"
    "popularity over the whole trace, per layer:\n"
    "  top10% share of activations of the ceil(J/10) most active experts\n"
    "  topK   share of the K most active experts\n"
    "  gini   Gini coefficient of the J activation counts\n"
    "  max/mn most active expert's count over the mean count\n"
    "cache locality (one pass of LRU stack distances; traces/stats/locality.h):\n"
    "  LRU hit rate of one cache per layer at 1, 2, 4 .. J slots (decode steps,\n"
    "  cache empty at each request) and of one cache of (layer, expert) pairs at\n"
    "  fractions of L*J (every iteration, no reset); the JSON has every variant\n"
    "  reuse distance: how many decode steps back a decode step's expert was last\n"
    "  used at that layer (1 = the previous step: reuseP)\n"
    "\"-\" (null in JSON) marks an undefined value, e.g. reuse with no decode step.\n"
    "\n"
    "--against MODEL compares the trace with the model's published locality\n"
    "targets (sim/profiles/targets/MODEL.ini, or a path ending in .ini): one row\n"
    "per target with the target, the trace's value, the difference and ok or\n"
    "MISS; exit status 1 when any target is missed (docs/generator.md).\n";

/* Parses argv; returns 0 and sets *path / *json, 1 for --help, or the usage
 * exit code (after printing the error). */
static int parse_args(int argc, char **argv, const char **path, int *json, const char **against)
{
    *path = NULL;
    *json = 0;
    *against = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return 1;
        if (!strcmp(a, "--json"))
            *json = 1;
        else if (!strcmp(a, "--against")) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return -ms_cli_usage("trace stats: --against needs a model name or a targets .ini file");
            if (*against)
                return -ms_cli_usage("trace stats: --against given twice");
            *against = argv[++i];
        }
        else if (a[0] == '-' && a[1] != '\0')
            return -ms_cli_usage("trace stats: unknown option '%s' (see moesim trace stats --help)", a);
        else if (*path)
            return -ms_cli_usage("trace stats: more than one FILE ('%s' and '%s')", *path, a);
        else
            *path = a;
    }
    if (!*path)
        return -ms_cli_usage("trace stats: missing FILE (usage: moesim trace stats FILE [--json])");
    return 0;
}

/* Streams every request of the open trace into s. */
static int accumulate(ms_trace_reader *rd, ms_stats *s, const char *path, ms_err *err)
{
    ms_request req;
    memset(&req, 0, sizeof req);
    int rc;
    while ((rc = ms_reader_next(rd, &req, err)) == 1)
        if (ms_stats_add(s, &req, err)) {
            ms_fail_prefix(err, "%s", path);
            rc = -1;
            break;
        }
    ms_request_free(&req);
    return rc;
}

/* Adds the trace's provenance to o, prints it and frees it; 0, or the
 * error's exit status. */
static int print_json(cJSON *o, const char *path)
{
    cJSON_AddItemToObject(o, "provenance", ms_trace_cli_provenance(path));
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    if (!txt)
        return ms_cli_error("trace stats: cannot format the JSON report");
    puts(txt);
    cJSON_free(txt);
    return 0;
}

static int print_report(const ms_stats *s, const char *path, int json)
{
    if (!json) {
        printf("trace %s\n", path);
        ms_stats_print(s, stdout);
        return 0;
    }
    cJSON *o = ms_stats_to_json(s);
    cJSON_AddStringToObject(o, "file", path);
    return print_json(o, path);
}

/* The trace against its model's targets: a table, or JSON with one object per
 * target; 1 when a target is missed. */
static int report_against(const ms_stats *s, const char *path, const ms_targets *ts, int json)
{
    if (!json) {
        printf("trace %s\n", path);
        return ms_targets_print(ts, s, stdout) ? 1 : 0;
    }
    const ms_stats_report *rp = ms_stats_report_get(s);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddStringToObject(o, "targets_file", ts->file);
    cJSON_AddStringToObject(o, "model", ts->model);
    cJSON *arr = cJSON_AddArrayToObject(o, "targets");
    int missed = 0;
    for (int i = 0; i < ts->n; i++) {
        const ms_target *t = &ts->t[i];
        char what[96];
        ms_target_describe(t, rp->L, rp->J, what, sizeof what);
        double v = ms_target_measure(t, s);
        int met = ms_target_met(t, v);
        missed += !met;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", t->name);
        cJSON_AddStringToObject(x, "statistic", what);
        cJSON_AddNumberToObject(x, "target", t->value);
        if (isfinite(v))
            cJSON_AddNumberToObject(x, "trace", v);
        else
            cJSON_AddNullToObject(x, "trace");
        cJSON_AddNumberToObject(x, "tolerance", t->tolerance);
        cJSON_AddBoolToObject(x, "tolerance_relative", t->tol_relative);
        cJSON_AddBoolToObject(x, "met", met);
        cJSON_AddStringToObject(x, "source", t->source);
        cJSON_AddItemToArray(arr, x);
    }
    cJSON_AddNumberToObject(o, "missed", missed);
    int rc = print_json(o, path);
    return rc ? rc : missed ? 1 : 0;
}

int ms_cli_trace_stats(int argc, char **argv)
{
    const char *path, *against;
    int json;
    int prc = parse_args(argc, argv, &path, &json, &against);
    if (prc == 1) {
        fputs(stats_help, stdout);
        return 0;
    }
    if (prc)
        return -prc;

    ms_err err;
    ms_targets *targets = NULL;
    if (against) { /* a bad targets file fails before the trace is read */
        targets = ms_xcalloc(1, sizeof *targets);
        if (ms_targets_load(against, targets, &err)) {
            free(targets);
            return ms_cli_usage("%s", err.msg); /* exit 2: 1 is a missed target */
        }
    }
    ms_trace_reader *rd = ms_reader_open(path, &err);
    if (!rd)
        return ms_cli_error(err.msg);
    ms_stats *s = ms_stats_new(ms_reader_meta(rd), &err);
    if (!s) {
        ms_fail_prefix(&err, "%s", path);
        ms_reader_close(rd);
        return ms_cli_error(err.msg);
    }
    int rc = accumulate(rd, s, path, &err);
    int v1 = ms_reader_meta(rd)->version == 1;
    ms_reader_close(rd);
    if (rc < 0) {
        ms_stats_free(s);
        return ms_cli_error(err.msg);
    }
    ms_stats_finish(s);
    rc = targets ? report_against(s, path, targets, json) : print_report(s, path, json);
    free(targets);
    ms_stats_free(s);
    if (!rc && v1) {
        ms_trace_meta note = {.version = 1};
        ms_trace_cli_note_v1(path, &note);
    }
    return rc; /* main() checks standard output */
}
