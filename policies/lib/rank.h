/* Ranking helpers shared by score-based prefetchers. */
#ifndef MS_RANK_H
#define MS_RANK_H

#include <stdint.h>

#include "policies/policy.h"

typedef struct {
    double score;
    uint32_t e;
} ms_scored;

/* Puts the k best of s[0..n) (score descending, ties to the lower id; no NaN)
 * into s[0..k) in that order: what a full sort would put there.  s[k..n)
 * keeps the other entries in an unspecified order.  One pass keeping the best
 * k found so far: O(n) when few entries enter them, O(n k) at worst. */
void ms_rank_first(ms_scored *s, uint32_t n, uint32_t k);

/* Prefetches the k experts of layer t with the highest score (ties to the
 * lower id); the best gets priority k, the next k-1, ... */
void ms_prefetch_top_scored(ms_view *v, uint32_t t, const double *score, uint32_t J, uint32_t k);

#endif
