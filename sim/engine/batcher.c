#include <stdlib.h>
#include <string.h>

#include "sim/engine/batcher.h"

void ms_batcher_init(ms_batcher *b, ms_trace_reader *rd, uint32_t max_batch, int timeless)
{
    memset(b, 0, sizeof *b);
    b->rd = rd;
    b->meta = ms_reader_meta(rd);
    b->max_batch = max_batch;
    b->timeless = timeless;
    b->slots = ms_xcalloc(max_batch, sizeof *b->slots);
    b->items = ms_xcalloc(max_batch, sizeof *b->items);
}

void ms_batcher_free(ms_batcher *b)
{
    for (uint32_t i = 0; i < b->max_batch; i++)
        ms_request_free(&b->slots[i].req);
    free(b->slots);
    free(b->items);
    memset(b, 0, sizeof *b);
}

void ms_batcher_skip(ms_batcher *b, uint64_t first_req, uint32_t first_iter)
{
    b->next_req = first_req;
    b->skip_iters = first_iter;
}

static int has_arrived(const ms_batcher *b, uint64_t i, double now)
{
    return b->timeless || b->meta->req_arrival_s[i] <= now;
}

/* Admits arrived requests into free slots, lowest slot first. */
static int admit_arrived(ms_batcher *b, double now, ms_err *err)
{
    for (uint32_t s = 0; s < b->max_batch && b->next_req < b->meta->n_requests; s++) {
        if (b->slots[s].active)
            continue;
        if (!has_arrived(b, b->next_req, now))
            break;
        ms_rslot *slot = &b->slots[s];
        if (ms_reader_read(b->rd, b->next_req, &slot->req, err) != 1)
            return -1;
        slot->index = b->next_req;
        slot->first_iter = b->next_req == 0 ? b->skip_iters : 0;
        slot->next_iter = slot->first_iter;
        slot->active = 1;
        slot->arrival_s = b->timeless ? 0.0 : b->meta->req_arrival_s[b->next_req];
        slot->first_token_s = slot->first_iter ? slot->arrival_s : 0;
        slot->start_s = slot->arrival_s;
        b->n_active++;
        b->next_req++;
    }
    return 0;
}

int ms_batcher_next(ms_batcher *b, double *now, ms_err *err)
{
    if (admit_arrived(b, *now, err))
        return -1;
    if (b->n_active == 0) {
        if (b->next_req >= b->meta->n_requests)
            return 0;
        *now = b->meta->req_arrival_s[b->next_req]; /* idle until the next arrival */
        if (admit_arrived(b, *now, err))
            return -1;
    }
    int any_prefill = 0;
    for (uint32_t s = 0; s < b->max_batch; s++)
        if (b->slots[s].active && b->slots[s].next_iter == 0)
            any_prefill = 1;
    b->phase = any_prefill ? MS_PHASE_PREFILL : MS_PHASE_DECODE;
    b->n_items = 0;
    b->rows = 0;
    for (uint32_t s = 0; s < b->max_batch; s++) {
        ms_rslot *slot = &b->slots[s];
        if (!slot->active || (any_prefill && slot->next_iter != 0))
            continue;
        if (slot->next_iter == slot->first_iter)
            slot->start_s = *now;
        b->items[b->n_items++] = s;
        b->rows += slot->req.iters[slot->next_iter].n_rows;
    }
    return 1;
}

const ms_iteration *ms_batcher_iter(const ms_batcher *b, uint32_t s)
{
    return &b->slots[s].req.iters[b->slots[s].next_iter];
}

void ms_batcher_complete(ms_batcher *b, double now, void (*done)(const ms_rslot *, void *), void *ctx)
{
    for (uint32_t i = 0; i < b->n_items; i++) {
        ms_rslot *slot = &b->slots[b->items[i]];
        if (slot->req.iters[slot->next_iter].phase == MS_PHASE_PREFILL)
            slot->first_token_s = now;
        if (++slot->next_iter < slot->req.n_iters)
            continue;
        if (done)
            done(slot, ctx);
        slot->active = 0;
        b->n_active--;
    }
}
