/* Importers: public routing dumps -> trace format v1.
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
#include <stdint.h>

#include "trace.h"

#define MS_IMPORT_MISSING_LIST 6 /* missing cells listed in a report */

typedef struct {
    uint64_t turn;
    uint32_t step, layer, slot;
    int decode; /* 1 when the cell belongs to a decode step */
} ms_missing_cell;

typedef struct {
    char input[MS_SOURCE_MAX]; /* basename of the input file */
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
} ms_import_report;

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

/* One-line human summary, e.g. "imported qwen.route.csv: 1 request, 28
 * prefill rows + 128 decode iterations, 44766 CSV rows; 162 missing cells
 * (2.0 % of prefill cells), first: step 0 layer 47 slot 0, ...". */
void ms_import_report_format(const ms_import_report *rep, char *buf, size_t cap);

#endif
