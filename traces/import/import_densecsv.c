/* dense-csv importer: one CSV of tokens x experts probabilities per layer;
 * see traces/import/import.h for the layout and the mapping.
 *
 * All L files are read in lock-step, one token row at a time; the rows of
 * the current request are buffered ([rows][L][J] floats) and written when
 * the request id changes, so memory is one request.  Files and columns:
 * import_densecsv_cols.c. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import/import_densecsv.h"
#include "sim/core/params.h"

#define DC_SUM_TOL 1e-3

static int parse_phase(const char *path, uint64_t ln, const char *v, int *prefill, ms_err *err)
{
    if (!strcmp(v, "prefill") || !strcmp(v, "0"))
        *prefill = 1;
    else if (!strcmp(v, "decode") || !strcmp(v, "1"))
        *prefill = 0;
    else
        return ms_fail(err, "%s:%llu: column phase: '%.40s' is not prefill/decode/0/1", path, (unsigned long long)ln, v);
    return 0;
}

/* One expert value: a finite number >= 0; with a top-k-only kind an empty
 * cell is 0 (the dump kept only the top-k). */
static int parse_value(dc_state *s, const char *path, unsigned long long ln, uint32_t c, uint32_t j, const char *v,
                       double *out, ms_err *err)
{
    if (!*v && s->pk != MS_PROBS_FULL) {
        *out = 0;
        return 0;
    }
    if (ms_parse_double(v, out) || !isfinite(*out) || *out < 0)
        return ms_fail(err, "%s:%llu: column %u (expert %u): '%.40s' is not a finite number >= 0", path, ln, c + 1, j,
                       v);
    return 0;
}

/* Checks the sum (and, top-k only, the count) of one row's values. */
static int check_row_sum(dc_state *s, const char *path, unsigned long long ln, double sum, uint32_t nonzero,
                         ms_err *err)
{
    if (s->pk == MS_PROBS_FULL) {
        if (fabs(sum - 1) > DC_SUM_TOL)
            return ms_fail(err, "%s:%llu: probabilities sum to %.6g, expected 1 (raw softmax, not renormalised)", path,
                           ln, sum);
        return 0;
    }
    if (nonzero > s->d.K)
        return ms_fail(err, "%s:%llu: %u values > 0, more than K=%u (--probs-kind %s keeps only the top-k)", path, ln,
                       nonzero, s->d.K, ms_probs_kind_name(s->pk));
    if (sum > 1 + DC_SUM_TOL)
        return ms_fail(err, "%s:%llu: top-k values sum to %.6g, more than 1", path, ln, sum);
    if (s->pk == MS_PROBS_TOPK_RENORM && nonzero == s->d.K && fabs(sum - 1) > DC_SUM_TOL)
        return ms_fail(err, "%s:%llu: top-k weights sum to %.6g, expected 1 (topk_renorm; --probs-kind topk_raw for "
                            "raw softmax kept at the top-k)",
                       path, ln, sum);
    return 0;
}

/* Parses row values of layer l into s->vals; returns request id / phase. */
static int parse_row(dc_state *s, uint32_t l, uint64_t *req, int *prefill, ms_err *err)
{
    ms_lines *r = &s->in[l];
    unsigned long long ln = (unsigned long long)r->lineno;
    uint32_t n = dc_split_csv(r->buf, s->cols, s->n_cols);
    if (n != s->n_cols)
        return ms_fail(err, "%s:%llu: %s%u columns, expected %u", r->path, ln, n > s->n_cols ? "more than " : "",
                       n > s->n_cols ? s->n_cols : n, s->n_cols);
    *req = s->o->tokens_per_seq ? s->rows_total / s->o->tokens_per_seq : 0;
    *prefill = 1;
    double sum = 0;
    uint32_t j = 0, nonzero = 0;
    for (uint32_t c = 0; c < n; c++) {
        const char *v = s->cols[c];
        switch (s->col_kind[c]) {
        case COL_SEQ: {
            unsigned long long x;
            if (ms_parse_u64(v, &x))
                return ms_fail(err, "%s:%llu: column %s: '%.40s' is not a non-negative integer", r->path, ln,
                               s->o->seq_column ? s->o->seq_column : "request", v);
            *req = x;
            break;
        }
        case COL_PHASE:
            if (parse_phase(r->path, ln, v, prefill, err))
                return -1;
            break;
        case COL_IGNORED:
            break;
        default:
            if (parse_value(s, r->path, ln, c, j, v, &s->vals[j], err))
                return -1;
            sum += s->vals[j];
            nonzero += s->vals[j] > 0;
            j++;
        }
    }
    return check_row_sum(s, r->path, ln, sum, nonzero, err);
}

/* K largest of p[0..J) (ties to the lower id), descending. */
static void topk_of(const float *p, uint32_t J, uint32_t K, int32_t *ids, float *w)
{
    for (uint32_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (uint32_t j = 0; j < J; j++) {
            int taken = 0;
            for (uint32_t q = 0; q < k; q++)
                taken |= ids[q] == (int32_t)j;
            if (!taken && (best < 0 || p[j] > p[best]))
                best = (int32_t)j;
        }
        ids[k] = best;
        w[k] = p[best];
    }
}

static void note_missing(dc_state *s, uint32_t row, uint32_t layer, uint32_t slot)
{
    ms_import_report *rep = &s->rep;
    if (row < s->n_prefill)
        rep->missing_prefill++;
    else
        rep->missing_decode++;
    if (rep->n_listed < MS_IMPORT_MISSING_LIST)
        rep->first_missing[rep->n_listed++] = (ms_missing_cell){s->req_id, row, layer, slot, row >= s->n_prefill};
}

static int flush_request(dc_state *s, ms_trace_writer *w, ms_err *err)
{
    const ms_trace_meta *m = &s->meta;
    if (s->o->prompt_len) { /* the first P rows are the prompt, each later row one decode step */
        s->n_prefill = s->n_rows < s->o->prompt_len ? s->n_rows : s->o->prompt_len;
        s->short_seqs += s->n_rows <= s->o->prompt_len;
    }
    ms_request req;
    memset(&req, 0, sizeof req);
    req.id = s->req_id;
    req.prompt_len = s->n_prefill;
    req.output_len = s->n_rows - s->n_prefill;
    req.n_iters = 1 + req.output_len;
    req.n_rows = s->n_rows;
    ms_request_alloc(&req, m);
    req.iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, s->n_prefill};
    for (uint32_t t = s->n_prefill; t < s->n_rows; t++)
        req.iters[1 + t - s->n_prefill] = (ms_iteration){MS_PHASE_DECODE, t, 1};
    if (req.probs)
        memcpy(req.probs, s->probs, (size_t)s->n_rows * m->L * m->J * sizeof *req.probs);
    for (uint32_t t = 0; t < s->n_rows; t++)
        for (uint32_t l = 0; l < m->L; l++) {
            size_t c = ms_topk_index(m, t, l);
            topk_of(&s->probs[((size_t)t * m->L + l) * m->J], m->J, m->K, &req.topk_ids[c], &req.topk_w[c]);
            for (uint32_t k = 0; k < m->K; k++)
                if (req.topk_w[c + k] == 0 && m->probs_kind != MS_PROBS_FULL) { /* fewer than K kept: missing */
                    req.topk_ids[c + k] = -1;
                    note_missing(s, t, l, k);
                }
        }
    int rc = ms_request_check(m, &req, s->dir, err);
    if (rc == 0)
        rc = ms_writer_add(w, &req, err);
    ms_request_free(&req);
    s->rep.requests++;
    s->rep.prefill_iters++;
    s->rep.prefill_rows += s->n_prefill;
    s->rep.decode_iters += s->n_rows - s->n_prefill;
    s->rep.prefill_cells += (uint64_t)s->n_prefill * m->L * m->K;
    s->rep.decode_cells += (uint64_t)(s->n_rows - s->n_prefill) * m->L * m->K;
    s->in_req = 0;
    return rc;
}

/* Adds token row (all layers read into probs by the caller) to the request. */
static int start_or_check_request(dc_state *s, uint64_t req, int prefill, ms_trace_writer *w, ms_err *err)
{
    const char *p0 = s->in[0].path;
    unsigned long long ln = (unsigned long long)s->in[0].lineno;
    if (s->in_req && req != s->req_id) {
        if (req < s->req_id)
            return ms_fail(err, "%s:%llu: column %s: %llu after request %llu (requests must increase)", p0, ln,
                           s->o->seq_column ? s->o->seq_column : "request", (unsigned long long)req,
                           (unsigned long long)s->req_id);
        if (flush_request(s, w, err))
            return -1;
    }
    if (!s->in_req) {
        if (!prefill)
            return ms_fail(err, "%s:%llu: column phase: request %llu starts with a decode row", p0, ln,
                           (unsigned long long)req);
        s->in_req = 1;
        s->req_id = req;
        s->n_rows = s->n_prefill = 0;
    }
    if (prefill && s->n_rows > s->n_prefill)
        return ms_fail(err, "%s:%llu: column phase: prefill row after decode rows of request %llu", p0, ln,
                       (unsigned long long)req);
    if (s->n_rows >= DC_MAX_ROWS)
        return ms_fail(err, "%s:%llu: request %llu has more than %u rows", p0, ln, (unsigned long long)req, DC_MAX_ROWS);
    if (s->n_rows == s->cap_rows) {
        s->cap_rows = s->cap_rows ? 2 * s->cap_rows : 64;
        s->probs = ms_xrealloc(s->probs, (size_t)s->cap_rows * s->L * s->J, sizeof *s->probs);
    }
    return 0;
}

/* Reads one token row from every layer file: 1 row, 0 layer 0 ended, -1 error. */
static int read_token_row(dc_state *s, ms_trace_writer *w, ms_err *err)
{
    uint64_t req0 = 0;
    int prefill0 = 1;
    for (uint32_t l = 0; l < s->L; l++) {
        int got = ms_lines_next(&s->in[l], err);
        if (got < 0)
            return -1;
        if (got == 0 && l == 0)
            return 0;
        if (got == 0)
            return ms_fail(err, "%s: %llu data rows, %s has more", s->in[l].path,
                           (unsigned long long)s->in[l].lineno - 1, ms_import_base_name(s->paths[0]));
        uint64_t req = 0;
        int prefill = 1;
        if (parse_row(s, l, &req, &prefill, err))
            return -1;
        if (l == 0) {
            req0 = req;
            prefill0 = prefill;
            if (start_or_check_request(s, req, prefill, w, err))
                return -1;
        } else if (req != req0 || prefill != prefill0) {
            return ms_fail(err, "%s:%llu: request/phase differ from %s on the same line", s->in[l].path,
                           (unsigned long long)s->in[l].lineno, ms_import_base_name(s->paths[0]));
        }
        float *dst = &s->probs[((size_t)s->n_rows * s->L + l) * s->J];
        for (uint32_t j = 0; j < s->J; j++)
            dst[j] = (float)s->vals[j];
    }
    s->n_rows++;
    s->n_prefill += prefill0;
    s->rows_total++;
    return 1;
}

/* Layer 0 ended: every other file must end too. */
static int check_all_ended(dc_state *s, ms_err *err)
{
    for (uint32_t l = 1; l < s->L; l++) {
        int got = ms_lines_next(&s->in[l], err);
        if (got < 0)
            return -1;
        if (got)
            return ms_fail(err, "%s:%llu: more rows than %s", s->in[l].path, (unsigned long long)s->in[l].lineno,
                           ms_import_base_name(s->paths[0]));
    }
    return 0;
}

static void dc_free(dc_state *s)
{
    for (uint32_t l = 0; l < s->L; l++) {
        if (s->in)
            ms_lines_close(&s->in[l]);
        if (s->paths)
            free(s->paths[l]);
    }
    free(s->in);
    free(s->paths);
    free(s->header);
    free(s->probs);
    free(s->cols);
    free(s->vals);
    free(s->col_kind);
    ms_trace_meta_free(&s->meta);
}

static int setup(dc_state *s, const ms_import_opts *o, ms_err *err)
{
    s->o = o;
    s->pk = o->probs_kind < 0 ? MS_PROBS_FULL : (ms_probs_kind)o->probs_kind;
    if (s->pk == MS_PROBS_TOPK_IDS)
        return ms_fail(err, "trace import --format dense-csv: --probs-kind topk_ids is not possible (the files hold "
                            "probabilities: full, topk_raw or topk_renorm)");
    if (dc_open_files(s, err))
        return -1;
    ms_import_opts oo = *o;
    if (!oo.model && !oo.experts)
        oo.experts = s->J;
    if (ms_import_dims_resolve(&oo, "dense-csv", &s->d, err))
        return -1;
    if (s->d.J != s->J)
        return ms_fail(err, "%s:1: %u expert columns, expected J=%u", s->paths[0], s->J, s->d.J);
    if (s->d.L && s->d.L != s->L)
        return ms_fail(err, "%s: %u layer files, expected L=%u", s->dir, s->L, s->d.L);
    s->d.L = s->L;
    if (!s->d.K)
        return ms_fail(err, "trace import --format dense-csv: K unknown: give --model PROFILE or --topk K");
    char source[MS_SOURCE_MAX];
    snprintf(source, sizeof source, "%.400s (%s%s)", o->source_name ? o->source_name : ms_import_base_name(s->dir),
             o->source_kind ? o->source_kind : "dense-csv router probabilities",
             s->pk == MS_PROBS_FULL ? "" : ", top-k only");
    ms_import_meta_fill(&s->d, source, s->pk, &s->meta);
    s->cols = ms_xcalloc(s->n_cols, sizeof *s->cols);
    s->vals = ms_xcalloc(s->J, sizeof *s->vals);
    return 0;
}

/* After the last row: --tokens-per-seq must tile the rows; notes. */
static int finish_notes(dc_state *s, ms_err *err)
{
    const ms_import_opts *o = s->o;
    if (o->tokens_per_seq && s->rows_total % o->tokens_per_seq)
        return ms_fail(err, "%s: %llu data rows are not a multiple of --tokens-per-seq %u (the last sequence has "
                            "%llu)",
                       s->paths[0], (unsigned long long)s->rows_total, o->tokens_per_seq,
                       (unsigned long long)(s->rows_total % o->tokens_per_seq));
    if (o->tokens_per_seq)
        ms_import_note(&s->rep, "%llu rows -> %llu sequences of %u rows (--tokens-per-seq)",
                       (unsigned long long)s->rows_total, (unsigned long long)s->rep.requests, o->tokens_per_seq);
    if (o->prompt_len)
        ms_import_note(&s->rep, "the first %u rows of a sequence are its prompt, each later row one decode step",
                       o->prompt_len);
    if (s->short_seqs)
        ms_import_note(&s->rep, "%llu sequences have no more rows than --prompt-len: prefill only",
                       (unsigned long long)s->short_seqs);
    return 0;
}

int ms_import_densecsv(const char *in_dir, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                       ms_err *err)
{
    dc_state s;
    memset(&s, 0, sizeof s);
    s.dir = in_dir;
    snprintf(s.rep.input, sizeof s.rep.input, "%s", ms_import_base_name(in_dir));
    snprintf(s.rep.row_unit, sizeof s.rep.row_unit, "CSV rows per layer");
    int rc = setup(&s, o, err);
    ms_import_sink sink;
    memset(&sink, 0, sizeof sink);
    if (rc == 0)
        rc = ms_import_sink_open(&sink, in_dir, out_path, &s.meta, err);
    while (rc == 0) {
        int r = read_token_row(&s, sink.w, err);
        if (r < 0)
            rc = -1;
        else if (r == 0) {
            rc = check_all_ended(&s, err);
            break;
        } else
            s.rep.rows++;
    }
    if (rc == 0 && !s.in_req)
        rc = ms_fail(err, "%s: no data rows after the header", s.paths[0]);
    if (rc == 0)
        rc = flush_request(&s, sink.w, err);
    if (rc == 0)
        rc = finish_notes(&s, err);
    if (sink.w)
        rc = ms_import_sink_finish(&sink, rc, err);
    if (rep)
        *rep = s.rep;
    dc_free(&s);
    return rc;
}
