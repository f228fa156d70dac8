/* The activated sets of a batch, remembered in the trace cache's memo
 * (traces/format/trace_cache.h) across the runs of one process.
 *
 * A batch's sets depend only on the trace and on which rows the batch
 * holds: its items in order, each a (request, iteration), and whether the
 * weights were read (without them the sums stay 0).  That is the key; the
 * snapshot the memo belongs to is the trace.  What the timing decides (which
 * requests have arrived, so the batch's make-up) is in the key, not assumed.
 * The value is the build's result: each layer's list length, then the lists,
 * layer after layer.  Recalling writes acts, n_acts, mark and act_pos as
 * eng_actsets_finish does and leaves the scratch (all 0) alone. */
#include <string.h>

#include "sim/engine/state.h"

static const char tag[8] = "actsets"; /* the engine's keys in a memo policies share */

static void key_append(ms_view *v, const void *p, size_t n)
{
    memcpy(v->act_key + v->act_klen, p, n);
    v->act_klen += n;
}

/* the running batch's key into v->act_key (v->act_klen bytes) */
static void make_key(ms_view *v)
{
    const ms_batcher *b = v->batch;
    size_t need = sizeof tag + 1 + (size_t)b->n_items * 12;
    if (need > v->act_key_cap) {
        v->act_key_cap = 2 * need;
        v->act_key = ms_xrealloc(v->act_key, v->act_key_cap, 1);
    }
    v->act_klen = 0;
    key_append(v, tag, sizeof tag);
    uint8_t weights = 0;
    for (uint32_t i = 0; i < b->n_items; i++)
        weights |= b->slots[b->items[i]].req.topk_w != NULL;
    key_append(v, &weights, 1);
    for (uint32_t i = 0; i < b->n_items; i++) {
        const ms_rslot *slot = &b->slots[b->items[i]];
        uint64_t req = slot->index;
        uint32_t it = slot->next_iter;
        key_append(v, &req, sizeof req);
        key_append(v, &it, sizeof it);
    }
}

int eng_memo_counted_ok(const unsigned char *p, size_t len, uint32_t n, uint32_t max_count, size_t item_size)
{
    size_t need = (size_t)n * sizeof(uint32_t);
    if (len < need)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t c;
        memcpy(&c, p + (size_t)i * sizeof c, sizeof c);
        if (c > max_count)
            return 0;
        need += (size_t)c * item_size;
    }
    return len == need;
}

int eng_actsets_recall(ms_view *v)
{
    if (!v->act_memo)
        return 0;
    make_key(v);
    size_t len;
    const unsigned char *p = ms_trace_memo_get(v->act_memo, v->act_key, v->act_klen, &len);
    if (!p || !eng_memo_counted_ok(p, len, v->L, v->J, sizeof *v->acts))
        return 0;
    uint64_t stamp = v->iter + 1;
    memcpy(v->n_acts, p, v->L * sizeof *v->n_acts);
    p += v->L * sizeof *v->n_acts;
    for (uint32_t l = 0, x0 = 0; l < v->L; l++, x0 += v->J) {
        ms_act *acts = v->acts + x0;
        uint32_t n = v->n_acts[l];
        for (uint32_t i = 0; i < n; i++, p += sizeof *acts) {
            memcpy(&acts[i], p, sizeof *acts); /* a few entries: one move each, no call */
            uint32_t x = x0 + acts[i].expert;
            v->mark[x] = stamp;
            v->act_pos[x] = i;
        }
    }
    return 1;
}

/* after a build that eng_actsets_recall did not find (its key is still in
 * v->act_key) */
void eng_actsets_remember(ms_view *v)
{
    if (!v->act_memo)
        return;
    if (!v->act_val)
        v->act_val = ms_xcalloc((size_t)v->L * sizeof *v->n_acts + (size_t)v->NX * sizeof *v->acts, 1);
    unsigned char *p = v->act_val;
    memcpy(p, v->n_acts, v->L * sizeof *v->n_acts);
    p += v->L * sizeof *v->n_acts;
    for (uint32_t l = 0; l < v->L; l++) {
        memcpy(p, v->acts + (size_t)l * v->J, v->n_acts[l] * sizeof *v->acts);
        p += v->n_acts[l] * sizeof *v->acts;
    }
    ms_trace_memo_put(v->act_memo, v->act_key, v->act_klen, v->act_val, (size_t)(p - v->act_val));
}
