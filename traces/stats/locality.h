/* Cache locality of a trace's routing: the hit rate an LRU expert cache of
 * any size would have, and how far back a decode step's experts were last
 * used, in one streaming pass (traces/stats/stats.h owns one; `moesim trace
 * stats` prints it and checks it against a model's published targets,
 * traces/stats/targets.h).
 *
 * An access is one iteration at one layer with the set of distinct experts
 * its valid cells chose (the union over its rows; a decode step has one
 * row).  A cache sees that set at once, as the engine does: each expert is a
 * hit when it was resident before the iteration (hit or miss decided at the
 * gate), then the set becomes the most recent, cells in (row, slot) order,
 * a later cell more recent.  With that rule an LRU cache of C entries holds
 * exactly the C most recently used keys, so one stack-distance pass
 * (Mattson et al. 1970) gives the hit rate at every C: an access of depth d
 * (d keys used more recently) hits iff d < C.
 *
 * Variants, each kept separately:
 *   granularity  layer:  one cache of C experts per layer (lru-slots,
 *                        llama.cpp's and HF's per-layer caches), C = 1..J;
 *                global: one cache of C (layer, expert) pairs (moesim's
 *                        lru), C = 1..L*J;
 *   scope        decode: decode steps only (the prompt is not seen at all);
 *                all:    every iteration, a prefill one as one access per
 *                        layer;
 *   reset        request: the cache is empty at each request's start;
 *                none:    one cache through the trace in trace order.
 * Hit rates pool every counted access of the trace (hits / accesses, not a
 * mean over layers), as the papers report them.
 *
 * Reuse distance (decode steps of one request, per layer): for each expert of
 * decode step t >= 2 of a request, d = t - the last earlier decode step of the
 * request that used it at that layer; buckets 1, 2, 3-4, 5-8, 9-16, 17-32,
 * 33-64, >= 65 and "none" (not used in an earlier decode step), as fractions of
 * those accesses.  Bucket 1 is `reuse_prev` of stats.h.
 *
 * Decode request entropy: for each request with decode steps, the entropy
 * (bits) of the activation counts of its decode steps at each layer, the
 * mean over its layers with activations; then the mean over those requests
 * (moe-trace's per-prompt routing entropy; stats.h's h_req includes the
 * prompt). */
#ifndef MS_LOCALITY_H
#define MS_LOCALITY_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "sim/core/err.h"
#include "traces/format/trace.h"

typedef enum { MS_LOC_LAYER = 0, MS_LOC_GLOBAL = 1 } ms_loc_granularity;
typedef enum { MS_LOC_DECODE = 0, MS_LOC_ALL = 1 } ms_loc_scope;
typedef enum { MS_LOC_RESET_REQUEST = 0, MS_LOC_RESET_NONE = 1 } ms_loc_reset;

#define MS_LOC_REUSE_BUCKETS 9 /* 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64, >= 65, none */

typedef struct ms_locality ms_locality;

/* L, J >= 1 and L * J <= 2^26; NULL + err otherwise. */
ms_locality *ms_locality_new(uint32_t L, uint32_t J, uint32_t K, ms_err *err);
/* Accumulates one request (already checked by the caller: ids in [-1, J), no
 * id twice in a row and layer). */
void ms_locality_add(ms_locality *loc, const ms_request *req);
void ms_locality_free(ms_locality *loc);

/* Hit rate of an LRU cache of `entries` keys (experts per layer for
 * MS_LOC_LAYER, (layer, expert) pairs for MS_LOC_GLOBAL); NaN when the
 * variant counted no access.  entries >= the number of keys is the
 * compulsory-miss bound (every key's first use misses). */
double ms_locality_lru_hit(const ms_locality *loc, ms_loc_granularity g, ms_loc_scope s, ms_loc_reset r,
                           uint64_t entries);
/* Accesses a variant counted (its hit rate's denominator). */
uint64_t ms_locality_accesses(const ms_locality *loc, ms_loc_granularity g, ms_loc_scope s, ms_loc_reset r);
/* Fraction of decode accesses (steps >= 2) in reuse-distance bucket b; NaN
 * without such accesses. */
double ms_locality_reuse_bucket(const ms_locality *loc, int b);
/* Decode request entropy (bits, above); NaN without decode steps. */
double ms_locality_h_req_decode(const ms_locality *loc);
/* The bucket's label ("1", "2", "3-4", ..., ">=65", "none"). */
const char *ms_locality_bucket_name(int b);

/* The names used in JSON, targets and tables. */
const char *ms_loc_granularity_name(ms_loc_granularity g); /* "layer" | "global" */
const char *ms_loc_scope_name(ms_loc_scope s);             /* "decode" | "all" */
const char *ms_loc_reset_name(ms_loc_reset r);             /* "request" | "none" */

/* {"lru_layer": {"decode_reset_request": [hit at C = 1..J], ...},
 *  "lru_global": {VARIANT: {"fraction": [...], "hit": [...]}},
 *  "reuse_distance": {"1": f, ...}}: the per-layer curves whole, the global
 * ones at 1/32, 1/16, 1/8, 1/4, 3/8, 1/2 and 3/4 of L*J. */
cJSON *ms_locality_to_json(const ms_locality *loc);
/* A few readable lines (per-layer LRU at 1, 2, 4, ... J slots; global at the
 * fractions above; reuse distances). */
void ms_locality_print(const ms_locality *loc, FILE *out);

#endif
