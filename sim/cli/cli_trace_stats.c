/* moesim trace stats FILE [--json]: entropy, reuse, inter-layer co-activation
 * and popularity skew of a trace, in one streaming pass (traces/stats/stats.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cli/cli.h"
#include "sim/cli/cli_trace_common.h"
#include "traces/stats/stats.h"

static const char stats_help[] =
    "usage: moesim trace stats FILE [--json]\n"
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
    "\"-\" (null in JSON) marks an undefined value, e.g. reuse with no decode step.\n";

/* Parses argv; returns 0 and sets *path / *json, 1 for --help, or the usage
 * exit code (after printing the error). */
static int parse_args(int argc, char **argv, const char **path, int *json)
{
    *path = NULL;
    *json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return 1;
        if (!strcmp(a, "--json"))
            *json = 1;
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

static int print_report(const ms_stats *s, const char *path, int json)
{
    if (!json) {
        printf("trace %s\n", path);
        ms_stats_print(s, stdout);
        return 0;
    }
    cJSON *o = ms_stats_to_json(s);
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddItemToObject(o, "provenance", ms_trace_cli_provenance(path));
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    if (!txt)
        return ms_cli_error("trace stats: cannot format the JSON report");
    puts(txt);
    cJSON_free(txt);
    return 0;
}

int ms_cli_trace_stats(int argc, char **argv)
{
    const char *path;
    int json;
    int prc = parse_args(argc, argv, &path, &json);
    if (prc == 1) {
        fputs(stats_help, stdout);
        return 0;
    }
    if (prc)
        return -prc;

    ms_err err;
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
    rc = print_report(s, path, json);
    ms_stats_free(s);
    if (!rc && v1) {
        ms_trace_meta note = {.version = 1};
        ms_trace_cli_note_v1(path, &note);
    }
    return rc; /* main() checks standard output */
}
