/* jsonl importer, request half: request keys, token rows from the dumped
 * positions (--token-pos), prompt lengths (phase field, --prompt-len, a
 * prompt-length field, or none for a request that starts with decode), and
 * the requests built and written in order of first appearance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import/import_jsonl.h"

/* ---- request keys ---- */

static uint32_t hash_text(const char *t)
{
    uint32_t h = 2166136261u;
    for (; *t; t++)
        h = (h ^ (uint8_t)*t) * 16777619u;
    return h;
}

static void rehash(jl_state *s)
{
    uint32_t n = s->n_slots ? 2 * s->n_slots : 64;
    free(s->slots);
    s->slots = ms_xcalloc(n, sizeof *s->slots);
    s->n_slots = n;
    for (uint32_t i = 0; i < s->n_keys; i++) {
        uint32_t h = hash_text(s->keys[i].text) & (n - 1);
        while (s->slots[h])
            h = (h + 1) & (n - 1);
        s->slots[h] = i + 1;
    }
}

uint32_t jl_key_intern(jl_state *s, const char *text, int numeric, uint64_t num)
{
    if (2 * (s->n_keys + 1) > s->n_slots)
        rehash(s);
    uint32_t h = hash_text(text) & (s->n_slots - 1);
    while (s->slots[h]) {
        if (!strcmp(s->keys[s->slots[h] - 1].text, text))
            return s->slots[h] - 1;
        h = (h + 1) & (s->n_slots - 1);
    }
    if (s->n_keys == s->cap_keys) {
        s->cap_keys = s->cap_keys ? 2 * s->cap_keys : 64;
        s->keys = ms_xrealloc(s->keys, s->cap_keys, sizeof *s->keys);
    }
    s->keys[s->n_keys] = (jl_key){ms_xstrdup(text), num, numeric};
    s->slots[h] = ++s->n_keys;
    return s->n_keys - 1;
}

void jl_key_name(const jl_state *s, uint32_t key, char *buf, size_t cap)
{
    const jl_key *k = &s->keys[key];
    if (k->numeric && s->n_files == 1) {
        snprintf(buf, cap, "%llu", (unsigned long long)k->num);
        return;
    }
    const char *t = k->text;
    size_t n = 0;
    if (s->n_files > 1) { /* "FILE:" instead of the file index */
        const char *sep = strchr(t, '\x1f');
        unsigned f = (unsigned)strtoul(t, NULL, 10);
        n = (size_t)snprintf(buf, cap, "%s:", ms_import_base_name(s->paths[f < s->n_files ? f : 0]));
        t = sep ? sep + 1 : t;
    }
    for (; *t && n + 1 < cap; t++)
        buf[n++] = *t == '\x1f' ? ',' : *t;
    buf[n < cap ? n : cap - 1] = '\0';
}

/* Request ids: the request field's value with one input and one integer key
 * field (what the dump says), else 0, 1, ... in order of first appearance. */
static int ids_renumbered(const jl_state *s)
{
    if (s->n_files > 1)
        return 1;
    for (uint32_t i = 0; i < s->n_keys; i++)
        if (!s->keys[i].numeric)
            return 1;
    return 0;
}

/* ---- token rows and prompt lengths ---- */

static int cmp_seq(const void *a, const void *b)
{
    const jl_row *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

static int cmp_rows(const void *a, const void *b)
{
    const jl_row *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

#define PATH_OF(s, r) ((s)->paths[(r)->file])

/* --token-pos per-step: a line whose (token, layer) the request already has
 * in its current step starts the request's next step (steps in file order);
 * a step's rows follow the previous step's. */
static int rows_per_step(jl_state *s, jl_row *r, size_t n, uint32_t L, ms_err *err)
{
    uint32_t *stamp = NULL, stamp_cap = 0, now = 1, base = 0, width = 0;
    int rc = 0;
    s->steps++;
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t need = ((uint64_t)r[i].token + 1) * L;
        if (need > stamp_cap) {
            rc = ms_import_check_cells(PATH_OF(s, &r[i]), r[i].line, r[i].key, r[i].token + 1, L, 1,
                                       "a corrupt token index?", err);
            if (rc)
                break;
            uint32_t cap = stamp_cap ? stamp_cap : 64;
            while (cap < need)
                cap *= 2;
            stamp = ms_xrealloc(stamp, cap, sizeof *stamp);
            memset(stamp + stamp_cap, 0, (size_t)(cap - stamp_cap) * sizeof *stamp);
            stamp_cap = cap;
        }
        uint32_t *st = &stamp[(size_t)r[i].token * L + r[i].layer];
        if (*st == now) { /* seen in this step: the next step begins */
            base += width;
            width = 0;
            now++;
            s->steps++;
        }
        stamp[(size_t)r[i].token * L + r[i].layer] = now;
        if ((uint64_t)base + r[i].token >= JL_MAX_TOKENS)
            rc = ms_fail(err, "%s:%llu: request has more than %u token rows (per-step positions)", PATH_OF(s, &r[i]),
                         (unsigned long long)r[i].line, JL_MAX_TOKENS);
        r[i].row = base + r[i].token;
        r[i].step = now - 1;
        if (r[i].token + 1 > width)
            width = r[i].token + 1;
    }
    free(stamp);
    return rc;
}

/* --prompt-len P: rows < P are the prompt, or under per-step positions the
 * rows of the first P steps (P counts steps there, as the report does).
 * Marks every line's phase and gives the prompt length in rows. */
static int prompt_from_flag(jl_state *s, jl_row *r, size_t n, const char *name, uint32_t *P_out, ms_err *err)
{
    uint32_t P = s->o->prompt_len;
    if (s->o->token_pos != MS_TOKEN_POS_PER_STEP) {
        for (size_t i = 0; i < n; i++)
            r[i].prompt = r[i].row < P;
        *P_out = P;
        return 0;
    }
    uint32_t steps = 0, rows = 0;
    for (size_t i = 0; i < n; i++) {
        r[i].prompt = r[i].step < P;
        if (r[i].step + 1 > steps)
            steps = r[i].step + 1;
        if (r[i].prompt && r[i].row + 1 > rows)
            rows = r[i].row + 1;
    }
    if (steps < P)
        return ms_fail(err, "%s:%llu: request %s has %u step%s, fewer than --prompt-len %u (with --token-pos "
                            "per-step, --prompt-len counts the steps that form the prompt, usually 1)",
                       PATH_OF(s, &r[0]), (unsigned long long)r[0].line, name, steps, steps == 1 ? "" : "s", P);
    s->prompt_steps++;
    *P_out = rows;
    return 0;
}

/* Prompt length of one request (lines r[0..n) in file order, rows set) and
 * the shift of its rows: a request that starts with decode under
 * per-request / per-step positions has its decode rows after the prompt. */
static int request_prompt(jl_state *s, jl_row *r, size_t n, uint32_t *P_out, ms_err *err)
{
    char name[160];
    jl_key_name(s, r[0].key, name, sizeof name);
    uint32_t field = JL_NO_PLEN;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && r[i].plen != r[0].plen)
            return ms_fail(err, "%s:%llu: field %s: request %s has prompt length %u here but %u on %s:%llu",
                           PATH_OF(s, &r[i]), (unsigned long long)r[i].line, s->names[F_PROMPT_LEN], name, r[i].plen,
                           r[0].plen, ms_import_base_name(PATH_OF(s, &r[0])), (unsigned long long)r[0].line);
        field = r[i].plen;
    }
    if (s->o->prompt_len)
        return prompt_from_flag(s, r, n, name, P_out, err);
    const jl_row *last_prompt = NULL, *first_decode = NULL;
    for (size_t i = 0; i < n; i++) {
        if (r[i].prompt && (!last_prompt || r[i].row > last_prompt->row))
            last_prompt = &r[i];
        if (!r[i].prompt && (!first_decode || r[i].row < first_decode->row))
            first_decode = &r[i];
    }
    if (last_prompt && first_decode && first_decode->row < last_prompt->row)
        return ms_fail(err, "%s:%llu: field %s: prompt token %u of request %s comes after decode token %u (line %llu)",
                       PATH_OF(s, last_prompt), (unsigned long long)last_prompt->line, s->names[F_PHASE],
                       last_prompt->row, name, first_decode->row, (unsigned long long)first_decode->line);
    uint32_t P, shift = 0;
    if (last_prompt) {
        P = last_prompt->row + 1;
        if (field != JL_NO_PLEN && field < P)
            return ms_fail(err, "%s:%llu: field %s: request %s has prompt length %u but prompt token %u",
                           PATH_OF(s, last_prompt), (unsigned long long)last_prompt->line, s->names[F_PROMPT_LEN],
                           name, field, last_prompt->row);
        if (field != JL_NO_PLEN)
            P = field;
    } else { /* the request starts with decode: its prompt is not in the dump */
        s->decode_only++;
        if (s->o->token_pos == MS_TOKEN_POS_ABSOLUTE && field == JL_NO_PLEN) {
            if (first_decode->row == 0)
                return ms_fail(err, "%s:%llu: request %s starts with decode at position 0: its prompt length is "
                                    "unknown (absolute positions count the prompt; name a prompt-length field with "
                                    "--fields prompt_len=NAME, or use --token-pos per-request)",
                               PATH_OF(s, first_decode), (unsigned long long)first_decode->line, name);
            P = first_decode->row;
            s->plen_first_decode++;
        } else if (field != JL_NO_PLEN) {
            if (field == 0)
                return ms_fail(err, "%s:%llu: field %s: request %s has prompt length 0 (a request has at least one "
                                    "prompt token)",
                               PATH_OF(s, &r[0]), (unsigned long long)r[0].line, s->names[F_PROMPT_LEN], name);
            P = field;
            s->plen_field++;
            shift = s->o->token_pos == MS_TOKEN_POS_ABSOLUTE ? 0 : P;
        } else {
            P = 1; /* unknown: one placeholder prompt row, every cell missing */
            s->plen_unknown++;
            shift = 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if ((uint64_t)r[i].row + shift >= JL_MAX_TOKENS)
            return ms_fail(err, "%s:%llu: request %s: token row %llu exceeds %u", PATH_OF(s, &r[i]),
                           (unsigned long long)r[i].line, name, (unsigned long long)r[i].row + shift,
                           JL_MAX_TOKENS - 1);
        r[i].row += shift;
        if (!r[i].prompt && r[i].row < P)
            return ms_fail(err, "%s:%llu: request %s: decode token %u inside the prompt (prompt length %u)",
                           PATH_OF(s, &r[i]), (unsigned long long)r[i].line, name, r[i].row, P);
    }
    *P_out = P;
    return 0;
}

/* Sets every line's row and every request's prompt length (P[key]). */
static int derive_rows(jl_state *s, uint32_t L, uint32_t *P, ms_err *err)
{
    qsort(s->rows, s->n, sizeof *s->rows, cmp_seq);
    for (size_t b = 0; b < s->n;) {
        size_t e = b;
        while (e < s->n && s->rows[e].key == s->rows[b].key)
            e++;
        jl_row *r = &s->rows[b];
        if (s->o->token_pos == MS_TOKEN_POS_PER_STEP) {
            if (rows_per_step(s, r, e - b, L, err))
                return -1;
        } else {
            for (size_t i = 0; i < e - b; i++)
                r[i].row = r[i].token;
        }
        if (request_prompt(s, r, e - b, &P[r[0].key], err))
            return -1;
        b = e;
    }
    qsort(s->rows, s->n, sizeof *s->rows, cmp_rows);
    return 0;
}

/* ---- building requests ---- */

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

static int build_request(jl_state *s, const ms_trace_meta *m, const jl_row *r, size_t n, uint32_t P, uint64_t id,
                         ms_request *req, ms_err *err)
{
    char name[160];
    jl_key_name(s, r[0].key, name, sizeof name);
    uint32_t rows = r[n - 1].row + 1 > P ? r[n - 1].row + 1 : P;
    if (ms_import_check_cells(PATH_OF(s, &r[n - 1]), r[n - 1].line, id, rows, m->L, m->K,
                              "a corrupt token index or layer number?", err))
        return -1;
    memset(req, 0, sizeof *req);
    req->id = id;
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
        if (i > 0 && r[i].row == r[i - 1].row && r[i].prompt != r[i - 1].prompt) {
            ms_request_free(req);
            return ms_fail(err, "%s:%llu: field %s: token %u of request %s is %s here but %s on line %llu",
                           PATH_OF(s, &r[i]), (unsigned long long)r[i].line, s->names[F_PHASE], r[i].row, name,
                           r[i].prompt ? "prompt" : "decode", r[i - 1].prompt ? "prompt" : "decode",
                           (unsigned long long)r[i - 1].line);
        }
        if (i > 0 && r[i].row == r[i - 1].row && r[i].layer == r[i - 1].layer) {
            ms_request_free(req);
            return ms_fail(err, "%s:%llu: field %s: request %s token %u layer %u given twice (first on line %llu)%s",
                           PATH_OF(s, &r[i]), (unsigned long long)r[i].line, s->names[F_LAYER], name, r[i].row,
                           r[i].layer, (unsigned long long)r[i - 1].line,
                           s->o->token_pos == MS_TOKEN_POS_PER_STEP ? "" : " (positions restarting per step? --token-pos per-step)");
        }
        size_t c = ms_topk_index(m, r[i].row, r[i].layer);
        memcpy(&req->topk_ids[c], &s->ids[r[i].off], m->K * sizeof *s->ids);
        memcpy(&req->topk_w[c], &s->w[r[i].off], m->K * sizeof *s->w);
    }
    for (uint32_t t = 0; t < rows; t++)
        for (uint32_t l = 0; l < m->L; l++)
            if (req->topk_ids[ms_topk_index(m, t, l)] < 0)
                note_missing(s, req->id, t, l, P);
    if (ms_request_check(m, req, PATH_OF(s, &r[0]), err)) {
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

static void add_notes(jl_state *s, int renumbered)
{
    ms_import_report *rep = &s->rep;
    if (s->n_files > 1)
        ms_import_note(rep, "%zu input files, requests kept apart per file", s->n_files);
    if (renumbered)
        ms_import_note(rep, "request keys (%s%s) -> ids 0..%u in order of first appearance",
                       s->o->request_key ? s->o->request_key : s->names[F_REQUEST], s->n_files > 1 ? ", file" : "",
                       s->n_keys - 1);
    if (s->o->token_pos == MS_TOKEN_POS_PER_STEP)
        ms_import_note(rep, "token positions restart per step: %llu steps in file order",
                       (unsigned long long)s->steps);
    if (s->prompt_steps)
        ms_import_note(rep, "prompt = the first %u step%s of each request (--prompt-len counts steps with --token-pos "
                            "per-step)",
                       s->o->prompt_len, s->o->prompt_len == 1 ? "" : "s");
    if (s->o->all_decode)
        ms_import_note(rep, "every line a generated token (--phase decode)");
    if (s->pk == MS_PROBS_TOPK_IDS)
        ms_import_note(rep, "expert ids only: no gate weights read, stored as the 1/K placeholder (probs_kind "
                            "topk_ids)");
    if (s->decode_only) {
        char how[256] = "";
        size_t n = 0;
        if (s->plen_field)
            n += (size_t)snprintf(how + n, sizeof how - n, ", %llu with the prompt length from field %s",
                                  (unsigned long long)s->plen_field, s->names[F_PROMPT_LEN]);
        if (s->plen_first_decode && n < sizeof how)
            n += (size_t)snprintf(how + n, sizeof how - n, ", %llu from the first decode position",
                                  (unsigned long long)s->plen_first_decode);
        if (s->plen_unknown && n < sizeof how)
            snprintf(how + n, sizeof how - n, ", %llu with the prompt length unknown (1 placeholder prompt row)",
                     (unsigned long long)s->plen_unknown);
        ms_import_note(rep, "%llu request%s start%s with decode (prompt rows not in the dump: missing cells)%s",
                       (unsigned long long)s->decode_only, s->decode_only == 1 ? "" : "s",
                       s->decode_only == 1 ? "s" : "", how);
    }
}

int jl_write_requests(jl_state *s, const char *out_path, ms_err *err)
{
    if (!s->d.L)
        s->d.L = s->max_layer + 1;
    uint32_t *P = ms_xcalloc(s->n_keys, sizeof *P);
    int rc = derive_rows(s, s->d.L, P, err);
    int renumbered = ids_renumbered(s);
    char source[MS_SOURCE_MAX];
    size_t sn = (size_t)snprintf(source, sizeof source, "%.300s", ms_import_base_name(s->paths[0]));
    if (s->n_files > 1)
        sn += (size_t)snprintf(source + sn, sizeof source - sn, " + %zu more", s->n_files - 1);
    sn += (size_t)snprintf(source + sn, sizeof source - sn, " (jsonl routing log");
    if (s->pk == MS_PROBS_TOPK_IDS)
        sn += (size_t)snprintf(source + sn, sizeof source - sn, ": expert ids only, weights 1/K placeholders");
    if (s->plen_unknown)
        sn += (size_t)snprintf(source + sn, sizeof source - sn,
                               "; %llu requests start with decode, prompt length unknown: 1 placeholder prompt row",
                               (unsigned long long)s->plen_unknown);
    snprintf(source + sn, sizeof source - sn, ")");
    ms_trace_meta m;
    ms_import_meta_fill(&s->d, source, s->pk, &m);
    /* groups in key order = order of first appearance */
    ms_import_sink sink;
    memset(&sink, 0, sizeof sink);
    if (rc == 0)
        rc = ms_import_sink_open(&sink, s->paths[0], out_path, &m, err);
    for (size_t b = 0; rc == 0 && b < s->n;) {
        size_t e = b;
        while (e < s->n && s->rows[e].key == s->rows[b].key)
            e++;
        uint32_t key = s->rows[b].key;
        ms_request req;
        rc = build_request(s, &m, &s->rows[b], e - b, P[key], renumbered ? key : s->keys[key].num, &req, err);
        if (rc == 0) {
            rc = ms_writer_add(sink.w, &req, err);
            ms_request_free(&req);
        }
        b = e;
    }
    if (sink.w)
        rc = ms_import_sink_finish(&sink, rc, err);
    if (rc == 0)
        add_notes(s, renumbered);
    free(P);
    ms_trace_meta_free(&m);
    return rc;
}
