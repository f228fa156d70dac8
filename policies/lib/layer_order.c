#include "policies/lib/layer_order.h"

#include <stdlib.h>

#include "sim/core/err.h"

void ms_layer_order_init(ms_layer_order *o, uint32_t L, uint32_t J, const double *key, const uint64_t *tick)
{
    o->L = L;
    o->J = J;
    o->key = key;
    o->tick = tick;
    o->list = ms_xcalloc((size_t)L * J + 1, sizeof *o->list);
    o->n = ms_xcalloc(L + 1, sizeof *o->n);
}

void ms_layer_order_free(ms_layer_order *o)
{
    free(o->list);
    free(o->n);
}

/* Member x = a comes before x = b: a lower key, or an equal key and a lower tick. */
static inline int before(const ms_layer_order *o, uint32_t a, uint32_t b)
{
    double ka = o->key[a], kb = o->key[b];
    return ka < kb || (ka == kb && o->tick[a] < o->tick[b]);
}

static uint32_t *row_of(const ms_layer_order *o, uint32_t l)
{
    return o->list + (size_t)l * o->J;
}

/* Moves the member at position i of layer l towards the front, then towards
 * the back, until it is in order with its neighbours (the rest is sorted). */
static void settle(ms_layer_order *o, uint32_t l, uint32_t i)
{
    uint32_t *row = row_of(o, l), base = l * o->J, e = row[i], n = o->n[l];
    while (i > 0 && before(o, base + e, base + row[i - 1])) {
        row[i] = row[i - 1];
        i--;
    }
    while (i + 1 < n && before(o, base + row[i + 1], base + e)) {
        row[i] = row[i + 1];
        i++;
    }
    row[i] = e;
}

static uint32_t position(const ms_layer_order *o, uint32_t l, uint32_t e)
{
    const uint32_t *row = row_of(o, l);
    uint32_t i = 0;
    while (row[i] != e)
        i++; /* e is a member: found before n[l] */
    return i;
}

void ms_layer_order_add(ms_layer_order *o, uint32_t l, uint32_t e)
{
    uint32_t i = o->n[l]++;
    row_of(o, l)[i] = e;
    settle(o, l, i);
}

void ms_layer_order_remove(ms_layer_order *o, uint32_t l, uint32_t e)
{
    uint32_t *row = row_of(o, l);
    for (uint32_t i = position(o, l, e); i + 1 < o->n[l]; i++)
        row[i] = row[i + 1];
    o->n[l]--;
}

void ms_layer_order_moved(ms_layer_order *o, uint32_t l, uint32_t e)
{
    settle(o, l, position(o, l, e));
}

void ms_layer_order_resort(ms_layer_order *o, uint32_t l)
{
    uint32_t *row = row_of(o, l), base = l * o->J;
    for (uint32_t i = 1; i < o->n[l]; i++) {
        uint32_t e = row[i], j = i;
        while (j > 0 && before(o, base + e, base + row[j - 1])) {
            row[j] = row[j - 1];
            j--;
        }
        row[j] = e;
    }
}

/* The lowest accepted member of layer l if it is below `best` (x, or
 * UINT32_MAX), else best. */
static uint32_t lowest_in_layer(const ms_layer_order *o, uint32_t l, ms_layer_accept accept, const void *ctx,
                                uint32_t best)
{
    const uint32_t *row = row_of(o, l);
    uint32_t base = l * o->J;
    for (uint32_t i = 0; i < o->n[l]; i++) {
        uint32_t x = base + row[i];
        if (best != UINT32_MAX && !before(o, x, best))
            return best; /* this and every later member of the layer are above best */
        if (accept(ctx, l, row[i]))
            return x;
    }
    return best;
}

uint32_t ms_layer_order_lowest(const ms_layer_order *o, uint32_t only, ms_layer_accept accept, const void *ctx)
{
    if (only != UINT32_MAX)
        return only < o->L ? lowest_in_layer(o, only, accept, ctx, UINT32_MAX) : UINT32_MAX;
    uint32_t best = UINT32_MAX;
    for (uint32_t l = 0; l < o->L; l++)
        best = lowest_in_layer(o, l, accept, ctx, best);
    return best;
}
