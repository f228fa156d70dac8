/* What the parts of the HDF5 trace format share (internal to
 * traces/format/trace_h5*.c; the contract is traces/format/trace.h):
 *   trace_h5.c        the dataset table, HDF5 errors as one line, metadata
 *                     checks, the content digest;
 *   trace_h5_open.c   opening a file: attributes, datasets, the request table;
 *   trace_h5_read.c   reading requests;
 *   trace_h5_write.c  the writer. */
#ifndef MS_TRACE_H5_PARTS_H
#define MS_TRACE_H5_PARTS_H

#include <hdf5.h>
#include <stdint.h>

#include "sim/core/digest.h"
#include "traces/format/trace.h"
#include "traces/format/trace_cache.h"


#define FORMAT_NAME "moesim-trace"
#define ZSTD_FILTER_ID 32015
/* zstd levels: 3 for integer datasets; -1 for float ones, whose random
 * mantissas compress only 1.1-1.3x at level 3 while the Huffman decoding of
 * those literals was about half of a full read (docs/trace-format.md: at -1
 * a full read of a Qwen1.5-MoE trace is 35 % faster for a 6 % larger file). */
#define ZSTD_LEVEL 3
#define ZSTD_LEVEL_FLOAT (-1)
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

/* In the order of docs/trace-format.md's dataset table, which is also the order of the
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

/* The datasets (docs/trace-format.md's table) and the groups that hold them. */
extern const ds_desc h5p_ds_table[D_COUNT];
extern const char *const h5p_group_names[6];

/* Dimensions after the first axis; returns their number. */

/* ---- content digest (docs/trace-format.md "Content digest") ----
 *
 * One SHA-256 per dataset a v2 file holds, over its elements in row-major
 * order, each little-endian in the type docs/trace-format.md names (so the digest does
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


/* trace_checked.c: the requests this process has checked, per file */
#define H5P_CHECKED 0x80u /* the request passed ms_request_check_parts (with the MS_PART_* bits beside it) */
typedef struct checked_file checked_file;
/* The marks of path's file (NULL for a v1 file: no digest to tell versions
 * apart); release when the reader closes. */
checked_file *h5p_checked_acquire(const char *path, const ms_trace_meta *m);
uint8_t *h5p_checked_marks(checked_file *f); /* [n_requests] */
void h5p_checked_release(checked_file *f);

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
    unsigned parts;         /* MS_PART_* handed out (ms_reader_select) */
    checked_file *checked;  /* the process's marks of this file, or NULL (v1) */
    uint8_t *marks;         /* [n_requests] H5P_CHECKED | parts checked: checked's, or own_marks */
    uint8_t *own_marks;
    content_digest *dig;    /* ms_reader_digest_begin: digest of the requests read */
    char v1_sha256[65];     /* a v1 trace streamed by ms_reader_open: its bytes' SHA-256 at the open ("" else) */
};

/* Integer overflow in a type conversion is an error, never a silent clamp. */

/* trace_h5.c */
int h5p_ds_inner_dims(const ms_trace_meta *m, ds_id d, hsize_t inner[3]);
int h5p_ds_wanted(const ms_trace_meta *m, ds_id d);
hid_t h5p_mem_type(elem_type t);
hid_t h5p_file_type(elem_type t);
size_t h5p_elem_size(elem_type t);
H5T_class_t h5p_elem_class(elem_type t);
hid_t h5p_vlen_string_type(H5T_cset_t cset);
int h5p_h5_fail(ms_err *err, const char *file, const char *obj, const char *what);
int h5p_h5_start(ms_err *err);
void h5p_close_id(hid_t *id, herr_t (*closer)(hid_t));
int h5p_validate_meta(const ms_trace_meta *m, const char *path, ms_err *err);
uint32_t h5p_meta_flags(const ms_trace_meta *m);
void h5p_digest_free(content_digest *g);
content_digest *h5p_digest_new(const ms_trace_meta *m, int topk_stored);
void h5p_digest_request(content_digest *g, const ms_trace_meta *m, const ms_request *q);
void h5p_digest_final(content_digest *g, const ms_trace_meta *m, char hex[MS_DIGEST_HEX]);
/* trace_h5_read.c */
void h5p_derive_topk(const ms_trace_meta *m, ms_request *q);
/* trace_h5_write.c */
int h5p_check_unique_ids(const uint64_t *ids, uint64_t n, const char *path, ms_err *err);

#endif
