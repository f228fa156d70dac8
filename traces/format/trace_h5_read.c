/* Reading requests from an open trace (trace.h ms_reader_read / _next):
 * hyperslab reads of a request's iterations, rows, tokens and text, and the
 * digest of what was read (trace_h5_parts.h). */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/digest.h"
#include "sim/core/out.h"
#include "traces/format/trace_h5_parts.h"

static int read_range(ms_trace_reader *r, ds_id d, uint64_t start, uint64_t count, hid_t mtype, void *buf,
                      ms_err *err)
{
    if (count == 0)
        return 0;
    int rank = r->rank[d];
    hsize_t off[4] = {start, 0, 0, 0}, cnt[4];
    memcpy(cnt, r->dims[d], sizeof cnt);
    cnt[0] = count;
    hid_t fs = H5Dget_space(r->ds[d]);
    hid_t ms = H5Screate_simple(rank, cnt, NULL);
    herr_t st = H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
    if (st >= 0)
        st = H5Dread(r->ds[d], mtype, ms, fs, r->dxpl, buf);
    int rc = 0;
    if (st < 0) {
        char what[96];
        snprintf(what, sizeof what, "cannot read entries %" PRIu64 "..%" PRIu64, start, start + count - 1);
        rc = h5p_h5_fail(err, r->path, h5p_ds_table[d].path, what);
    }
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

static int read_typed(ms_trace_reader *r, ds_id d, uint64_t start, uint64_t count, void *buf, ms_err *err)
{
    return read_range(r, d, start, count, h5p_mem_type(h5p_ds_table[d].type), buf, err);
}

/* Phase and request-relative row range of each iteration of request i. */
static int read_iterations(ms_trace_reader *r, uint64_t i, ms_request *q, ms_err *err)
{
    uint64_t start = r->iter_start[i], n = q->n_iters, rs = r->row_start[i];
    uint8_t *phase = ms_xcalloc(n, 1);
    uint64_t *row = ms_xcalloc(n, sizeof *row);
    uint32_t *rows = ms_xcalloc(n, sizeof *rows);
    int rc = read_typed(r, D_IT_PHASE, start, n, phase, err);
    if (rc == 0)
        rc = read_typed(r, D_IT_ROW_START, start, n, row, err);
    if (rc == 0)
        rc = read_typed(r, D_IT_N_ROWS, start, n, rows, err);
    for (uint64_t k = 0; rc == 0 && k < n; k++) {
        if (phase[k] > 1)
            rc = ms_fail(err, "%s: /iterations/phase[%" PRIu64 "] = %u, expected 0 (prefill) or 1 (decode)", r->path,
                         start + k, phase[k]);
        else if (row[k] < rs || row[k] - rs >= q->n_rows)
            rc = ms_fail(err, "%s: /iterations/row_start[%" PRIu64 "] = %" PRIu64 " outside request %" PRIu64
                         "'s rows [%" PRIu64 ", %" PRIu64 ")", r->path, start + k, row[k], q->id, rs, rs + q->n_rows);
        else {
            q->iters[k].phase = phase[k] ? MS_PHASE_DECODE : MS_PHASE_PREFILL;
            q->iters[k].row0 = (uint32_t)(row[k] - rs);
            q->iters[k].n_rows = rows[k];
        }
    }
    free(phase);
    free(row);
    free(rows);
    return rc;
}

/* FULL trace without stored top-k: the K largest probs, ties to the lower id,
 * in descending order. */
void h5p_derive_topk(const ms_trace_meta *m, ms_request *q)
{
    uint8_t *taken = ms_xcalloc(m->J, 1);
    for (uint32_t row = 0; row < q->n_rows; row++) {
        for (uint32_t l = 0; l < m->L; l++) {
            const float *p = q->probs + ms_probs_index(m, row, l);
            size_t o = ms_topk_index(m, row, l);
            memset(taken, 0, m->J);
            for (uint32_t k = 0; k < m->K; k++) {
                int64_t best = -1;
                for (uint32_t j = 0; j < m->J; j++)
                    if (!taken[j] && (best < 0 || p[j] > p[best]))
                        best = j;
                taken[best] = 1;
                q->topk_ids[o + k] = (int32_t)best;
                q->topk_w[o + k] = p[best];
            }
        }
    }
    free(taken);
}

/* v2: n_text_bytes[i] bytes of /text/utf8 from text_start[i]; a NUL byte
 * would cut the C string short, so it is an error. */
static int read_text_v2(ms_trace_reader *r, uint64_t i, ms_request *q, ms_err *err)
{
    uint64_t start = r->text_start[i], n = r->n_text[i];
    char *s = ms_xcalloc(n + 1, 1);
    if (read_typed(r, D_TEXT_UTF8, start, n, s, err) < 0) {
        free(s);
        return -1;
    }
    const char *nul = memchr(s, 0, n);
    if (nul) {
        uint64_t at = start + (uint64_t)(nul - s);
        free(s);
        return ms_fail(err, "%s: /text/utf8[%" PRIu64 "]: NUL byte inside the text of request %" PRIu64, r->path, at,
                       q->id);
    }
    q->text = s;
    return 0;
}

static int read_text(ms_trace_reader *r, uint64_t i, ms_request *q, ms_err *err)
{
    if (r->text_start)
        return read_text_v2(r, i, q, err);
    hid_t ft = H5Dget_type(r->ds[D_REQ_TEXT]);
    hid_t mt = h5p_vlen_string_type(H5Tget_cset(ft));
    H5Tclose(ft);
    char *s = NULL;
    int rc = read_range(r, D_REQ_TEXT, i, 1, mt, &s, err);
    if (rc == 0 && !s)
        rc = ms_fail(err, "%s: /requests/text[%" PRIu64 "] is a null string", r->path, i);
    if (rc == 0)
        q->text = ms_xstrdup(s);
    if (s) {
        hsize_t one = 1;
        hid_t ms = H5Screate_simple(1, &one, NULL);
        H5Dvlen_reclaim(mt, ms, H5P_DEFAULT, &s);
        H5Sclose(ms);
    }
    H5Tclose(mt);
    return rc;
}

static uint64_t request_bytes(const ms_trace_meta *m, uint64_t n_rows, uint64_t n_iters)
{
    uint64_t row = (uint64_t)m->L * ((uint64_t)m->K * 9 + (uint64_t)m->spec_depth * m->K * 8 +
                                     (m->probs_kind == MS_PROBS_FULL ? (uint64_t)m->J * 4 : 0));
    return n_rows * (row + 4) + n_iters * ((uint64_t)m->embed_dim * 4 + sizeof(ms_iteration));
}

/* The arrays of the selected parts, uninitialised: every element is read
 * (or derived) before anyone looks at it.  A v1 full trace without stored
 * top-k derives it from the probabilities, so reads them in any case. */
static void alloc_parts(ms_trace_reader *r, ms_request *q, unsigned parts)
{
    const ms_trace_meta *m = &r->meta;
    size_t cells = (size_t)q->n_rows * m->L * m->K;
    q->iters = ms_xrealloc(NULL, q->n_iters, sizeof *q->iters);
    q->topk_ids = ms_xrealloc(NULL, cells, sizeof *q->topk_ids);
    if ((parts & MS_PART_WEIGHTS) || r->derive_topk)
        q->topk_w = ms_xrealloc(NULL, cells, sizeof *q->topk_w);
    if (m->probs_kind == MS_PROBS_FULL && ((parts & MS_PART_PROBS) || r->derive_topk))
        q->probs = ms_xrealloc(NULL, (size_t)q->n_rows * m->L * m->J, sizeof *q->probs);
    if (m->embed_dim && (parts & MS_PART_EMBED))
        q->embedding = ms_xrealloc(NULL, (size_t)q->n_iters * m->embed_dim, sizeof *q->embedding);
    if (m->spec_depth && (parts & MS_PART_SPEC)) {
        q->spec_ids = ms_xrealloc(NULL, cells * m->spec_depth, sizeof *q->spec_ids);
        q->spec_w = ms_xrealloc(NULL, cells * m->spec_depth, sizeof *q->spec_w);
    }
    if (m->has_recorded_hits && (parts & MS_PART_HITS))
        q->recorded_hit = ms_xrealloc(NULL, cells, 1);
    if (m->has_token_ids && (parts & MS_PART_PROMPT))
        q->token_ids = ms_xrealloc(NULL, q->n_tokens, sizeof *q->token_ids);
}

static int read_rows(ms_trace_reader *r, uint64_t i, ms_request *q, unsigned parts, ms_err *err)
{
    uint64_t rs = r->row_start[i], n = q->n_rows;
    if (!r->derive_topk &&
        (read_typed(r, D_ROW_TOPK_IDS, rs, n, q->topk_ids, err) < 0 ||
         (q->topk_w && read_typed(r, D_ROW_TOPK_W, rs, n, q->topk_w, err) < 0)))
        return -1;
    if (q->probs && read_typed(r, D_ROW_PROBS, rs, n, q->probs, err) < 0)
        return -1;
    if (q->recorded_hit && read_typed(r, D_ROW_HIT, rs, n, q->recorded_hit, err) < 0)
        return -1;
    if (q->spec_ids && (read_typed(r, D_ROW_SPEC_IDS, rs, n, q->spec_ids, err) < 0 ||
                        read_typed(r, D_ROW_SPEC_W, rs, n, q->spec_w, err) < 0))
        return -1;
    if (r->derive_topk) {
        h5p_derive_topk(&r->meta, q);
        if (!(parts & MS_PART_WEIGHTS)) {
            free(q->topk_w);
            q->topk_w = NULL;
        }
        if (!(parts & MS_PART_PROBS)) {
            free(q->probs);
            q->probs = NULL;
        }
    }
    return 0;
}

static int read_request(ms_trace_reader *r, uint64_t i, ms_request *q, unsigned parts, ms_err *err)
{
    const ms_trace_meta *m = &r->meta;
    memset(q, 0, sizeof *q);
    q->id = m->req_id[i];
    q->arrival_s = m->req_arrival_s[i];
    q->prompt_len = m->req_prompt_len[i];
    q->output_len = m->req_output_len[i];
    q->n_iters = m->req_n_iters[i];
    q->n_rows = (uint32_t)m->req_n_rows[i];
    q->n_tokens = r->n_tokens[i];
    uint64_t bytes = request_bytes(m, q->n_rows, q->n_iters) + (r->n_text ? r->n_text[i] : 0);
    if (bytes > MAX_REQUEST_BYTES)
        return ms_fail(err, "%s: request %" PRIu64 " (index %" PRIu64 ") needs %" PRIu64 " bytes, more than the %"
                       PRIu64 " one request may take", r->path, q->id, i, bytes, MAX_REQUEST_BYTES);
    alloc_parts(r, q, parts);
    if (read_iterations(r, i, q, err) < 0 || read_rows(r, i, q, parts, err) < 0)
        return -1;
    if (q->embedding && read_typed(r, D_IT_EMBED, r->iter_start[i], q->n_iters, q->embedding, err) < 0)
        return -1;
    if (q->token_ids && read_typed(r, D_TOK_IDS, r->token_start[i], q->n_tokens, q->token_ids, err) < 0)
        return -1;
    if (m->has_text && (parts & MS_PART_PROMPT) && read_text(r, i, q, err) < 0)
        return -1;
    return 0;
}

static uint64_t checks_done;

uint64_t ms_trace_checks(void)
{
    return checks_done;
}

/* Checks request i unless this process already checked it with these parts
 * (trace_checked.c); marks it once it passed. */
static int check_once(ms_trace_reader *r, uint64_t i, const ms_request *q, unsigned parts, ms_err *err)
{
    uint8_t done = r->marks[i];
    if ((done & H5P_CHECKED) && (parts & ~done & MS_PART_ALL) == 0)
        return 0;
    checks_done++;
    if (ms_request_check_parts(&r->meta, q, parts, r->path, err) < 0)
        return -1;
    r->marks[i] = (uint8_t)(done | H5P_CHECKED | parts);
    return 0;
}

/* Request i of the snapshot, its arrays shared (read-only, ms_request.borrowed),
 * the parts not selected left out. */
static void borrow_from_snapshot(ms_trace_reader *r, uint64_t i, ms_request *out, unsigned parts)
{
    *out = *ms_trace_snapshot_request(r->mem, i);
    out->borrowed = 1;
    if (!(parts & MS_PART_WEIGHTS))
        out->topk_w = NULL;
    if (!(parts & MS_PART_PROBS))
        out->probs = NULL;
    if (!(parts & MS_PART_EMBED))
        out->embedding = NULL;
    if (!(parts & MS_PART_SPEC))
        out->spec_ids = NULL, out->spec_w = NULL;
    if (!(parts & MS_PART_HITS))
        out->recorded_hit = NULL;
    if (!(parts & MS_PART_PROMPT))
        out->token_ids = NULL, out->text = NULL;
}

int ms_reader_read(ms_trace_reader *r, uint64_t i, ms_request *out, ms_err *err)
{
    ms_request_free(out);
    if (i >= r->meta.n_requests)
        return ms_fail(err, "%s: request index %" PRIu64 " out of range (the trace has %" PRIu64 " requests)",
                       r->path, i, r->meta.n_requests);
    unsigned parts = r->parts;
    if (r->mem) {
        borrow_from_snapshot(r, i, out, parts); /* checked when the snapshot was loaded */
    } else if (read_request(r, i, out, parts, err) < 0 || check_once(r, i, out, parts, err) < 0) {
        ms_request_free(out);
        return -1;
    }
    r->cursor = i + 1;
    if (r->dig) {
        if (i == r->dig->next)
            h5p_digest_request(r->dig, &r->meta, out);
        else
            r->dig->broken = 1;
    }
    return 1;
}

int ms_reader_next(ms_trace_reader *r, ms_request *out, ms_err *err)
{
    if (r->cursor >= r->meta.n_requests) {
        ms_request_free(out);
        return 0;
    }
    return ms_reader_read(r, r->cursor, out, err);
}
