/* A cache's members kept, per layer, in ascending order of a key pair the
 * owner stores: (key[x], tick[x]) with x = l * J + e, the lowest first
 * (ties of key to the lower tick; ticks are unique among the members).
 * Built for `mrs`, whose key (the MRS score S) changes for a whole layer at
 * each of its gates: the owner resorts that layer (insertion sort, O(its
 * members) when the order barely moves), instead of a victim search that
 * scans every member of every layer.  A lowest-member query walks each
 * layer's order from its lowest and stops at the first member that is not
 * below the best accepted so far; it finds what the scan found, the lowest
 * accepted member (the order is total: ticks are unique). */
#ifndef MS_LAYER_ORDER_H
#define MS_LAYER_ORDER_H

#include <stdint.h>

typedef struct {
    uint32_t L, J;
    const double *key;    /* [L * J] owned by the caller */
    const uint64_t *tick; /* [L * J] owned by the caller */
    uint32_t *list;       /* [L][J]: layer l's member experts, ascending */
    uint32_t *n;          /* [L] members per layer */
} ms_layer_order;

void ms_layer_order_init(ms_layer_order *o, uint32_t L, uint32_t J, const double *key, const uint64_t *tick);
void ms_layer_order_free(ms_layer_order *o);
/* (l, e) becomes a member (it is not one), placed by its key and tick. */
void ms_layer_order_add(ms_layer_order *o, uint32_t l, uint32_t e);
/* (l, e) stops being a member (it is one). */
void ms_layer_order_remove(ms_layer_order *o, uint32_t l, uint32_t e);
/* The key or tick of member (l, e) changed: it moves to its place. */
void ms_layer_order_moved(ms_layer_order *o, uint32_t l, uint32_t e);
/* Any keys of layer l changed: the layer's members are put in order. */
void ms_layer_order_resort(ms_layer_order *o, uint32_t l);

typedef int (*ms_layer_accept)(const void *ctx, uint32_t l, uint32_t e);
/* x = l * J + e of the lowest member for which accept(ctx, l, e) holds,
 * among layer `only`'s members, or every layer's when only == UINT32_MAX;
 * UINT32_MAX when none.  accept is asked only of members below the best
 * accepted so far (it must not depend on being asked). */
uint32_t ms_layer_order_lowest(const ms_layer_order *o, uint32_t only, ms_layer_accept accept, const void *ctx);

#endif
