/* Trace format v2 (v1 still reads) on HDF5: the streaming reader and the
 * writer.
 *
 * Layout (docs/trace-format.md is the reference): root attributes hold the
 * metadata; /layers holds per-layer sizes; /requests is a columnar table with
 * one entry per request; /iterations and /rows hold the routing, indexed by
 * the request table's iter_start / row_start; /tokens/ids the prompt tokens,
 * /text/utf8 the prompt text (v1: /requests/text, variable-length strings).
 * Every dataset is chunked along its first axis, zstd-compressed (filter
 * 32015) and, in v2, checksummed (Fletcher32 after zstd), so the writer
 * appends request by request and the reader reads one request with hyperslab
 * selections: memory stays bounded by one request.  v2 files use HDF5's 1.10
 * file format, whose metadata (superblock, object headers, chunk indexes)
 * carries checksums too; they hold no variable-length data (the global heap
 * has no checksum).
 *
 * This file: the dataset table, HDF5 errors, metadata checks and the content
 * digest that the reader (trace_h5_open.c, trace_h5_read.c) and the writer
 * (trace_h5_write.c) share (trace_h5_parts.h). */
#define _GNU_SOURCE /* fallocate */
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

const ds_desc h5p_ds_table[D_COUNT] = {
    [D_EXPERT_BYTES] = {"/layers/expert_bytes", T_U64, AX_LAYER, "[L]"},
    [D_DENSE_BYTES] = {"/layers/dense_bytes", T_U64, AX_LAYER, "[L]"},
    [D_REQ_ID] = {"/requests/id", T_U64, AX_REQ, "[N]"},
    [D_REQ_ARRIVAL] = {"/requests/arrival_s", T_F64, AX_REQ, "[N]"},
    [D_REQ_PROMPT] = {"/requests/prompt_len", T_U32, AX_REQ, "[N]"},
    [D_REQ_OUTPUT] = {"/requests/output_len", T_U32, AX_REQ, "[N]"},
    [D_REQ_ITER_START] = {"/requests/iter_start", T_U64, AX_REQ, "[N]"},
    [D_REQ_N_ITERS] = {"/requests/n_iters", T_U32, AX_REQ, "[N]"},
    [D_REQ_ROW_START] = {"/requests/row_start", T_U64, AX_REQ, "[N]"},
    [D_REQ_N_ROWS] = {"/requests/n_rows", T_U64, AX_REQ, "[N]"},
    [D_REQ_TOKEN_START] = {"/requests/token_start", T_U64, AX_REQ, "[N]"},
    [D_REQ_N_TOKENS] = {"/requests/n_tokens", T_U32, AX_REQ, "[N]"},
    [D_REQ_TEXT_START] = {"/requests/text_start", T_U64, AX_REQ, "[N]"},
    [D_REQ_N_TEXT] = {"/requests/n_text_bytes", T_U32, AX_REQ, "[N]"},
    [D_REQ_TEXT] = {"/requests/text", T_STR, AX_REQ, "[N]"},
    [D_TOK_IDS] = {"/tokens/ids", T_I32, AX_TOK, "[T]"},
    [D_TEXT_UTF8] = {"/text/utf8", T_U8, AX_TEXT, "[B]"},
    [D_IT_PHASE] = {"/iterations/phase", T_U8, AX_ITER, "[I]"},
    [D_IT_ROW_START] = {"/iterations/row_start", T_U64, AX_ITER, "[I]"},
    [D_IT_N_ROWS] = {"/iterations/n_rows", T_U32, AX_ITER, "[I]"},
    [D_IT_EMBED] = {"/iterations/embedding", T_F32, AX_ITER, "[I, E]"},
    [D_ROW_TOPK_IDS] = {"/rows/topk_ids", T_I32, AX_ROW, "[R, L, K]"},
    [D_ROW_TOPK_W] = {"/rows/topk_w", T_F32, AX_ROW, "[R, L, K]"},
    [D_ROW_PROBS] = {"/rows/probs", T_F32, AX_ROW, "[R, L, J]"},
    [D_ROW_HIT] = {"/rows/recorded_hit", T_I8, AX_ROW, "[R, L, K]"},
    [D_ROW_SPEC_IDS] = {"/rows/spec_ids", T_I32, AX_ROW, "[R, L, S, K]"},
    [D_ROW_SPEC_W] = {"/rows/spec_w", T_F32, AX_ROW, "[R, L, S, K]"},
};

const char *const h5p_group_names[6] = {"/layers", "/requests", "/tokens", "/text", "/iterations", "/rows"};

int h5p_ds_inner_dims(const ms_trace_meta *m, ds_id d, hsize_t inner[3])
{
    switch (d) {
    case D_IT_EMBED: inner[0] = m->embed_dim; return 1;
    case D_ROW_TOPK_IDS: case D_ROW_TOPK_W: case D_ROW_HIT:
        inner[0] = m->L; inner[1] = m->K; return 2;
    case D_ROW_PROBS: inner[0] = m->L; inner[1] = m->J; return 2;
    case D_ROW_SPEC_IDS: case D_ROW_SPEC_W:
        inner[0] = m->L; inner[1] = m->spec_depth; inner[2] = m->K; return 3;
    default: return 0;
    }
}

/* Whether a trace of this version with this metadata holds the dataset.
 * FULL traces written by moesim store the top-k too; a v1 reader derives it
 * when absent. */
static int ds_wanted_v(const ms_trace_meta *m, uint32_t version, ds_id d)
{
    switch (d) {
    case D_REQ_TEXT: return m->has_text != 0 && version == 1;
    case D_REQ_TEXT_START: case D_REQ_N_TEXT: case D_TEXT_UTF8: return m->has_text != 0 && version >= 2;
    case D_TOK_IDS: return m->has_token_ids != 0;
    case D_IT_EMBED: return m->embed_dim > 0;
    case D_ROW_PROBS: return m->probs_kind == MS_PROBS_FULL;
    case D_ROW_HIT: return m->has_recorded_hits != 0;
    case D_ROW_SPEC_IDS: case D_ROW_SPEC_W: return m->spec_depth > 0;
    default: return 1;
    }
}

int h5p_ds_wanted(const ms_trace_meta *m, ds_id d)
{
    return ds_wanted_v(m, m->version, d);
}

hid_t h5p_mem_type(elem_type t)
{
    switch (t) {
    case T_U8: return H5T_NATIVE_UINT8;
    case T_I8: return H5T_NATIVE_INT8;
    case T_I32: return H5T_NATIVE_INT32;
    case T_U32: return H5T_NATIVE_UINT32;
    case T_U64: return H5T_NATIVE_UINT64;
    case T_F32: return H5T_NATIVE_FLOAT;
    case T_F64: return H5T_NATIVE_DOUBLE;
    default: return H5I_INVALID_HID;
    }
}

hid_t h5p_file_type(elem_type t)
{
    switch (t) {
    case T_U8: return H5T_STD_U8LE;
    case T_I8: return H5T_STD_I8LE;
    case T_I32: return H5T_STD_I32LE;
    case T_U32: return H5T_STD_U32LE;
    case T_U64: return H5T_STD_U64LE;
    case T_F32: return H5T_IEEE_F32LE;
    case T_F64: return H5T_IEEE_F64LE;
    default: return H5I_INVALID_HID;
    }
}

size_t h5p_elem_size(elem_type t)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 4, 8, sizeof(char *)};
    return sizes[t];
}

H5T_class_t h5p_elem_class(elem_type t)
{
    if (t == T_STR)
        return H5T_STRING;
    return t == T_F32 || t == T_F64 ? H5T_FLOAT : H5T_INTEGER;
}

/* A variable-length string type (v1 reads; caller closes it). */
hid_t h5p_vlen_string_type(H5T_cset_t cset)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, cset);
    return t;
}

/* ---- HDF5 errors as one line ---- */

typedef struct {
    char text[200];
    int got;
    int checksum; /* some message on the stack reports a failed checksum */
} h5_detail;

static herr_t take_innermost(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    h5_detail *d = data;
    if (!e->desc)
        return 0;
    if (strstr(e->desc, "checksum") || strstr(e->desc, "Fletcher32"))
        d->checksum = 1;
    if (!d->got && e->desc[0]) {
        /* the sec2 driver's "file write failed: time = ..., error message =
         * 'No space left on device', buf = ...": keep the system's words */
        const char *sys = strstr(e->desc, "error message = '");
        const char *end = sys ? strchr(sys + 17, '\'') : NULL;
        if (sys && end)
            snprintf(d->text, sizeof d->text, "%.*s", (int)(end - sys - 17), sys + 17);
        else
            snprintf(d->text, sizeof d->text, "%s", e->desc);
        d->got = 1;
    }
    return 0;
}

/* The innermost message on HDF5's error stack (the most specific cause), on
 * one line.  Must run right after the failing call: the next API call clears
 * the stack. */
static const char *h5_cause(h5_detail *d)
{
    d->text[0] = 0;
    d->got = d->checksum = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, take_innermost, d);
    for (char *p = d->text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return d->got ? d->text : "unknown HDF5 error";
}

/* "FILE: OBJ: what (HDF5: cause)"; a failed checksum says the file is
 * corrupt in so many words. */
int h5p_h5_fail(ms_err *err, const char *file, const char *obj, const char *what)
{
    h5_detail d;
    const char *cause = h5_cause(&d);
    const char *corrupt = d.checksum ? "; checksum mismatch: the file is damaged" : "";
    if (obj)
        return ms_fail(err, "%s: %s: %s (HDF5: %s%s)", file, obj, what, cause, corrupt);
    return ms_fail(err, "%s: %s (HDF5: %s%s)", file, what, cause, corrupt);
}

/* Registers the zstd filter (which also turns HDF5's exit-time clean-up off,
 * before anything else touches HDF5) and turns HDF5's own error printing off:
 * errors are read from its stack and reported as one line. */
int h5p_h5_start(ms_err *err)
{
    if (ms_h5_register_zstd(err) < 0)
        return -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

void h5p_close_id(hid_t *id, herr_t (*closer)(hid_t))
{
    if (*id >= 0)
        closer(*id);
    *id = H5I_INVALID_HID;
}

/* ---- metadata ---- */

static int check_fixed_string(const char *s, size_t cap, const char *path, const char *name, ms_err *err)
{
    if (!memchr(s, 0, cap))
        return ms_fail(err, "%s: %s longer than %zu bytes", path, name, cap - 1);
    return 0;
}

/* Dimensions and layer sizes every reader and writer relies on. */
int h5p_validate_meta(const ms_trace_meta *m, const char *path, ms_err *err)
{
    if (check_fixed_string(m->model_name, sizeof m->model_name, path, "model_name", err) < 0 ||
        check_fixed_string(m->source, sizeof m->source, path, "source", err) < 0)
        return -1;
    if (m->L < 1 || m->L > MAX_L)
        return ms_fail(err, "%s: L = %u out of range [1, %u]", path, m->L, MAX_L);
    if (m->J < 1 || m->J > MAX_J)
        return ms_fail(err, "%s: J = %u out of range [1, %u]", path, m->J, MAX_J);
    if (m->K < 1 || m->K > m->J)
        return ms_fail(err, "%s: K = %u out of range [1, J = %u]", path, m->K, m->J);
    if (m->spec_depth >= m->L)
        return ms_fail(err, "%s: spec_depth = %u out of range [0, L - 1 = %u]", path, m->spec_depth, m->L - 1);
    if (m->embed_dim > MAX_EMBED)
        return ms_fail(err, "%s: embed_dim = %u out of range [0, %u]", path, m->embed_dim, MAX_EMBED);
    if ((unsigned)m->probs_kind > MS_PROBS_TOPK_IDS)
        return ms_fail(err, "%s: probs_kind = %d unknown", path, (int)m->probs_kind);
    uint64_t row_bytes = (uint64_t)m->L * ((uint64_t)m->K * 9 + (uint64_t)m->spec_depth * m->K * 8 +
                                           (m->probs_kind == MS_PROBS_FULL ? (uint64_t)m->J * 4 : 0));
    if (row_bytes > MAX_ROW_BYTES)
        return ms_fail(err, "%s: one token row would take %" PRIu64 " bytes (L = %u, J = %u, K = %u, spec_depth = %u), "
                       "more than %" PRIu64, path, row_bytes, m->L, m->J, m->K, m->spec_depth, MAX_ROW_BYTES);
    if (!m->expert_bytes || !m->dense_bytes)
        return ms_fail(err, "%s: expert_bytes / dense_bytes per layer missing", path);
    for (uint32_t l = 0; l < m->L; l++)
        if (m->expert_bytes[l] == 0)
            return ms_fail(err, "%s: expert_bytes[%u] = 0 (every routed expert has a size)", path, l);
    return 0;
}

uint32_t h5p_meta_flags(const ms_trace_meta *m)
{
    return (m->has_token_ids ? FLAG_TOKEN_IDS : 0) | (m->has_text ? FLAG_TEXT : 0) |
           (m->has_recorded_hits ? FLAG_RECORDED_HITS : 0);
}

uint64_t ms_trace_request_bytes(const ms_trace_meta *m, uint64_t n_rows, uint64_t n_iters, uint64_t n_tokens,
                                uint64_t text_bytes)
{
    uint64_t row = (uint64_t)m->L * ((uint64_t)m->K * 8 + (m->has_recorded_hits ? m->K : 0) +
                                     (uint64_t)m->spec_depth * m->K * 8 +
                                     (m->probs_kind == MS_PROBS_FULL ? (uint64_t)m->J * 4 : 0));
    uint64_t iter = 1 + 8 + 4 + (uint64_t)m->embed_dim * 4;
    uint64_t table = 8 + 8 + 4 + 4 + 8 + 4 + 8 + 8 + 8 + 4 + (m->has_text ? 12 : 0);
    return n_rows * row + n_iters * iter + n_tokens * 4 + text_bytes + table;
}

int ms_trace_v1_note(const char *path, const ms_trace_meta *m, char *buf, size_t n)
{
    if (n)
        buf[0] = '\0';
    if (!m || m->version != 1)
        return 0;
    snprintf(buf, n, "note: %s is trace format v1: no checksums, a damaged file can go unnoticed "
             "(`moesim trace upgrade %s NEW.h5` rewrites it as v2)", path, path);
    return 1;
}

/* ---- content digest (docs/trace-format.md "Content digest") ----
 *
 * One SHA-256 per dataset a v2 file holds, over its elements in row-major
 * order, each little-endian in the type docs/trace-format.md names (so the digest does
 * not depend on chunking, compression or the stored integer width), then one
 * SHA-256 over a header (the root attributes) and, per dataset in table
 * order, its path, a 0 byte and its hex digest.  The writer and the reader
 * feed it the same logical values, request by request: every dataset's
 * stream is the concatenation of the requests' parts, in order. */


static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* n elements of size esz, each as little-endian bytes. */
static void digest_le(ms_digest *d, const void *p, size_t n, size_t esz)
{
    if (!d || n == 0)
        return;
    if (esz == 1 || host_is_le()) {
        ms_digest_update(d, p, n * esz);
        return;
    }
    unsigned char buf[4096];
    const unsigned char *src = p;
    size_t per = sizeof buf / esz;
    for (size_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? n - i : per;
        for (size_t e = 0; e < k; e++)
            for (size_t b = 0; b < esz; b++)
                buf[e * esz + b] = src[(i + e) * esz + esz - 1 - b];
        ms_digest_update(d, buf, k * esz);
    }
}

void h5p_digest_free(content_digest *g)
{
    if (!g)
        return;
    for (int d = 0; d < D_COUNT; d++)
        ms_digest_free(g->ds[d]);
    free(g);
}

/* topk_stored: whether the file holds /rows/topk_* (a FULL trace may leave
 * them out; the digest covers the datasets the file holds). */
content_digest *h5p_digest_new(const ms_trace_meta *m, int topk_stored)
{
    content_digest *g = ms_xcalloc(1, sizeof *g);
    for (int d = 0; d < D_COUNT; d++)
        if (ds_wanted_v(m, MS_TRACE_FORMAT_VERSION, (ds_id)d) &&
            (topk_stored || (d != D_ROW_TOPK_IDS && d != D_ROW_TOPK_W)))
            g->ds[d] = ms_digest_new();
    digest_le(g->ds[D_EXPERT_BYTES], m->expert_bytes, m->L, 8);
    digest_le(g->ds[D_DENSE_BYTES], m->dense_bytes, m->L, 8);
    return g;
}

static void digest_u64(ms_digest *d, uint64_t v)
{
    digest_le(d, &v, 1, 8);
}

static void digest_u32(ms_digest *d, uint32_t v)
{
    digest_le(d, &v, 1, 4);
}

void h5p_digest_request(content_digest *g, const ms_trace_meta *m, const ms_request *q)
{
    size_t cells = (size_t)q->n_rows * m->L * m->K;
    uint64_t text = q->text ? strlen(q->text) : 0;
    ms_digest **ds = g->ds;
    digest_u64(ds[D_REQ_ID], q->id);
    digest_le(ds[D_REQ_ARRIVAL], &q->arrival_s, 1, 8);
    digest_u32(ds[D_REQ_PROMPT], q->prompt_len);
    digest_u32(ds[D_REQ_OUTPUT], q->output_len);
    digest_u64(ds[D_REQ_ITER_START], g->iters);
    digest_u32(ds[D_REQ_N_ITERS], q->n_iters);
    digest_u64(ds[D_REQ_ROW_START], g->rows);
    digest_u64(ds[D_REQ_N_ROWS], q->n_rows);
    digest_u64(ds[D_REQ_TOKEN_START], g->tokens);
    digest_u32(ds[D_REQ_N_TOKENS], q->n_tokens);
    if (ds[D_TEXT_UTF8]) {
        digest_u64(ds[D_REQ_TEXT_START], g->text);
        digest_u32(ds[D_REQ_N_TEXT], (uint32_t)text);
        digest_le(ds[D_TEXT_UTF8], q->text, text, 1);
    }
    digest_le(ds[D_TOK_IDS], q->token_ids, q->token_ids ? q->n_tokens : 0, 4);
    for (uint32_t k = 0; k < q->n_iters; k++) {
        uint8_t phase = q->iters[k].phase == MS_PHASE_DECODE;
        digest_le(ds[D_IT_PHASE], &phase, 1, 1);
        digest_u64(ds[D_IT_ROW_START], g->rows + q->iters[k].row0);
        digest_u32(ds[D_IT_N_ROWS], q->iters[k].n_rows);
    }
    digest_le(ds[D_IT_EMBED], q->embedding, q->embedding ? (size_t)q->n_iters * m->embed_dim : 0, 4);
    digest_le(ds[D_ROW_TOPK_IDS], q->topk_ids, cells, 4);
    digest_le(ds[D_ROW_TOPK_W], q->topk_w, cells, 4);
    digest_le(ds[D_ROW_PROBS], q->probs, q->probs ? (size_t)q->n_rows * m->L * m->J : 0, 4);
    digest_le(ds[D_ROW_HIT], q->recorded_hit, q->recorded_hit ? cells : 0, 1);
    digest_le(ds[D_ROW_SPEC_IDS], q->spec_ids, q->spec_ids ? cells * m->spec_depth : 0, 4);
    digest_le(ds[D_ROW_SPEC_W], q->spec_w, q->spec_w ? cells * m->spec_depth : 0, 4);
    g->iters += q->n_iters;
    g->rows += q->n_rows;
    g->tokens += q->n_tokens;
    g->text += text;
    g->next++;
}

/* The content digest as hex; frees g. */
void h5p_digest_final(content_digest *g, const ms_trace_meta *m, char hex[MS_DIGEST_HEX])
{
    ms_digest *top = ms_digest_new();
    static const char magic[] = "moesim-trace content v2\n";
    ms_digest_update(top, magic, sizeof magic - 1);
    uint32_t ints[] = {m->L, m->J, m->K, m->shared_experts, m->hidden_size, m->embed_dim, m->spec_depth,
                       h5p_meta_flags(m)};
    digest_le(top, ints, sizeof ints / sizeof ints[0], 4);
    const char *strs[] = {ms_probs_kind_name(m->probs_kind), m->model_name, m->source};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        ms_digest_update(top, strs[i], strlen(strs[i]) + 1);
    for (int d = 0; d < D_COUNT; d++) {
        if (!g->ds[d])
            continue;
        char part[MS_DIGEST_HEX];
        ms_digest_final(g->ds[d], part);
        g->ds[d] = NULL;
        ms_digest_update(top, h5p_ds_table[d].path, strlen(h5p_ds_table[d].path) + 1);
        ms_digest_update(top, part, MS_DIGEST_HEX - 1);
    }
    ms_digest_final(top, hex);
    h5p_digest_free(g);
}
