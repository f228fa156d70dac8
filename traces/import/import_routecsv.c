/* route-csv importer ("route_trace v1"): see traces/import/import.h for the format
 * and its mapping to the trace model.
 *
 * The parser pulls one turn at a time: rows of the current turn are
 * buffered, sorted by (step, layer, slot) when the turn ends, checked for
 * gaps and duplicates, and turned into one ms_request.  Work is
 * O(rows log rows); memory is one turn. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "traces/import/import.h"
#include "sim/core/params.h"

#define RC_MAGIC "# route_trace v1"
#define RC_COLUMNS "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes"
#define RC_NFIELDS 9
/* Limits of trace format v1 (docs/trace-format.md); they also keep a corrupt
 * header from asking for absurd allocations. */
#define RC_MAX_LAYERS 4096u
#define RC_MAX_EXPERTS 65536u
#define RC_MAX_TOPK 1024u
#define RC_WEIGHT_SUM_TOL 1e-3 /* renormalised top-k weights printed with ~6 digits */

typedef struct {
    uint64_t line;
    uint32_t step, layer, slot;
    int32_t expert;
    float weight;
    int8_t residency;
} rc_row;

typedef struct {
    const char *path;
    ms_lines in;     /* the capped line reader of import_common.c */
    char *buf;       /* in.buf: the line just read */
    uint64_t lineno;
    int had_newline; /* the line just read ended with '\n' */
    ms_trace_meta meta;
    /* rows of the turn being gathered */
    rc_row *rows;
    size_t n_rows, cap_rows;
    uint64_t turn;
    int in_turn;
    int turn_has_decode;
    uint32_t turn_max_prefill_step;
    int turn_has_prefill;
    /* a row of the next turn, read before the current one was handed out */
    int have_pending;
    uint64_t pending_turn;
    int pending_phase;
    rc_row pending;
    int at_eof;
    ms_import_report rep;
} rc_parser;

/* ---- line reading ---- */

/* Reads the next line without its "\n" / "\r\n" through the capped reader
 * (MS_IMPORT_LINE_MAX bytes, no NUL bytes), so that a huge file of garbage
 * fails at its first line.  1 line, 0 EOF, -1 error. */
static int read_line(rc_parser *p, ms_err *err)
{
    int r = ms_lines_next(&p->in, err);
    p->buf = p->in.buf;
    p->lineno = p->in.lineno;
    p->had_newline = p->in.had_newline;
    return r;
}

/* ---- header ---- */

/* `why` (may be NULL) names the limit in the range message, e.g. "n_layer=48". */
static int parse_u64_lim(rc_parser *p, const char *field, const char *val, unsigned long long lo,
                         unsigned long long hi, const char *why, unsigned long long *out, ms_err *err)
{
    unsigned long long v;
    if (ms_parse_u64(val, &v) != 0)
        return ms_fail(err, "%s:%llu: field %s: '%.40s' is not a non-negative integer", p->path,
                       (unsigned long long)p->lineno, field, val);
    if (v < lo && hi == UINT64_MAX)
        return ms_fail(err, "%s:%llu: field %s: value %llu is below %llu%s%s%s", p->path, (unsigned long long)p->lineno,
                       field, v, lo, why ? " (" : "", why ? why : "", why ? ")" : "");
    if (v < lo || v > hi)
        return ms_fail(err, "%s:%llu: field %s: value %llu out of range [%llu, %llu]%s%s%s", p->path,
                       (unsigned long long)p->lineno, field, v, lo, hi, why ? " (" : "", why ? why : "",
                       why ? ")" : "");
    *out = v;
    return 0;
}

static int parse_u64_in(rc_parser *p, const char *field, const char *val, unsigned long long lo,
                        unsigned long long hi, unsigned long long *out, ms_err *err)
{
    return parse_u64_lim(p, field, val, lo, hi, NULL, out, err);
}

typedef struct {
    const char *key;
    const char *val;
} kv_pair;

/* Splits "# k=v k=v ..." (buf modified) into pairs; a repeated key or a
 * token without '=' is an error. */
static int split_header_kv(rc_parser *p, char *line, kv_pair *kv, int cap, int *n_out, ms_err *err)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line + 1, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return ms_fail(err, "%s:%llu: header: '%.60s' is not key=value", p->path,
                           (unsigned long long)p->lineno, tok);
        *eq = '\0';
        for (int i = 0; i < n; i++)
            if (!strcmp(kv[i].key, tok))
                return ms_fail(err, "%s:%llu: header: key '%s' given twice", p->path,
                               (unsigned long long)p->lineno, tok);
        if (n == cap)
            return ms_fail(err, "%s:%llu: header: too many keys (at '%.40s')", p->path,
                           (unsigned long long)p->lineno, tok);
        kv[n].key = tok;
        kv[n].val = eq + 1;
        n++;
    }
    *n_out = n;
    return 0;
}

/* Looks each of `keys` up in kv (all required, no others allowed). */
static int match_keys(rc_parser *p, const kv_pair *kv, int n, const char *const *keys, int n_keys,
                      const char **vals, ms_err *err)
{
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (int k = 0; k < n_keys; k++)
            if (!strcmp(kv[i].key, keys[k])) {
                vals[k] = kv[i].val;
                known = 1;
            }
        if (!known)
            return ms_fail(err, "%s:%llu: header: unknown key '%.40s'", p->path, (unsigned long long)p->lineno,
                           kv[i].key);
    }
    for (int k = 0; k < n_keys; k++) {
        if (!vals[k])
            return ms_fail(err, "%s:%llu: header: key '%s' missing", p->path, (unsigned long long)p->lineno,
                           keys[k]);
        if (!*vals[k])
            return ms_fail(err, "%s:%llu: header: field %s: empty value", p->path, (unsigned long long)p->lineno,
                           keys[k]);
    }
    return 0;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* model_name = "<model file name without .gguf> (<arch>)". */
static int set_model_name(rc_parser *p, const char *model, const char *arch, ms_err *err)
{
    const char *b = base_name(model);
    size_t len = strlen(b);
    if (len > 5 && !strcmp(b + len - 5, ".gguf"))
        len -= 5;
    int w = snprintf(p->meta.model_name, sizeof p->meta.model_name, "%.*s (%s)", (int)len, b, arch);
    if (w < 0 || (size_t)w >= sizeof p->meta.model_name)
        return ms_fail(err, "%s:%llu: field model: name '%.*s (%s)' longer than %d characters", p->path,
                       (unsigned long long)p->lineno, (int)len, b, arch, MS_NAME_MAX - 1);
    return 0;
}

static int parse_model_line(rc_parser *p, ms_err *err)
{
    static const char *const keys[] = {"model", "arch", "n_layer", "n_expert", "n_expert_used"};
    const char *vals[5] = {0};
    kv_pair kv[8];
    int n = 0; /* zero-initialised (and below) only to quiet gcc 12's -O3 maybe-uninitialized */
    if (split_header_kv(p, p->buf, kv, 8, &n, err) || match_keys(p, kv, n, keys, 5, vals, err))
        return -1;
    unsigned long long L = 0, J = 0, K = 0;
    if (parse_u64_in(p, "n_layer", vals[2], 1, RC_MAX_LAYERS, &L, err) ||
        parse_u64_in(p, "n_expert", vals[3], 1, RC_MAX_EXPERTS, &J, err) ||
        parse_u64_in(p, "n_expert_used", vals[4], 1, RC_MAX_TOPK, &K, err))
        return -1;
    if (K > J)
        return ms_fail(err, "%s:%llu: field n_expert_used: value %llu exceeds n_expert %llu", p->path,
                       (unsigned long long)p->lineno, K, J);
    if (set_model_name(p, vals[0], vals[1], err))
        return -1;
    int w = snprintf(p->meta.source, sizeof p->meta.source, "%s (route_trace v1)", base_name(p->path));
    if (w < 0 || (size_t)w >= sizeof p->meta.source)
        return ms_fail(err, "%s: input file name longer than %d characters", p->path, MS_SOURCE_MAX - 20);
    p->meta.L = (uint32_t)L;
    p->meta.J = (uint32_t)J;
    p->meta.K = (uint32_t)K;
    p->meta.probs_kind = MS_PROBS_TOPK_RENORM;
    p->meta.has_recorded_hits = 1;
    ms_trace_meta_alloc_layers(&p->meta);
    return 0;
}

static int parse_layer_line(rc_parser *p, uint32_t expect, ms_err *err)
{
    static const char *const keys[] = {"layer", "expert_bytes", "dense_bytes"};
    const char *vals[3] = {0};
    kv_pair kv[4];
    int n = 0;
    if (split_header_kv(p, p->buf, kv, 4, &n, err) || match_keys(p, kv, n, keys, 3, vals, err))
        return -1;
    unsigned long long layer = 0, eb = 0, db = 0;
    if (parse_u64_in(p, "layer", vals[0], 0, UINT32_MAX, &layer, err))
        return -1;
    if (layer != expect)
        return ms_fail(err, "%s:%llu: field layer: value %llu, expected %u (layer lines 0..%u in order)", p->path,
                       (unsigned long long)p->lineno, layer, expect, p->meta.L - 1);
    if (parse_u64_in(p, "expert_bytes", vals[1], 1, UINT64_MAX, &eb, err) ||
        parse_u64_in(p, "dense_bytes", vals[2], 0, UINT64_MAX, &db, err))
        return -1;
    p->meta.expert_bytes[expect] = eb;
    p->meta.dense_bytes[expect] = db;
    return 0;
}

/* Reads everything up to and including the column line. */
static int parse_header(rc_parser *p, ms_err *err)
{
    int r = read_line(p, err);
    if (r < 0)
        return -1;
    if (r == 0)
        return ms_fail(err, "%s: empty file (expected '%s')", p->path, RC_MAGIC);
    if (strcmp(p->buf, RC_MAGIC) != 0)
        return ms_fail(err, "%s:1: header: expected '%s', got '%.60s'", p->path, RC_MAGIC, p->buf);
    uint32_t layers_seen = 0;
    int have_model = 0;
    for (;;) {
        if ((r = read_line(p, err)) < 0)
            return -1;
        if (r == 0)
            return ms_fail(err, "%s:%llu: header: file ends before the column line '%s'", p->path,
                           (unsigned long long)p->lineno, RC_COLUMNS);
        if (p->buf[0] != '#')
            break;
        if (!strncmp(p->buf, "# model=", 8)) {
            if (have_model)
                return ms_fail(err, "%s:%llu: header: second model line", p->path, (unsigned long long)p->lineno);
            if (parse_model_line(p, err))
                return -1;
            have_model = 1;
        } else if (!strncmp(p->buf, "# layer=", 8)) {
            if (!have_model)
                return ms_fail(err, "%s:%llu: header: layer line before the model line", p->path,
                               (unsigned long long)p->lineno);
            if (layers_seen == p->meta.L)
                return ms_fail(err, "%s:%llu: header: more layer lines than n_layer=%u", p->path,
                               (unsigned long long)p->lineno, p->meta.L);
            if (parse_layer_line(p, layers_seen, err))
                return -1;
            layers_seen++;
        } else {
            return ms_fail(err, "%s:%llu: header: unknown header line '%.60s'", p->path,
                           (unsigned long long)p->lineno, p->buf);
        }
    }
    if (!have_model)
        return ms_fail(err, "%s:%llu: header: model line '# model=... arch=... n_layer=...' missing", p->path,
                       (unsigned long long)p->lineno);
    if (layers_seen != p->meta.L)
        return ms_fail(err, "%s:%llu: header: layer line for layer %u missing (n_layer=%u)", p->path,
                       (unsigned long long)p->lineno, layers_seen, p->meta.L);
    if (strcmp(p->buf, RC_COLUMNS) != 0)
        return ms_fail(err, "%s:%llu: header: column line '%.80s', expected '%s'", p->path,
                       (unsigned long long)p->lineno, p->buf, RC_COLUMNS);
    return 0;
}

/* ---- data rows ---- */

typedef struct {
    uint64_t turn;
    int phase;
    rc_row row;
} parsed_row;

static int split_fields(rc_parser *p, char **f, ms_err *err)
{
    int n = 0;
    char *s = p->buf;
    for (;;) {
        char *c = strchr(s, ',');
        if (n < RC_NFIELDS)
            f[n] = s;
        n++;
        if (!c)
            break;
        *c = '\0';
        s = c + 1;
    }
    if (n != RC_NFIELDS)
        return ms_fail(err, "%s:%llu: expected %d fields (%s), got %d%s", p->path, (unsigned long long)p->lineno,
                       RC_NFIELDS, RC_COLUMNS, n, p->had_newline ? "" : " (truncated last line?)");
    if (!p->had_newline)
        return ms_fail(err, "%s:%llu: last line has no newline (truncated file?)", p->path,
                       (unsigned long long)p->lineno);
    return 0;
}

static int parse_weight(rc_parser *p, const char *s, float *out, ms_err *err)
{
    double w;
    if (ms_parse_double(s, &w) != 0)
        return ms_fail(err, "%s:%llu: field weight: '%.40s' is not a finite number", p->path,
                       (unsigned long long)p->lineno, s);
    if (w < 0)
        return ms_fail(err, "%s:%llu: field weight: value %s is negative", p->path, (unsigned long long)p->lineno, s);
    if (w > 1 + RC_WEIGHT_SUM_TOL)
        return ms_fail(err, "%s:%llu: field weight: value %s exceeds 1 (weights are renormalised over k)", p->path,
                       (unsigned long long)p->lineno, s);
    *out = (float)w;
    return 0;
}

/* Parses and range-checks the fields of the current line. */
static int parse_row(rc_parser *p, parsed_row *out, ms_err *err)
{
    char *f[RC_NFIELDS];
    if (split_fields(p, f, err))
        return -1;
    const ms_trace_meta *m = &p->meta;
    char lim_l[32], lim_k[32], lim_j[32];
    snprintf(lim_l, sizeof lim_l, "n_layer=%u", m->L);
    snprintf(lim_k, sizeof lim_k, "n_expert_used=%u", m->K);
    snprintf(lim_j, sizeof lim_j, "n_expert=%u", m->J);
    unsigned long long turn = 0, phase = 0, step = 0, layer = 0, slot = 0, expert = 0, res = 0, eb = 0;
    if (parse_u64_in(p, "turn", f[0], 0, UINT64_MAX, &turn, err) ||
        parse_u64_lim(p, "phase", f[1], 0, 1, "0 prefill, 1 decode", &phase, err) ||
        parse_u64_in(p, "step", f[2], 0, UINT32_MAX - 1, &step, err) ||
        parse_u64_lim(p, "layer", f[3], 0, m->L - 1, lim_l, &layer, err) ||
        parse_u64_lim(p, "slot", f[4], 0, m->K - 1, lim_k, &slot, err) ||
        parse_u64_lim(p, "expert", f[5], 0, m->J - 1, lim_j, &expert, err) ||
        parse_weight(p, f[6], &out->row.weight, err) ||
        parse_u64_lim(p, "residency", f[7], 0, 1, "1 resident, 0 read", &res, err) ||
        parse_u64_in(p, "expert_bytes", f[8], 0, UINT64_MAX, &eb, err))
        return -1;
    if (eb != 0 && eb != m->expert_bytes[layer])
        return ms_fail(err, "%s:%llu: field expert_bytes: value %llu disagrees with the header's %llu for layer %llu",
                       p->path, (unsigned long long)p->lineno, eb, (unsigned long long)m->expert_bytes[layer], layer);
    out->turn = turn;
    out->phase = (int)phase;
    out->row.line = p->lineno;
    out->row.step = (uint32_t)step;
    out->row.layer = (uint32_t)layer;
    out->row.slot = (uint32_t)slot;
    out->row.expert = (int32_t)expert;
    out->row.residency = (int8_t)res;
    return 0;
}

static void start_turn(rc_parser *p, uint64_t turn)
{
    p->in_turn = 1;
    p->turn = turn;
    p->n_rows = 0;
    p->turn_has_decode = 0;
    p->turn_has_prefill = 0;
    p->turn_max_prefill_step = 0;
}

/* Phase order inside a turn: all prefill rows first, decode steps after the
 * prefill steps.  Checked in file order so the error names the right line. */
static int add_row_to_turn(rc_parser *p, const parsed_row *pr, ms_err *err)
{
    unsigned long long ln = (unsigned long long)pr->row.line;
    if (pr->phase == MS_PHASE_PREFILL) {
        if (p->turn_has_decode)
            return ms_fail(err, "%s:%llu: field phase: prefill row after decode rows of turn %llu", p->path, ln,
                           (unsigned long long)p->turn);
        if (!p->turn_has_prefill || pr->row.step > p->turn_max_prefill_step)
            p->turn_max_prefill_step = pr->row.step;
        p->turn_has_prefill = 1;
    } else {
        if (!p->turn_has_prefill)
            return ms_fail(err, "%s:%llu: field phase: decode row before any prefill row of turn %llu", p->path, ln,
                           (unsigned long long)p->turn);
        if (pr->row.step <= p->turn_max_prefill_step)
            return ms_fail(err, "%s:%llu: field step: decode step %u is not after the prefill steps (last %u) of turn %llu",
                           p->path, ln, pr->row.step, p->turn_max_prefill_step, (unsigned long long)p->turn);
        p->turn_has_decode = 1;
    }
    if (p->n_rows == p->cap_rows) {
        p->cap_rows = p->cap_rows ? 2 * p->cap_rows : 4096;
        p->rows = ms_xrealloc(p->rows, p->cap_rows, sizeof *p->rows);
    }
    p->rows[p->n_rows++] = pr->row;
    return 0;
}

static int cmp_row(const void *a, const void *b)
{
    const rc_row *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->line < y->line ? -1 : (x->line > y->line);
}

/* Sorted rows: steps contiguous from 0 (prefill) and then from P (decode),
 * no duplicate cell.  Returns the number of prefill steps in *P. */
static int check_turn_steps(rc_parser *p, uint32_t *P, uint32_t *D, ms_err *err)
{
    const rc_row *r = p->rows;
    unsigned long long turn = (unsigned long long)p->turn;
    if (r[0].step != 0)
        return ms_fail(err, "%s:%llu: field step: prefill steps of turn %llu start at %u, expected 0", p->path,
                       (unsigned long long)r[0].line, turn, r[0].step);
    uint32_t last_prefill = p->turn_max_prefill_step;
    for (size_t i = 1; i < p->n_rows; i++) {
        const rc_row *a = &r[i - 1], *b = &r[i];
        if (b->step > a->step + 1 && a->step != last_prefill)
            return ms_fail(err, "%s:%llu: field step: step %u follows step %u in turn %llu (step %u has no rows)",
                           p->path, (unsigned long long)b->line, b->step, a->step, turn, a->step + 1);
        if (a->step == last_prefill && b->step > last_prefill + 1)
            return ms_fail(err, "%s:%llu: field step: first decode step of turn %llu is %u, expected %u (right after the prefill steps)",
                           p->path, (unsigned long long)b->line, turn, b->step, last_prefill + 1);
        if (b->step == a->step && b->layer == a->layer && b->slot == a->slot)
            return ms_fail(err, "%s:%llu: field slot: duplicate cell step %u layer %u slot %u (first on line %llu)",
                           p->path, (unsigned long long)b->line, b->step, b->layer, b->slot,
                           (unsigned long long)a->line);
    }
    *P = last_prefill + 1;
    *D = r[p->n_rows - 1].step - last_prefill;
    if (!p->turn_has_decode)
        *D = 0;
    return 0;
}

/* Checks one (step, layer) group r[0..n): distinct experts, weights summing
 * to 1 when all k slots are present and to at most 1 when some are missing
 * (the rules of docs/trace-format.md, reported here with a line number). */
static int check_group(rc_parser *p, const rc_row *r, size_t n, ms_err *err)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += r[i].weight;
        for (size_t j = 0; j < i; j++)
            if (r[j].expert == r[i].expert)
                return ms_fail(err, "%s:%llu: field expert: expert %d already routed in step %u layer %u on line %llu",
                               p->path, (unsigned long long)r[i].line, r[i].expert, r[i].step, r[i].layer,
                               (unsigned long long)r[j].line);
    }
    if (n == p->meta.K && fabs(sum - 1.0) > RC_WEIGHT_SUM_TOL)
        return ms_fail(err, "%s:%llu: field weight: weights of step %u layer %u sum to %.6g, expected 1 (topk_renorm)",
                       p->path, (unsigned long long)r[n - 1].line, r[0].step, r[0].layer, sum);
    if (sum > 1.0 + RC_WEIGHT_SUM_TOL)
        return ms_fail(err, "%s:%llu: field weight: weights of step %u layer %u sum to %.6g, more than 1",
                       p->path, (unsigned long long)r[n - 1].line, r[0].step, r[0].layer, sum);
    return 0;
}

static void note_missing(rc_parser *p, uint32_t row, uint32_t layer, uint32_t slot, uint32_t P)
{
    ms_import_report *rep = &p->rep;
    if (row < P)
        rep->missing_prefill++;
    else
        rep->missing_decode++;
    if (rep->n_listed < MS_IMPORT_MISSING_LIST)
        rep->first_missing[rep->n_listed++] = (ms_missing_cell){p->turn, row, layer, slot, row >= P};
}

/* Builds the request of the gathered turn (rows sorted and checked). */
static int build_request(rc_parser *p, uint32_t P, uint32_t D, ms_request *req, ms_err *err)
{
    const ms_trace_meta *m = &p->meta;
    if (ms_import_check_cells(p->path, p->rows[p->n_rows - 1].line, p->turn, (uint64_t)P + D, m->L, m->K,
                              "a corrupt header or step number?", err))
        return -1;
    memset(req, 0, sizeof *req);
    req->id = p->turn;
    req->arrival_s = 0;
    req->prompt_len = P;
    req->output_len = D; /* one decode iteration per generated token */
    req->n_iters = 1 + D;
    req->n_rows = P + D;
    ms_request_alloc(req, m);
    if (!req->recorded_hit) { /* meta.has_recorded_hits is set, so this is a bug */
        ms_request_free(req);
        return ms_fail(err, "%s: internal: request has no recorded_hit array", p->path);
    }
    req->iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, P};
    for (uint32_t d = 0; d < D; d++)
        req->iters[1 + d] = (ms_iteration){MS_PHASE_DECODE, P + d, 1};
    size_t cells = (size_t)req->n_rows * m->L * m->K;
    for (size_t c = 0; c < cells; c++) {
        req->topk_ids[c] = -1;
        req->topk_w[c] = 0;
        req->recorded_hit[c] = -1;
    }
    size_t i = 0;
    while (i < p->n_rows) {
        size_t j = i;
        while (j < p->n_rows && p->rows[j].step == p->rows[i].step && p->rows[j].layer == p->rows[i].layer)
            j++;
        if (check_group(p, &p->rows[i], j - i, err)) {
            ms_request_free(req);
            return -1;
        }
        for (; i < j; i++) {
            const rc_row *r = &p->rows[i];
            size_t c = ms_topk_index(m, r->step, r->layer) + r->slot; /* row index == step */
            req->topk_ids[c] = r->expert;
            req->topk_w[c] = r->weight;
            req->recorded_hit[c] = r->residency;
        }
    }
    for (uint32_t row = 0; row < req->n_rows; row++)
        for (uint32_t l = 0; l < m->L; l++)
            for (uint32_t k = 0; k < m->K; k++)
                if (req->topk_ids[ms_topk_index(m, row, l) + k] < 0)
                    note_missing(p, row, l, k, P);
    if (ms_request_check(m, req, p->path, err)) {
        ms_request_free(req);
        return -1;
    }
    return 0;
}

static int finish_turn(rc_parser *p, ms_request *req, ms_err *err)
{
    qsort(p->rows, p->n_rows, sizeof *p->rows, cmp_row);
    uint32_t P = 0, D = 0;
    if (check_turn_steps(p, &P, &D, err))
        return -1;
    if (build_request(p, P, D, req, err))
        return -1;
    ms_import_report *rep = &p->rep;
    rep->requests++;
    rep->prefill_iters++;
    rep->decode_iters += D;
    rep->prefill_rows += P;
    rep->prefill_cells += (uint64_t)P * p->meta.L * p->meta.K;
    rep->decode_cells += (uint64_t)D * p->meta.L * p->meta.K;
    p->in_turn = 0;
    return 0;
}

/* Reads rows until the current turn ends; 1 request in *req, 0 end, -1 error. */
static int rc_next(rc_parser *p, ms_request *req, ms_err *err)
{
    if (p->have_pending) {
        parsed_row pr = {p->pending_turn, p->pending_phase, p->pending};
        p->have_pending = 0;
        start_turn(p, pr.turn);
        if (add_row_to_turn(p, &pr, err))
            return -1;
    }
    while (!p->at_eof) {
        int r = read_line(p, err);
        if (r < 0)
            return -1;
        if (r == 0) {
            p->at_eof = 1;
            break;
        }
        parsed_row pr = {0};
        if (parse_row(p, &pr, err))
            return -1;
        p->rep.rows++;
        if (!p->in_turn) {
            start_turn(p, pr.turn);
        } else if (pr.turn < p->turn) {
            return ms_fail(err, "%s:%llu: field turn: value %llu after turn %llu (turns must be contiguous and increasing)",
                           p->path, (unsigned long long)p->lineno, (unsigned long long)pr.turn,
                           (unsigned long long)p->turn);
        } else if (pr.turn > p->turn) {
            p->have_pending = 1;
            p->pending_turn = pr.turn;
            p->pending_phase = pr.phase;
            p->pending = pr.row;
            return finish_turn(p, req, err) ? -1 : 1;
        }
        if (add_row_to_turn(p, &pr, err))
            return -1;
    }
    if (p->in_turn)
        return finish_turn(p, req, err) ? -1 : 1;
    if (p->rep.rows == 0)
        return ms_fail(err, "%s:%llu: no data rows after the column line", p->path, (unsigned long long)p->lineno);
    return 0;
}

static int rc_open(rc_parser *p, const char *path, ms_err *err)
{
    memset(p, 0, sizeof *p);
    p->path = path;
    snprintf(p->rep.input, sizeof p->rep.input, "%s", base_name(path));
    if (ms_lines_open(&p->in, path, err))
        return -1;
    p->buf = p->in.buf;
    return parse_header(p, err);
}

/* Releases the parser; with keep_meta the caller takes p->meta. */
static void rc_close(rc_parser *p, int keep_meta)
{
    ms_lines_close(&p->in);
    free(p->rows);
    if (!keep_meta)
        ms_trace_meta_free(&p->meta);
}

static void copy_report(const rc_parser *p, ms_import_report *rep)
{
    if (rep)
        *rep = p->rep;
}

/* ---- public ---- */

void ms_routecsv_free(ms_routecsv_trace *t)
{
    if (!t)
        return;
    for (uint64_t i = 0; i < t->n_requests; i++)
        ms_request_free(&t->requests[i]);
    free(t->requests);
    ms_trace_meta_free(&t->meta);
    memset(t, 0, sizeof *t);
}

int ms_routecsv_parse(const char *path, ms_routecsv_trace *out, ms_import_report *rep, ms_err *err)
{
    memset(out, 0, sizeof *out);
    rc_parser p;
    int rc = rc_open(&p, path, err);
    uint64_t cap = 0;
    while (rc == 0) {
        ms_request req;
        int r = rc_next(&p, &req, err);
        if (r <= 0) {
            rc = r;
            break;
        }
        if (out->n_requests == cap) {
            cap = cap ? 2 * cap : 4;
            out->requests = ms_xrealloc(out->requests, cap, sizeof *out->requests);
        }
        out->requests[out->n_requests++] = req;
    }
    copy_report(&p, rep);
    out->meta = p.meta;
    rc_close(&p, 1);
    return rc;
}

/* Refuses to write over the input (the writer truncates its path). */
static int check_distinct_files(const char *in_path, const char *out_path, ms_err *err)
{
    struct stat a, b;
    if (stat(in_path, &a) == 0 && stat(out_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return ms_fail(err, "%s: output is the input file", out_path);
    return 0;
}

/* The writer writes a temporary beside out_path and renames it over
 * out_path only when the whole input converted: a bad input half-way
 * leaves an existing out_path untouched. */
int ms_import_routecsv(const char *in_path, const char *out_path, ms_import_report *rep, ms_err *err)
{
    if (check_distinct_files(in_path, out_path, err))
        return -1;
    rc_parser p;
    if (rc_open(&p, in_path, err)) {
        copy_report(&p, rep);
        rc_close(&p, 0);
        return -1;
    }
    ms_trace_writer *w = ms_writer_open(out_path, &p.meta, err);
    int rc = w ? 0 : -1;
    while (rc == 0) {
        ms_request req;
        int r = rc_next(&p, &req, err);
        if (r <= 0) {
            rc = r;
            break;
        }
        rc = ms_writer_add(w, &req, err);
        ms_request_free(&req);
    }
    if (w && rc == 0)
        rc = ms_writer_close(w, err);
    else
        ms_writer_abort(w);
    copy_report(&p, rep);
    rc_close(&p, 0);
    return rc;
}
