/* Pure helpers of four baselines (docs/policies.md): the speculative
 * and transition prefetchers and the lru-slots and neighbor caches.  No
 * engine state: tests call these directly with hand-computed inputs. */
#ifndef MS_BASE_PREDICT_H
#define MS_BASE_PREDICT_H

#include <stdint.h>

#include "traces/format/trace.h"

/* Writes to out[] the ids of the (at most k) experts with the largest strictly
 * positive score[0..J), best first, ties to the lower id; returns how many.
 * Experts with score 0 are never chosen: nothing predicts them. */
uint32_t ms_base_top_positive(const double *score, uint32_t J, uint32_t k, uint32_t *out);

/* Scales score[0..J) to sum 1 (all zeros when the sum is 0). */
void ms_base_normalise(double *score, uint32_t J);

/* Co-activation counts of the transition predictor:
 * T[l][e][e'] = token rows that activated expert e at layer l and e' at
 * layer l + d (l + d < L). */
typedef struct {
    uint32_t L, J, K, d;
    double *T; /* [L][J][J] */
} ms_coact;

void ms_coact_init(ms_coact *c, uint32_t L, uint32_t J, uint32_t K, uint32_t d);
void ms_coact_free(ms_coact *c);
/* Adds one token row's routing, ids[L][K] laid out as a request's topk_ids
 * row (id -1 = missing, skipped), for source layer l only (nothing when
 * l + d >= L). */
void ms_coact_add_row_layer(ms_coact *c, const int32_t *ids, uint32_t l);
/* Adds one token row for every source layer. */
void ms_coact_add_row(ms_coact *c, const int32_t *ids);
/* out[J] = sum over experts[0..n) of T[l][e][*]: the unnormalised prediction
 * for layer l + d. */
void ms_coact_predict(const ms_coact *c, uint32_t l, const uint32_t *experts, uint32_t n, double *out);

/* 1 when layer l lies in the window [run, run + window) of running layer run;
 * with wrap the window continues at layer 0 of the next iteration (mod L). */
int ms_base_in_window(uint32_t run, uint32_t l, uint32_t window, uint32_t L, int wrap);

#endif
