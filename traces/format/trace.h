/* Trace data model (format v2; v1 still reads) and the streaming reader /
 * writer contract.
 *
 * A trace holds requests; a request holds iterations (one prefill, then one
 * decode per generated token); an iteration holds token rows; every token row
 * has, per MoE layer, the router's top-k ids and weights and, when
 * probs_kind == MS_PROBS_FULL, the full distribution over J experts.
 * docs/trace-format.md gives the on-disk HDF5 layout.
 *
 * The reader streams one request at a time (a trace larger than memory
 * replays) and validates every value it hands out, so a consumer never sees a
 * malformed request: out-of-range ids, negative / NaN / non-normalised
 * probabilities and inconsistent counts are one-line errors. */
#ifndef MS_TRACE_H
#define MS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/digest.h"
#include "sim/core/err.h"

/* The version every writer writes; readers read 1 and 2.  v2 (docs/trace-format.md):
 * every chunk carries HDF5's Fletcher32 checksum, the HDF5 metadata its own
 * checksums (superblock v3, object header v2), strings are fixed-length and
 * the root attribute content_sha256 holds a digest of the whole content. */
#define MS_TRACE_FORMAT_VERSION 2
#define MS_TRACE_FORMAT_OLDEST 1
#define MS_NAME_MAX 128
#define MS_SOURCE_MAX 512

typedef enum {
    MS_PROBS_FULL = 0,        /* full softmax over J experts per row and layer */
    MS_PROBS_TOPK_RENORM = 1, /* only top-k ids + weights, renormalised over k */
    MS_PROBS_TOPK_RAW = 2,    /* only top-k ids + their raw softmax weights */
    MS_PROBS_TOPK_IDS = 3     /* only top-k ids: the source recorded no weights; topk_w holds 1/K per id (a
                               * placeholder, not the router's); policies that read weights refuse it */
} ms_probs_kind;

typedef enum { MS_PHASE_PREFILL = 0, MS_PHASE_DECODE = 1 } ms_phase;

const char *ms_probs_kind_name(ms_probs_kind k);
int ms_probs_kind_parse(const char *s, ms_probs_kind *out); /* 0 ok, -1 unknown */

/* Whole-trace metadata; arrays are owned by the struct (ms_trace_meta_free). */
typedef struct {
    uint32_t version;        /* format version of the file read (1 or 2); ignored by writers */
    char content_sha256[MS_DIGEST_HEX]; /* v2: the stored content digest (hex); "" for v1 */
    char model_name[MS_NAME_MAX];
    char source[MS_SOURCE_MAX];
    uint32_t L;              /* MoE layers */
    uint32_t J;              /* routed experts per layer */
    uint32_t K;              /* experts activated per token row */
    uint32_t shared_experts; /* always-on experts per layer (never offloaded) */
    uint32_t hidden_size;
    ms_probs_kind probs_kind;
    uint64_t *expert_bytes;  /* [L] bytes of one routed expert of layer l */
    uint64_t *dense_bytes;   /* [L] non-expert bytes of layer l (attention, gate, shared) */
    uint32_t embed_dim;      /* per-iteration semantic embedding size; 0 = none */
    uint32_t spec_depth;     /* speculative gate outputs gate_{l+i}(h_l), i = 1..spec_depth; 0 = none */
    int has_token_ids;       /* requests carry prompt token ids */
    int has_text;            /* requests carry prompt text */
    int has_recorded_hits;   /* rows carry the recording engine's residency (1 hit / 0 miss / -1 unknown) */
    /* Request table, read whole at open (a few dozen bytes per request). */
    uint64_t n_requests;
    uint64_t n_iterations;
    uint64_t n_rows;
    uint64_t *req_id;        /* [n_requests] */
    double *req_arrival_s;   /* [n_requests], non-decreasing */
    uint32_t *req_prompt_len;
    uint32_t *req_output_len;
    uint32_t *req_n_iters;   /* iterations of request i */
    uint64_t *req_n_rows;    /* token rows of request i */
} ms_trace_meta;

typedef struct {
    ms_phase phase;
    uint32_t row0;   /* first token row, index into the request's row arrays */
    uint32_t n_rows; /* prefill: prompt tokens; decode: 1 */
} ms_iteration;

/* One request with all its routing.  Index helpers below give the layout. */
typedef struct {
    uint64_t id;
    double arrival_s;
    uint32_t prompt_len, output_len;
    uint32_t n_iters;
    ms_iteration *iters;     /* [n_iters] */
    uint32_t n_rows;
    int32_t *topk_ids;       /* [n_rows][L][K]; -1 = cell missing in the source */
    float *topk_w;           /* [n_rows][L][K]; 0 where the id is -1 */
    float *probs;            /* [n_rows][L][J] when probs_kind == FULL, else NULL */
    float *embedding;        /* [n_iters][embed_dim] or NULL */
    int32_t *spec_ids;       /* [n_rows][L][spec_depth][K] or NULL */
    float *spec_w;           /* [n_rows][L][spec_depth][K] or NULL */
    int8_t *recorded_hit;    /* [n_rows][L][K] or NULL */
    uint32_t n_tokens;
    int32_t *token_ids;      /* [n_tokens] prompt token ids or NULL */
    char *text;              /* prompt text or NULL */
    int borrowed;            /* the arrays belong to a trace-cache snapshot (trace_cache.h): read-only, and
                              * ms_request_free only clears the struct */
} ms_request;

/* ---- parts of a request ----
 * Every request a reader hands out has its iterations and top-k ids; the
 * other parts only when the reader's selection includes them
 * (ms_reader_select; default MS_PART_ALL).  A part left out is NULL in the
 * request: neither decompressed nor checked. */
enum {
    MS_PART_WEIGHTS = 1u << 0, /* topk_w */
    MS_PART_PROBS = 1u << 1,   /* probs (probs_kind full) */
    MS_PART_EMBED = 1u << 2,   /* embedding */
    MS_PART_SPEC = 1u << 3,    /* spec_ids and spec_w */
    MS_PART_HITS = 1u << 4,    /* recorded_hit */
    MS_PART_PROMPT = 1u << 5,  /* token_ids and text */
    MS_PART_ALL = (1u << 6) - 1,
    MS_PART_GATE = MS_PART_WEIGHTS | MS_PART_PROBS /* the router's distribution (policies/lib/gate.h) */
};
/* The parts of meta's requests that exist (MS_PART_* bits). */
unsigned ms_trace_parts(const ms_trace_meta *m);
/* A programming error, not bad input: `who` reads a part of r its reader did
 * not select (a policy whose descriptor's `reads` leaves it out).  Prints
 * one line naming both and aborts. */
_Noreturn void ms_request_part_missing(const char *who, const char *part);

static inline size_t ms_topk_index(const ms_trace_meta *m, uint32_t row, uint32_t layer)
{
    return ((size_t)row * m->L + layer) * m->K;
}
static inline size_t ms_probs_index(const ms_trace_meta *m, uint32_t row, uint32_t layer)
{
    return ((size_t)row * m->L + layer) * m->J;
}
static inline size_t ms_spec_index(const ms_trace_meta *m, uint32_t row, uint32_t layer, uint32_t i)
{
    return (((size_t)row * m->L + layer) * m->spec_depth + i) * m->K;
}

void ms_trace_meta_free(ms_trace_meta *m);
/* Allocates expert_bytes / dense_bytes for m->L layers (zeroed). */
void ms_trace_meta_alloc_layers(ms_trace_meta *m);
void ms_request_free(ms_request *r);
/* Allocates every per-row / per-iteration array a request needs under meta
 * (n_iters and n_rows set by the caller first); ids start at -1. */
void ms_request_alloc(ms_request *r, const ms_trace_meta *m);

/* Checks one request against meta: ids in [-1, J), no duplicate id within a
 * (row, layer), weights finite and >= 0, full probs finite, >= 0, summing to 1
 * within 1e-3, top-k consistent with probs, iteration row ranges contiguous
 * and covering n_rows, prefill first.  `where` names the file in messages. */
int ms_request_check(const ms_trace_meta *m, const ms_request *r, const char *where, ms_err *err);
/* The same checks over the parts in `parts` only (MS_PART_*; ids, iterations
 * and the request's counts always): each part left out must be NULL. */
int ms_request_check_parts(const ms_trace_meta *m, const ms_request *r, unsigned parts, const char *where,
                           ms_err *err);

/* ---- streaming reader ---- */
typedef struct ms_trace_reader ms_trace_reader;

ms_trace_reader *ms_reader_open(const char *path, ms_err *err);
/* Another reader of what r reads (a run's second pass: a policy's training
 * read): from r's trace cache snapshot when r has one, whatever is at r's
 * path now; else r's path streamed again, refused with one line when the
 * digest r was opened with (a v2 trace's stored one; a v1 trace's bytes'
 * SHA-256 when ms_reader_open took it) is no longer the file's, or its
 * format changed: the file was replaced since. */
ms_trace_reader *ms_reader_open_again(const ms_trace_reader *r, ms_err *err);
/* meta->version says which format the file has; a CLI reading a v1 trace
 * prints ms_trace_v1_note once (the library never prints). */
const ms_trace_meta *ms_reader_meta(const ms_trace_reader *r);
/* Selects the parts (MS_PART_*) the next reads hand out; the others are
 * neither read nor checked.  A reader starts with MS_PART_ALL; a content
 * digest (ms_reader_digest_begin) needs all of them.
 * Each request is checked once per process: a request this reader, or an
 * earlier reader of the same v2 file (same path, device, inode, size, mtime
 * and content digest attribute), already handed out with those parts is not
 * checked again (HDF5's checksums still verify every chunk read). */
void ms_reader_select(ms_trace_reader *r, unsigned parts);
/* Requests the readers of this process have checked so far (a counter for
 * tests and benchmarks). */
uint64_t ms_trace_checks(void);
/* 1 when r's reads verify the chunks' Fletcher32 checksums; 0 when this
 * process has read and checked every request of the file with every part r
 * selects (r then skips the checksums as it skips the value checks: a trace
 * is checked once).  A content digest always verifies them. */
int ms_reader_chunk_checksums(const ms_trace_reader *r);
/* Reads and validates the next request into *out (previous contents freed).
 * Returns 1 when a request was read, 0 at end of trace, -1 on error. */
int ms_reader_next(ms_trace_reader *r, ms_request *out, ms_err *err);
/* Reads request i (0-based) into *out; same return convention. */
int ms_reader_read(ms_trace_reader *r, uint64_t i, ms_request *out, ms_err *err);
void ms_reader_rewind(ms_trace_reader *r);
void ms_reader_close(ms_trace_reader *r);

/* Content digest (docs/trace-format.md "Content digest").  After ms_reader_digest_begin
 * (before the first read, or right after a rewind), the reader digests every
 * request it returns; once all were read, in order, ms_reader_digest_check
 * compares the result with the stored content_sha256: 0 when they agree,
 * -1 with one line when they differ or the requests were not all read in
 * order, 1 for a v1 trace (no stored digest; hex still gets the digest). */
void ms_reader_digest_begin(ms_trace_reader *r);
int ms_reader_digest_check(ms_trace_reader *r, char hex[MS_DIGEST_HEX], ms_err *err);

/* ---- provenance (docs/trace-format.md "Provenance") ----
 * The digest that names a trace file in results (run --json's provenance,
 * the first line of CSVs, a sweep's trace columns): for a format v2 file its
 * stored content digest, the root attribute content_sha256, read without a
 * pass over the data (`moesim trace validate` verifies the content against
 * it; a run verifies the Fletcher32 checksum of every chunk it reads); for
 * any other file (v1 traces, which have no content digest) the SHA-256 of
 * its bytes, as `sha256sum` prints it, remembered per file (path, device,
 * inode, size, mtime) for the life of the process
 * (sim/core/digest.h ms_digest_file_cached).  A v2 file's digest is read
 * again at every call (an attribute read), so a file rewritten in place with
 * the same size and mtime is named by its new digest.  -1 with err, hex ""
 * and content 0 when the file cannot be read. */
typedef struct {
    int content;             /* 1: hex is the stored content digest; 0: the SHA-256 of the file's bytes */
    char hex[MS_DIGEST_HEX];
} ms_trace_digest;
int ms_trace_digest_of(const char *path, ms_trace_digest *d, ms_err *err);
/* What outputs call d: "content_sha256" or "sha256" (the JSON key, the word
 * before the digest in CSV lines), so that nobody compares a content digest
 * with sha256sum's output. */
const char *ms_trace_digest_name(const ms_trace_digest *d);
/* The digest that names what r reads, taken when r was opened, not when a
 * result is written (a trace replaced in between is not named for content
 * that was not read): a v2 trace's stored digest as r opened it (from the
 * trace cache: as the snapshot was loaded); for a v1 trace served by the
 * trace cache the SHA-256 of its bytes taken at the snapshot's load; for a
 * v1 trace streamed by ms_reader_open the SHA-256 of its bytes right after
 * the open (one pass over the file, remembered by its stat for the
 * process).  hex "" when a v1 file could not be read then, or for a reader
 * of ms_reader_open_stream: the caller names it with ms_trace_digest_of
 * when it writes. */
void ms_reader_trace_digest(const ms_trace_reader *r, ms_trace_digest *d);
/* 1 with hex when path is a format v2 moesim trace with a well-formed
 * content digest, read from the root attributes alone (format, version,
 * content_sha256: no pass over the data); 0 with hex "" for anything else (a
 * v1 trace, another or an unreadable file).  With the file's stat, a v2
 * file's identity wherever a file read once is known again (the trace
 * cache, the digests above). */
int ms_trace_stored_digest(const char *path, char hex[MS_DIGEST_HEX]);

/* The one-line note for a v1 trace ("... has no checksums; moesim trace
 * upgrade ...") into buf; 0 when m is not v1 (buf empty), else 1. */
int ms_trace_v1_note(const char *path, const ms_trace_meta *m, char *buf, size_t n);

/* ---- writer ---- */
typedef struct ms_trace_writer ms_trace_writer;

/* Writes format v2.  meta's request table, version and content_sha256 are
 * ignored (the writer builds them); layer arrays, flags and dimensions are
 * taken as given.  The output goes through sim/core/out.h: path is checked
 * (ms_out_check: not an input, not a device / fifo / folder, a writable
 * folder) and written as a temporary beside it, removed on a signal;
 * ms_writer_close renames it over path only when everything was written,
 * else removes it, so a failed or killed writer leaves path as it was.
 * Disk space is reserved ahead of HDF5 (fallocate), so a full disk is one
 * line ("No space left on device") and a clean close, never a write error
 * inside HDF5. */
ms_trace_writer *ms_writer_open(const char *path, const ms_trace_meta *meta, ms_err *err);
int ms_writer_add(ms_trace_writer *w, const ms_request *req, ms_err *err);
int ms_writer_close(ms_trace_writer *w, ms_err *err); /* frees w even on error */
/* Closes w and removes its temporary without writing the rest (error paths;
 * NULL is a no-op). */
void ms_writer_abort(ms_trace_writer *w);

/* Progress of long writes: a process-wide callback every writer calls after
 * each request (requests and rows so far, bytes of the file so far).  The
 * CLI sets it to draw a progress line on a terminal; NULL turns it off. */
typedef void (*ms_write_progress_fn)(void *ctx, uint64_t requests, uint64_t rows, uint64_t bytes);
void ms_writer_set_progress(ms_write_progress_fn fn, void *ctx);

/* Uncompressed bytes one request of this shape stores (rows, iterations,
 * tokens, text bytes): an upper bound of what it adds to a file, for the
 * size estimates of the CLI. */
uint64_t ms_trace_request_bytes(const ms_trace_meta *m, uint64_t n_rows, uint64_t n_iters, uint64_t n_tokens,
                                uint64_t text_bytes);

/* How this build's writer stores a trace (format version, filters, zstd
 * levels, chunk size) as one line: the same values give the same bytes, so
 * a cache of generated traces keys on it with the generator's knobs. */
const char *ms_trace_storage_tag(void);

/* Registers the zstd HDF5 filter (id 32015, the one hdf5plugin uses);
 * idempotent. */
int ms_h5_register_zstd(ms_err *err);

#endif
