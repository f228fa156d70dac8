/* sglang / vllm importers: serving engines' routed-expert outputs
 * (--enable-return-routed-experts); see traces/import/import.h for the
 * mapping and docs/traces.md for the versions followed.
 *
 * The input (API responses: one JSON document, JSON lines, or an SSE
 * stream `data: {...}`) is read whole, up to ENG_FILE_MAX bytes.  Records
 * are merged by response id (a stream's chunks; a usage chunk after the
 * payload), the payload decoded (SGLang: base64 of int32 little-endian
 * [rows, layers, K]; vLLM: base64 of a .npy), then dense layers (all cells
 * 0) dropped and every request written with ids only (probs_kind
 * topk_ids: import_engine_build.c). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "traces/import/b64npy.h"
#include "traces/import/import_engine.h"

/* "FILE:LINE" or "FILE (response N)" for a record. */
void eng_where(const eng_state *s, uint64_t line, uint64_t index, char *buf, size_t cap)
{
    if (line)
        snprintf(buf, cap, "%s:%llu", s->path, (unsigned long long)line);
    else
        snprintf(buf, cap, "%s (response %llu)", s->path, (unsigned long long)index + 1);
}

static eng_req *find_or_add(eng_state *s, const char *key)
{
    for (size_t i = s->n; i-- > 0;)
        if (!strcmp(s->reqs[i].key, key))
            return &s->reqs[i];
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->reqs = ms_xrealloc(s->reqs, s->cap, sizeof *s->reqs);
    }
    eng_req *r = &s->reqs[s->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", key);
    r->P = r->C = r->cached = -1;
    return r;
}

static long long get_count(const cJSON *obj, const char *name)
{
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble > 1e15)
        return -1;
    return (long long)v->valuedouble;
}

/* SGLang: int32 little-endian [rows, La, K], no header. */
static int decode_sglang(eng_state *s, eng_req *r, const uint8_t *b, size_t n, const char *at, ms_err *err)
{
    uint64_t cell = 4ull * s->La * s->K;
    if (n % cell)
        return ms_fail(err, "%s: routed_experts: %zu bytes, not a multiple of 4 x %u layers x K %u = %llu (is "
                            "--engine-layers the model's num_hidden_layers and K its top-k?)",
                       at, n, s->La, s->K, (unsigned long long)cell);
    r->rows = n / cell;
    size_t cnt = n / 4;
    r->ids = ms_xcalloc(cnt ? cnt : 1, sizeof *r->ids);
    for (size_t i = 0; i < cnt; i++)
        r->ids[i] = (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                              (uint32_t)b[4 * i + 3] << 24);
    return 0;
}

/* vLLM: a .npy of shape [rows, La, K], integers. */
static int decode_npy(eng_state *s, eng_req *r, const uint8_t *b, size_t n, const char *at, ms_err *err)
{
    ms_npy_ints a;
    if (ms_npy_parse_ints(b, n, &a, at, err))
        return -1;
    if (a.ndim != 3)
        return ms_fail(err, "%s: routed_experts: .npy has %u axes, expected 3 [tokens, layers, top-k]", at, a.ndim);
    if (s->La && a.shape[1] != s->La)
        return ms_fail(err, "%s: routed_experts: .npy shape (%llu, %llu, %llu), expected %u layers on axis 1", at,
                       (unsigned long long)a.shape[0], (unsigned long long)a.shape[1], (unsigned long long)a.shape[2],
                       s->La);
    if (s->K && a.shape[2] != s->K)
        return ms_fail(err, "%s: routed_experts: .npy shape (%llu, %llu, %llu), expected K = %u on axis 2", at,
                       (unsigned long long)a.shape[0], (unsigned long long)a.shape[1], (unsigned long long)a.shape[2],
                       s->K);
    if (!a.shape[1] || !a.shape[2] || a.shape[1] > 4096 || a.shape[2] > 1024)
        return ms_fail(err, "%s: routed_experts: .npy shape (%llu, %llu, %llu) has no or too many layers / experts",
                       at, (unsigned long long)a.shape[0], (unsigned long long)a.shape[1],
                       (unsigned long long)a.shape[2]);
    s->La = (uint32_t)a.shape[1];
    s->K = (uint32_t)a.shape[2];
    r->rows = a.shape[0];
    r->ids = ms_xcalloc(a.count ? a.count : 1, sizeof *r->ids);
    for (uint64_t i = 0; i < a.count; i++) {
        int64_t v = ms_npy_get(&a, i);
        r->ids[i] = v < INT32_MIN || v > INT32_MAX ? INT32_MIN : (int32_t)v;
    }
    return 0;
}

/* One payload string into r. */
static int take_payload(eng_state *s, eng_req *r, const cJSON *re, uint64_t line, uint64_t index, ms_err *err)
{
    char at[600];
    eng_where(s, line, index, at, sizeof at);
    if (r->have) {
        char first[600];
        eng_where(s, r->line, r->index, first, sizeof first);
        return ms_fail(err, "%s: response %s carries routed experts twice (first at %s)", at, r->key,
                       ms_import_base_name(first));
    }
    uint8_t *b;
    size_t n;
    if (ms_b64_decode(re->valuestring, strlen(re->valuestring), &b, &n, at, err))
        return -1;
    int rc = s->vllm ? decode_npy(s, r, b, n, at, err) : decode_sglang(s, r, b, n, at, err);
    free(b);
    if (rc == 0) {
        r->have = 1;
        r->line = line;
        r->index = index;
        if (ms_import_check_cells(s->path, line, (uint64_t)(r - s->reqs), r->rows, s->La, s->K, "a corrupt payload?",
                                  err))
            return -1;
    }
    return rc;
}

static int nonempty_string(const cJSON *v)
{
    return cJSON_IsString(v) && v->valuestring[0];
}

/* SGLang /generate (meta_info) or OpenAI (sglext; choices[0].sgl_ext). */
static int record_sglang(eng_state *s, const cJSON *o, uint64_t line, uint64_t index, ms_err *err)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "meta_info");
    const cJSON *id, *re = NULL, *counts;
    if (cJSON_IsObject(meta)) {
        id = cJSON_GetObjectItemCaseSensitive(meta, "id");
        re = cJSON_GetObjectItemCaseSensitive(meta, "routed_experts");
        counts = meta;
    } else {
        id = cJSON_GetObjectItemCaseSensitive(o, "id");
        const cJSON *ext = cJSON_GetObjectItemCaseSensitive(o, "sglext");
        if (!cJSON_IsObject(ext)) { /* the choice-level form of the unreleased #17434 */
            const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
            ext = ch ? cJSON_GetObjectItemCaseSensitive(ch, "sgl_ext") : NULL;
        }
        re = ext ? cJSON_GetObjectItemCaseSensitive(ext, "routed_experts") : NULL;
        counts = cJSON_GetObjectItemCaseSensitive(o, "usage");
    }
    char key[200];
    if (cJSON_IsString(id))
        snprintf(key, sizeof key, "%.190s", id->valuestring);
    else
        snprintf(key, sizeof key, "(record %llu)", (unsigned long long)index + 1);
    eng_req *r = find_or_add(s, key);
    long long P = get_count(counts, "prompt_tokens"), C = get_count(counts, "completion_tokens"),
              cached = get_count(counts, "cached_tokens");
    if (P >= 0)
        r->P = P;
    if (C >= 0)
        r->C = C;
    if (cached >= 0)
        r->cached = cached;
    if (!nonempty_string(re)) {
        s->skipped++;
        return 0;
    }
    return take_payload(s, r, re, line, index, err);
}

/* vLLM: choices[i].routed_experts, one request per choice. */
static int record_vllm(eng_state *s, const cJSON *o, uint64_t line, uint64_t index, ms_err *err)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    if (!cJSON_IsString(id))
        id = cJSON_GetObjectItemCaseSensitive(o, "request_id");
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(o, "usage");
    int n_choices = cJSON_IsArray(choices) ? cJSON_GetArraySize(choices) : 0;
    long long P = get_count(usage, "prompt_tokens"), C = n_choices == 1 ? get_count(usage, "completion_tokens") : -1;
    if (n_choices == 0)
        s->skipped++;
    for (int i = 0; i < n_choices; i++) {
        const cJSON *ch = cJSON_GetArrayItem(choices, i);
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(ch, "index");
        int ci = cJSON_IsNumber(idx) ? idx->valueint : i;
        char key[200];
        if (cJSON_IsString(id))
            snprintf(key, sizeof key, "%.180s#%d", id->valuestring, ci);
        else
            snprintf(key, sizeof key, "(record %llu)#%d", (unsigned long long)index + 1, ci);
        eng_req *r = find_or_add(s, key);
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(ch, "token_ids");
        if (P >= 0)
            r->P = P;
        if (C >= 0)
            r->C = C;
        else if (cJSON_IsArray(toks) && r->C < 0)
            r->C = cJSON_GetArraySize(toks);
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(ch, "routed_experts");
        if (!nonempty_string(re)) {
            s->skipped++;
            continue;
        }
        if (take_payload(s, r, re, line, index, err))
            return -1;
    }
    return 0;
}

static int do_record(eng_state *s, const cJSON *v, uint64_t line, ms_err *err)
{
    if (cJSON_IsArray(v)) { /* a batch: one response per element */
        for (const cJSON *e = v->child; e; e = e->next)
            if (do_record(s, e, line, err))
                return -1;
        return 0;
    }
    uint64_t index = s->records++;
    if (!cJSON_IsObject(v)) {
        char at[600];
        eng_where(s, line, index, at, sizeof at);
        return ms_fail(err, "%s: expected a JSON object (an API response)", at);
    }
    return s->vllm ? record_vllm(s, v, line, index, err) : record_sglang(s, v, line, index, err);
}

/* JSON lines or SSE (`data: {...}`, `data: [DONE]`, comments / event lines). */
static int read_lines(eng_state *s, char *buf, ms_err *err)
{
    uint64_t ln = 0;
    for (char *p = buf; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        ln++;
        char *q = p;
        size_t n = strlen(q);
        if (n && q[n - 1] == '\r')
            q[--n] = '\0';
        while (*q == ' ' || *q == '\t')
            q++;
        p = nl ? nl + 1 : NULL;
        if (!strncmp(q, "data:", 5)) {
            q += 5;
            while (*q == ' ')
                q++;
            if (!strcmp(q, "[DONE]"))
                continue;
        } else if (*q == ':' || !strncmp(q, "event:", 6) || !strncmp(q, "id:", 3) || !strncmp(q, "retry:", 6)) {
            continue;
        }
        if (!*q)
            continue;
        const char *end = NULL;
        cJSON *v = cJSON_ParseWithOpts(q, &end, 1);
        if (!v) {
            const char *e = end ? end : cJSON_GetErrorPtr();
            size_t col = e && e >= q ? (size_t)(e - q) + 1 : 1;
            return ms_fail(err, "%s:%llu: bad JSON at column %zu: '%.30s'", s->path, (unsigned long long)ln, col,
                           e && e >= q ? e : q);
        }
        int rc = do_record(s, v, ln, err);
        cJSON_Delete(v);
        if (rc)
            return -1;
    }
    return 0;
}

/* The whole file into *buf (NUL-terminated), at most ENG_FILE_MAX bytes. */
static int read_whole(const char *path, char **buf, size_t *n, ms_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return ms_fail(err, "%s: is a directory, expected a file", path);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > ENG_FILE_MAX)
        return ms_fail(err, "%s: %.1f MiB, more than the %u MiB an engine response file may have (split it)", path,
                       (double)st.st_size / 1048576.0, ENG_FILE_MAX >> 20);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ms_fail(err, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *b = ms_xcalloc(cap + 1, 1);
    size_t got;
    while ((got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            if (cap >= ENG_FILE_MAX) {
                fclose(f);
                free(b);
                return ms_fail(err, "%s: more than the %u MiB an engine response file may have (split it)", path,
                               ENG_FILE_MAX >> 20);
            }
            cap *= 2;
            b = ms_xrealloc(b, cap + 1, 1);
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return ms_fail(err, "%s: read error", path);
    }
    b[len] = '\0';
    *buf = b;
    *n = len;
    return 0;
}

int eng_read_input(eng_state *s, ms_err *err)
{
    char *buf = NULL;
    size_t n = 0;
    if (read_whole(s->path, &buf, &n, err))
        return -1;
    int rc = 0;
    if (s->vllm && n >= 6 && !memcmp(buf, "\x93NUMPY", 6)) { /* offline: np.save(out.routed_experts) */
        eng_req *r = find_or_add(s, "(file)");
        rc = decode_npy(s, r, (const uint8_t *)buf, n, s->path, err);
        r->have = rc == 0;
        r->line = 1;
        s->records = 1;
    } else if (memchr(buf, '\0', n)) {
        rc = ms_fail(err, "%s: NUL byte at offset %zu (binary data, not JSON)", s->path,
                     (size_t)((char *)memchr(buf, '\0', n) - buf));
    } else {
        const char *end = NULL;
        cJSON *doc = cJSON_ParseWithOpts(buf, &end, 1);
        if (doc) { /* one JSON document (pretty-printed or not: then records are named by index) */
            size_t t = n;
            while (t > 0 && (buf[t - 1] == '\n' || buf[t - 1] == '\r' || buf[t - 1] == ' '))
                t--;
            rc = do_record(s, doc, memchr(buf, '\n', t) ? 0 : 1, err);
            cJSON_Delete(doc);
        } else {
            rc = read_lines(s, buf, err);
        }
        if (rc == 0 && s->records == 0)
            rc = ms_fail(err, "%s: empty file (no API responses)", s->path);
    }
    free(buf);
    return rc;
}

