/* Trace data model helpers: probs-kind names, allocation of the metadata and
 * request arrays, and ms_request_check, the one validation every request
 * passes through (the writer before writing it, the reader before handing it
 * out).  The on-disk format is in trace_h5.c and docs/trace-format.md. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/format/trace_check.h"

static const char *const kind_names[] = {"full", "topk_renorm", "topk_raw", "topk_ids"};

const char *ms_probs_kind_name(ms_probs_kind k)
{
    if ((unsigned)k < sizeof kind_names / sizeof kind_names[0])
        return kind_names[k];
    return "unknown";
}

int ms_probs_kind_parse(const char *s, ms_probs_kind *out)
{
    for (unsigned i = 0; s && i < sizeof kind_names / sizeof kind_names[0]; i++) {
        if (!strcmp(s, kind_names[i])) {
            *out = (ms_probs_kind)i;
            return 0;
        }
    }
    return -1;
}

void ms_trace_meta_free(ms_trace_meta *m)
{
    if (!m)
        return;
    free(m->expert_bytes);
    free(m->dense_bytes);
    free(m->req_id);
    free(m->req_arrival_s);
    free(m->req_prompt_len);
    free(m->req_output_len);
    free(m->req_n_iters);
    free(m->req_n_rows);
    m->expert_bytes = m->dense_bytes = NULL;
    m->req_id = NULL;
    m->req_arrival_s = NULL;
    m->req_prompt_len = m->req_output_len = m->req_n_iters = NULL;
    m->req_n_rows = NULL;
    m->n_requests = m->n_iterations = m->n_rows = 0;
}

void ms_trace_meta_alloc_layers(ms_trace_meta *m)
{
    free(m->expert_bytes);
    free(m->dense_bytes);
    m->expert_bytes = ms_xcalloc(m->L, sizeof *m->expert_bytes);
    m->dense_bytes = ms_xcalloc(m->L, sizeof *m->dense_bytes);
}

void ms_request_free(ms_request *r)
{
    if (!r)
        return;
    if (r->borrowed) {
        memset(r, 0, sizeof *r);
        return;
    }
    free(r->iters);
    free(r->topk_ids);
    free(r->topk_w);
    free(r->probs);
    free(r->embedding);
    free(r->spec_ids);
    free(r->spec_w);
    free(r->recorded_hit);
    free(r->token_ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

static int32_t *alloc_ids(size_t n)
{
    int32_t *ids = ms_xcalloc(n, sizeof *ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = -1;
    return ids;
}

/* The array pointers of r are overwritten, not freed.  token_ids is sized by
 * r->n_tokens (set by the caller with n_iters and n_rows) when the trace
 * carries token ids; text is left NULL (the caller strdup()s it). */
void ms_request_alloc(ms_request *r, const ms_trace_meta *m)
{
    size_t cells = (size_t)r->n_rows * m->L * m->K;
    r->iters = ms_xcalloc(r->n_iters, sizeof *r->iters);
    r->topk_ids = alloc_ids(cells);
    r->topk_w = ms_xcalloc(cells, sizeof *r->topk_w);
    r->probs = m->probs_kind == MS_PROBS_FULL
                   ? ms_xcalloc((size_t)r->n_rows * m->L * m->J, sizeof *r->probs) : NULL;
    r->embedding = m->embed_dim ? ms_xcalloc((size_t)r->n_iters * m->embed_dim, sizeof *r->embedding) : NULL;
    r->spec_ids = m->spec_depth ? alloc_ids(cells * m->spec_depth) : NULL;
    r->spec_w = m->spec_depth ? ms_xcalloc(cells * m->spec_depth, sizeof *r->spec_w) : NULL;
    r->recorded_hit = NULL;
    if (m->has_recorded_hits) {
        r->recorded_hit = ms_xcalloc(cells, sizeof *r->recorded_hit);
        memset(r->recorded_hit, -1, cells);
    }
    r->token_ids = m->has_token_ids ? ms_xcalloc(r->n_tokens, sizeof *r->token_ids) : NULL;
    r->text = NULL;
}

/* ---- ms_request_check ---- */

/* Where a failing value sits, for the one-line message. */
typedef struct {
    const char *where;
    uint64_t req;
    uint32_t row, layer;
    int spec; /* speculative depth (1-based) or 0 for the routed top-k */
} cell_loc;

static int fail_at(ms_err *err, const cell_loc *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(ms_err *err, const cell_loc *at, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (at->spec)
        return ms_fail(err, "%s: request %" PRIu64 " row %u layer %u: spec depth %d: %s", at->where, at->req,
                       at->row, at->layer, at->spec, what);
    return ms_fail(err, "%s: request %" PRIu64 " row %u layer %u: %s", at->where, at->req, at->row, at->layer,
                   what);
}

/* Shared state of one check: a stamp per expert finds duplicates in O(K). */
typedef struct {
    const ms_trace_meta *m;
    uint32_t *stamp; /* [J] */
    uint32_t now;
} cell_scratch;

static void scratch_next(cell_scratch *s)
{
    if (++s->now == 0) { /* wrapped: clear and restart */
        memset(s->stamp, 0, (size_t)s->m->J * sizeof *s->stamp);
        s->now = 1;
    }
}

/* Ids in [-1, J), no duplicate, weights finite, in [0, 1 + tol], 0 where the
 * id is -1, and summing to 1 (renormalised, all K present) or to at most 1
 * (raw softmax weights, or a renormalised cell with missing slots); ids only
 * (renorm == 2): every present weight is exactly (float)(1/K).  w == NULL
 * (weights not read): the ids alone. */
/* Ids only (weights not read), for the usual small K: each id in [-1, J)
 * and no id twice, by comparing pairs (no stamps); the messages are
 * check_topk_cell's. */
static int check_ids_cell(const ms_trace_meta *m, const int32_t *ids, const cell_loc *at, const char *ids_name,
                          ms_err *err)
{
    for (uint32_t k = 0; k < m->K; k++) {
        int32_t id = ids[k];
        if (id < -1 || id >= (int64_t)m->J)
            return fail_at(err, at, "%s[%u] = %" PRId32 " out of range [-1, %u)", ids_name, k, id, m->J);
        for (uint32_t k2 = 0; id >= 0 && k2 < k; k2++)
            if (ids[k2] == id)
                return fail_at(err, at, "%s: duplicate expert %" PRId32, ids_name, id);
    }
    return 0;
}

static int check_topk_cell(cell_scratch *s, const int32_t *ids, const float *w, int renorm, const cell_loc *at,
                           const char *ids_name, const char *w_name, ms_err *err)
{
    if (renorm == 2 && w)
        for (uint32_t k = 0; k < s->m->K; k++)
            if (ids[k] >= 0 && w[k] != (float)(1.0 / s->m->K))
                return fail_at(err, at, "%s[%u] = %g but probs_kind topk_ids stores 1/K = %g", w_name, k, (double)w[k],
                               (double)(float)(1.0 / s->m->K));
    const ms_trace_meta *m = s->m;
    double sum = 0;
    uint32_t present = 0;
    scratch_next(s);
    for (uint32_t k = 0; k < m->K; k++) {
        int32_t id = ids[k];
        float x = w ? w[k] : 0.0f;
        if (id < -1 || id >= (int64_t)m->J)
            return fail_at(err, at, "%s[%u] = %" PRId32 " out of range [-1, %u)", ids_name, k, id, m->J);
        if (!isfinite(x) || x < 0 || x > 1 + MS_SUM_TOL)
            return fail_at(err, at, "%s[%u] = %g not a weight in [0, 1]", w_name, k, (double)x);
        if (id == -1) {
            if (x != 0)
                return fail_at(err, at, "%s[%u] = %g but %s[%u] is -1 (missing)", w_name, k, (double)x, ids_name, k);
            continue;
        }
        if (s->stamp[id] == s->now)
            return fail_at(err, at, "%s: duplicate expert %" PRId32, ids_name, id);
        s->stamp[id] = s->now;
        present++;
        sum += x;
    }
    if (!w)
        return 0;
    if (renorm && present == m->K && fabs(sum - 1.0) > MS_SUM_TOL)
        return fail_at(err, at, "%s sum to %.6g, expected 1 (topk_renorm)", w_name, sum);
    if (sum > 1.0 + MS_SUM_TOL)
        return fail_at(err, at, "%s sum to %.6g, more than 1", w_name, sum);
    return 0;
}

/* Full distribution: finite, >= 0, sums to 1; every top-k slot present, the
 * K ids are K largest probabilities (ties allowed) and topk_w equals them
 * (when read: w != NULL). */
static int check_full_cell(cell_scratch *s, const float *p, const int32_t *ids, const float *w, const cell_loc *at,
                           ms_err *err)
{
    const ms_trace_meta *m = s->m;
    double sum = 0;
    for (uint32_t j = 0; j < m->J; j++) {
        if (!isfinite(p[j]) || p[j] < 0)
            return fail_at(err, at, "probs[%u] = %g not a probability", j, (double)p[j]);
        sum += p[j];
    }
    if (fabs(sum - 1.0) > MS_SUM_TOL)
        return fail_at(err, at, "probs sum to %.6g, expected 1", sum);
    /* stamps were set by check_topk_cell for this cell's ids */
    float min_sel = INFINITY, max_other = -INFINITY;
    uint32_t arg_other = 0;
    for (uint32_t k = 0; k < m->K; k++) {
        if (ids[k] < 0)
            return fail_at(err, at, "topk_ids[%u] = -1 but probs_kind full has no missing cells", k);
        float pk = p[ids[k]];
        if (w && fabs((double)w[k] - (double)pk) > MS_TOPK_PROB_TOL)
            return fail_at(err, at, "topk_w[%u] = %g but probs[%" PRId32 "] = %g", k, (double)w[k], ids[k], (double)pk);
        if (pk < min_sel)
            min_sel = pk;
    }
    for (uint32_t j = 0; j < m->J; j++) {
        if (s->stamp[j] != s->now && p[j] > max_other) {
            max_other = p[j];
            arg_other = j;
        }
    }
    if (max_other > min_sel)
        return fail_at(err, at, "topk_ids are not the %u largest probs: expert %u has prob %g > %g", m->K, arg_other,
                       (double)max_other, (double)min_sel);
    return 0;
}

static int check_recorded_hits(const ms_trace_meta *m, const int32_t *ids, const int8_t *hit, const cell_loc *at,
                               ms_err *err)
{
    for (uint32_t k = 0; k < m->K; k++) {
        if (hit[k] < -1 || hit[k] > 1)
            return fail_at(err, at, "recorded_hit[%u] = %d not -1, 0 or 1", k, hit[k]);
        if (ids[k] == -1 && hit[k] != -1)
            return fail_at(err, at, "recorded_hit[%u] = %d but topk_ids[%u] is -1 (missing)", k, hit[k], k);
    }
    return 0;
}

/* gate_{l+d}(h_l) exists only for l + d < L; the cells beyond are all -1. */
static int check_spec_cells(cell_scratch *s, const ms_request *r, uint32_t row, uint32_t l, cell_loc *at,
                            ms_err *err)
{
    const ms_trace_meta *m = s->m;
    int renorm = m->probs_kind == MS_PROBS_TOPK_IDS ? 2 : m->probs_kind == MS_PROBS_TOPK_RENORM;
    for (uint32_t d = 0; d < m->spec_depth; d++) {
        size_t o = ms_spec_index(m, row, l, d);
        at->spec = (int)d + 1;
        if (l + d + 1 >= m->L) {
            for (uint32_t k = 0; k < m->K; k++)
                if (r->spec_ids[o + k] != -1 || r->spec_w[o + k] != 0)
                    return fail_at(err, at, "spec_ids[%u] = %" PRId32 " but layer %u + %u has no gate (expected -1)",
                                   k, r->spec_ids[o + k], l, d + 1);
            continue;
        }
        if (check_topk_cell(s, r->spec_ids + o, r->spec_w + o, renorm, at, "spec_ids", "spec_w", err) < 0)
            return -1;
    }
    at->spec = 0;
    return 0;
}

int ms_request_rows_check(const ms_trace_meta *m, const ms_request *r, unsigned parts, const char *where,
                          ms_err *err)
{
    const float *w = parts & MS_PART_WEIGHTS ? r->topk_w : NULL;
    int full = m->probs_kind == MS_PROBS_FULL && (parts & MS_PART_PROBS);
    int hits = r->recorded_hit && (parts & MS_PART_HITS);
    int spec = m->spec_depth && (parts & MS_PART_SPEC);
    int ids_only = !w && !full && m->K <= 16;
    cell_scratch s = {m, ms_xcalloc(m->J, sizeof(uint32_t)), 0};
    cell_loc at = {where, r->id, 0, 0, 0};
    int renorm = m->probs_kind == MS_PROBS_TOPK_IDS ? 2 : m->probs_kind == MS_PROBS_TOPK_RENORM;
    int rc = 0;
    for (uint32_t row = 0; row < r->n_rows && rc == 0; row++) {
        for (uint32_t l = 0; l < m->L && rc == 0; l++) {
            size_t o = ms_topk_index(m, row, l);
            at.row = row;
            at.layer = l;
            if (ids_only) /* no weights, no probs after it (check_full_cell reads the stamps) */
                rc = check_ids_cell(m, r->topk_ids + o, &at, "topk_ids", err);
            else
                rc = check_topk_cell(&s, r->topk_ids + o, w ? w + o : NULL, renorm, &at, "topk_ids", "topk_w", err);
            if (rc == 0 && full)
                rc = check_full_cell(&s, r->probs + ms_probs_index(m, row, l), r->topk_ids + o, w ? w + o : NULL,
                                     &at, err);
            if (rc == 0 && hits)
                rc = check_recorded_hits(m, r->topk_ids + o, r->recorded_hit + o, &at, err);
            if (rc == 0 && spec)
                rc = check_spec_cells(&s, r, row, l, &at, err);
        }
    }
    free(s.stamp);
    return rc;
}

/* The fast pass first; the cell-by-cell checks only when it saw a value
 * that may be bad, to name it (or to find none). */
static int check_rows(const ms_trace_meta *m, const ms_request *r, unsigned parts, const char *where, ms_err *err)
{
    if (ms_request_rows_fast_ok(m, r, parts))
        return 0;
    return ms_request_rows_check(m, r, parts, where, err);
}

/* One prefill iteration of prompt_len rows first, then output_len decode
 * iterations of one row each, row ranges contiguous from 0 to n_rows. */
static int check_iterations(const ms_request *r, const char *where, ms_err *err)
{
    uint64_t id = r->id;
    if (r->prompt_len == 0)
        return ms_fail(err, "%s: request %" PRIu64 ": prompt_len = 0 (a request has at least one prompt token)",
                       where, id);
    if ((uint64_t)r->n_iters != (uint64_t)r->output_len + 1)
        return ms_fail(err, "%s: request %" PRIu64 ": n_iters = %u, expected output_len + 1 = %" PRIu64, where, id,
                       r->n_iters, (uint64_t)r->output_len + 1);
    if ((uint64_t)r->n_rows != (uint64_t)r->prompt_len + r->output_len)
        return ms_fail(err, "%s: request %" PRIu64 ": n_rows = %u, expected prompt_len + output_len = %" PRIu64,
                       where, id, r->n_rows, (uint64_t)r->prompt_len + r->output_len);
    if (!r->iters)
        return ms_fail(err, "%s: request %" PRIu64 ": iterations missing", where, id);
    uint64_t next_row = 0;
    for (uint32_t i = 0; i < r->n_iters; i++) {
        const ms_iteration *it = &r->iters[i];
        ms_phase want = i == 0 ? MS_PHASE_PREFILL : MS_PHASE_DECODE;
        uint32_t want_rows = i == 0 ? r->prompt_len : 1;
        if (it->phase != want)
            return ms_fail(err, "%s: request %" PRIu64 " iteration %u: phase %d, expected %d (%s)", where, id, i,
                           (int)it->phase, (int)want, want == MS_PHASE_PREFILL ? "prefill" : "decode");
        if (it->row0 != next_row)
            return ms_fail(err, "%s: request %" PRIu64 " iteration %u: row0 = %u, expected %" PRIu64 " (contiguous)",
                           where, id, i, it->row0, next_row);
        if (it->n_rows != want_rows)
            return ms_fail(err, "%s: request %" PRIu64 " iteration %u: n_rows = %u, expected %u", where, id, i,
                           it->n_rows, want_rows);
        next_row += it->n_rows;
    }
    return 0;
}

/* Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF), so
 * that h5py and other readers can decode the text they are promised. */
static size_t utf8_invalid_at(const unsigned char *s)
{
    const unsigned char *p = s;
    while (*p) {
        unsigned c = *p, n;
        uint32_t cp;
        if (c < 0x80) { p++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07; }
        else return (size_t)(p - s) + 1;
        for (unsigned i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return (size_t)(p - s) + 1;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return (size_t)(p - s) + 1;
        p += n + 1;
    }
    return 0;
}

_Noreturn void ms_request_part_missing(const char *who, const char *part)
{
    fprintf(stderr, "moesim: internal error: %s reads %s of a request, which its reader did not select "
                    "(declare it in the policy's reads)\n", who, part);
    abort();
}

unsigned ms_trace_parts(const ms_trace_meta *m)
{
    return MS_PART_WEIGHTS | (m->probs_kind == MS_PROBS_FULL ? MS_PART_PROBS : 0u) |
           (m->embed_dim ? MS_PART_EMBED : 0u) | (m->spec_depth ? MS_PART_SPEC : 0u) |
           (m->has_recorded_hits ? MS_PART_HITS : 0u) | (m->has_token_ids || m->has_text ? MS_PART_PROMPT : 0u);
}

/* Optional parts are present exactly when meta says the trace has them and
 * they were selected. */
static int check_presence(const ms_trace_meta *m, const ms_request *r, unsigned sel, const char *where, ms_err *err)
{
    struct { const char *name; int have, want; unsigned part; } parts[] = {
        {"topk_ids", r->topk_ids != NULL, 1, 0},
        {"topk_w", r->topk_w != NULL, 1, MS_PART_WEIGHTS},
        {"probs", r->probs != NULL, m->probs_kind == MS_PROBS_FULL, MS_PART_PROBS},
        {"embedding", r->embedding != NULL, m->embed_dim > 0, MS_PART_EMBED},
        {"spec_ids", r->spec_ids != NULL, m->spec_depth > 0, MS_PART_SPEC},
        {"spec_w", r->spec_w != NULL, m->spec_depth > 0, MS_PART_SPEC},
        {"recorded_hit", r->recorded_hit != NULL, m->has_recorded_hits != 0, MS_PART_HITS},
        {"token_ids", r->token_ids != NULL, m->has_token_ids != 0, MS_PART_PROMPT},
        {"text", r->text != NULL, m->has_text != 0, MS_PART_PROMPT},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        int want = parts[i].want && (!parts[i].part || (sel & parts[i].part));
        if (parts[i].have == want)
            continue;
        if (!parts[i].want || parts[i].have)
            return ms_fail(err, "%s: request %" PRIu64 ": %s %s but the trace metadata says %s", where, r->id,
                           parts[i].name, parts[i].have ? "present" : "missing",
                           parts[i].want ? "every request has it" : "it has none");
        return ms_fail(err, "%s: request %" PRIu64 ": %s missing although it was read", where, r->id, parts[i].name);
    }
    return 0;
}

static int check_prompt(const ms_trace_meta *m, const ms_request *r, const char *where, ms_err *err)
{
    uint32_t want_tokens = m->has_token_ids ? r->prompt_len : 0; /* a count: set whether or not the ids were read */
    if (r->n_tokens != want_tokens)
        return ms_fail(err, "%s: request %" PRIu64 ": n_tokens = %u, expected %u (%s)", where, r->id, r->n_tokens,
                       want_tokens, m->has_token_ids ? "prompt_len" : "trace has no token ids");
    for (uint32_t t = 0; r->token_ids && t < r->n_tokens; t++)
        if (r->token_ids[t] < 0)
            return ms_fail(err, "%s: request %" PRIu64 ": token_ids[%u] = %" PRId32 " is negative", where, r->id, t,
                           r->token_ids[t]);
    size_t bad = r->text ? utf8_invalid_at((const unsigned char *)r->text) : 0;
    if (bad)
        return ms_fail(err, "%s: request %" PRIu64 ": text is not valid UTF-8 at byte %zu", where, r->id, bad - 1);
    return 0;
}

static int check_embedding(const ms_trace_meta *m, const ms_request *r, const char *where, ms_err *err)
{
    size_t n = (size_t)r->n_iters * m->embed_dim;
    for (size_t i = 0; i < n && r->embedding; i++)
        if (!isfinite(r->embedding[i]))
            return ms_fail(err, "%s: request %" PRIu64 " iteration %zu: embedding[%zu] = %g not finite", where, r->id,
                           i / m->embed_dim, i % m->embed_dim, (double)r->embedding[i]);
    return 0;
}

int ms_request_check(const ms_trace_meta *m, const ms_request *r, const char *where, ms_err *err)
{
    return ms_request_check_parts(m, r, MS_PART_ALL, where, err);
}

int ms_request_check_parts(const ms_trace_meta *m, const ms_request *r, unsigned parts, const char *where,
                           ms_err *err)
{
    if (!where)
        where = "trace";
    if (!isfinite(r->arrival_s) || r->arrival_s < 0)
        return ms_fail(err, "%s: request %" PRIu64 ": arrival_s = %g not a finite time >= 0", where, r->id,
                       r->arrival_s);
    if (check_iterations(r, where, err) < 0 || check_presence(m, r, parts, where, err) < 0 ||
        check_prompt(m, r, where, err) < 0 || check_embedding(m, r, where, err) < 0)
        return -1;
    return check_rows(m, r, parts, where, err);
}
