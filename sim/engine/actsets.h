/* The activated sets of an iteration (engine-internal; loop.c builds them
 * through these, tests/unit/test_actsets.c checks them against the direct
 * per-layer build): per layer, the union of the top-k of every token row,
 * in order of first appearance (row, then slot), with the rows that routed
 * to each expert and their summed router weight.
 *
 * Rows are counted one whole row at a time (the trace stores a row's layers
 * together: ids[row][layer][k]) into per-expert scratch counters, then each
 * layer's list takes its counts.  Per layer the slots are visited in the
 * same order as a layer-by-layer build, so the lists, the counts and the
 * float sums (each expert's weights added in row order) are the same. */
#ifndef ENG_ACTSETS_H
#define ENG_ACTSETS_H

#include <stdint.h>

#include "policies/view.h"

typedef struct {
    uint32_t L, J, K;
    uint32_t *tok;   /* [L*J] scratch: rows counted so far; all 0 between builds */
    float *wsum;     /* [L*J] scratch: weights summed so far; all 0 between builds */
    ms_act *acts;    /* [L][J]: layer l's list at acts + l*J */
    uint32_t *n;     /* [L] list lengths */
} eng_actsets;

/* Starts a build: every list empty. */
void eng_actsets_begin(eng_actsets *s);
/* Counts `rows` consecutive rows of ids ([rows][L][K], negative = empty
 * slot) and their weights w (same layout; NULL: not read, sums stay 0). */
void eng_actsets_add_rows(eng_actsets *s, const int32_t *ids, const float *w, uint32_t rows);
/* Ends a build: each list's tokens and weight sums; for every listed
 * expert x = l*J + e, mark[x] = stamp and act_pos[x] = its index in the
 * list; the scratch back to 0. */
void eng_actsets_finish(eng_actsets *s, uint64_t *mark, uint64_t stamp, uint32_t *act_pos);

#endif
