/* The inner loops of fMoE's map store (fmoe_store.h), vectorised across
 * entries.  Values are stored in blocks of FMOE_BLOCK entries, entries-minor:
 * value i of entry y at block(y / FMOE_BLOCK)[i x FMOE_BLOCK + y % FMOE_BLOCK].
 * Every kernel gives exactly what the scalar loop, one entry at a time, gives:
 * vector lanes are entries, each entry's sum is added term by term in the
 * scalar order, with no fused multiply-add.  On x86-64 fmoe_kernels_pick
 * returns the AVX versions when the CPU has AVX, else SSE2 ones; elsewhere
 * plain C loops. */
#ifndef MS_FMOE_SCAN_H
#define MS_FMOE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#define FMOE_BLOCK 16 /* entries per block: 64 bytes of floats per stored value */

/* out[b B + t] = sum over k < nc, in k's order, of w[k] x vals[b][first + cols[k]][t]
 * (sum from +0), for every block b < nb; vals holds blocks of `len` values
 * per entry (B = FMOE_BLOCK). */
typedef void fmoe_scan_fn(const float *vals, size_t len, size_t first, uint32_t nb, const uint32_t *cols,
                          const double *w, uint32_t nc, double *out);

/* One trajectory step over entries y < n: dot[y] += acc[y]; norm2[y] += rn[y];
 * score[y] = traj_norm2 > 0 && norm2[y] > 0 ? dot[y] / (sqrt(traj_norm2)
 * sqrt(norm2[y])) : 0, with sqrt(norm2[y]) read from sq[y] when sq is not
 * NULL (the caller's sqrt of the very value norm2[y] takes).  Returns y* =
 * the first index of the largest score (*best its score), or -1 when n = 0
 * or a score is NaN (then the caller scans score[] itself: NaN never
 * compares greater). */
typedef int fmoe_traj_fn(double *dot, double *norm2, double *score, const double *acc, const double *rn,
                         const double *sq, uint32_t n, double traj_norm2, double *best);

/* The cached roots of one layer for traj_scan: sq[y] = sqrt of entry y's
 * prefix norm over layers 0..l, inv[y] = 1 / sq[y] (0 where sq[y] = 0),
 * floor <= every positive sq[y]; tmp: scratch of n doubles. */
typedef struct {
    const double *sq, *inv;
    double floor;
    double *tmp;
} fmoe_roots;

/* One in-order trajectory step fused with the scan of its layer (issue 18,
 * i18f): for every entry y < n, acc = the scan's sum of w[k] x value
 * first + cols[k] of entry y (from +0, k in order) and dot[y] += acc; then
 * y* = the first index of the largest score dot[y] / (sqrt(traj_norm2)
 * sq[y]) (0 unless traj_norm2 > 0 and sq[y] > 0), *best its score: the same
 * operations as scan then traj with sq (sq[y] > 0 exactly when the norm2[y]
 * whose root it is is), without the acc, norm2 and score arrays.  The AVX
 * version divides only for the candidates (see fmoe_scan.c).  Returns -1
 * when n = 0, when a score is NaN, or when the AVX version's filter cannot
 * decide (values near the ends of the double range): the caller then
 * computes every score from dot and takes the first largest. */
typedef int fmoe_traj_scan_fn(const float *vals, size_t len, size_t first, const uint32_t *cols, const double *w,
                              uint32_t nc, double *dot, const fmoe_roots *r, uint32_t n, double traj_norm2,
                              double *best);

typedef struct {
    fmoe_scan_fn *scan;
    fmoe_traj_fn *traj;
    /* scan's sums continued from out's values instead of +0: a scan of terms
     * [0, k) then scan_more of terms [k, nc) gives scan's result over [0, nc)
     * bit for bit (the same additions in the same order). */
    fmoe_scan_fn *scan_more;
    fmoe_traj_scan_fn *traj_scan; /* NULL: the caller runs scan, then traj (SSE2) */
    const char *name; /* "avx", "sse2" or "c" */
} fmoe_kernels;

const fmoe_kernels *fmoe_kernels_pick(void);
/* Every version this CPU can run, the plain C one first (at most 3), for the
 * tests that compare them; returns their count. */
size_t fmoe_kernels_list(const fmoe_kernels **out);

#endif
