/* Importers: public routing dumps -> trace format v2.
 *
 * route-csv ("route_trace v1", BigMoeOnEdge's llama.cpp recorder): `#`
 * header lines
 *     # route_trace v1
 *     # model=PATH arch=A n_layer=L n_expert=J n_expert_used=K
 *     # layer=i expert_bytes=B dense_bytes=D        (i = 0..L-1, in order)
 * then the column line and one CSV row per routed expert:
 *     turn,phase,step,layer,slot,expert,weight,residency,expert_bytes
 *
 * Mapping: one request per `turn` (turns contiguous and increasing); the
 * phase 0 rows form one prefill iteration whose token rows are the prefill
 * steps 0..P-1 (step = prompt token index, prompt_len = P); every phase 1
 * step is one decode iteration of one row, steps P, P+1, ... in order.
 * topk_ids / topk_w are ordered by `slot`, probs_kind = topk_renorm,
 * recorded_hit = residency.  A (step, layer, slot) without a row is a
 * missing cell: id -1, weight 0, recorded_hit -1; it is counted in the
 * report, never an error.  Every other inconsistency is a one-line error
 * "FILE:LINE: field F: ..." (ms_err). */
#ifndef MS_IMPORT_H
#define MS_IMPORT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "traces/format/trace.h"

#define MS_IMPORT_MISSING_LIST 6 /* missing cells listed in a report */

typedef struct {
    uint64_t turn;
    uint32_t step, layer, slot;
    int decode; /* 1 when the cell belongs to a decode step */
} ms_missing_cell;

typedef struct {
    char input[MS_SOURCE_MAX]; /* basename of the input file */
    char row_unit[24];         /* what `rows` counts: "CSV rows" when empty, "JSON lines", ... */
    uint64_t rows;             /* CSV data rows read */
    uint64_t requests;         /* turns */
    uint64_t prefill_iters;
    uint64_t decode_iters;
    uint64_t prefill_rows;     /* prefill token rows (prompt tokens), all requests */
    uint64_t prefill_cells;    /* prefill (row, layer, slot) cells = prefill_rows * L * K */
    uint64_t decode_cells;     /* decode_iters * L * K */
    uint64_t missing_prefill;  /* prefill cells with no CSV row */
    uint64_t missing_decode;   /* decode cells with no CSV row */
    uint32_t n_listed;         /* entries of first_missing in use */
    ms_missing_cell first_missing[MS_IMPORT_MISSING_LIST]; /* in (turn, step, layer, slot) order */
    char notes[1024]; /* what else the importer did ("layers renumbered ...; columns ignored ..."), "; "-separated */
} ms_import_report;

/* Appends one note ("; "-separated) to rep->notes; cut at its capacity. */
void ms_import_note(ms_import_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A whole parsed file, for tests and tools that want it in memory. */
typedef struct {
    ms_trace_meta meta;  /* dimensions, layer bytes, flags; request table unused */
    uint64_t n_requests;
    ms_request *requests;
} ms_routecsv_trace;

/* Parses a route_trace v1 file into *out (free with ms_routecsv_free, also
 * after an error).  rep may be NULL.  0 ok, -1 with err filled. */
int ms_routecsv_parse(const char *path, ms_routecsv_trace *out, ms_import_report *rep, ms_err *err);
void ms_routecsv_free(ms_routecsv_trace *t);

/* Streams a route_trace v1 file into a new trace file at out_path (one
 * request in memory at a time) through the ms_writer_* API.  rep may be
 * NULL.  0 ok, -1 with err filled (a partly written out_path is removed). */
int ms_import_routecsv(const char *in_path, const char *out_path, ms_import_report *rep, ms_err *err);

/* Human summary: one line, e.g. "imported qwen.route.csv: 1 request, 28
 * prefill rows + 128 decode iterations, 44766 CSV rows; 162 missing cells
 * (2.0 % of prefill cells), first: step 0 layer 47 slot 0, ...", then the
 * notes (if any) on a second line indented by two spaces. */
void ms_import_report_format(const ms_import_report *rep, char *buf, size_t cap);


/* ---- options and helpers shared by the jsonl / dense-csv / npy importers ----
 *
 * Their inputs carry no model metadata.  Dimensions and layer bytes come
 * from `--model PROFILE` (L = moe_layers, J = experts, K = top_k,
 * expert_bytes / dense_bytes / hidden / shared_experts of every layer), or
 * from the flags --experts J, --layers L, --topk K, --expert-bytes B,
 * --dense-bytes B.  A flag given with --model must agree with the profile.
 * J and expert bytes must be known (model or flags); L and K may be inferred
 * from the data (documented per importer). */
typedef struct {
    const char *model;     /* profile name / path, or NULL */
    uint32_t layers;       /* 0 = unknown */
    uint32_t experts;      /* 0 = unknown */
    uint32_t topk;         /* 0 = unknown */
    uint64_t expert_bytes; /* 0 = unknown */
    uint64_t dense_bytes;  /* 0 without --model */
    int have_dense_bytes;
    const char *fields;    /* jsonl: "key=name,..." overrides of the field names */
    uint32_t prompt_len;   /* jsonl, dense-csv, sglang, vllm, hf-logits: 0 = from the data */
    const char *pattern;   /* dense-csv: file name pattern with one '*' for the layer; NULL = "layer*.csv" */
    int probs_kind;        /* jsonl, dense-csv: -1 = the format's default, else an ms_probs_kind */
    const char *request_key; /* jsonl: comma-separated fields forming the request key; NULL = the request field */
    int token_pos;         /* jsonl: an ms_token_pos */
    int all_decode;        /* jsonl: --phase decode: every line is a generated token (no prompt in the dump) */
    long layer_base;       /* dense-csv: -1 = renumber from the first file, else the file number of layer 0 */
    const char *id_columns; /* dense-csv: comma-separated non-expert columns to ignore */
    const char *seq_column; /* dense-csv: column naming the sequence (request); NULL = "request" if present */
    uint32_t tokens_per_seq; /* dense-csv: 0 = off, else every N rows form one request */
    uint32_t engine_layers; /* sglang, vllm: layers of the engine's array (dense ones included); 0 = L */
    uint32_t start_len;    /* sglang, vllm: routed_experts_start_len / routed_experts_prompt_start of the requests */
    const char *layout;    /* hf-logits (.npy): "LTJ" (default) or "TLJ" */
    const char *source_name; /* internal (npy): input name written to the `source` attribute */
    const char *source_kind; /* internal (npy): its description */
} ms_import_opts;

/* How a jsonl dump numbers its tokens (--token-pos). */
typedef enum {
    MS_TOKEN_POS_ABSOLUTE = 0,    /* position in the request's sequence, prompt first (0 = first prompt token) */
    MS_TOKEN_POS_PER_REQUEST = 1, /* counts the request's dumped tokens from 0 (a decode-only request: 0 = first generated) */
    MS_TOKEN_POS_PER_STEP = 2     /* restarts at 0 at every step; steps in file order */
} ms_token_pos;
int ms_token_pos_parse(const char *s, ms_token_pos *out); /* 0 ok, -1 unknown */

void ms_import_opts_init(ms_import_opts *o);

/* Dimensions and bytes resolved from opts; 0 = still unknown. */
typedef struct {
    char model_name[MS_NAME_MAX];
    uint32_t L, J, K, shared_experts, hidden_size;
    uint64_t expert_bytes, dense_bytes;
} ms_import_dims;

/* Loads the profile (if any) and merges the flags; checks that J and the
 * expert bytes are known.  `fmt` names the importer in messages. */
int ms_import_dims_resolve(const ms_import_opts *o, const char *fmt, ms_import_dims *d, ms_err *err);
/* Fills meta (layer arrays allocated) from complete dims. */
void ms_import_meta_fill(const ms_import_dims *d, const char *source, ms_probs_kind pk, ms_trace_meta *m);

/* Bounded line reader: lines longer than MS_IMPORT_LINE_MAX or holding a
 * NUL byte are errors at the first offending byte, so a multi-gigabyte
 * garbage file fails at once instead of being read whole. */
#define MS_IMPORT_LINE_MAX (1u << 20)

/* A request is held densely (token rows x L x K cells of id + weight, and a
 * recorded hit for route-csv), so one corrupt token index or step number
 * could ask for terabytes.  An importer refuses a request of more than
 * MS_IMPORT_MAX_CELLS cells (16 Mi: ~150 MB; 43 k tokens at L=48, K=8, 262 k
 * at L=32, K=2) with "PATH:LINE: request R: ROWS token rows x L layers x K
 * = N cells, more than 16777216 (WHAT)"; `line` is the line that set the row
 * count.  (2^26 let a one-line input take 30 s under the fuzzer's sanitizers.) */
#define MS_IMPORT_MAX_CELLS (1ull << 24)
int ms_import_check_cells(const char *path, uint64_t line, uint64_t request, uint64_t rows, uint32_t L, uint32_t K,
                          const char *what, ms_err *err);
typedef struct {
    const char *path;
    FILE *f;
    char *buf;
    size_t cap;
    uint64_t lineno;
    int had_newline; /* the line just read ended with '\n' (0: the file's unterminated last line) */
    size_t max;      /* line cap in bytes; 0 = MS_IMPORT_LINE_MAX (set after ms_lines_open) */
} ms_lines;
int ms_lines_open(ms_lines *r, const char *path, ms_err *err);
/* 1 line in r->buf (without "\n" / "\r\n"), 0 at EOF, -1 error. */
int ms_lines_next(ms_lines *r, ms_err *err);
void ms_lines_close(ms_lines *r);

/* Output through ms_writer_open (a temporary beside out, renamed over out
 * only on success; refuses out == in). */
typedef struct {
    const char *out;
    ms_trace_writer *w;
} ms_import_sink;
int ms_import_sink_open(ms_import_sink *s, const char *in_path, const char *out_path, const ms_trace_meta *m,
                        ms_err *err);
/* With rc == 0 closes the writer (renaming into place), else aborts it
 * (removing the temporary, out untouched).  Returns the final status (rc,
 * or -1 when closing failed). */
int ms_import_sink_finish(ms_import_sink *s, int rc, ms_err *err);

const char *ms_import_base_name(const char *path);

/* ---- jsonl: one JSON object per (request, token, layer) line ----
 * Fields (names overridable with --fields request=...,layer=...):
 *   request_id  integer >= 0 or string   request the token belongs to
 *   token_idx   integer >= 0       token position (see token_pos)
 *   layer       integer in [0, L)  MoE layer
 *   topk_ids    array of K ints    routed experts, in [0, J)
 *   topk_weights array of K numbers their gate weights (not read with
 *               probs_kind topk_ids: an ids-only dump; 1/K placeholders)
 *   is_prompt   bool, or "prefill"/"prompt"/"decode"   prompt token or generated token
 *               (not read with --prompt-len P or opts.all_decode)
 *   prompt_len  (no default name: read only when named with --fields prompt_len=NAME)
 *               integer, the request's prompt length, the same on all its lines
 * Request key: the request field, or the fields of opts.request_key
 * (--request-key dataset,problem_id: values integers or strings; a line
 * without one is an error).  With several inputs (ms_import_jsonl_files)
 * keys are namespaced per file.  Request ids: the request field's value
 * with one input and one integer key field, else 0, 1, ... in order of first
 * appearance (reported).  Requests may interleave (continuous batching);
 * they are written in order of first appearance.
 * Token rows (opts.token_pos): absolute = the position (0 = first prompt
 * token); per-request = the same, except that a request starting with
 * decode counts its generated tokens from 0; per-step = positions restart at
 * every step: a line whose (token, layer) the request already has in its
 * current step starts its next step (steps in file order), whose rows follow.
 * Prompt: with --prompt-len P the phase field is not read: row < P is
 * prompt, except under per-step positions, where P counts steps (the rows
 * of the request's first P steps are its prompt; a request of fewer than P
 * steps is an error).  With opts.all_decode (--phase decode) the phase field
 * is not read either and every line is a decode token.  Else rows flagged
 * prompt form the prompt (length = last prompt row + 1, or the prompt_len
 * field when larger); prompt rows must precede decode rows.  A request
 * with only decode lines starts with decode: its
 * prompt length is the prompt_len field, else (absolute) its first decode
 * position, else (per-request / per-step) unknown: one placeholder prompt
 * row; its prompt rows are missing cells and the report (and, when unknown,
 * the trace's `source`) says so.  Each decode row is one decode iteration.
 * A (token, layer) without a line is a missing cell (reported); a token
 * with no line at all too, when a later token of the request has lines.
 * L: --model / --layers, else 1 + the largest layer seen.  K: --model /
 * --topk, else the length of the first line's expert list (every list must
 * have K entries).  Token rows are below 2^20.  probs_kind topk_renorm (weights sum to 1, checked per
 * line) unless opts.probs_kind says topk_raw (sum <= 1) or topk_ids (no
 * weights read: a dump of expert ids only, stored with the 1/K placeholder,
 * said in the report and the trace's `source`; a line without the weights
 * field under the other kinds is an error naming --probs-kind topk_ids). */
int ms_import_jsonl(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                    ms_err *err);
int ms_import_jsonl_files(const char *const *in_paths, size_t n_in, const char *out_path, const ms_import_opts *o,
                          ms_import_report *rep, ms_err *err);

/* ---- dense-csv: one CSV per layer, tokens x experts probabilities ----
 * IN is a directory holding files named by the pattern (default
 * "layer*.csv", '*' = the layer number in decimal).  The files numbered
 * B..B+L-1, without gaps, are layers 0..L-1: B = opts.layer_base
 * (--layer-base; files below it are ignored, reported), else the lowest
 * number (a first file other than layer0 is renumbered, reported).  Every
 * file starts with a header and has the same columns and number of rows;
 * row r of every file is token row r, and its sequence / phase cells must
 * agree across files.  Columns, by name, anywhere in the header: the
 * sequence column (opts.seq_column, else `request` if present: integers,
 * increasing from one request to the next, rows of a request contiguous),
 * `phase` (prefill / decode, or 0 / 1), ignored columns (opts.id_columns,
 * and any named request (when another column is the sequence), layer, layer_id, layer_idx, token, token_id, token_idx,
 * token_pos, position, pos, step, row, row_id, index, idx, id, time,
 * timestamp, case-insensitive: reported, never experts), and the J expert
 * columns (all others, in order).  Without a sequence column the file is one
 * request (id 0), or with opts.tokens_per_seq = N every N rows are one
 * request (ids 0, 1, ...; the row count must be a multiple of N).  Phases:
 * the phase column, or with opts.prompt_len = P the first P rows of each
 * request are its prompt and every later row one decode step (a request of
 * at most P rows is prefill only, reported), else every row is a prompt
 * token (prefill-only requests).  Values (opts.probs_kind): full (default)
 * = the router's raw softmax (finite, >= 0, each row summing to 1 within
 * 1e-3); topk_raw = raw softmax kept only at the top-k (other cells 0 or
 * empty, at most K values > 0, sum <= 1); topk_renorm = the same with
 * renormalised weights (sum 1 when K are kept).  Top-k = K largest (ties to
 * the lower id); with a top-k-only kind a row with fewer than K values > 0
 * has missing cells (reported).  K from --model / --topk (required); J from
 * --model / --experts, else the header. */
int ms_import_densecsv(const char *in_dir, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                       ms_err *err);

/* ---- sglang / vllm: serving engines' --enable-return-routed-experts ----
 * IN holds API responses: one JSON document (an object or an array of
 * them), JSON lines, or a server-sent-event stream ("data: {...}" lines,
 * "data: [DONE]").  Records are merged by response id (a stream's chunks;
 * SGLang's payload comes in the last chunk, the usage chunk after it).
 * SGLang (v0.5.7 and later): meta_info.routed_experts (/generate), or
 * sglext.routed_experts (/v1/chat/completions, /v1/completions, v0.5.9+;
 * choices[0].sgl_ext also read): base64 of int32 little-endian [rows,
 * engine layers, K] with no shape, so the engine layers (opts.engine_layers,
 * else L) and K come from --model / flags; counts from meta_info or usage
 * (prompt_tokens, completion_tokens, cached_tokens).  vLLM (v0.22 and
 * later): choices[i].routed_experts, base64 of a .npy [rows, layers, K]
 * (|u1 or <u2, older int32 too), one request per choice; the prompt length
 * from usage.prompt_tokens, else --prompt-len; a raw .npy file (offline
 * np.save of RequestOutput.outputs[0].routed_experts) is one request and
 * needs --prompt-len.  Rows: the engines return prompt + completion - 1 -
 * start rows (start = opts.start_len: routed_experts_start_len /
 * routed_experts_prompt_start), checked when the counts are known: prompt_len
 * = prompt - start, every later row one decode step.  Engine layers whose
 * cells are all 0 in every request are dense layers and dropped (K >= 2;
 * their number must be engine layers - L when L is known).  A cell that
 * repeats an id (a zero-filled row) is a missing cell (reported); an id
 * outside [0, J) is an error.  No weights: probs_kind topk_ids (1/K
 * placeholders), said in the report and the trace's `source`.  Request ids
 * 0, 1, ... in order of first appearance.  The file is read whole (at most
 * 256 MiB). */
int ms_import_sglang(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                     ms_err *err);
int ms_import_vllm(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                   ms_err *err);

/* ---- npy: a NumPy array [tokens, layers, experts] of router probabilities ----
 * Runs traces/tools/npy2trace.py (Python + NumPy; interpreter $MOESIM_PYTHON,
 * else the build's) to write one dense-csv file per layer into a temporary
 * directory, then imports it with ms_import_densecsv (one prefill-only
 * request).  The converter's one-line error becomes err. */
int ms_import_npy(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                  ms_err *err);

/* ---- hf-logits: HF transformers output_router_logits (Python converter) ----
 * Runs traces/tools/logits2trace.py (NumPy; PyTorch for .pt files): a
 * torch.save of the router_logits tuple (one (tokens, experts) tensor per
 * MoE layer), a .npy [layers, tokens, experts] (opts.layout "LTJ", or "TLJ")
 * or a .npz of per-layer arrays; softmax per token and layer -> dense-csv ->
 * ms_import_densecsv (probs_kind full).  opts.prompt_len P: rows < P are the
 * prompt, each later row one decode step (else one prefill-only request). */
int ms_import_hf_logits(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                        ms_err *err);

#endif
