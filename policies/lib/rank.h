/* Ranking helpers shared by score-based prefetchers. */
#ifndef MS_RANK_H
#define MS_RANK_H

#include <stdint.h>

#include "policies/policy.h"

/* Prefetches the k experts of layer t with the highest score (ties to the
 * lower id); the best gets priority k, the next k-1, ... */
void ms_prefetch_top_scored(ms_view *v, uint32_t t, const double *score, uint32_t J, uint32_t k);

#endif
