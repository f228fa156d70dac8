/* jsonl importer, reading half: one JSON object per (request, token,
 * layer); see traces/import/import.h for the fields and the mapping.
 *
 * The whole dump (every input file) is read first (requests may
 * interleave): every line is parsed with cJSON and checked, its ids and
 * weights kept in flat arrays (about 56 + 8K bytes per line) and its request
 * key interned.  import_jsonl_req.c then derives token rows and prompt
 * lengths and writes the requests. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import/import_jsonl.h"

#define JL_SUM_TOL 1e-3
#define KEYS_LIST "request, token, layer, experts, weights, phase, prompt_len"

static const char *const field_keys[N_FIELDS] = {"request", "token",  "layer",     "experts",
                                                 "weights", "phase", "prompt_len"};
/* prompt_len has no default: the field is read only when named */
static const char *const field_defaults[N_FIELDS] = {"request_id",   "token_idx", "layer", "topk_ids",
                                                     "topk_weights", "is_prompt", ""};

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
            return ms_fail(err, "trace import --format jsonl: --fields: '%s' is not key=name (keys: " KEYS_LIST ")",
                           tok);
        *eq = '\0';
        int k = 0;
        while (k < N_FIELDS && strcmp(field_keys[k], tok))
            k++;
        if (k == N_FIELDS)
            return ms_fail(err, "trace import --format jsonl: --fields: unknown key '%s' (keys: " KEYS_LIST ")", tok);
        snprintf(s->names[k], sizeof s->names[k], "%s", eq + 1);
    }
    return 0;
}

/* Short text of a JSON value for messages.  A number beyond a double's
 * range (1e400), which cJSON holds as infinite and would print as null, is
 * named as out of range. */
static void value_text(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsNumber(v) && isinf(v->valuedouble)) {
        snprintf(buf, cap, "%s (out of range)", v->valuedouble > 0 ? "1e309 or more" : "-1e309 or less");
        return;
    }
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
    if (s->o->all_decode) { /* --phase decode */
        *prompt = 0;
        return 0;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, s->names[F_PHASE]);
    if (!v)
        return ms_fail(err, "%s:%llu: field %s: missing (a dump without a phase field: --prompt-len P when tokens "
                            "< P are the prompt, --phase decode when every line is a generated token)",
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

/* Reads the expert ids and weights of one line into the pools; an ids-only
 * dump (topk_ids) has no weights: each id gets the 1/K placeholder. */
static int parse_routing(jl_state *s, uint64_t ln, const cJSON *obj, size_t off, ms_err *err)
{
    const cJSON *ids, *ws = NULL;
    int ids_only = s->pk == MS_PROBS_TOPK_IDS;
    if (get_field(s, ln, obj, F_EXPERTS, &ids, err))
        return -1;
    if (!ids_only && !(ws = cJSON_GetObjectItemCaseSensitive(obj, s->names[F_WEIGHTS])))
        return ms_fail(err, "%s:%llu: field %s: missing (a dump of expert ids without weights: --probs-kind topk_ids)",
                       s->path, (unsigned long long)ln, s->names[F_WEIGHTS]);
    const char *ni = s->names[F_EXPERTS], *nw = s->names[F_WEIGHTS];
    if (!cJSON_IsArray(ids) || (ws && !cJSON_IsArray(ws)))
        return ms_fail(err, "%s:%llu: field %s: not an array", s->path, (unsigned long long)ln,
                       cJSON_IsArray(ids) ? nw : ni);
    uint32_t K = s->d.K;
    int ni_n = cJSON_GetArraySize(ids), nw_n = ws ? cJSON_GetArraySize(ws) : (int)K;
    if ((uint32_t)ni_n != K || (uint32_t)nw_n != K)
        return ms_fail(err, "%s:%llu: field %s: %d entries, expected K=%u", s->path, (unsigned long long)ln,
                       (uint32_t)ni_n != K ? ni : nw, (uint32_t)ni_n != K ? ni_n : nw_n, K);
    double sum = 0;
    char t[64];
    for (uint32_t k = 0; k < K; k++) {
        const cJSON *e = cJSON_GetArrayItem(ids, (int)k);
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
        s->ids[off + k] = (int32_t)id;
        if (ids_only) {
            s->w[off + k] = (float)(1.0 / K);
            continue;
        }
        const cJSON *w = cJSON_GetArrayItem(ws, (int)k);
        if (!cJSON_IsNumber(w) || !isfinite(w->valuedouble) || w->valuedouble < 0 ||
            w->valuedouble > 1 + JL_SUM_TOL) {
            value_text(w, t, sizeof t);
            return ms_fail(err, "%s:%llu: field %s: value %s is not a number in [0, 1]", s->path,
                           (unsigned long long)ln, nw, t);
        }
        s->w[off + k] = (float)w->valuedouble;
        sum += w->valuedouble;
    }
    if (ids_only)
        return 0;
    if (s->pk == MS_PROBS_TOPK_RENORM && fabs(sum - 1) > JL_SUM_TOL)
        return ms_fail(err, "%s:%llu: field %s: weights sum to %.6g, expected 1 (topk_renorm; use --probs-kind "
                            "topk_raw for raw softmax weights)",
                       s->path, (unsigned long long)ln, nw, sum);
    if (sum > 1 + JL_SUM_TOL)
        return ms_fail(err, "%s:%llu: field %s: weights sum to %.6g, more than 1", s->path, (unsigned long long)ln,
                       nw, sum);
    return 0;
}


/* --request-key a,b,...: the fields whose values together name a request
 * (default: the request field alone). */
static int parse_request_key(jl_state *s, ms_err *err)
{
    s->n_key_fields = 0;
    if (!s->o->request_key) {
        snprintf(s->key_fields[0], sizeof s->key_fields[0], "%s", s->names[F_REQUEST]);
        s->n_key_fields = 1;
        return 0;
    }
    s->custom_key = 1;
    const char *p = s->o->request_key;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == 0 || n >= sizeof s->key_fields[0] || s->n_key_fields == JL_MAX_KEY_FIELDS)
            return ms_fail(err, "trace import --format jsonl: --request-key '%s': expected 1 to %u comma-separated "
                                "field names (each under 64 characters)",
                           s->o->request_key, JL_MAX_KEY_FIELDS);
        snprintf(s->key_fields[s->n_key_fields++], sizeof s->key_fields[0], "%.*s", (int)n, p);
        if (!c)
            return 0;
        p = c + 1;
    }
}

/* The request key text of one line: its key fields' values (integers >= 0
 * or strings), and the file index when several inputs are namespaced. */
static int line_key(jl_state *s, uint64_t ln, const cJSON *obj, uint32_t *key, ms_err *err)
{
    char text[1024];
    size_t n = 0;
    if (s->n_files > 1)
        n += (size_t)snprintf(text, sizeof text, "%u\x1f", s->file);
    int numeric = s->n_key_fields == 1;
    uint64_t num = 0;
    for (uint32_t i = 0; i < s->n_key_fields; i++) {
        const char *f = s->key_fields[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, f);
        if (!v)
            return ms_fail(err, "%s:%llu: field %s: missing%s%s%s", s->path, (unsigned long long)ln, f,
                           s->custom_key ? " (--request-key " : "", s->custom_key ? s->o->request_key : "",
                           s->custom_key ? ")" : "");
        if (cJSON_IsString(v)) {
            numeric = 0;
        } else if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble != floor(v->valuedouble) ||
                   v->valuedouble > 9007199254740991.0) {
            char t[64];
            value_text(v, t, sizeof t);
            return ms_fail(err, "%s:%llu: field %s: value %s is not a non-negative integer or a string", s->path,
                           (unsigned long long)ln, f, t);
        } else {
            num = (uint64_t)v->valuedouble;
        }
        char *t = cJSON_PrintUnformatted(v);
        size_t tl = t ? strlen(t) : 0;
        if (n + tl + 2 > sizeof text) {
            free(t);
            return ms_fail(err, "%s:%llu: request key longer than %zu characters", s->path, (unsigned long long)ln,
                           sizeof text - 2);
        }
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", i ? "\x1f" : "", t ? t : "");
        free(t);
    }
    *key = jl_key_intern(s, text, numeric, num);
    return 0;
}

static int parse_prompt_len(jl_state *s, uint64_t ln, const cJSON *obj, uint32_t *plen, ms_err *err)
{
    *plen = JL_NO_PLEN;
    if (!s->names[F_PROMPT_LEN][0])
        return 0;
    const cJSON *v;
    uint64_t x;
    if (get_field(s, ln, obj, F_PROMPT_LEN, &v, err) ||
        as_uint(s, ln, s->names[F_PROMPT_LEN], v, JL_MAX_TOKENS - 1, &x, err))
        return -1;
    *plen = (uint32_t)x;
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
    uint64_t tok = 0, layer = 0;
    uint32_t key = 0, plen = JL_NO_PLEN;
    int8_t prompt = -1;
    if (line_key(s, ln, obj, &key, err) || get_field(s, ln, obj, F_TOKEN, &v, err) ||
        as_uint(s, ln, s->names[F_TOKEN], v, JL_MAX_TOKENS - 1, &tok, err) || get_field(s, ln, obj, F_LAYER, &v, err) ||
        as_uint(s, ln, s->names[F_LAYER], v, (s->d.L ? s->d.L : JL_MAX_LAYERS) - 1, &layer, err) ||
        parse_phase(s, ln, obj, &prompt, err) || parse_prompt_len(s, ln, obj, &plen, err)) {
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
    s->rows[s->n] = (jl_row){key, s->file, ln, s->n, (uint32_t)tok, (uint32_t)layer, 0, plen, prompt, 0, off};
    s->n++;
    if (layer > s->max_layer)
        s->max_layer = (uint32_t)layer;
out:
    cJSON_Delete(obj);
    return rc;
}

static int read_file(jl_state *s, ms_err *err)
{
    ms_lines r;
    if (ms_lines_open(&r, s->path, err))
        return -1;
    int rc;
    size_t before = s->n;
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
    if (s->n == before)
        return ms_fail(err, "%s: empty file (no JSON lines)", s->path);
    return 0;
}

int ms_import_jsonl_files(const char *const *in_paths, size_t n_in, const char *out_path, const ms_import_opts *o,
                          ms_import_report *rep, ms_err *err)
{
    jl_state s;
    memset(&s, 0, sizeof s);
    s.paths = in_paths;
    s.n_files = n_in;
    s.o = o;
    snprintf(s.rep.input, sizeof s.rep.input, "%s", ms_import_base_name(in_paths[0]));
    if (n_in > 1) {
        size_t l = strlen(s.rep.input);
        snprintf(s.rep.input + l, sizeof s.rep.input - l, " + %zu more", n_in - 1);
    }
    snprintf(s.rep.row_unit, sizeof s.rep.row_unit, "JSON lines");
    s.pk = o->probs_kind < 0 ? MS_PROBS_TOPK_RENORM : (ms_probs_kind)o->probs_kind;
    int rc = 0;
    if (n_in == 0 || n_in > UINT32_MAX)
        rc = ms_fail(err, "trace import --format jsonl: no input file");
    if (rc == 0 && s.pk != MS_PROBS_TOPK_RENORM && s.pk != MS_PROBS_TOPK_RAW && s.pk != MS_PROBS_TOPK_IDS)
        rc = ms_fail(err, "trace import --format jsonl: --probs-kind %s is not possible (the log has top-k ids, and "
                          "weights or not: topk_renorm, topk_raw or topk_ids)",
                     ms_probs_kind_name(s.pk));
    if (rc == 0 && o->all_decode && o->prompt_len)
        rc = ms_fail(err, "trace import --format jsonl: --phase decode and --prompt-len %u contradict each other "
                          "(--phase decode: the dump has no prompt lines)",
                     o->prompt_len);
    if (rc == 0)
        rc = parse_fields(&s, err);
    if (rc == 0)
        rc = parse_request_key(&s, err);
    if (rc == 0)
        rc = ms_import_dims_resolve(o, "jsonl", &s.d, err);
    for (size_t i = 0; rc == 0 && i < n_in; i++) {
        s.path = in_paths[i];
        s.file = (uint32_t)i;
        rc = read_file(&s, err);
    }
    if (rc == 0)
        rc = jl_write_requests(&s, out_path, err);
    if (rep)
        *rep = s.rep;
    for (uint32_t i = 0; i < s.n_keys; i++)
        free(s.keys[i].text);
    free(s.keys);
    free(s.slots);
    free(s.rows);
    free(s.ids);
    free(s.w);
    return rc;
}

int ms_import_jsonl(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                    ms_err *err)
{
    return ms_import_jsonl_files(&in_path, 1, out_path, o, rep, err);
}
