/* Internals shared by the map store's files (fmoe_store.c, fmoe_dedup.c):
 * the sums of fmoe_cosine, each in its order, and the query's terms.  Not
 * for policies: they read fmoe_store.h. */
#ifndef MS_FMOE_STORE_PRIV_H
#define MS_FMOE_STORE_PRIV_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "policies/lib/fmoe_store.h"

/* |a|^2 summed in fmoe_cosine's order. */
static inline double fmoe_norm2_of(const float *a, size_t n)
{
    double aa = 0;
    for (size_t i = 0; i < n; i++)
        aa += (double)a[i] * a[i];
    return aa;
}

/* fmoe_cosine's result from its three sums, sqrt(bb) given: the same value,
 * as sqrt is exact (correctly rounded). */
static inline double fmoe_cosine_of(double ab, double aa, double bb, double sqrt_bb)
{
    return aa > 0 && bb > 0 ? ab / (sqrt(aa) * sqrt_bb) : 0.0;
}

/* Entry y's semantic score in deduplication, as fmoe_dedup_full computes it
 * from dot_e[y], the embedding dot product, and ee = |query|^2 (0 when
 * D = 0). */
static inline double fmoe_sem_of(const fmoe_store *s, uint32_t y, const double *dot_e, double ee)
{
    return s->D ? fmoe_cosine_of(dot_e[y], ee, s->emb_norm2[y], s->emb_norm[y]) : 0.0;
}

/* RDY of entry y from its semantic score and map dot product ab, mm =
 * |query map|^2 (fmoe_dedup_full's expression). */
static inline double fmoe_rdy_of(const fmoe_store *s, uint32_t y, double sem, double ab, double mm)
{
    return fmoe_rdy(s->d, s->L, sem, fmoe_cosine_of(ab, mm, s->map_norm2[y], s->map_norm[y]));
}

/* The query's terms to sum into s->cols / s->w: the non-zero ones while
 * every stored value is finite (a zero term then adds +-0 to a sum that is
 * never -0: no change), else all of them.  Returns their count. */
uint32_t fmoe_query_terms(fmoe_store *s, const float *q, uint32_t n);
/* The same for a whole map query (map[L J]), each term's column the
 * layer-major one (fmoe_map_col): the kernels then read s->map with len = J,
 * first = 0.  s->wf gets the values as floats too (the float filters'). */
uint32_t fmoe_map_terms(fmoe_store *s, const float *map);
/* The same for a deduplication query's embedding (emb[D]) into s->ecols,
 * s->ew and s->ewf, so that s->cols keeps the map's terms. */
uint32_t fmoe_emb_terms(fmoe_store *s, const float *emb);

/* out[y] = q[0..n) . (values first .. first + n - 1 of entry y), summed from
 * +0 in index order, for every held entry (out is written up to the end of
 * the last held block; the empty slots there give 0). */
void fmoe_scan_query(fmoe_store *s, const float *vals, size_t len, size_t first, const float *q, uint32_t n,
                     double *out);

int fmoe_all_finite(const float *v, size_t n);

#endif
