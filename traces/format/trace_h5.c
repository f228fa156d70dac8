/* Trace format v2 (v1 still reads) on HDF5: the streaming reader and the
 * writer.
 *
 * Layout (traces/FORMAT.md is the reference): root attributes hold the
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
 * has no checksum). */
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
#include "traces/format/trace.h"
#include "traces/format/trace_cache.h"

#define FORMAT_NAME "moesim-trace"
#define ZSTD_FILTER_ID 32015
#define ZSTD_LEVEL 3u
#define CHUNK_TARGET_BYTES (256u << 10)
#define TEXT_CHUNK_ENTRIES 1024u
#define CACHE_MIN_BYTES ((size_t)1 << 20)
#define CACHE_MAX_BYTES ((size_t)256 << 20)
#define CACHE_SLOTS 521
/* Limits that keep a malformed header from asking for absurd memory. */
#define MAX_L 4096u
#define MAX_J 65536u
#define MAX_EMBED 1048576u
#define MAX_ROW_BYTES ((uint64_t)64 << 20)
#define MAX_REQUEST_BYTES ((uint64_t)16 << 30)
/* Attribute and link messages stay in the (checksummed) object headers: up
 * to this many per object before HDF5 would move them to dense storage. */
#define MAX_COMPACT 64u
#define DIGEST_ATTR "content_sha256"

enum { FLAG_TOKEN_IDS = 1u, FLAG_TEXT = 2u, FLAG_RECORDED_HITS = 4u, FLAG_KNOWN = 7u };

/* ---- the datasets of formats v1 and v2 ---- */

typedef enum { AX_LAYER, AX_REQ, AX_ITER, AX_ROW, AX_TOK, AX_TEXT } axis_kind;
typedef enum { T_U8, T_I8, T_I32, T_U32, T_U64, T_F32, T_F64, T_STR } elem_type;

/* In the order of FORMAT.md's dataset table, which is also the order of the
 * content digest. */
typedef enum {
    D_EXPERT_BYTES, D_DENSE_BYTES,
    D_REQ_ID, D_REQ_ARRIVAL, D_REQ_PROMPT, D_REQ_OUTPUT, D_REQ_ITER_START, D_REQ_N_ITERS,
    D_REQ_ROW_START, D_REQ_N_ROWS, D_REQ_TOKEN_START, D_REQ_N_TOKENS, D_REQ_TEXT_START, D_REQ_N_TEXT,
    D_REQ_TEXT, /* v1 only: variable-length strings */
    D_TOK_IDS, D_TEXT_UTF8,
    D_IT_PHASE, D_IT_ROW_START, D_IT_N_ROWS, D_IT_EMBED,
    D_ROW_TOPK_IDS, D_ROW_TOPK_W, D_ROW_PROBS, D_ROW_HIT, D_ROW_SPEC_IDS, D_ROW_SPEC_W,
    D_COUNT
} ds_id;

typedef struct {
    const char *path;
    elem_type type;
    axis_kind axis;
    const char *shape; /* for messages */
} ds_desc;

static const ds_desc ds_table[D_COUNT] = {
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

static const char *const group_names[] = {"/layers", "/requests", "/tokens", "/text", "/iterations", "/rows"};

/* Dimensions after the first axis; returns their number. */
static int ds_inner_dims(const ms_trace_meta *m, ds_id d, hsize_t inner[3])
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

static int ds_wanted(const ms_trace_meta *m, ds_id d)
{
    return ds_wanted_v(m, m->version, d);
}

static hid_t mem_type(elem_type t)
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

static hid_t file_type(elem_type t)
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

static size_t elem_size(elem_type t)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 4, 8, sizeof(char *)};
    return sizes[t];
}

static H5T_class_t elem_class(elem_type t)
{
    if (t == T_STR)
        return H5T_STRING;
    return t == T_F32 || t == T_F64 ? H5T_FLOAT : H5T_INTEGER;
}

/* A variable-length string type (v1 reads; caller closes it). */
static hid_t vlen_string_type(H5T_cset_t cset)
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
static int h5_fail(ms_err *err, const char *file, const char *obj, const char *what)
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
static int h5_start(ms_err *err)
{
    if (ms_h5_register_zstd(err) < 0)
        return -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

static void close_id(hid_t *id, herr_t (*closer)(hid_t))
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
static int validate_meta(const ms_trace_meta *m, const char *path, ms_err *err)
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

static uint32_t meta_flags(const ms_trace_meta *m)
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

/* ---- content digest (FORMAT.md "Content digest") ----
 *
 * One SHA-256 per dataset a v2 file holds, over its elements in row-major
 * order, each little-endian in the type FORMAT.md names (so the digest does
 * not depend on chunking, compression or the stored integer width), then one
 * SHA-256 over a header (the root attributes) and, per dataset in table
 * order, its path, a 0 byte and its hex digest.  The writer and the reader
 * feed it the same logical values, request by request: every dataset's
 * stream is the concatenation of the requests' parts, in order. */

typedef struct {
    ms_digest *ds[D_COUNT]; /* NULL where a v2 file has no such dataset */
    uint64_t iters, rows, tokens, text; /* totals so far: the *_start columns */
    uint64_t next;                      /* requests digested */
    int broken;                         /* a request was skipped or read twice */
} content_digest;

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

static void digest_free(content_digest *g)
{
    if (!g)
        return;
    for (int d = 0; d < D_COUNT; d++)
        ms_digest_free(g->ds[d]);
    free(g);
}

/* topk_stored: whether the file holds /rows/topk_* (a FULL trace may leave
 * them out; the digest covers the datasets the file holds). */
static content_digest *digest_new(const ms_trace_meta *m, int topk_stored)
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

static void digest_request(content_digest *g, const ms_trace_meta *m, const ms_request *q)
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
static void digest_final(content_digest *g, const ms_trace_meta *m, char hex[MS_DIGEST_HEX])
{
    ms_digest *top = ms_digest_new();
    static const char magic[] = "moesim-trace content v2\n";
    ms_digest_update(top, magic, sizeof magic - 1);
    uint32_t ints[] = {m->L, m->J, m->K, m->shared_experts, m->hidden_size, m->embed_dim, m->spec_depth,
                       meta_flags(m)};
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
        ms_digest_update(top, ds_table[d].path, strlen(ds_table[d].path) + 1);
        ms_digest_update(top, part, MS_DIGEST_HEX - 1);
    }
    ms_digest_final(top, hex);
    digest_free(g);
}

/* ======================================================================
 * Reader
 * ====================================================================== */

struct ms_trace_reader {
    char *path;
    hid_t file;
    hid_t dxpl;             /* transfer plist: out-of-range conversions abort */
    hid_t ds[D_COUNT];      /* H5I_INVALID_HID when absent */
    int rank[D_COUNT];
    hsize_t dims[D_COUNT][4];
    ms_trace_meta meta;
    uint64_t *iter_start, *row_start, *token_start, *text_start; /* [N] (text_start: v2 with text) */
    uint32_t *n_tokens, *n_text;                                /* [N] */
    uint64_t n_tokens_total, n_text_total;
    int derive_topk; /* v1 FULL trace stored without /rows/topk_*: compute them */
    uint64_t cursor;
    ms_trace_snapshot *mem; /* served from the process trace cache (trace_cache.h) */
    content_digest *dig;    /* ms_reader_digest_begin: digest of the requests read */
};

/* Integer overflow in a type conversion is an error, never a silent clamp. */
static H5T_conv_ret_t abort_on_range(H5T_conv_except_t kind, hid_t src, hid_t dst, void *s, void *d, void *u)
{
    (void)src; (void)dst; (void)s; (void)d; (void)u;
    if (kind == H5T_CONV_EXCEPT_RANGE_HI || kind == H5T_CONV_EXCEPT_RANGE_LOW)
        return H5T_CONV_ABORT;
    return H5T_CONV_UNHANDLED;
}

static int open_hdf5_file(ms_trace_reader *r, ms_err *err)
{
    struct stat st;
    if (stat(r->path, &st) != 0)
        return ms_fail(err, "%s: cannot open: %s", r->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ms_fail(err, "%s: not a regular file", r->path);
    htri_t is = H5Fis_hdf5(r->path);
    if (is < 0)
        return h5_fail(err, r->path, NULL, "cannot read the file");
    if (is == 0)
        return ms_fail(err, "%s: not an HDF5 file (no HDF5 signature)", r->path);
    r->file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0)
        return h5_fail(err, r->path, NULL, "cannot open the HDF5 file");
    r->dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_type_conv_cb(r->dxpl, abort_on_range, NULL);
    return 0;
}

/* An attribute of the root group: one value (scalar or [1]) of class cls. */
static hid_t open_root_attr(ms_trace_reader *r, const char *name, H5T_class_t cls, hid_t *type, ms_err *err)
{
    htri_t ex = H5Aexists(r->file, name);
    if (ex < 0)
        return h5_fail(err, r->path, name, "cannot look up the root attribute");
    if (ex == 0)
        return ms_fail(err, "%s: root attribute '%s' missing", r->path, name);
    hid_t a = H5Aopen(r->file, name, H5P_DEFAULT);
    if (a < 0)
        return h5_fail(err, r->path, name, "cannot open the root attribute");
    hid_t sp = H5Aget_space(a);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    H5Sclose(sp);
    *type = H5Aget_type(a);
    if (n != 1 || H5Tget_class(*type) != cls) {
        H5Tclose(*type);
        H5Aclose(a);
        return ms_fail(err, "%s: root attribute '%s' is not a single %s", r->path, name,
                       cls == H5T_STRING ? "string" : "integer");
    }
    return a;
}

static int read_attr_uint32(ms_trace_reader *r, const char *name, uint32_t *out, ms_err *err)
{
    hid_t type;
    hid_t a = open_root_attr(r, name, H5T_INTEGER, &type, err);
    if (a < 0)
        return -1;
    /* Read through int64 / uint64 so negative and huge values are seen. */
    int is_signed = H5Tget_sign(type) == H5T_SGN_2;
    int64_t sv = 0;
    uint64_t uv = 0;
    herr_t st = is_signed ? H5Aread(a, H5T_NATIVE_INT64, &sv) : H5Aread(a, H5T_NATIVE_UINT64, &uv);
    if (st < 0) {
        h5_fail(err, r->path, name, "cannot read the root attribute");
        H5Tclose(type);
        H5Aclose(a);
        return -1;
    }
    H5Tclose(type);
    H5Aclose(a);
    if (is_signed && sv < 0)
        return ms_fail(err, "%s: root attribute '%s' = %" PRId64 " is negative", r->path, name, sv);
    uint64_t v = is_signed ? (uint64_t)sv : uv;
    if (v > UINT32_MAX)
        return ms_fail(err, "%s: root attribute '%s' = %" PRIu64 " out of range [0, %u]", r->path, name, v,
                       UINT32_MAX);
    *out = (uint32_t)v;
    return 0;
}

/* Fixed-length or (v1 only: h5py's default, but held in HDF5's global heap,
 * which has no checksum) variable-length string attribute.  *vlen (when not
 * NULL) tells which it was. */
static int read_attr_string(ms_trace_reader *r, const char *name, char *buf, size_t cap, int allow_vlen, int *vlen,
                            ms_err *err)
{
    hid_t type;
    hid_t a = open_root_attr(r, name, H5T_STRING, &type, err);
    if (a < 0)
        return -1;
    int rc = 0;
    size_t len = 0;
    int is_vlen = H5Tis_variable_str(type) > 0;
    if (vlen)
        *vlen = is_vlen;
    if (is_vlen && !allow_vlen) {
        rc = ms_fail(err, "%s: root attribute '%s' is a variable-length string; format v2 stores fixed-length "
                     "strings", r->path, name);
    } else if (is_vlen) {
        hid_t mt = vlen_string_type(H5Tget_cset(type));
        char *s = NULL;
        if (H5Aread(a, mt, &s) < 0) {
            rc = h5_fail(err, r->path, name, "cannot read the root attribute");
        } else {
            len = s ? strlen(s) : 0;
            if (len < cap)
                memcpy(buf, s ? s : "", len + 1);
            H5free_memory(s);
        }
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(type);
        char *tmp = ms_xcalloc(n + 1, 1);
        hid_t mt = H5Tcopy(type);
        if (H5Aread(a, mt, tmp) < 0)
            rc = h5_fail(err, r->path, name, "cannot read the root attribute");
        len = strlen(tmp);
        if (rc == 0 && len < cap)
            memcpy(buf, tmp, len + 1);
        H5Tclose(mt);
        free(tmp);
    }
    H5Tclose(type);
    H5Aclose(a);
    if (rc == 0 && len >= cap)
        return ms_fail(err, "%s: root attribute '%s' is %zu bytes long, at most %zu allowed", r->path, name, len,
                       cap - 1);
    return rc;
}

/* v2: the stored content digest, 64 lowercase hex digits. */
static int read_digest_attr(ms_trace_reader *r, ms_err *err)
{
    char *hex = r->meta.content_sha256;
    if (read_attr_string(r, DIGEST_ATTR, hex, MS_DIGEST_HEX, 0, NULL, err) < 0)
        return -1;
    size_t n = strlen(hex);
    int ok = n == MS_DIGEST_HEX - 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = (hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f');
    if (!ok)
        return ms_fail(err, "%s: root attribute '" DIGEST_ATTR "' = '%s' is not 64 lowercase hex digits", r->path, hex);
    return 0;
}

/* v2 promises checksums on HDF5's metadata: superblock version 2 or later
 * (HDF5 1.8+ file format, with checksummed object headers). */
static int check_v2_superblock(ms_trace_reader *r, ms_err *err)
{
    H5F_info2_t info;
    if (H5Fget_info2(r->file, &info) < 0)
        return h5_fail(err, r->path, NULL, "cannot read the superblock");
    if (info.super.version < 2)
        return ms_fail(err, "%s: superblock version %u: format v2 needs HDF5's checksummed metadata (superblock "
                       "version 2 or later: create the file with libver bounds 1.10)", r->path, info.super.version);
    return 0;
}

static int read_root_attributes(ms_trace_reader *r, ms_err *err)
{
    ms_trace_meta *m = &r->meta;
    char format[64], kind[64];
    uint32_t version, flags;
    int format_vlen = 0;
    if (read_attr_string(r, "format", format, sizeof format, 1, &format_vlen, err) < 0)
        return -1;
    if (strcmp(format, FORMAT_NAME))
        return ms_fail(err, "%s: root attribute 'format' = '%s', expected '%s'", r->path, format, FORMAT_NAME);
    if (read_attr_uint32(r, "version", &version, err) < 0)
        return -1;
    if (version < MS_TRACE_FORMAT_OLDEST || version > MS_TRACE_FORMAT_VERSION)
        return ms_fail(err, "%s: root attribute 'version' = %u unsupported (this moesim reads versions %d to %d)",
                       r->path, version, MS_TRACE_FORMAT_OLDEST, MS_TRACE_FORMAT_VERSION);
    m->version = version;
    int v1 = version == 1;
    if (!v1 && format_vlen)
        return ms_fail(err, "%s: root attribute 'format' is a variable-length string; format v2 stores fixed-length "
                       "strings", r->path);
    if (!v1 && (check_v2_superblock(r, err) < 0 || read_digest_attr(r, err) < 0))
        return -1;
    struct { const char *name; uint32_t *dst; } ints[] = {
        {"L", &m->L}, {"J", &m->J}, {"K", &m->K}, {"shared_experts", &m->shared_experts},
        {"hidden_size", &m->hidden_size}, {"embed_dim", &m->embed_dim}, {"spec_depth", &m->spec_depth},
        {"flags", &flags},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (read_attr_uint32(r, ints[i].name, ints[i].dst, err) < 0)
            return -1;
    if (read_attr_string(r, "model_name", m->model_name, sizeof m->model_name, v1, NULL, err) < 0 ||
        read_attr_string(r, "source", m->source, sizeof m->source, v1, NULL, err) < 0 ||
        read_attr_string(r, "probs_kind", kind, sizeof kind, v1, NULL, err) < 0)
        return -1;
    if (ms_probs_kind_parse(kind, &m->probs_kind) < 0)
        return ms_fail(err, "%s: root attribute 'probs_kind' = '%s' unknown (full, topk_renorm, topk_raw, topk_ids)", r->path,
                       kind);
    if (flags & ~FLAG_KNOWN)
        return ms_fail(err, "%s: root attribute 'flags' = %u has unknown bits (known: 1 token ids, 2 text, "
                       "4 recorded hits)", r->path, flags);
    m->has_token_ids = (flags & FLAG_TOKEN_IDS) != 0;
    m->has_text = (flags & FLAG_TEXT) != 0;
    m->has_recorded_hits = (flags & FLAG_RECORDED_HITS) != 0;
    return 0;
}

/* Whether path exists, checking each group on the way (H5Lexists fails on
 * a missing intermediate group): 1, 0, or -1 with err when HDF5 cannot tell
 * (a damaged group: not the same as a missing dataset). */
static int link_exists(ms_trace_reader *r, const char *path, ms_err *err)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            htri_t ex = H5Lexists(r->file, buf, H5P_DEFAULT);
            if (ex < 0)
                return h5_fail(err, r->path, buf, "cannot look up the link");
            if (ex == 0)
                return 0;
            if (c == 0)
                return 1;
            *p = c;
        }
    }
}

/* Chunk cache big enough that sequential requests never decompress a chunk
 * twice: a few chunks per dataset. */
static hid_t access_plist_for(hid_t ds)
{
    size_t bytes = CACHE_MIN_BYTES;
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t cd[8];
        int n = H5Pget_chunk(dcpl, 8, cd);
        hid_t t = H5Dget_type(ds);
        size_t chunk = t >= 0 ? H5Tget_size(t) : 8;
        for (int i = 0; i < n; i++)
            chunk = cd[i] && chunk > CACHE_MAX_BYTES / cd[i] ? CACHE_MAX_BYTES : chunk * cd[i];
        if (t >= 0)
            H5Tclose(t);
        if (chunk > CACHE_MAX_BYTES / 4)
            bytes = CACHE_MAX_BYTES;
        else if (4 * chunk > bytes)
            bytes = 4 * chunk;
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_chunk_cache(dapl, CACHE_SLOTS, bytes, 1.0);
    return dapl;
}

static int open_dataset(ms_trace_reader *r, ds_id d, ms_err *err)
{
    const char *path = ds_table[d].path;
    hid_t ds = H5Dopen2(r->file, path, H5P_DEFAULT);
    if (ds < 0)
        return h5_fail(err, r->path, path, "cannot open the dataset");
    hid_t dapl = access_plist_for(ds);
    H5Dclose(ds);
    r->ds[d] = H5Dopen2(r->file, path, dapl);
    H5Pclose(dapl);
    if (r->ds[d] < 0)
        return h5_fail(err, r->path, path, "cannot open the dataset");
    return 0;
}

static void format_dims(char *buf, size_t cap, int rank, const hsize_t *dims)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* v2: chunked, with HDF5's Fletcher32 checksum in the filter pipeline. */
static int check_v2_storage(ms_trace_reader *r, ds_id d, ms_err *err)
{
    hid_t dcpl = H5Dget_create_plist(r->ds[d]);
    if (dcpl < 0)
        return h5_fail(err, r->path, ds_table[d].path, "cannot read the dataset's storage");
    int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED;
    unsigned flags = 0, conf = 0;
    size_t nelmts = 0;
    int fletcher = chunked && H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, &nelmts, NULL, 0, NULL,
                                                    &conf) >= 0;
    H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
    if (!chunked || !fletcher)
        return ms_fail(err, "%s: %s: %s; format v2 checksums every chunk (Fletcher32 filter)", r->path,
                       ds_table[d].path, chunked ? "no Fletcher32 filter" : "not chunked");
    return 0;
}

/* v2: every dataset checksummed (after the shape checks, which name the
 * more telling problem). */
static int check_v2_datasets(ms_trace_reader *r, ms_err *err)
{
    for (int d = 0; d < D_COUNT && r->meta.version >= 2; d++)
        if (r->ds[d] >= 0 && check_v2_storage(r, (ds_id)d, err) < 0)
            return -1;
    return 0;
}

/* Class, rank and the dimensions after the first; the first is checked
 * against the request table later. */
static int check_dataset_layout(ms_trace_reader *r, ds_id d, ms_err *err)
{
    const ds_desc *dd = &ds_table[d];
    hid_t t = H5Dget_type(r->ds[d]);
    H5T_class_t cls = H5Tget_class(t);
    int vlen = cls == H5T_STRING && H5Tis_variable_str(t) > 0;
    H5Tclose(t);
    if (cls != elem_class(dd->type))
        return ms_fail(err, "%s: %s: stored as HDF5 class %d, expected %s", r->path, dd->path, (int)cls,
                       dd->type == T_STR ? "string" : elem_class(dd->type) == H5T_FLOAT ? "float" : "integer");
    if (dd->type == T_STR && !vlen)
        return ms_fail(err, "%s: %s: fixed-length strings, expected variable-length UTF-8 strings", r->path, dd->path);
    hid_t sp = H5Dget_space(r->ds[d]);
    int rank = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[8] = {0};
    if (rank >= 1 && rank <= 8)
        H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    hsize_t inner[3] = {0};
    int n_inner = ds_inner_dims(&r->meta, d, inner);
    int ok = rank == 1 + n_inner;
    for (int i = 0; ok && i < n_inner; i++)
        ok = dims[1 + i] == inner[i];
    if (!ok) {
        char have[96], want[96];
        hsize_t w[4] = {dims[0], inner[0], inner[1], inner[2]};
        format_dims(have, sizeof have, rank < 0 ? 0 : rank > 8 ? 8 : rank, dims);
        format_dims(want, sizeof want, 1 + n_inner, w);
        return ms_fail(err, "%s: %s: shape %s, expected %s = %s", r->path, dd->path, have, dd->shape, want);
    }
    r->rank[d] = rank;
    memcpy(r->dims[d], dims, sizeof r->dims[d]);
    return 0;
}

static int open_datasets(ms_trace_reader *r, ms_err *err)
{
    const ms_trace_meta *m = &r->meta;
    for (int d = 0; d < D_COUNT; d++) {
        int present = link_exists(r, ds_table[d].path, err);
        if (present < 0)
            return -1;
        int wanted = ds_wanted(m, (ds_id)d);
        int optional = m->probs_kind == MS_PROBS_FULL && (d == D_ROW_TOPK_IDS || d == D_ROW_TOPK_W);
        if (wanted && !present && !optional)
            return ms_fail(err, "%s: dataset %s missing", r->path, ds_table[d].path);
        if (present && !wanted && d == D_REQ_TEXT && m->version >= 2)
            return ms_fail(err, "%s: dataset /requests/text (variable-length strings) is format v1; format v2 keeps "
                           "the text in /text/utf8", r->path);
        if (present && !wanted)
            return ms_fail(err, "%s: dataset %s present but the root attributes say the trace has none "
                           "(flags %u, probs_kind %s, embed_dim %u, spec_depth %u)", r->path, ds_table[d].path,
                           meta_flags(m), ms_probs_kind_name(m->probs_kind), m->embed_dim, m->spec_depth);
        if (present && (open_dataset(r, (ds_id)d, err) < 0 || check_dataset_layout(r, (ds_id)d, err) < 0))
            return -1;
    }
    if ((r->ds[D_ROW_TOPK_IDS] >= 0) != (r->ds[D_ROW_TOPK_W] >= 0))
        return ms_fail(err, "%s: /rows/topk_ids and /rows/topk_w must be stored together", r->path);
    r->derive_topk = r->ds[D_ROW_TOPK_IDS] < 0;
    return 0;
}

/* Reads the whole of a 1-D dataset (n elements, checked by the caller). */
static int read_column(ms_trace_reader *r, ds_id d, void *buf, ms_err *err)
{
    if (r->dims[d][0] == 0)
        return 0;
    if (H5Dread(r->ds[d], mem_type(ds_table[d].type), H5S_ALL, H5S_ALL, r->dxpl, buf) < 0)
        return h5_fail(err, r->path, ds_table[d].path, "cannot read");
    return 0;
}

static int check_first_dim(ms_trace_reader *r, ds_id d, uint64_t want, const char *what, ms_err *err)
{
    if (r->ds[d] >= 0 && r->dims[d][0] != want)
        return ms_fail(err, "%s: %s: %llu entries along the first axis, expected %" PRIu64 " (%s)", r->path,
                       ds_table[d].path, (unsigned long long)r->dims[d][0], want, what);
    return 0;
}

static int read_layers(ms_trace_reader *r, ms_err *err)
{
    ms_trace_meta *m = &r->meta;
    ms_trace_meta_alloc_layers(m);
    if (check_first_dim(r, D_EXPERT_BYTES, m->L, "L", err) < 0 || check_first_dim(r, D_DENSE_BYTES, m->L, "L", err) < 0 ||
        read_column(r, D_EXPERT_BYTES, m->expert_bytes, err) < 0 || read_column(r, D_DENSE_BYTES, m->dense_bytes, err) < 0)
        return -1;
    return validate_meta(m, r->path, err);
}

static int check_unique_ids(const uint64_t *ids, uint64_t n, const char *path, ms_err *err);

/* One request's entry: counts consistent with the iteration rule, ranges
 * contiguous with the requests before it. */
static int check_request_entry(ms_trace_reader *r, uint64_t i, uint64_t iters, uint64_t rows, uint64_t toks,
                               uint64_t text, ms_err *err)
{
    const ms_trace_meta *m = &r->meta;
    const char *p = r->path;
    double t = m->req_arrival_s[i];
    uint64_t prompt = m->req_prompt_len[i], out = m->req_output_len[i];
    if (!isfinite(t) || t < 0)
        return ms_fail(err, "%s: /requests/arrival_s[%" PRIu64 "] = %g not a finite time >= 0", p, i, t);
    if (i > 0 && t < m->req_arrival_s[i - 1])
        return ms_fail(err, "%s: /requests/arrival_s[%" PRIu64 "] = %.9g before the previous request's %.9g "
                       "(arrivals must be non-decreasing)", p, i, t, m->req_arrival_s[i - 1]);
    if (prompt == 0)
        return ms_fail(err, "%s: /requests/prompt_len[%" PRIu64 "] = 0 (at least one prompt token)", p, i);
    if (m->req_n_iters[i] != out + 1)
        return ms_fail(err, "%s: /requests/n_iters[%" PRIu64 "] = %u, expected output_len + 1 = %" PRIu64, p, i,
                       m->req_n_iters[i], out + 1);
    if (m->req_n_rows[i] != prompt + out)
        return ms_fail(err, "%s: /requests/n_rows[%" PRIu64 "] = %" PRIu64 ", expected prompt_len + output_len = %"
                       PRIu64, p, i, m->req_n_rows[i], prompt + out);
    if (m->req_n_rows[i] > UINT32_MAX)
        return ms_fail(err, "%s: /requests/n_rows[%" PRIu64 "] = %" PRIu64 " more than a request may hold", p, i,
                       m->req_n_rows[i]);
    uint64_t want_tokens = m->has_token_ids ? prompt : 0;
    if (r->n_tokens[i] != want_tokens)
        return ms_fail(err, "%s: /requests/n_tokens[%" PRIu64 "] = %u, expected %" PRIu64, p, i, r->n_tokens[i],
                       want_tokens);
    struct { const char *name; uint64_t have, want; } starts[] = {
        {"iter_start", r->iter_start[i], iters}, {"row_start", r->row_start[i], rows},
        {"token_start", r->token_start[i], toks}, {"text_start", r->text_start ? r->text_start[i] : 0, text},
    };
    for (int k = 0; k < 4; k++)
        if (starts[k].have != starts[k].want)
            return ms_fail(err, "%s: /requests/%s[%" PRIu64 "] = %" PRIu64 ", expected %" PRIu64
                           " (contiguous after the requests before it)", p, starts[k].name, i, starts[k].have,
                           starts[k].want);
    return 0;
}

static int read_request_table(ms_trace_reader *r, ms_err *err)
{
    ms_trace_meta *m = &r->meta;
    uint64_t n = r->dims[D_REQ_ID][0];
    for (int d = 0; d < D_COUNT; d++)
        if (ds_table[d].axis == AX_REQ && check_first_dim(r, (ds_id)d, n, "one per request, as /requests/id", err) < 0)
            return -1;
    m->n_requests = n;
    m->req_id = ms_xcalloc(n, sizeof *m->req_id);
    m->req_arrival_s = ms_xcalloc(n, sizeof *m->req_arrival_s);
    m->req_prompt_len = ms_xcalloc(n, sizeof *m->req_prompt_len);
    m->req_output_len = ms_xcalloc(n, sizeof *m->req_output_len);
    m->req_n_iters = ms_xcalloc(n, sizeof *m->req_n_iters);
    m->req_n_rows = ms_xcalloc(n, sizeof *m->req_n_rows);
    r->iter_start = ms_xcalloc(n, sizeof *r->iter_start);
    r->row_start = ms_xcalloc(n, sizeof *r->row_start);
    r->token_start = ms_xcalloc(n, sizeof *r->token_start);
    r->n_tokens = ms_xcalloc(n, sizeof *r->n_tokens);
    int text_v2 = r->ds[D_REQ_TEXT_START] >= 0;
    if (text_v2) {
        r->text_start = ms_xcalloc(n, sizeof *r->text_start);
        r->n_text = ms_xcalloc(n, sizeof *r->n_text);
    }
    if (read_column(r, D_REQ_ID, m->req_id, err) < 0 || read_column(r, D_REQ_ARRIVAL, m->req_arrival_s, err) < 0 ||
        read_column(r, D_REQ_PROMPT, m->req_prompt_len, err) < 0 ||
        read_column(r, D_REQ_OUTPUT, m->req_output_len, err) < 0 ||
        read_column(r, D_REQ_N_ITERS, m->req_n_iters, err) < 0 || read_column(r, D_REQ_N_ROWS, m->req_n_rows, err) < 0 ||
        read_column(r, D_REQ_ITER_START, r->iter_start, err) < 0 ||
        read_column(r, D_REQ_ROW_START, r->row_start, err) < 0 ||
        read_column(r, D_REQ_TOKEN_START, r->token_start, err) < 0 ||
        read_column(r, D_REQ_N_TOKENS, r->n_tokens, err) < 0 ||
        (text_v2 && (read_column(r, D_REQ_TEXT_START, r->text_start, err) < 0 ||
                     read_column(r, D_REQ_N_TEXT, r->n_text, err) < 0)))
        return -1;
    uint64_t iters = 0, rows = 0, toks = 0, text = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (check_request_entry(r, i, iters, rows, toks, text, err) < 0)
            return -1;
        iters += m->req_n_iters[i];
        rows += m->req_n_rows[i];
        toks += r->n_tokens[i];
        text += text_v2 ? r->n_text[i] : 0;
    }
    if (check_unique_ids(m->req_id, n, r->path, err) < 0)
        return -1;
    m->n_iterations = iters;
    m->n_rows = rows;
    r->n_tokens_total = toks;
    r->n_text_total = text;
    for (int d = 0; d < D_COUNT; d++) {
        axis_kind ax = ds_table[d].axis;
        if (ax == AX_LAYER || ax == AX_REQ)
            continue;
        uint64_t want = ax == AX_TOK ? toks : ax == AX_TEXT ? text : ax == AX_ITER ? iters : rows;
        const char *what = ax == AX_TOK    ? "sum of /requests/n_tokens"
                           : ax == AX_TEXT ? "sum of /requests/n_text_bytes"
                           : ax == AX_ITER ? "sum of /requests/n_iters"
                                           : "sum of /requests/n_rows";
        if (check_first_dim(r, (ds_id)d, want, what, err) < 0)
            return -1;
    }
    return 0;
}

void ms_reader_close(ms_trace_reader *r)
{
    if (!r)
        return;
    for (int d = 0; d < D_COUNT; d++)
        close_id(&r->ds[d], H5Dclose);
    close_id(&r->dxpl, H5Pclose);
    close_id(&r->file, H5Fclose);
    ms_trace_meta_free(&r->meta);
    free(r->iter_start);
    free(r->row_start);
    free(r->token_start);
    free(r->n_tokens);
    free(r->text_start);
    free(r->n_text);
    free(r->path);
    ms_trace_cache_release(r->mem);
    digest_free(r->dig);
    free(r);
}

/* A reader over a cached snapshot: no HDF5 object is opened. */
static ms_trace_reader *open_from_snapshot(const char *path, ms_trace_snapshot *s)
{
    ms_trace_reader *r = ms_xcalloc(1, sizeof *r);
    r->path = ms_xstrdup(path);
    r->file = r->dxpl = H5I_INVALID_HID;
    for (int d = 0; d < D_COUNT; d++)
        r->ds[d] = H5I_INVALID_HID;
    ms_trace_meta_copy(&r->meta, ms_trace_snapshot_meta(s));
    r->mem = s;
    return r;
}

ms_trace_reader *ms_reader_open(const char *path, ms_err *err)
{
    ms_trace_snapshot *s = ms_trace_cache_acquire(path);
    if (s)
        return open_from_snapshot(path, s);
    return ms_reader_open_stream(path, err);
}

ms_trace_reader *ms_reader_open_stream(const char *path, ms_err *err)
{
    if (h5_start(err) < 0)
        return NULL;
    ms_trace_reader *r = ms_xcalloc(1, sizeof *r);
    r->path = ms_xstrdup(path);
    r->file = r->dxpl = H5I_INVALID_HID;
    for (int d = 0; d < D_COUNT; d++)
        r->ds[d] = H5I_INVALID_HID;
    if (open_hdf5_file(r, err) < 0 || read_root_attributes(r, err) < 0 || open_datasets(r, err) < 0 ||
        read_layers(r, err) < 0 || read_request_table(r, err) < 0 || check_v2_datasets(r, err) < 0) {
        ms_reader_close(r);
        return NULL;
    }
    return r;
}

const ms_trace_meta *ms_reader_meta(const ms_trace_reader *r)
{
    return &r->meta;
}

void ms_reader_rewind(ms_trace_reader *r)
{
    r->cursor = 0;
}

void ms_reader_digest_begin(ms_trace_reader *r)
{
    digest_free(r->dig);
    r->dig = digest_new(&r->meta, !r->derive_topk);
}

int ms_reader_digest_check(ms_trace_reader *r, char hex[MS_DIGEST_HEX], ms_err *err)
{
    hex[0] = '\0';
    content_digest *g = r->dig;
    r->dig = NULL;
    if (!g)
        return ms_fail(err, "%s: no content digest was started (ms_reader_digest_begin)", r->path);
    if (g->broken || g->next != r->meta.n_requests) {
        uint64_t next = g->next;
        digest_free(g);
        return ms_fail(err, "%s: content digest: the requests were not read once each in order (%" PRIu64 " of %"
                       PRIu64 ")", r->path, next, r->meta.n_requests);
    }
    digest_final(g, &r->meta, hex);
    if (r->meta.version < 2)
        return 1;
    if (strcmp(hex, r->meta.content_sha256))
        return ms_fail(err, "%s: content digest mismatch: the file says " DIGEST_ATTR " %s, its content hashes to %s "
                       "(values changed after writing)", r->path, r->meta.content_sha256, hex);
    return 0;
}

/* Reads entries [start, start + count) along the first axis, all of the
 * other axes, into buf. */
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
        rc = h5_fail(err, r->path, ds_table[d].path, what);
    }
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

static int read_typed(ms_trace_reader *r, ds_id d, uint64_t start, uint64_t count, void *buf, ms_err *err)
{
    return read_range(r, d, start, count, mem_type(ds_table[d].type), buf, err);
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
static void derive_topk(const ms_trace_meta *m, ms_request *q)
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
    hid_t mt = vlen_string_type(H5Tget_cset(ft));
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

static int read_rows(ms_trace_reader *r, uint64_t i, ms_request *q, ms_err *err)
{
    uint64_t rs = r->row_start[i], n = q->n_rows;
    if (!r->derive_topk &&
        (read_typed(r, D_ROW_TOPK_IDS, rs, n, q->topk_ids, err) < 0 ||
         read_typed(r, D_ROW_TOPK_W, rs, n, q->topk_w, err) < 0))
        return -1;
    if (q->probs && read_typed(r, D_ROW_PROBS, rs, n, q->probs, err) < 0)
        return -1;
    if (q->recorded_hit && read_typed(r, D_ROW_HIT, rs, n, q->recorded_hit, err) < 0)
        return -1;
    if (q->spec_ids && (read_typed(r, D_ROW_SPEC_IDS, rs, n, q->spec_ids, err) < 0 ||
                        read_typed(r, D_ROW_SPEC_W, rs, n, q->spec_w, err) < 0))
        return -1;
    if (r->derive_topk)
        derive_topk(&r->meta, q);
    return 0;
}

static int read_request(ms_trace_reader *r, uint64_t i, ms_request *q, ms_err *err)
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
    ms_request_alloc(q, m);
    if (read_iterations(r, i, q, err) < 0 || read_rows(r, i, q, err) < 0)
        return -1;
    if (q->embedding && read_typed(r, D_IT_EMBED, r->iter_start[i], q->n_iters, q->embedding, err) < 0)
        return -1;
    if (q->token_ids && read_typed(r, D_TOK_IDS, r->token_start[i], q->n_tokens, q->token_ids, err) < 0)
        return -1;
    if (m->has_text && read_text(r, i, q, err) < 0)
        return -1;
    return ms_request_check(m, q, r->path, err);
}

int ms_reader_read(ms_trace_reader *r, uint64_t i, ms_request *out, ms_err *err)
{
    ms_request_free(out);
    if (i >= r->meta.n_requests)
        return ms_fail(err, "%s: request index %" PRIu64 " out of range (the trace has %" PRIu64 " requests)",
                       r->path, i, r->meta.n_requests);
    if (r->mem) {
        ms_request_copy(out, ms_trace_snapshot_request(r->mem, i), &r->meta);
    } else if (read_request(r, i, out, err) < 0) {
        ms_request_free(out);
        return -1;
    }
    r->cursor = i + 1;
    if (r->dig) {
        if (i == r->dig->next)
            digest_request(r->dig, &r->meta, out);
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

/* ======================================================================
 * Writer
 * ====================================================================== */

/* Metadata HDF5 may have to write besides the chunks (object headers, chunk
 * indexes, superblock): 256 KiB (a small trace's metadata takes ~40 KiB),
 * plus 64 bytes per chunk written, at most the metadata cache's 32 MiB. */
#define RESERVE_META ((uint64_t)256 << 10)
#define RESERVE_META_MAX ((uint64_t)32 << 20)

static ms_write_progress_fn progress_fn;
static void *progress_ctx;

void ms_writer_set_progress(ms_write_progress_fn fn, void *ctx)
{
    progress_fn = fn;
    progress_ctx = ctx;
}

struct ms_trace_writer {
    char *path;
    char tmp_path[PATH_MAX]; /* the temporary beside path (sim/core/out.h), registered for removal on a signal */
    int have_tmp;
    hid_t file;
    hid_t ds[D_COUNT];
    int n_inner[D_COUNT];
    hsize_t inner[D_COUNT][3];
    hsize_t size[D_COUNT];   /* entries along the first axis so far */
    size_t entry[D_COUNT];   /* bytes of one entry */
    size_t cache[D_COUNT];   /* bytes of the dataset's chunk cache: data HDF5 may hold unwritten */
    hsize_t chunk0[D_COUNT]; /* entries per chunk */
    ms_trace_meta meta; /* dimensions + layers copied; request table built here */
    uint64_t cap;
    uint64_t *iter_start, *row_start, *token_start, *text_start;
    uint32_t *n_tokens, *n_text;
    uint64_t n_tokens_total, n_text_total;
    content_digest *dig;
    int rfd;               /* our descriptor of the temporary, for fallocate; -1 when unsupported */
    uint64_t reserved_end; /* bytes [0, reserved_end) of the temporary have disk blocks */
    int failed;            /* a write failed or the disk is full: the file is incomplete */
};

/* ---- disk space, reserved ahead of HDF5 ----
 *
 * HDF5 1.10.8 cannot fail a write cleanly: after a write error (a full disk)
 * its H5Fclose fails too and leaves a freed file behind its id, which its
 * exit-time clean-up closes again (SIGSEGV in H5F__close_cb; h5_zstd.c).  So the writer makes sure HDF5 never meets a full disk: before
 * each request it reserves (fallocate, keeping the file size) the blocks for
 * everything HDF5 may write until the next check and at close: the request's
 * uncompressed bytes, every chunk cache's worth of pending data and the
 * metadata.  A full disk is then the reservation's ENOSPC, reported here,
 * and closing writes into reserved blocks.  Where fallocate is not supported
 * (EOPNOTSUPP) the writer goes on without a reserve. */

static uint64_t file_bytes(ms_trace_writer *w)
{
    hsize_t n = 0;
    if (H5Fget_filesize(w->file, &n) < 0) {
        H5Eclear2(H5E_DEFAULT);
        n = 0;
    }
    struct stat st;
    if (w->rfd >= 0 && fstat(w->rfd, &st) == 0 && (uint64_t)st.st_size > n)
        n = (hsize_t)st.st_size;
    return n;
}

/* Data HDF5 may still hold unwritten: chunk caches and metadata. */
static uint64_t pending_bytes(const ms_trace_writer *w)
{
    uint64_t data = 0, chunks = 0;
    for (int d = 0; d < D_COUNT; d++) {
        if (w->ds[d] < 0)
            continue;
        uint64_t b = (uint64_t)w->size[d] * w->entry[d];
        data += b < w->cache[d] ? b : w->cache[d];
        chunks += (w->size[d] + w->chunk0[d] - 1) / w->chunk0[d];
    }
    uint64_t meta = RESERVE_META + chunks * 64;
    return data + (meta < RESERVE_META_MAX ? meta : RESERVE_META_MAX);
}

static int space_fail(ms_trace_writer *w, int e, uint64_t more, ms_err *err)
{
    w->failed = 1;
    return ms_fail(err, "%s: %s (%.1f MiB written after %" PRIu64 " requests, about %.1f MiB more needed; nothing "
                   "is left behind)", w->path, strerror(e), (double)file_bytes(w) / 1048576.0, w->meta.n_requests,
                   (double)more / 1048576.0);
}

/* Reserves blocks for `more` new bytes plus what is pending. */
static int reserve(ms_trace_writer *w, uint64_t more, ms_err *err)
{
    if (w->rfd < 0)
        return 0;
    uint64_t size = file_bytes(w);
    /* zstd frames and Fletcher32 add a few bytes per chunk; incompressible
     * data grows by at most 1/256 */
    uint64_t need = size + more + more / 64 + pending_bytes(w);
    if (need <= w->reserved_end)
        return 0;
    uint64_t from = w->reserved_end > size ? w->reserved_end : size;
    if (need - from > (uint64_t)INT64_MAX - from)
        return space_fail(w, EFBIG, more, err);
    if (fallocate(w->rfd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(need - from)) == 0) {
        w->reserved_end = need;
        return 0;
    }
    int e = errno;
    if (e == EOPNOTSUPP || e == ENOSYS) { /* a file system without fallocate: no reserve */
        close(w->rfd);
        w->rfd = -1;
        return 0;
    }
    return space_fail(w, e, more, err);
}

/* Before HDF5 touches the temporary: room for its first metadata (H5Fcreate
 * truncates the file, which drops this reservation; reserve() makes it again
 * right after). */
static int probe_space(ms_trace_writer *w, ms_err *err)
{
    int fd = open(w->tmp_path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return ms_fail(err, "%s: cannot open the temporary %s: %s", w->path, w->tmp_path, strerror(errno));
    int rc = 0;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)RESERVE_META) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
        rc = space_fail(w, errno, RESERVE_META, err);
    close(fd);
    return rc;
}

/* ---- requests ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int check_unique_ids(const uint64_t *ids, uint64_t n, const char *path, ms_err *err)
{
    if (n < 2)
        return 0;
    uint64_t *s = ms_xcalloc(n, sizeof *s);
    memcpy(s, ids, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    int rc = 0;
    for (uint64_t i = 1; i < n && rc == 0; i++)
        if (s[i] == s[i - 1])
            rc = ms_fail(err, "%s: /requests/id: request id %" PRIu64 " appears more than once", path, s[i]);
    free(s);
    return rc;
}

static int write_attr(ms_trace_writer *w, const char *name, hid_t ftype, hid_t mtype, const void *value,
                      ms_err *err)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(w->file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t st = a >= 0 ? H5Awrite(a, mtype, value) : -1;
    int rc = st < 0 ? h5_fail(err, w->path, name, "cannot write the root attribute") : 0;
    if (a >= 0 && H5Aclose(a) < 0 && rc == 0)
        rc = h5_fail(err, w->path, name, "cannot write the root attribute");
    H5Sclose(sp);
    return rc;
}

static int write_attr_u32(ms_trace_writer *w, const char *name, uint32_t v, ms_err *err)
{
    return write_attr(w, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, &v, err);
}

/* A fixed-length UTF-8 string of exactly its bytes (at least one, so "" is
 * one NUL byte), held in the checksummed object header, never in the global
 * heap. */
static int write_attr_str(ms_trace_writer *w, const char *name, const char *s, ms_err *err)
{
    size_t n = strlen(s);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n ? n : 1);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    H5Tset_cset(t, H5T_CSET_UTF8);
    char *buf = ms_xcalloc(n + 1, 1);
    memcpy(buf, s, n);
    int rc = write_attr(w, name, t, t, buf, err);
    free(buf);
    H5Tclose(t);
    return rc;
}

static int write_root_attributes(ms_trace_writer *w, ms_err *err)
{
    const ms_trace_meta *m = &w->meta;
    struct { const char *name; uint32_t v; } ints[] = {
        {"version", MS_TRACE_FORMAT_VERSION}, {"L", m->L}, {"J", m->J}, {"K", m->K},
        {"shared_experts", m->shared_experts}, {"hidden_size", m->hidden_size}, {"embed_dim", m->embed_dim},
        {"spec_depth", m->spec_depth}, {"flags", meta_flags(m)},
    };
    if (write_attr_str(w, "format", FORMAT_NAME, err) < 0 || write_attr_str(w, "model_name", m->model_name, err) < 0 ||
        write_attr_str(w, "source", m->source, err) < 0 ||
        write_attr_str(w, "probs_kind", ms_probs_kind_name(m->probs_kind), err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (write_attr_u32(w, ints[i].name, ints[i].v, err) < 0)
            return -1;
    return 0;
}

/* First-axis entries per chunk: about CHUNK_TARGET_BYTES per chunk. */
static hsize_t chunk_entries(size_t entry_bytes)
{
    hsize_t n = CHUNK_TARGET_BYTES / (entry_bytes ? entry_bytes : 1);
    return n ? n : 1;
}

/* Empty, extendible along the first axis, chunked, zstd-compressed, then
 * Fletcher32-checksummed (the checksum covers the stored bytes, so a reader
 * checks it before decompressing), without timestamps (same trace in, same
 * bytes out).  The chunk cache holds the chunk being filled and one more:
 * appends are sequential, and it bounds what HDF5 holds unwritten. */
static int create_dataset(ms_trace_writer *w, ds_id d, ms_err *err)
{
    const ds_desc *dd = &ds_table[d];
    int n_inner = ds_inner_dims(&w->meta, d, w->inner[d]);
    hsize_t dims[4] = {0}, maxdims[4] = {H5S_UNLIMITED}, chunk[4];
    size_t entry = elem_size(dd->type);
    for (int i = 0; i < n_inner; i++) {
        dims[1 + i] = maxdims[1 + i] = chunk[1 + i] = w->inner[d][i];
        entry *= w->inner[d][i] ? w->inner[d][i] : 1;
    }
    chunk[0] = chunk_entries(entry);
    w->entry[d] = entry;
    w->chunk0[d] = chunk[0];
    w->cache[d] = 2 * (size_t)chunk[0] * entry + ((size_t)64 << 10);
    unsigned level = ZSTD_LEVEL;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1 + n_inner, chunk);
    H5Pset_filter(dcpl, ZSTD_FILTER_ID, H5Z_FLAG_MANDATORY, 1, &level);
    H5Pset_fletcher32(dcpl);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_chunk_cache(dapl, CACHE_SLOTS, w->cache[d], 1.0);
    hid_t sp = H5Screate_simple(1 + n_inner, dims, maxdims);
    w->ds[d] = H5Dcreate2(w->file, dd->path, file_type(dd->type), sp, H5P_DEFAULT, dcpl, dapl);
    int rc = w->ds[d] < 0 ? h5_fail(err, w->path, dd->path, "cannot create the dataset") : 0;
    H5Sclose(sp);
    H5Pclose(dapl);
    H5Pclose(dcpl);
    w->n_inner[d] = n_inner;
    return rc;
}

static int create_layout(ms_trace_writer *w, ms_err *err)
{
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_obj_track_times(gcpl, 0);
    H5Pset_link_phase_change(gcpl, MAX_COMPACT, MAX_COMPACT - 8);
    int rc = 0;
    for (size_t g = 0; g < sizeof group_names / sizeof group_names[0] && rc == 0; g++) {
        if ((!strcmp(group_names[g], "/tokens") && !w->meta.has_token_ids) ||
            (!strcmp(group_names[g], "/text") && !w->meta.has_text))
            continue;
        hid_t id = H5Gcreate2(w->file, group_names[g], H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (id < 0)
            rc = h5_fail(err, w->path, group_names[g], "cannot create the group");
        else
            H5Gclose(id);
    }
    H5Pclose(gcpl);
    for (int d = 0; d < D_COUNT && rc == 0; d++)
        if (ds_wanted(&w->meta, (ds_id)d))
            rc = create_dataset(w, (ds_id)d, err);
    return rc;
}

/* Appends n entries along the first axis of dataset d. */
static int append(ms_trace_writer *w, ds_id d, uint64_t n, const void *buf, ms_err *err)
{
    if (n == 0)
        return 0;
    int rank = 1 + w->n_inner[d];
    hsize_t newdims[4], off[4] = {w->size[d], 0, 0, 0}, cnt[4];
    newdims[0] = w->size[d] + n;
    cnt[0] = n;
    for (int i = 1; i < rank; i++)
        newdims[i] = cnt[i] = w->inner[d][i - 1];
    if (H5Dset_extent(w->ds[d], newdims) < 0) {
        w->failed = 1;
        return h5_fail(err, w->path, ds_table[d].path, "cannot extend the dataset");
    }
    hid_t fs = H5Dget_space(w->ds[d]);
    hid_t ms = H5Screate_simple(rank, cnt, NULL);
    herr_t st = H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
    if (st >= 0)
        st = H5Dwrite(w->ds[d], mem_type(ds_table[d].type), ms, fs, H5P_DEFAULT, buf);
    int rc = 0;
    if (st < 0) {
        w->failed = 1;
        rc = h5_fail(err, w->path, ds_table[d].path, "cannot write");
    }
    H5Sclose(ms);
    H5Sclose(fs);
    w->size[d] += n;
    return rc;
}

static void writer_free(ms_trace_writer *w)
{
    ms_trace_meta_free(&w->meta);
    free(w->iter_start);
    free(w->row_start);
    free(w->token_start);
    free(w->text_start);
    free(w->n_tokens);
    free(w->n_text);
    digest_free(w->dig);
    free(w->path);
    free(w);
}

/* Closes every HDF5 object and the file; with ok, renames the temporary
 * over the path (sim/core/out.h: fsync, rename), else removes it.  Frees w.
 * Returns 0, or -1 with one line when ok and something failed (then the
 * temporary is removed too). */
static int writer_finish(ms_trace_writer *w, int ok, ms_err *err)
{
    for (int d = 0; d < D_COUNT; d++) {
        if (w->ds[d] >= 0 && H5Dclose(w->ds[d]) < 0 && ok) {
            h5_fail(err, w->path, ds_table[d].path, "cannot finish the dataset");
            ok = 0;
        }
        w->ds[d] = H5I_INVALID_HID;
    }
    if (w->file >= 0 && H5Fclose(w->file) < 0 && ok) {
        h5_fail(err, w->path, NULL, "cannot finish the HDF5 file");
        ok = 0;
    }
    w->file = H5I_INVALID_HID;
    if (w->rfd >= 0) {
        /* give back the reserved blocks past the end of the file */
        struct stat st;
        if (ok && fstat(w->rfd, &st) == 0 && ftruncate(w->rfd, st.st_size) != 0) {
            ms_fail(err, "%s: cannot trim the temporary %s: %s", w->path, w->tmp_path, strerror(errno));
            ok = 0;
        }
        close(w->rfd);
        w->rfd = -1;
    }
    int rc = ok ? 0 : -1;
    if (w->have_tmp) {
        ms_err tmp_err;
        if (ms_out_tmp_end(w->tmp_path, w->path, ok, ok ? err : &tmp_err) < 0)
            rc = -1;
    }
    writer_free(w);
    return rc;
}

void ms_writer_abort(ms_trace_writer *w)
{
    if (w) {
        ms_err ignored;
        writer_finish(w, 0, &ignored);
    }
}

static void copy_meta_dims(ms_trace_meta *dst, const ms_trace_meta *src)
{
    *dst = *src;
    dst->version = MS_TRACE_FORMAT_VERSION;
    dst->content_sha256[0] = '\0';
    dst->expert_bytes = dst->dense_bytes = NULL;
    dst->req_id = NULL;
    dst->req_arrival_s = NULL;
    dst->req_prompt_len = dst->req_output_len = dst->req_n_iters = NULL;
    dst->req_n_rows = NULL;
    dst->n_requests = dst->n_iterations = dst->n_rows = 0;
    ms_trace_meta_alloc_layers(dst);
    memcpy(dst->expert_bytes, src->expert_bytes, src->L * sizeof *dst->expert_bytes);
    memcpy(dst->dense_bytes, src->dense_bytes, src->L * sizeof *dst->dense_bytes);
}

/* HDF5's 1.10 file format (superblock v3, object header v2, extensible-array
 * chunk indexes: all checksummed; Debian 12's HDF5 1.10.8 and h5py read
 * it), attributes and links kept in the object headers. */
static hid_t create_file(ms_trace_writer *w)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_obj_track_times(fcpl, 0);
    H5Pset_attr_phase_change(fcpl, MAX_COMPACT, MAX_COMPACT - 8);
    H5Pset_link_phase_change(fcpl, MAX_COMPACT, MAX_COMPACT - 8);
    hid_t f = H5Fcreate(w->tmp_path, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    return f;
}

/* The file is written as a temporary beside path (ms_out_tmp_begin) and
 * renamed over path on close, so a killed or failed writer never leaves a
 * file under the final name; a signal removes the temporary. */
ms_trace_writer *ms_writer_open(const char *path, const ms_trace_meta *meta, ms_err *err)
{
    if (h5_start(err) < 0 || validate_meta(meta, path, err) < 0)
        return NULL;
    ms_trace_writer *w = ms_xcalloc(1, sizeof *w);
    w->path = ms_xstrdup(path);
    w->file = H5I_INVALID_HID;
    w->rfd = -1;
    for (int d = 0; d < D_COUNT; d++)
        w->ds[d] = H5I_INVALID_HID;
    copy_meta_dims(&w->meta, meta);
    if (ms_out_tmp_begin("output", path, w->tmp_path, sizeof w->tmp_path, err) < 0) {
        writer_free(w);
        return NULL;
    }
    w->have_tmp = 1;
    if (probe_space(w, err) < 0)
        goto fail;
    w->file = create_file(w);
    if (w->file < 0) {
        h5_fail(err, w->path, NULL, "cannot create the HDF5 file");
        goto fail;
    }
    w->rfd = open(w->tmp_path, O_WRONLY | O_CLOEXEC);
    if (reserve(w, 0, err) < 0 || write_root_attributes(w, err) < 0 || create_layout(w, err) < 0 ||
        append(w, D_EXPERT_BYTES, w->meta.L, w->meta.expert_bytes, err) < 0 ||
        append(w, D_DENSE_BYTES, w->meta.L, w->meta.dense_bytes, err) < 0)
        goto fail;
    w->dig = digest_new(&w->meta, 1);
    return w;
fail:
    ms_writer_abort(w);
    return NULL;
}

static int append_iterations(ms_trace_writer *w, const ms_request *q, ms_err *err)
{
    uint64_t n = q->n_iters;
    uint8_t *phase = ms_xcalloc(n, 1);
    uint64_t *row = ms_xcalloc(n, sizeof *row);
    uint32_t *rows = ms_xcalloc(n, sizeof *rows);
    for (uint64_t k = 0; k < n; k++) {
        phase[k] = q->iters[k].phase == MS_PHASE_DECODE;
        row[k] = w->meta.n_rows + q->iters[k].row0;
        rows[k] = q->iters[k].n_rows;
    }
    int rc = append(w, D_IT_PHASE, n, phase, err);
    if (rc == 0)
        rc = append(w, D_IT_ROW_START, n, row, err);
    if (rc == 0)
        rc = append(w, D_IT_N_ROWS, n, rows, err);
    if (rc == 0 && q->embedding)
        rc = append(w, D_IT_EMBED, n, q->embedding, err);
    free(phase);
    free(row);
    free(rows);
    return rc;
}

static int append_rows(ms_trace_writer *w, const ms_request *q, ms_err *err)
{
    uint64_t n = q->n_rows;
    if (append(w, D_ROW_TOPK_IDS, n, q->topk_ids, err) < 0 || append(w, D_ROW_TOPK_W, n, q->topk_w, err) < 0)
        return -1;
    if (q->probs && append(w, D_ROW_PROBS, n, q->probs, err) < 0)
        return -1;
    if (q->recorded_hit && append(w, D_ROW_HIT, n, q->recorded_hit, err) < 0)
        return -1;
    if (q->spec_ids && (append(w, D_ROW_SPEC_IDS, n, q->spec_ids, err) < 0 ||
                        append(w, D_ROW_SPEC_W, n, q->spec_w, err) < 0))
        return -1;
    return 0;
}

static void push_request_entry(ms_trace_writer *w, const ms_request *q, uint32_t text_bytes)
{
    ms_trace_meta *m = &w->meta;
    uint64_t i = m->n_requests;
    if (i == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        m->req_id = ms_xrealloc(m->req_id, w->cap, sizeof *m->req_id);
        m->req_arrival_s = ms_xrealloc(m->req_arrival_s, w->cap, sizeof *m->req_arrival_s);
        m->req_prompt_len = ms_xrealloc(m->req_prompt_len, w->cap, sizeof *m->req_prompt_len);
        m->req_output_len = ms_xrealloc(m->req_output_len, w->cap, sizeof *m->req_output_len);
        m->req_n_iters = ms_xrealloc(m->req_n_iters, w->cap, sizeof *m->req_n_iters);
        m->req_n_rows = ms_xrealloc(m->req_n_rows, w->cap, sizeof *m->req_n_rows);
        w->iter_start = ms_xrealloc(w->iter_start, w->cap, sizeof *w->iter_start);
        w->row_start = ms_xrealloc(w->row_start, w->cap, sizeof *w->row_start);
        w->token_start = ms_xrealloc(w->token_start, w->cap, sizeof *w->token_start);
        w->n_tokens = ms_xrealloc(w->n_tokens, w->cap, sizeof *w->n_tokens);
        w->text_start = ms_xrealloc(w->text_start, w->cap, sizeof *w->text_start);
        w->n_text = ms_xrealloc(w->n_text, w->cap, sizeof *w->n_text);
    }
    m->req_id[i] = q->id;
    m->req_arrival_s[i] = q->arrival_s;
    m->req_prompt_len[i] = q->prompt_len;
    m->req_output_len[i] = q->output_len;
    m->req_n_iters[i] = q->n_iters;
    m->req_n_rows[i] = q->n_rows;
    w->iter_start[i] = m->n_iterations;
    w->row_start[i] = m->n_rows;
    w->token_start[i] = w->n_tokens_total;
    w->n_tokens[i] = q->n_tokens;
    w->text_start[i] = w->n_text_total;
    w->n_text[i] = text_bytes;
    m->n_requests++;
    m->n_iterations += q->n_iters;
    m->n_rows += q->n_rows;
    w->n_tokens_total += q->n_tokens;
    w->n_text_total += text_bytes;
}

int ms_writer_add(ms_trace_writer *w, const ms_request *q, ms_err *err)
{
    ms_trace_meta *m = &w->meta;
    if (w->failed)
        return ms_fail(err, "%s: an earlier write failed; the trace is incomplete", w->path);
    if (ms_request_check(m, q, w->path, err) < 0)
        return -1;
    if (m->n_requests > 0 && q->arrival_s < m->req_arrival_s[m->n_requests - 1])
        return ms_fail(err, "%s: request %" PRIu64 ": arrival_s = %.9g before the previous request's %.9g "
                       "(arrivals must be non-decreasing)", w->path, q->id, q->arrival_s,
                       m->req_arrival_s[m->n_requests - 1]);
    size_t text = q->text ? strlen(q->text) : 0;
    if (text > UINT32_MAX)
        return ms_fail(err, "%s: request %" PRIu64 ": text of %zu bytes, at most %u", w->path, q->id, text, UINT32_MAX);
    if (reserve(w, ms_trace_request_bytes(m, q->n_rows, q->n_iters, q->n_tokens, text), err) < 0)
        return -1;
    if (append_rows(w, q, err) < 0 || append_iterations(w, q, err) < 0)
        return -1;
    if (q->token_ids && append(w, D_TOK_IDS, q->n_tokens, q->token_ids, err) < 0)
        return -1;
    if (q->text && append(w, D_TEXT_UTF8, text, q->text, err) < 0)
        return -1;
    digest_request(w->dig, m, q);
    push_request_entry(w, q, (uint32_t)text);
    if (progress_fn)
        progress_fn(progress_ctx, m->n_requests, m->n_rows, file_bytes(w));
    return 0;
}

static int write_request_table(ms_trace_writer *w, ms_err *err)
{
    ms_trace_meta *m = &w->meta;
    uint64_t n = m->n_requests;
    if (check_unique_ids(m->req_id, n, w->path, err) < 0)
        return -1;
    if (reserve(w, n * ms_trace_request_bytes(m, 0, 0, 0, 0), err) < 0)
        return -1;
    struct { ds_id d; const void *buf; } cols[] = {
        {D_REQ_ID, m->req_id}, {D_REQ_ARRIVAL, m->req_arrival_s}, {D_REQ_PROMPT, m->req_prompt_len},
        {D_REQ_OUTPUT, m->req_output_len}, {D_REQ_ITER_START, w->iter_start}, {D_REQ_N_ITERS, m->req_n_iters},
        {D_REQ_ROW_START, w->row_start}, {D_REQ_N_ROWS, m->req_n_rows}, {D_REQ_TOKEN_START, w->token_start},
        {D_REQ_N_TOKENS, w->n_tokens}, {D_REQ_TEXT_START, w->text_start}, {D_REQ_N_TEXT, w->n_text},
    };
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
        if (w->ds[cols[c].d] >= 0 && append(w, cols[c].d, n, cols[c].buf, err) < 0)
            return -1;
    return 0;
}

/* The content digest of everything written, as root attribute. */
static int write_digest(ms_trace_writer *w, ms_err *err)
{
    digest_final(w->dig, &w->meta, w->meta.content_sha256);
    w->dig = NULL;
    return write_attr_str(w, DIGEST_ATTR, w->meta.content_sha256, err);
}

int ms_writer_close(ms_trace_writer *w, ms_err *err)
{
    if (!w)
        return 0;
    int rc = 0;
    if (w->failed)
        rc = ms_fail(err, "%s: not written: an earlier write failed", w->path);
    else if (write_request_table(w, err) < 0 || write_digest(w, err) < 0)
        rc = -1;
    if (rc < 0) {
        ms_writer_abort(w);
        return -1;
    }
    return writer_finish(w, 1, err);
}
