/* Continuous batching over a streamed trace.
 *
 * Requests are admitted in trace order, up to max_batch at once, when they
 * have arrived (or at once in timeless mode, used by the next-use pre-pass
 * and by --offline).  An iteration is either a prefill of every admitted
 * request that has not run its prefill yet, or, when there is none, one
 * decode step of every running request (prefill first, as vLLM schedules).
 * Only the requests in the batch are held in memory. */
#ifndef MS_BATCHER_H
#define MS_BATCHER_H

#include <stdint.h>

#include "traces/format/trace.h"
#include "sim/core/err.h"

typedef struct {
    ms_request req;
    uint64_t index;        /* request index in the trace */
    uint32_t next_iter;    /* next iteration of req to run */
    uint32_t first_iter;   /* iterations before it are training (ms_batcher_skip) */
    int active;
    double arrival_s;
    double first_token_s;  /* end of its prefill iteration */
    double start_s;        /* start of its first replayed iteration: its queueing ends, its service begins */
} ms_rslot;

typedef struct {
    ms_trace_reader *rd;
    const ms_trace_meta *meta;
    uint32_t max_batch;
    int timeless;          /* admit regardless of arrival time */
    ms_rslot *slots;       /* [max_batch] */
    uint32_t n_active;
    uint64_t next_req;
    uint32_t skip_iters;   /* request 0 starts at this iteration */
    /* the iteration formed by ms_batcher_next */
    uint32_t *items;       /* slot indices, ascending */
    uint32_t n_items;
    ms_phase phase;
    uint32_t rows;         /* token rows in the iteration */
} ms_batcher;

void ms_batcher_init(ms_batcher *b, ms_trace_reader *rd, uint32_t max_batch, int timeless);
void ms_batcher_free(ms_batcher *b);
/* Skips the training split: requests before first_req, and, when first_iter
 * > 0, the first first_iter iterations of request 0 (a request that starts
 * past its prefill has no TTFT). */
void ms_batcher_skip(ms_batcher *b, uint64_t first_req, uint32_t first_iter);
/* Forms the next iteration at time *now (advanced to the next arrival when
 * nothing is running).  Returns 1 with items/phase/rows set, 0 when the
 * trace is done, -1 on a read error. */
int ms_batcher_next(ms_batcher *b, double *now, ms_err *err);
/* The iteration of slot s in the current batch. */
const ms_iteration *ms_batcher_iter(const ms_batcher *b, uint32_t s);
/* Marks the current iteration done at time `now`; calls done(slot, ctx) for
 * every request that finished, before freeing it. */
void ms_batcher_complete(ms_batcher *b, double now, void (*done)(const ms_rslot *, void *), void *ctx);

#endif
