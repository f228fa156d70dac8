/* The activated sets of an iteration, counted row by row (actsets.h). */
#include <string.h>

#include "sim/engine/actsets.h"

void eng_actsets_begin(eng_actsets *s)
{
    memset(s->n, 0, s->L * sizeof *s->n);
}

/* One row's slots of every layer.  Only an expert's first slot touches its
 * list; every slot adds to its counter (and weight sum when w is given:
 * inlined twice, so the test of w leaves the loop). */
static inline void add_row(const int32_t *restrict ids, const float *restrict w, uint32_t L, uint32_t J, uint32_t K,
                           uint32_t *restrict tok, float *restrict wsum, ms_act *restrict acts, uint32_t *restrict n)
{
    for (uint32_t l = 0, x0 = 0; l < L; l++, x0 += J, ids += K) {
        for (uint32_t k = 0; k < K; k++) {
            int32_t e = ids[k];
            if (e < 0)
                continue;
            uint32_t x = x0 + (uint32_t)e;
            if (tok[x]++ == 0)
                acts[x0 + n[l]++].expert = (uint32_t)e;
            if (w)
                wsum[x] += w[(size_t)l * K + k];
        }
    }
}

/* Rows [0, rows) with top-k k (a constant where the caller's K is 2, 4, 6
 * or 8: the slot loop unrolls) and weights when w is not NULL. */
static inline void add_rows(const eng_actsets *s, const int32_t *ids, const float *w, uint32_t rows, uint32_t k)
{
    size_t stride = (size_t)s->L * k;
    if (w)
        for (uint32_t r = 0; r < rows; r++)
            add_row(ids + r * stride, w + r * stride, s->L, s->J, k, s->tok, s->wsum, s->acts, s->n);
    else
        for (uint32_t r = 0; r < rows; r++)
            add_row(ids + r * stride, NULL, s->L, s->J, k, s->tok, s->wsum, s->acts, s->n);
}

void eng_actsets_add_rows(eng_actsets *s, const int32_t *ids, const float *w, uint32_t rows)
{
    switch (s->K) {
    case 2:
        add_rows(s, ids, w, rows, 2);
        break;
    case 4:
        add_rows(s, ids, w, rows, 4);
        break;
    case 6:
        add_rows(s, ids, w, rows, 6);
        break;
    case 8:
        add_rows(s, ids, w, rows, 8);
        break;
    default:
        add_rows(s, ids, w, rows, s->K);
    }
}

void eng_actsets_finish(eng_actsets *s, uint64_t *mark, uint64_t stamp, uint32_t *act_pos)
{
    for (uint32_t l = 0, x0 = 0; l < s->L; l++, x0 += s->J) {
        ms_act *acts = s->acts + x0;
        for (uint32_t i = 0; i < s->n[l]; i++) {
            uint32_t x = x0 + acts[i].expert;
            acts[i].tokens = s->tok[x];
            acts[i].weight_sum = s->wsum[x];
            s->tok[x] = 0;
            s->wsum[x] = 0.0f;
            mark[x] = stamp;
            act_pos[x] = i;
        }
    }
}
