/* A float filter for fMoE's whole-store cosine searches (issue 18, branch
 * i18p): RDY deduplication (fmoe_dedup) and the semantic search
 * (fmoe_semantic_search), with the same entry and score as the exact
 * searches bit for bit.
 *
 * Both searches compute, for every entry, double dot products of the query
 * with the entry's embedding (D values) and, for deduplication, its whole map
 * (L J values): a float-to-double conversion, a multiply and an add per
 * stored value and entry.  The filter first estimates every entry's score
 * (RDY, or the semantic cosine) from float sums (fused multiply-adds, eight
 * entries per instruction, from the floats the store holds) scaled by float
 * inverse norms.  Each estimate is within an absolute E of the exact
 * search's score, E = (|w| (N_e + 8) + |1 - w| (N_m + 8)) 2^-23 + 2^-30
 * (N_e, N_m: the query's embedding and map terms summed, w = d / L; the
 * semantic search: w = 1, no map), whatever the signs of the values (the
 * argument is in fmoe_cosfilter.c), so every entry with the largest exact
 * score (or tied with it) has an estimate >= A - 2 E, A the largest
 * estimate.  Only those candidates get the exact dot products, summed by the
 * store's scan kernels over their blocks in the exact search's order (a
 * block's sums are the whole scan's bit for bit), and the exact score by the
 * exact search's expression; the first largest, in index order, wins.
 *
 * It needs a CPU with AVX2 and FMA (fmoe_cosf_pick; else the exact searches
 * run), at least FMOE_COSF_MIN entries, finite values, every non-zero norm
 * (entries' and query's) within [2^-40, 2^40], at most 2^14 terms per dot
 * product and d <= L; else fmoe_dedup_filtered / fmoe_semantic_filtered
 * return 0 and the caller runs the exact search.  The plain C kernels are
 * for the tests. */
#ifndef MS_FMOE_COSFILTER_H
#define MS_FMOE_COSFILTER_H

#include <stddef.h>
#include <stdint.h>

#include "policies/lib/fmoe_store.h"

#define FMOE_COSF_MAX_TERMS 16384u /* N <= 2^14: N 2^-24 <= 2^-10 */
#define FMOE_COSF_MIN 32           /* entries held below which the exact searches run */
/* Deduplication is filtered only for maps of at most this many non-zero
 * terms: the float sums cost every term for every entry, while the staged
 * searches (fmoe_dedup_fstaged, fmoe_dedup_pruned) drop most entries after
 * their first stage.  Measured on the 1M-step bench traces
 * (docs/performance.md, "fMoE map store"): Mixtral-8x7B's 256-term maps gain
 * (dedup 791 -> 332 M instructions), Qwen1.5-MoE's 1,440-term maps lose
 * (fmoe+fmoe 4.3 -> 5.1 s).  Either way the result is the same entry. */
#define FMOE_COSF_DEDUP_MAX_TERMS 512u

/* out[b B + t] = fma(w[nc-1], v, ... fma(w[0], v, +0)) in float, v = value
 * cols[k] of entry t of block b (vals: blocks of `len` values per entry, B
 * = FMOE_BLOCK), for every block b < nb. */
typedef void fmoe_fscan_fn(const float *vals, size_t len, uint32_t nb, const uint32_t *cols, const float *w,
                           uint32_t nc, float *out);
/* est[y] = (fe[y] x ie[y]) x ae + (fm[y] x im[y]) x am for y < n, each
 * operation rounded to float (the map's term left out when fm is NULL);
 * returns the largest est[y] (-inf when n = 0). */
typedef float fmoe_estimate_fn(const float *fe, const float *ie, float ae, const float *fm, const float *im,
                               float am, uint32_t n, float *est);

/* idx[0..k) = the y < n with a[y] >= thr, ascending; returns k
 * (fmoe_filter.h's pick kernels). */
typedef uint32_t fmoe_cosf_pick_fn(const float *a, uint32_t n, float thr, uint32_t *idx);

typedef struct fmoe_cosf_kernels {
    fmoe_fscan_fn *fscan;
    fmoe_estimate_fn *estimate;
    fmoe_cosf_pick_fn *pick;
    /* fscan's chains continued from out's values instead of +0: fscan of
     * terms [0, k) then fscan_more of [k, nc) is fscan over [0, nc) bit for
     * bit (deduplication's float stages, fmoe_dedup.c) */
    fmoe_fscan_fn *fscan_more;
    const char *name; /* "c" or "avx2-fma" */
} fmoe_cosf_kernels;

/* The AVX2-FMA version when the CPU has both, else NULL (no filter). */
const fmoe_cosf_kernels *fmoe_cosf_pick(void);
/* Every version this CPU runs, the plain C one first (at most 2). */
size_t fmoe_cosf_list(const fmoe_cosf_kernels **out);

/* Whether an entry with these norms (sqrt of the double sums of squares) can
 * be filtered: each 0 or within [2^-40, 2^40]. */
int fmoe_cosf_norms_ok(double emb_norm, double map_norm);

/* Whether the bound above holds for a query of squared norms ee (its
 * embedding, 0 when D = 0) and mm (its map) on this store: the filter's
 * kernels, its guards on the store and the query (the float stages of
 * fmoe_dedup.c take the same). */
int fmoe_cosf_applies(const fmoe_store *s, double ee, double mm);

/* fmoe_dedup_full's entry for (emb, map) (n > 0), by the filter: returns 1
 * and sets *out, or 0 when the filter does not apply (see above). */
int fmoe_dedup_filtered(fmoe_store *s, const float *emb, const float *map, uint32_t *out);
/* The same with the map's terms already in s->cols, s->w and s->wf
 * (fmoe_map_terms: nm of them; fmoe_dedup computes them once for every
 * search it tries); they are left there. */
int fmoe_dedup_filtered_terms(fmoe_store *s, const float *emb, const float *map, uint32_t nm, uint32_t *out);
/* fmoe_semantic_search's entry and score, by the filter: returns 1 and sets
 * *best and *score, or 0 when the filter does not apply. */
int fmoe_semantic_filtered(fmoe_store *s, const float *e_new, int *best, double *score);

#endif
