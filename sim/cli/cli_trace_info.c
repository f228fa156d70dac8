/* `moesim trace info` and `moesim trace validate`. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sim/cli/cli.h"
#include "sim/cli/cli_trace_common.h"
#include "traces/format/trace.h"

static const char info_usage[] =
    "usage: moesim trace info FILE [--json]\n"
    "\n"
    "Prints the metadata of a trace: format version (v2: checksummed, with its\n"
    "content digest; v1: none), model, L/J/K, probs kind, request, iteration and\n"
    "row counts, optional parts, bytes per expert, source.  Opening validates the\n"
    "header and the request table; `moesim trace validate` checks every value.\n"
    "\n"
    "  --json   one JSON object on stdout instead of text\n";

static const char validate_usage[] =
    "usage: moesim trace validate FILE\n"
    "\n"
    "Streams every request of a trace through the reader, which checks every\n"
    "value (ids in range, probabilities finite and normalised, counts and ranges\n"
    "consistent) and, in format v2, every chunk's checksum on the way; then\n"
    "compares the content digest of what it read with the file's content_sha256.\n"
    "Prints \"FILE: ok (N requests, I iterations, R rows, M missing cells)\" and\n"
    "exits 0, or prints the first problem on one line and exits 1.  A v1 trace\n"
    "(no checksums) gets a note on stderr.\n";

/* Positional FILE plus the flags a command accepts; 0 ok, 1 help printed,
 * else the usage exit code. */
static int parse_args(int argc, char **argv, const char *usage, int allow_json, const char **file, int *json)
{
    *file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 1;
        }
        if (allow_json && !strcmp(a, "--json"))
            *json = 1;
        else if (a[0] == '-' && a[1])
            return ms_cli_usage("%s: unknown option '%s' (see --help)", argv[0], a);
        else if (*file)
            return ms_cli_usage("%s: more than one FILE ('%s' and '%s')", argv[0], *file, a);
        else
            *file = a;
    }
    if (!*file)
        return ms_cli_usage("%s: missing FILE (see --help)", argv[0]);
    return 0;
}

typedef struct {
    uint64_t prefill, decode, layer_steps;
    uint64_t expert_min, expert_max, dense_min, dense_max;
} trace_summary;

static trace_summary summarise(const ms_trace_meta *m)
{
    trace_summary s = {0};
    s.prefill = m->n_requests; /* exactly one prefill iteration per request */
    s.decode = m->n_iterations - m->n_requests;
    s.layer_steps = m->n_iterations * m->L;
    s.expert_min = s.dense_min = UINT64_MAX;
    for (uint32_t l = 0; l < m->L; l++) {
        uint64_t e = m->expert_bytes[l], d = m->dense_bytes[l];
        s.expert_min = e < s.expert_min ? e : s.expert_min;
        s.expert_max = e > s.expert_max ? e : s.expert_max;
        s.dense_min = d < s.dense_min ? d : s.dense_min;
        s.dense_max = d > s.dense_max ? d : s.dense_max;
    }
    return s;
}

static void optional_parts(const ms_trace_meta *m, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    if (m->embed_dim)
        o += (size_t)snprintf(buf + o, cap - o, " embedding[%u]", m->embed_dim);
    if (m->spec_depth && o < cap)
        o += (size_t)snprintf(buf + o, cap - o, " spec[%u]", m->spec_depth);
    if (m->has_token_ids && o < cap)
        o += (size_t)snprintf(buf + o, cap - o, " token_ids");
    if (m->has_text && o < cap)
        o += (size_t)snprintf(buf + o, cap - o, " text");
    if (m->has_recorded_hits && o < cap)
        snprintf(buf + o, cap - o, " recorded_hit");
    if (!buf[0])
        snprintf(buf, cap, " none");
}

static void print_info_text(const char *file, const ms_trace_meta *m)
{
    trace_summary s = summarise(m);
    char parts[128];
    optional_parts(m, parts, sizeof parts);
    printf("file:           %s\n", file);
    if (m->version >= 2)
        printf("format:         v%u (checksummed; content_sha256 %s)\n", m->version, m->content_sha256);
    else
        printf("format:         v%u (no checksums; `moesim trace upgrade` rewrites it as v2)\n", m->version);
    printf("model:          %s\n", m->model_name);
    printf("source:         %s\n", m->source);
    printf("layers (L):     %u\n", m->L);
    printf("experts (J):    %u\n", m->J);
    printf("top-k (K):      %u\n", m->K);
    printf("shared experts: %u\n", m->shared_experts);
    printf("hidden size:    %u\n", m->hidden_size);
    printf("probs kind:     %s\n", ms_probs_kind_name(m->probs_kind));
    printf("requests:       %" PRIu64 "\n", m->n_requests);
    printf("iterations:     %" PRIu64 " (%" PRIu64 " prefill, %" PRIu64 " decode)\n", m->n_iterations, s.prefill,
           s.decode);
    printf("rows:           %" PRIu64 "\n", m->n_rows);
    printf("layer-steps:    %" PRIu64 "\n", s.layer_steps);
    printf("optional:      %s\n", parts);
    printf("expert bytes:   min %" PRIu64 ", max %" PRIu64 "\n", s.expert_min, s.expert_max);
    printf("dense bytes:    min %" PRIu64 ", max %" PRIu64 "\n", s.dense_min, s.dense_max);
}

static void print_info_json(const char *file, const ms_trace_meta *m)
{
    trace_summary s = summarise(m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", file);
    cJSON_AddStringToObject(o, "model", m->model_name);
    cJSON_AddStringToObject(o, "source", m->source);
    cJSON_AddNumberToObject(o, "L", m->L);
    cJSON_AddNumberToObject(o, "J", m->J);
    cJSON_AddNumberToObject(o, "K", m->K);
    cJSON_AddNumberToObject(o, "shared_experts", m->shared_experts);
    cJSON_AddNumberToObject(o, "hidden_size", m->hidden_size);
    cJSON_AddStringToObject(o, "probs_kind", ms_probs_kind_name(m->probs_kind));
    cJSON_AddNumberToObject(o, "requests", (double)m->n_requests);
    cJSON_AddNumberToObject(o, "iterations", (double)m->n_iterations);
    cJSON_AddNumberToObject(o, "prefill_iterations", (double)s.prefill);
    cJSON_AddNumberToObject(o, "decode_iterations", (double)s.decode);
    cJSON_AddNumberToObject(o, "rows", (double)m->n_rows);
    cJSON_AddNumberToObject(o, "layer_steps", (double)s.layer_steps);
    cJSON_AddNumberToObject(o, "embed_dim", m->embed_dim);
    cJSON_AddNumberToObject(o, "spec_depth", m->spec_depth);
    cJSON_AddBoolToObject(o, "token_ids", m->has_token_ids);
    cJSON_AddBoolToObject(o, "text", m->has_text);
    cJSON_AddBoolToObject(o, "recorded_hit", m->has_recorded_hits);
    cJSON_AddNumberToObject(o, "expert_bytes_min", (double)s.expert_min);
    cJSON_AddNumberToObject(o, "expert_bytes_max", (double)s.expert_max);
    cJSON_AddNumberToObject(o, "dense_bytes_min", (double)s.dense_min);
    cJSON_AddNumberToObject(o, "dense_bytes_max", (double)s.dense_max);
    cJSON_AddNumberToObject(o, "version", m->version);
    if (m->version >= 2)
        cJSON_AddStringToObject(o, "content_sha256", m->content_sha256);
    else
        cJSON_AddNullToObject(o, "content_sha256");
    cJSON_AddItemToObject(o, "provenance", ms_trace_cli_provenance(file));
    char *text = cJSON_PrintUnformatted(o);
    puts(text);
    cJSON_free(text);
    cJSON_Delete(o);
}

int ms_cli_trace_info(int argc, char **argv)
{
    const char *file;
    int json = 0;
    int rc = parse_args(argc, argv, info_usage, 1, &file, &json);
    if (rc)
        return rc == 1 ? 0 : rc;
    ms_err err = {{0}};
    ms_trace_reader *r = ms_reader_open(file, &err);
    if (!r)
        return ms_cli_error(err.msg);
    if (json)
        print_info_json(file, ms_reader_meta(r));
    else
        print_info_text(file, ms_reader_meta(r));
    ms_trace_cli_note_v1(file, ms_reader_meta(r));
    ms_reader_close(r);
    return 0;
}

/* A missing cell is one topk_ids entry equal to -1. */
static uint64_t count_missing(const ms_trace_meta *m, const ms_request *q)
{
    size_t n = (size_t)q->n_rows * m->L * m->K;
    uint64_t missing = 0;
    for (size_t i = 0; i < n; i++)
        missing += q->topk_ids[i] == -1;
    return missing;
}

int ms_cli_trace_validate(int argc, char **argv)
{
    const char *file;
    int json = 0;
    int rc = parse_args(argc, argv, validate_usage, 0, &file, &json);
    if (rc)
        return rc == 1 ? 0 : rc;
    ms_err err = {{0}};
    ms_trace_reader *r = ms_reader_open(file, &err);
    if (!r)
        return ms_cli_error(err.msg);
    const ms_trace_meta *m = ms_reader_meta(r);
    ms_request q;
    memset(&q, 0, sizeof q);
    uint64_t missing = 0;
    int got;
    ms_reader_digest_begin(r);
    while ((got = ms_reader_next(r, &q, &err)) == 1)
        missing += count_missing(m, &q);
    ms_request_free(&q);
    char hex[MS_DIGEST_HEX];
    if (got < 0 || ms_reader_digest_check(r, hex, &err) < 0) {
        ms_reader_close(r);
        return ms_cli_error(err.msg);
    }
    printf("%s: ok (%" PRIu64 " requests, %" PRIu64 " iterations, %" PRIu64 " rows, %" PRIu64 " missing cells)\n",
           file, m->n_requests, m->n_iterations, m->n_rows, missing);
    ms_trace_cli_note_v1(file, m);
    ms_reader_close(r);
    return 0;
}
