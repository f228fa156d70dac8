/* jsonl importer: one JSON object per (request, token, layer); see
 * traces/import/import.h for the fields and the mapping.
 *
 * The whole dump is read first (requests may interleave): every line is
 * parsed with cJSON and checked, its ids and weights kept in flat arrays
 * (about 24 + 8K bytes per line).  Rows are then sorted by (request, token,
 * layer), requests ordered by their first line, and each request is built
 * and written in turn. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import/import.h"

#define JL_SUM_TOL 1e-3
#define JL_MAX_LAYERS 4096u
#define JL_MAX_TOKENS (1u << 20) /* tokens per request; keeps a corrupt token index from asking for huge arrays */

enum { F_REQUEST, F_TOKEN, F_LAYER, F_EXPERTS, F_WEIGHTS, F_PHASE, N_FIELDS };
static const char *const field_keys[N_FIELDS] = {"request", "token", "layer", "experts", "weights", "phase"};
static const char *const field_defaults[N_FIELDS] = {"request_id", "token_idx", "layer", "topk_ids", "topk_weights",
                                                     "is_prompt"};

typedef struct {
    uint64_t req;
    uint64_t line;
    uint32_t token, layer;
    int8_t prompt; /* 1 prompt, 0 decode, -1 from --prompt-len */
    size_t off;    /* into ids / w */
} jl_row;

typedef struct {
    const char *path;
    const ms_import_opts *o;
    char names[N_FIELDS][64];
    ms_import_dims d;
    uint32_t max_layer;
    jl_row *rows;
    size_t n, cap;
    int32_t *ids;
    float *w;
    size_t ids_cap;
    ms_probs_kind pk;
    ms_import_report rep;
} jl_state;

/* "request=req,layer=lyr" -> names; unknown keys are errors. */
static int parse_fields(jl_state *s, ms_err *err)
{
    for (int i = 0; i < N_FIELDS; i++)
        snprintf(s->names[i], sizeof s->names[i], "%s", field_defaults[i]);
    if (!s->o->fields || !*s->o->fields)
        return 0;
    char buf[512];
    if (strlen(s->o->fields) >= sizeof buf)
        return ms_fail(err, "trace import --format jsonl: --fields longer than %zu characters", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", s->o->fields);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1] || strlen(eq + 1) >= sizeof s->names[0])
            return ms_fail(err, "trace import --format jsonl: --fields: '%s' is not key=name (keys: request, token, "
                                "layer, experts, weights, phase)",
                           tok);
        *eq = '\0';
        int k = 0;
        while (k < N_FIELDS && strcmp(field_keys[k], tok))
            k++;
        if (k == N_FIELDS)
            return ms_fail(err, "trace import --format jsonl: --fields: unknown key '%s' (keys: request, token, layer, "
                                "experts, weights, phase)",
                           tok);
        snprintf(s->names[k], sizeof s->names[k], "%s", eq + 1);
    }
    return 0;
}

/* Short text of a JSON value for messages. */
static void value_text(const cJSON *v, char *buf, size_t cap)
{
    char *t = cJSON_PrintUnformatted(v);
    snprintf(buf, cap, "%.40s%s", t ? t : "?", t && strlen(t) > 40 ? "..." : "");
    free(t);
}

static int get_field(jl_state *s, uint64_t ln, const cJSON *obj, int f, const cJSON **out, ms_err *err)
{
    *out = cJSON_GetObjectItemCaseSensitive(obj, s->names[f]);
    if (!*out)
        return ms_fail(err, "%s:%llu: field %s: missing", s->path, (unsigned long long)ln, s->names[f]);
    return 0;
}

static int as_uint(jl_state *s, uint64_t ln, const char *what, const cJSON *v, double hi, uint64_t *out, ms_err *err)
{
    char t[64];
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble != floor(v->valuedouble)) {
        value_text(v, t, sizeof t);
        return ms_fail(err, "%s:%llu: field %s: value %s is not a non-negative integer", s->path,
                       (unsigned long long)ln, what, t);
    }
    if (v->valuedouble > hi) {
        value_text(v, t, sizeof t);
        return ms_fail(err, "%s:%llu: field %s: value %s exceeds %.0f", s->path, (unsigned long long)ln, what, t, hi);
    }
    *out = (uint64_t)v->valuedouble;
    return 0;
}

static int parse_phase(jl_state *s, uint64_t ln, const cJSON *obj, int8_t *prompt, ms_err *err)
{
    if (s->o->prompt_len) {
        *prompt = -1;
        return 0;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, s->names[F_PHASE]);
    if (!v)
        return ms_fail(err, "%s:%llu: field %s: missing (give --prompt-len P when the dump has no phase field)",
                       s->path, (unsigned long long)ln, s->names[F_PHASE]);
    if (cJSON_IsBool(v)) {
        *prompt = cJSON_IsTrue(v) ? 1 : 0;
        return 0;
    }
    if (cJSON_IsString(v)) {
        if (!strcmp(v->valuestring, "prefill") || !strcmp(v->valuestring, "prompt")) {
            *prompt = 1;
            return 0;
        }
        if (!strcmp(v->valuestring, "decode")) {
            *prompt = 0;
            return 0;
        }
    }
    char t[64];
    value_text(v, t, sizeof t);
    return ms_fail(err, "%s:%llu: field %s: value %s is not true/false or \"prefill\"/\"prompt\"/\"decode\"", s->path,
                   (unsigned long long)ln, s->names[F_PHASE], t);
}

/* Reads the expert ids and weights of one line into the pools. */
static int parse_routing(jl_state *s, uint64_t ln, const cJSON *obj, size_t off, ms_err *err)
{
    const cJSON *ids, *ws;
    if (get_field(s, ln, obj, F_EXPERTS, &ids, err) || get_field(s, ln, obj, F_WEIGHTS, &ws, err))
        return -1;
    const char *ni = s->names[F_EXPERTS], *nw = s->names[F_WEIGHTS];
    if (!cJSON_IsArray(ids) || !cJSON_IsArray(ws))
        return ms_fail(err, "%s:%llu: field %s: not an array", s->path, (unsigned long long)ln,
                       cJSON_IsArray(ids) ? nw : ni);
    uint32_t K = s->d.K;
    int ni_n = cJSON_GetArraySize(ids), nw_n = cJSON_GetArraySize(ws);
    if ((uint32_t)ni_n != K || (uint32_t)nw_n != K)
        return ms_fail(err, "%s:%llu: field %s: %d entries, expected K=%u", s->path, (unsigned long long)ln,
                       (uint32_t)ni_n != K ? ni : nw, (uint32_t)ni_n != K ? ni_n : nw_n, K);
    double sum = 0;
    char t[64];
    for (uint32_t k = 0; k < K; k++) {
        const cJSON *e = cJSON_GetArrayItem(ids, (int)k), *w = cJSON_GetArrayItem(ws, (int)k);
        uint64_t id;
        if (as_uint(s, ln, ni, e, 1e18, &id, err))
            return -1;
        if (id >= s->d.J)
            return ms_fail(err, "%s:%llu: field %s: expert id %llu out of range [0, %u)", s->path,
                           (unsigned long long)ln, ni, (unsigned long long)id, s->d.J);
        for (uint32_t j = 0; j < k; j++)
            if (s->ids[off + j] == (int32_t)id)
                return ms_fail(err, "%s:%llu: field %s: expert %llu listed twice", s->path, (unsigned long long)ln,
                               ni, (unsigned long long)id);
        if (!cJSON_IsNumber(w) || !isfinite(w->valuedouble) || w->valuedouble < 0 ||
            w->valuedouble > 1 + JL_SUM_TOL) {
            value_text(w, t, sizeof t);
            return ms_fail(err, "%s:%llu: field %s: value %s is not a number in [0, 1]", s->path,
                           (unsigned long long)ln, nw, t);
        }
        s->ids[off + k] = (int32_t)id;
        s->w[off + k] = (float)w->valuedouble;
        sum += w->valuedouble;
    }
    if (s->pk == MS_PROBS_TOPK_RENORM && fabs(sum - 1) > JL_SUM_TOL)
        return ms_fail(err, "%s:%llu: field %s: weights sum to %.6g, expected 1 (topk_renorm; use --probs-kind "
                            "topk_raw for raw softmax weights)",
                       s->path, (unsigned long long)ln, nw, sum);
    if (sum > 1 + JL_SUM_TOL)
        return ms_fail(err, "%s:%llu: field %s: weights sum to %.6g, more than 1", s->path, (unsigned long long)ln,
                       nw, sum);
    return 0;
}

static int parse_line(jl_state *s, char *line, uint64_t ln, ms_err *err)
{
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithOpts(line, &end, 1);
    if (!obj) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        size_t col = at && at >= line ? (size_t)(at - line) + 1 : 1;
        return ms_fail(err, "%s:%llu: bad JSON at column %zu: '%.30s'", s->path, (unsigned long long)ln, col,
                       at && at >= line ? at : line);
    }
    int rc = 0;
    if (!cJSON_IsObject(obj)) {
        rc = ms_fail(err, "%s:%llu: expected a JSON object, got '%.30s'", s->path, (unsigned long long)ln, line);
        goto out;
    }
    const cJSON *v;
    uint64_t req = 0, tok = 0, layer = 0;
    int8_t prompt = -1;
    if (get_field(s, ln, obj, F_REQUEST, &v, err) || as_uint(s, ln, s->names[F_REQUEST], v, 9007199254740991.0, &req, err) ||
        get_field(s, ln, obj, F_TOKEN, &v, err) || as_uint(s, ln, s->names[F_TOKEN], v, JL_MAX_TOKENS - 1, &tok, err) ||
        get_field(s, ln, obj, F_LAYER, &v, err) ||
        as_uint(s, ln, s->names[F_LAYER], v, (s->d.L ? s->d.L : JL_MAX_LAYERS) - 1, &layer, err) ||
        parse_phase(s, ln, obj, &prompt, err)) {
        rc = -1;
        goto out;
    }
    if (!s->d.K) { /* K from the first line */
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(obj, s->names[F_EXPERTS]);
        int n = ids && cJSON_IsArray(ids) ? cJSON_GetArraySize(ids) : 0;
        if (n < 1 || (uint32_t)n > s->d.J) {
            rc = ms_fail(err, "%s:%llu: field %s: cannot infer K from %d entries (give --topk K)", s->path,
                         (unsigned long long)ln, s->names[F_EXPERTS], n);
            goto out;
        }
        s->d.K = (uint32_t)n;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->rows = ms_xrealloc(s->rows, s->cap, sizeof *s->rows);
        s->ids = ms_xrealloc(s->ids, s->cap * s->d.K, sizeof *s->ids);
        s->w = ms_xrealloc(s->w, s->cap * s->d.K, sizeof *s->w);
    }
    size_t off = s->n * s->d.K;
    if (parse_routing(s, ln, obj, off, err)) {
        rc = -1;
        goto out;
    }
    s->rows[s->n++] = (jl_row){req, ln, (uint32_t)tok, (uint32_t)layer, prompt, off};
    if (layer > s->max_layer)
        s->max_layer = (uint32_t)layer;
out:
    cJSON_Delete(obj);
    return rc;
}

static int read_all(jl_state *s, ms_err *err)
{
    ms_lines r;
    if (ms_lines_open(&r, s->path, err))
        return -1;
    int rc;
    while ((rc = ms_lines_next(&r, err)) == 1) {
        char *p = r.buf;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            continue; /* blank line */
        s->rep.rows++;
        if ((rc = parse_line(s, p, r.lineno, err)) != 0)
            break;
    }
    ms_lines_close(&r);
    if (rc < 0)
        return -1;
    if (s->n == 0)
        return ms_fail(err, "%s: empty file (no JSON lines)", s->path);
    return 0;
}

static int cmp_rows(const void *a, const void *b)
{
    const jl_row *x = a, *y = b;
    if (x->req != y->req)
        return x->req < y->req ? -1 : 1;
    if (x->token != y->token)
        return x->token < y->token ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return x->line < y->line ? -1 : (x->line > y->line);
}

typedef struct {
    size_t begin, end; /* range in the sorted rows */
    uint64_t first_line;
} jl_group;

static int cmp_groups(const void *a, const void *b)
{
    const jl_group *x = a, *y = b;
    return x->first_line < y->first_line ? -1 : (x->first_line > y->first_line);
}

/* Prompt length of one request's rows [b, e): checks phase consistency. */
static int request_prompt_len(jl_state *s, const jl_row *r, size_t n, uint32_t *P, ms_err *err)
{
    if (s->o->prompt_len) {
        *P = s->o->prompt_len;
        return 0;
    }
    const jl_row *last_prompt = NULL, *first_decode = NULL;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && r[i].token == r[i - 1].token && r[i].prompt != r[i - 1].prompt)
            return ms_fail(err, "%s:%llu: field %s: token %u of request %llu is %s here but %s on line %llu", s->path,
                           (unsigned long long)r[i].line, s->names[F_PHASE], r[i].token, (unsigned long long)r[i].req,
                           r[i].prompt ? "prompt" : "decode", r[i - 1].prompt ? "prompt" : "decode",
                           (unsigned long long)r[i - 1].line);
        if (r[i].prompt)
            last_prompt = &r[i];
        else if (!first_decode)
            first_decode = &r[i];
    }
    if (!last_prompt)
        return ms_fail(err, "%s:%llu: field %s: request %llu has no prompt token rows", s->path,
                       (unsigned long long)r[0].line, s->names[F_PHASE], (unsigned long long)r[0].req);
    if (first_decode && first_decode->token < last_prompt->token)
        return ms_fail(err, "%s:%llu: field %s: prompt token %u of request %llu comes after decode token %u (line %llu)",
                       s->path, (unsigned long long)last_prompt->line, s->names[F_PHASE], last_prompt->token,
                       (unsigned long long)r[0].req, first_decode->token, (unsigned long long)first_decode->line);
    *P = last_prompt->token + 1;
    return 0;
}

static void note_missing(jl_state *s, uint64_t req, uint32_t row, uint32_t layer, uint32_t P)
{
    ms_import_report *rep = &s->rep;
    for (uint32_t k = 0; k < s->d.K; k++) {
        if (row < P)
            rep->missing_prefill++;
        else
            rep->missing_decode++;
        if (rep->n_listed < MS_IMPORT_MISSING_LIST)
            rep->first_missing[rep->n_listed++] = (ms_missing_cell){req, row, layer, k, row >= P};
    }
}

static int build_request(jl_state *s, const ms_trace_meta *m, const jl_row *r, size_t n, ms_request *req, ms_err *err)
{
    uint32_t P = 0;
    if (request_prompt_len(s, r, n, &P, err))
        return -1;
    uint32_t rows = r[n - 1].token + 1 > P ? r[n - 1].token + 1 : P;
    if (ms_import_check_cells(s->path, r[n - 1].line, r[0].req, rows, m->L, m->K,
                              "a corrupt token index or layer number?", err))
        return -1;
    memset(req, 0, sizeof *req);
    req->id = r[0].req;
    req->prompt_len = P;
    req->output_len = rows - P;
    req->n_iters = 1 + req->output_len;
    req->n_rows = rows;
    ms_request_alloc(req, m);
    req->iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, P};
    for (uint32_t t = P; t < rows; t++)
        req->iters[1 + t - P] = (ms_iteration){MS_PHASE_DECODE, t, 1};
    size_t cells = (size_t)rows * m->L * m->K;
    for (size_t c = 0; c < cells; c++) {
        req->topk_ids[c] = -1;
        req->topk_w[c] = 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && r[i].token == r[i - 1].token && r[i].layer == r[i - 1].layer) {
            ms_request_free(req);
            return ms_fail(err, "%s:%llu: field %s: request %llu token %u layer %u given twice (first on line %llu)",
                           s->path, (unsigned long long)r[i].line, s->names[F_LAYER], (unsigned long long)r[i].req,
                           r[i].token, r[i].layer, (unsigned long long)r[i - 1].line);
        }
        size_t c = ms_topk_index(m, r[i].token, r[i].layer);
        memcpy(&req->topk_ids[c], &s->ids[r[i].off], m->K * sizeof *s->ids);
        memcpy(&req->topk_w[c], &s->w[r[i].off], m->K * sizeof *s->w);
    }
    for (uint32_t t = 0; t < rows; t++)
        for (uint32_t l = 0; l < m->L; l++)
            if (req->topk_ids[ms_topk_index(m, t, l)] < 0)
                note_missing(s, req->id, t, l, P);
    if (ms_request_check(m, req, s->path, err)) {
        ms_request_free(req);
        return -1;
    }
    s->rep.requests++;
    s->rep.prefill_iters++;
    s->rep.prefill_rows += P;
    s->rep.decode_iters += req->output_len;
    s->rep.prefill_cells += (uint64_t)P * m->L * m->K;
    s->rep.decode_cells += (uint64_t)req->output_len * m->L * m->K;
    return 0;
}

/* Sorts the rows and groups them into requests in order of first line. */
static jl_group *group_requests(jl_state *s, size_t *n_groups)
{
    qsort(s->rows, s->n, sizeof *s->rows, cmp_rows);
    jl_group *g = ms_xcalloc(s->n, sizeof *g);
    size_t ng = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (i == 0 || s->rows[i].req != s->rows[i - 1].req)
            g[ng++] = (jl_group){i, i, s->rows[i].line};
        jl_group *cur = &g[ng - 1];
        cur->end = i + 1;
        if (s->rows[i].line < cur->first_line)
            cur->first_line = s->rows[i].line;
    }
    qsort(g, ng, sizeof *g, cmp_groups);
    *n_groups = ng;
    return g;
}

static int write_requests(jl_state *s, const char *out_path, ms_err *err)
{
    if (!s->d.L)
        s->d.L = s->max_layer + 1;
    char source[MS_SOURCE_MAX];
    snprintf(source, sizeof source, "%.400s (jsonl routing log)", ms_import_base_name(s->path));
    ms_trace_meta m;
    ms_import_meta_fill(&s->d, source, s->pk, &m);
    size_t ng;
    jl_group *g = group_requests(s, &ng);
    ms_import_sink sink;
    int rc = ms_import_sink_open(&sink, s->path, out_path, &m, err);
    for (size_t i = 0; rc == 0 && i < ng; i++) {
        ms_request req;
        rc = build_request(s, &m, &s->rows[g[i].begin], g[i].end - g[i].begin, &req, err);
        if (rc == 0) {
            rc = ms_writer_add(sink.w, &req, err);
            ms_request_free(&req);
        }
    }
    if (sink.w)
        rc = ms_import_sink_finish(&sink, rc, err);
    free(g);
    ms_trace_meta_free(&m);
    return rc;
}

int ms_import_jsonl(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                    ms_err *err)
{
    jl_state s;
    memset(&s, 0, sizeof s);
    s.path = in_path;
    s.o = o;
    snprintf(s.rep.input, sizeof s.rep.input, "%s", ms_import_base_name(in_path));
    snprintf(s.rep.row_unit, sizeof s.rep.row_unit, "JSON lines");
    s.pk = o->probs_kind < 0 ? MS_PROBS_TOPK_RENORM : (ms_probs_kind)o->probs_kind;
    int rc = 0;
    if (s.pk == MS_PROBS_FULL)
        rc = ms_fail(err, "trace import --format jsonl: --probs-kind full is not possible (the log has top-k only)");
    if (rc == 0)
        rc = parse_fields(&s, err);
    if (rc == 0)
        rc = ms_import_dims_resolve(o, "jsonl", &s.d, err);
    if (rc == 0)
        rc = read_all(&s, err);
    if (rc == 0)
        rc = write_requests(&s, out_path, err);
    if (rep)
        *rep = s.rep;
    free(s.rows);
    free(s.ids);
    free(s.w);
    return rc;
}
