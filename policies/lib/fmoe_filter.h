/* fMoE's trajectory search with a float filter (issue 18, branch i18m):
 * the same best entry and score as the exact in-order step of fmoe_store.c,
 * for stores whose maps and trajectory rows are finite and non-negative (gate
 * distributions, hit counts).
 *
 * The exact step adds P . m_y[l] (in double, term by term) to every entry's
 * dot product at every layer: a float-to-double conversion per stored value,
 * the scan's bottleneck, and the memory it streams.  The filtered step
 * keeps instead, per entry, a float estimate f_y of the dot product from a
 * bfloat16 copy of the maps (map16: half the bytes; float fused
 * multiply-adds, eight entries per instruction) and its estimated score a_y
 * = f_y x (1 / root_y).  With non-negative terms and no cancellation, a_y is
 * within a relative 2^-7.9 (plus an absolute term for underflow) of the exact
 * score times |traj|, so every entry whose exact score is the largest (or
 * tied with it) has a_y >= A (1 - 2^-6) - 2 eta, A = max a (the argument is
 * in fmoe_filter.c).  Only those candidates get their exact dot product: each
 * keeps how many layers its double dot holds (synced[y]) and is caught up
 * from the iteration's observed rows with the exact step's operations in the
 * exact step's order, so its dot is the exact step's bit for bit; then the
 * exact scores of the candidates, in index order, the first largest.  While
 * an iteration is filtered, dot[y] of the other entries lags:
 * fmoe_traj_sync brings every entry up to date (the exact paths call it
 * first).
 *
 * The filter needs a CPU with AVX2 and FMA (else the exact step runs); the
 * plain C version (fmaf) is for the tests. */
#ifndef MS_FMOE_FILTER_H
#define MS_FMOE_FILTER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "policies/lib/fmoe_store.h"

#define FMOE_FILTER_MIN 64 /* entries held below which the exact step runs (nothing to gain) */

/* bfloat16 of a finite float, rounded to nearest (ties to even): its top 16
 * bits after rounding; an infinity when it overflows. */
static inline uint16_t fmoe_bf16(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
static inline float fmoe_bf16_value(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}
/* Where entry t (< FMOE_BLOCK) of a block's term sits in map16: entries 0-3,
 * 8-11, 4-7, 12-15 in that order (what the AVX2 unpacking reads back as
 * 0-7 and 8-15). */
static inline uint32_t fmoe_bf16_pos(uint32_t t)
{
    return (t & 3u) | ((t >> 2 & 1u) << 3) | ((t >> 3 & 1u) << 2);
}

/* For every entry y of the nb blocks of a layer slice of map16 (J values per
 * entry, blocks of FMOE_BLOCK, fmoe_bf16_pos order): f[y] = fma(P[J-1], m,
 * ... fma(P[0], m, f[y])) in float with m the bfloat16 values, a[y] = f[y]
 * x invf[y]; returns the largest a[y] (+0 at least). */
typedef float fmoe_approx_fn(const uint16_t *layer, uint32_t J, const float *P, uint32_t nb, float *f,
                             const float *invf, float *a);
/* idx[0..k) = the y < n with a[y] >= thr, ascending; returns k. */
typedef uint32_t fmoe_pick_fn(const float *a, uint32_t n, float thr, uint32_t *idx);

/* The pick kernels, also the cosine filter's (fmoe_cosfilter.c): the plain
 * C one, and on x86-64 the AVX one (for CPUs with AVX). */
fmoe_pick_fn fmoe_pick_c;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
fmoe_pick_fn fmoe_pick_avx;
#endif

typedef struct fmoe_filter_kernels {
    fmoe_approx_fn *approx;
    fmoe_pick_fn *pick;
    const char *name; /* "c" or "avx2-fma" */
} fmoe_filter_kernels;

/* The AVX-FMA version when the CPU has both, else NULL (no filter). */
const fmoe_filter_kernels *fmoe_filter_pick(void);
/* Every version this CPU runs, the plain C one first (at most 2). */
size_t fmoe_filter_list(const fmoe_filter_kernels **out);

/* The in-order step of layer l (layers 0 .. l - 1 observed in order before)
 * by the filter: sets s->best and s->best_score and returns 1; or returns 0
 * when the filter does not apply (no filter kernels, fewer than
 * FMOE_FILTER_MIN entries, a negative or non-finite value, an earlier layer
 * of this iteration not filtered, ...), after fmoe_traj_sync: the caller
 * then runs the exact step. */
int fmoe_traj_filtered(fmoe_store *s, uint32_t l, const float *P);
/* Brings dot[y] of every held entry up to the layers observed (a no-op
 * unless the iteration is filtered); the iteration is no longer filtered. */
void fmoe_traj_sync(fmoe_store *s);

#endif
