#include "policies/lib/fmoe_scan.h"

#include <math.h>

/* Products and sums rounded one by one: no fused multiply-add (GCC does not
 * contract in ISO C mode; clang would). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define B FMOE_BLOCK

/* ---- plain C (every target; the reference of the vector versions) ---- */

/* more = 1: the sums continue from out's values (the same additions, in the
 * same order, as one scan over the terms before and these). */
static void scan1_from(const float *restrict vals, size_t len, size_t first, uint32_t nb,
                       const uint32_t *restrict cols, const double *restrict w, uint32_t nc, double *restrict out,
                       int more)
{
    for (uint32_t b = 0; b < nb; b++) {
        const float *blk = vals + ((size_t)b * len + first) * B;
        double *o = out + (size_t)b * B;
        for (uint32_t t = 0; t < B && !more; t++)
            o[t] = 0;
        for (uint32_t k = 0; k < nc; k++)
            for (uint32_t t = 0; t < B; t++)
                o[t] += w[k] * (double)blk[(size_t)cols[k] * B + t];
    }
}

static void scan1(const float *vals, size_t len, size_t first, uint32_t nb, const uint32_t *cols, const double *w,
                  uint32_t nc, double *out)
{
    scan1_from(vals, len, first, nb, cols, w, nc, out, 0);
}

static void scan1_more(const float *vals, size_t len, size_t first, uint32_t nb, const uint32_t *cols,
                       const double *w, uint32_t nc, double *out)
{
    scan1_from(vals, len, first, nb, cols, w, nc, out, 1);
}

/* Trajectory steps of entries [y0, n), one at a time, folded into the best
 * (*by, *bc) with fmoe_traj_best's rule; returns 1 when a score is NaN. */
static int traj_tail(double *dot, double *norm2, double *score, const double *acc, const double *rn,
                     const double *sq, uint32_t y0, uint32_t n, double traj_norm2, int *by, double *bc)
{
    double st = sqrt(traj_norm2);
    int nan = 0;
    for (uint32_t y = y0; y < n; y++) {
        dot[y] += acc[y];
        norm2[y] += rn[y];
        double c = traj_norm2 > 0 && norm2[y] > 0 ? dot[y] / (st * (sq ? sq[y] : sqrt(norm2[y]))) : 0.0;
        score[y] = c;
        nan |= isnan(c);
        if (*by < 0 || c > *bc) {
            *by = (int)y;
            *bc = c;
        }
    }
    return nan;
}

static int traj1(double *dot, double *norm2, double *score, const double *acc, const double *rn, const double *sq,
                 uint32_t n, double traj_norm2, double *best)
{
    int by = -1;
    double bc = 0;
    if (traj_tail(dot, norm2, score, acc, rn, sq, 0, n, traj_norm2, &by, &bc) || by < 0)
        return -1;
    *best = bc;
    return by;
}

/* The in-order step of entries [y0, n) from their sums acc[y - y0], one at a
 * time: dot only (sq given), folded into (*by, *bc) with traj's rule;
 * returns 1 when a score is NaN. */
static int traj_sq_tail(double *dot, const double *acc, const double *sq, uint32_t y0, uint32_t n, double traj_norm2,
                        int *by, double *bc)
{
    double st = sqrt(traj_norm2);
    int nan = 0;
    for (uint32_t y = y0; y < n; y++) {
        dot[y] += acc[y - y0];
        double c = traj_norm2 > 0 && sq[y] > 0 ? dot[y] / (st * sq[y]) : 0.0;
        nan |= isnan(c);
        if (*by < 0 || c > *bc) {
            *by = (int)y;
            *bc = c;
        }
    }
    return nan;
}

static int traj_scan1(const float *vals, size_t len, size_t first, const uint32_t *cols, const double *w, uint32_t nc,
                      double *dot, const fmoe_roots *r, uint32_t n, double traj_norm2, double *best)
{
    const double *sq = r->sq;
    int by = -1, nan = 0;
    double bc = 0, acc[B];
    for (uint32_t y0 = 0; y0 < n; y0 += B) {
        scan1(vals + (size_t)(y0 / B) * len * B, len, first, 1, cols, w, nc, acc);
        nan |= traj_sq_tail(dot, acc, sq, y0, y0 + B < n ? y0 + B : n, traj_norm2, &by, &bc);
    }
    if (nan || by < 0)
        return -1;
    *best = bc;
    return by;
}

static const fmoe_kernels kernels_c = {scan1, traj1, scan1_more, traj_scan1, "c"};

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>

/* The lanes' bests (value v[l], index ix[l], -1 for none: each the first of
 * its lane's largest) folded into one: the largest, ties to the lower index. */
static void fold_lanes(const double *v, const double *ix, int lanes, int *by, double *bc)
{
    for (int l = 0; l < lanes; l++) {
        int i = (int)ix[l];
        if (i >= 0 && (*by < 0 || v[l] > *bc || (v[l] == *bc && i < *by))) {
            *by = i;
            *bc = v[l];
        }
    }
}

/* The vector part's bests, then the tail one at a time (higher indices: they
 * win only when strictly greater). */
static int traj_finish(const double *v, const double *ix, int lanes, int nan, double *dot, double *norm2,
                       double *score, const double *acc, const double *rn, const double *sq, uint32_t y0, uint32_t n,
                       double traj_norm2, double *best)
{
    int by = -1;
    double bc = 0;
    fold_lanes(v, ix, lanes, &by, &bc);
    nan |= traj_tail(dot, norm2, score, acc, rn, sq, y0, n, traj_norm2, &by, &bc);
    if (nan || by < 0)
        return -1;
    *best = bc;
    return by;
}

/* Two floats at p as two doubles (cvtps2pd of a 64-bit load). */
static inline __m128d cvt2(const float *p)
{
    return _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}

static void scan2_from(const float *restrict vals, size_t len, size_t first, uint32_t nb,
                       const uint32_t *restrict cols, const double *restrict w, uint32_t nc, double *restrict out,
                       int more)
{
    for (uint32_t b = 0; b < nb; b++) {
        const float *blk = vals + ((size_t)b * len + first) * B;
        __m128d a[8];
        for (int t = 0; t < 8; t++)
            a[t] = more ? _mm_loadu_pd(out + (size_t)b * B + 2 * t) : _mm_setzero_pd();
        for (uint32_t k = 0; k < nc; k++) {
            const float *v = blk + (size_t)cols[k] * B;
            __m128d x = _mm_set1_pd(w[k]);
            a[0] = _mm_add_pd(a[0], _mm_mul_pd(x, cvt2(v + 0)));
            a[1] = _mm_add_pd(a[1], _mm_mul_pd(x, cvt2(v + 2)));
            a[2] = _mm_add_pd(a[2], _mm_mul_pd(x, cvt2(v + 4)));
            a[3] = _mm_add_pd(a[3], _mm_mul_pd(x, cvt2(v + 6)));
            a[4] = _mm_add_pd(a[4], _mm_mul_pd(x, cvt2(v + 8)));
            a[5] = _mm_add_pd(a[5], _mm_mul_pd(x, cvt2(v + 10)));
            a[6] = _mm_add_pd(a[6], _mm_mul_pd(x, cvt2(v + 12)));
            a[7] = _mm_add_pd(a[7], _mm_mul_pd(x, cvt2(v + 14)));
        }
        for (int t = 0; t < 8; t++)
            _mm_storeu_pd(out + (size_t)b * B + 2 * t, a[t]);
    }
}

static void scan2(const float *vals, size_t len, size_t first, uint32_t nb, const uint32_t *cols, const double *w,
                  uint32_t nc, double *out)
{
    scan2_from(vals, len, first, nb, cols, w, nc, out, 0);
}

static void scan2_more(const float *vals, size_t len, size_t first, uint32_t nb, const uint32_t *cols,
                       const double *w, uint32_t nc, double *out)
{
    scan2_from(vals, len, first, nb, cols, w, nc, out, 1);
}

/* The same with four lanes: AVX (vcvtps2pd, vmulpd, vaddpd; no FMA).  Two
 * blocks at a time: eight independent sums in flight hide the add latency. */
#define FMOE_AVX_TERM(acc, blk, off) \
    acc = _mm256_add_pd(acc, _mm256_mul_pd(x, _mm256_cvtps_pd(_mm_loadu_ps((blk) + (off)))))

/* The starting sums of out[off .. off + 4): zero, or out's (more = 1). */
#define FMOE_AVX_START(off) (more ? _mm256_loadu_pd(o + (off)) : _mm256_setzero_pd())

__attribute__((target("avx"))) static inline void scan4_from(const float *restrict vals, size_t len, size_t first,
                                                             uint32_t nb, const uint32_t *restrict cols,
                                                             const double *restrict w, uint32_t nc,
                                                             double *restrict out, int more)
{
    uint32_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const float *p = vals + ((size_t)b * len + first) * B, *q = p + len * B;
        double *o = out + (size_t)b * B;
        __m256d a0 = FMOE_AVX_START(0), a1 = FMOE_AVX_START(4), a2 = FMOE_AVX_START(8), a3 = FMOE_AVX_START(12);
        __m256d a4 = FMOE_AVX_START(16), a5 = FMOE_AVX_START(20), a6 = FMOE_AVX_START(24), a7 = FMOE_AVX_START(28);
        for (uint32_t k = 0; k < nc; k++) {
            size_t c = (size_t)cols[k] * B;
            __m256d x = _mm256_set1_pd(w[k]);
            FMOE_AVX_TERM(a0, p + c, 0);
            FMOE_AVX_TERM(a1, p + c, 4);
            FMOE_AVX_TERM(a2, p + c, 8);
            FMOE_AVX_TERM(a3, p + c, 12);
            FMOE_AVX_TERM(a4, q + c, 0);
            FMOE_AVX_TERM(a5, q + c, 4);
            FMOE_AVX_TERM(a6, q + c, 8);
            FMOE_AVX_TERM(a7, q + c, 12);
        }
        _mm256_storeu_pd(o + 0, a0);
        _mm256_storeu_pd(o + 4, a1);
        _mm256_storeu_pd(o + 8, a2);
        _mm256_storeu_pd(o + 12, a3);
        _mm256_storeu_pd(o + 16, a4);
        _mm256_storeu_pd(o + 20, a5);
        _mm256_storeu_pd(o + 24, a6);
        _mm256_storeu_pd(o + 28, a7);
    }
    if (b < nb) {
        const float *p = vals + ((size_t)b * len + first) * B;
        double *o = out + (size_t)b * B;
        __m256d a0 = FMOE_AVX_START(0), a1 = FMOE_AVX_START(4), a2 = FMOE_AVX_START(8), a3 = FMOE_AVX_START(12);
        for (uint32_t k = 0; k < nc; k++) {
            size_t c = (size_t)cols[k] * B;
            __m256d x = _mm256_set1_pd(w[k]);
            FMOE_AVX_TERM(a0, p + c, 0);
            FMOE_AVX_TERM(a1, p + c, 4);
            FMOE_AVX_TERM(a2, p + c, 8);
            FMOE_AVX_TERM(a3, p + c, 12);
        }
        _mm256_storeu_pd(o + 0, a0);
        _mm256_storeu_pd(o + 4, a1);
        _mm256_storeu_pd(o + 8, a2);
        _mm256_storeu_pd(o + 12, a3);
    }
}

__attribute__((target("avx"))) static void scan4(const float *vals, size_t len, size_t first, uint32_t nb,
                                                 const uint32_t *cols, const double *w, uint32_t nc, double *out)
{
    scan4_from(vals, len, first, nb, cols, w, nc, out, 0);
}

__attribute__((target("avx"))) static void scan4_more(const float *vals, size_t len, size_t first, uint32_t nb,
                                                      const uint32_t *cols, const double *w, uint32_t nc,
                                                      double *out)
{
    scan4_from(vals, len, first, nb, cols, w, nc, out, 1);
}

static int traj2(double *dot, double *norm2, double *score, const double *acc, const double *rn, const double *sq,
                 uint32_t n, double traj_norm2, double *best)
{
    const __m128d zero = _mm_setzero_pd(), st = _mm_set1_pd(sqrt(traj_norm2)), step = _mm_set1_pd(2);
    __m128d bv = _mm_set1_pd(-INFINITY), bi = _mm_set1_pd(-1), idx = _mm_set_pd(1, 0), bad = zero;
    int pos = traj_norm2 > 0;
    uint32_t y = 0;
    for (; y + 2 <= n; y += 2) {
        __m128d d = _mm_add_pd(_mm_loadu_pd(dot + y), _mm_loadu_pd(acc + y));
        __m128d q = _mm_add_pd(_mm_loadu_pd(norm2 + y), _mm_loadu_pd(rn + y));
        _mm_storeu_pd(dot + y, d);
        _mm_storeu_pd(norm2 + y, q);
        /* norm2 = 0 gives 0/0 or x/0 in the lane, then masked to +0 */
        __m128d r = sq ? _mm_loadu_pd(sq + y) : _mm_sqrt_pd(q);
        __m128d c = pos ? _mm_and_pd(_mm_cmpgt_pd(q, zero), _mm_div_pd(d, _mm_mul_pd(st, r))) : zero;
        _mm_storeu_pd(score + y, c);
        bad = _mm_or_pd(bad, _mm_cmpunord_pd(c, c));
        __m128d gt = _mm_cmpgt_pd(c, bv);
        bv = _mm_or_pd(_mm_and_pd(gt, c), _mm_andnot_pd(gt, bv));
        bi = _mm_or_pd(_mm_and_pd(gt, idx), _mm_andnot_pd(gt, bi));
        idx = _mm_add_pd(idx, step);
    }
    double v[2], ix[2];
    _mm_storeu_pd(v, bv);
    _mm_storeu_pd(ix, bi);
    return traj_finish(v, ix, 2, _mm_movemask_pd(bad) != 0, dot, norm2, score, acc, rn, sq, y, n, traj_norm2, best);
}

__attribute__((target("avx"))) static int traj4(double *dot, double *norm2, double *score, const double *acc,
                                                const double *rn, const double *sq, uint32_t n, double traj_norm2,
                                                double *best)
{
    const __m256d zero = _mm256_setzero_pd(), st = _mm256_set1_pd(sqrt(traj_norm2)), step = _mm256_set1_pd(4);
    __m256d bv = _mm256_set1_pd(-INFINITY), bi = _mm256_set1_pd(-1), idx = _mm256_set_pd(3, 2, 1, 0), bad = zero;
    int pos = traj_norm2 > 0;
    uint32_t y = 0;
    for (; y + 4 <= n; y += 4) {
        __m256d d = _mm256_add_pd(_mm256_loadu_pd(dot + y), _mm256_loadu_pd(acc + y));
        __m256d q = _mm256_add_pd(_mm256_loadu_pd(norm2 + y), _mm256_loadu_pd(rn + y));
        _mm256_storeu_pd(dot + y, d);
        _mm256_storeu_pd(norm2 + y, q);
        __m256d r = sq ? _mm256_loadu_pd(sq + y) : _mm256_sqrt_pd(q);
        __m256d c = pos ? _mm256_and_pd(_mm256_cmp_pd(q, zero, _CMP_GT_OQ), _mm256_div_pd(d, _mm256_mul_pd(st, r)))
                        : zero;
        _mm256_storeu_pd(score + y, c);
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(c, c, _CMP_UNORD_Q));
        __m256d gt = _mm256_cmp_pd(c, bv, _CMP_GT_OQ);
        bv = _mm256_or_pd(_mm256_and_pd(gt, c), _mm256_andnot_pd(gt, bv)); /* and/or: GCC 12 lowers blendv badly */
        bi = _mm256_or_pd(_mm256_and_pd(gt, idx), _mm256_andnot_pd(gt, bi));
        idx = _mm256_add_pd(idx, step);
    }
    double v[4], ix[4];
    _mm256_storeu_pd(v, bv);
    _mm256_storeu_pd(ix, bi);
    return traj_finish(v, ix, 4, _mm256_movemask_pd(bad) != 0, dot, norm2, score, acc, rn, sq, y, n, traj_norm2,
                       best);
}

/* The AVX step without a division per entry.  Pass 1 adds each block's sums
 * to dot (as traj4) and keeps a[y] = dot[y] x inv[y], the score without its
 * common factor 1 / sqrt(traj_norm2) up to the rounding of two products
 * instead of a product and a quotient: |a[y] - st c[y]| <= 5 u |a[y]| with
 * u = 2^-53 while no value leaves the normal range (st = sqrt(traj_norm2),
 * c[y] the score as traj computes it; an entry with sq = 0 has a = +-0 and
 * c = 0).  So the first largest score is among the entries whose a[y] is at
 * least A - 2^-40 |A|, A = max a (a score larger or equal has a within 10 u
 * of the largest a, whatever its sign), and pass 2 computes the exact score
 * of those only, in index order, with traj's rule.  Guards, so that every
 * value involved stays normal (scores of the size 2^-900 .. 2^900): st
 * within 2^-300 .. 2^300 and floor >= 2^-300, else the exact loop of the C
 * version; |A| within 2^-600 .. 2^600 and no NaN, else -1 (the caller's
 * exact scan).  An entry whose a is far below |A| in size cannot have the
 * largest score: that needs |a| >= |A| (1 - 10 u) when A < 0, and when
 * A > 0 its score is below the normal-range score of A's entry. */
#define FMOE_AVX_RATIO(acc, y)                                                                                     \
    do {                                                                                                           \
        __m256d d_ = _mm256_add_pd(_mm256_loadu_pd(dot + (y)), acc);                                               \
        _mm256_storeu_pd(dot + (y), d_);                                                                           \
        __m256d a_ = _mm256_mul_pd(d_, _mm256_loadu_pd(inv + (y)));                                                \
        _mm256_storeu_pd(tmp + (y), a_);                                                                           \
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(a_, a_, _CMP_UNORD_Q));                                              \
        top = _mm256_max_pd(top, a_);                                                                              \
    } while (0)

#define FMOE_ST_LO 0x1p-300 /* st and floor at least this, st at most FMOE_ST_HI */
#define FMOE_ST_HI 0x1p300
#define FMOE_A_LO 0x1p-600  /* |A| within these */
#define FMOE_A_HI 0x1p600
#define FMOE_FILTER_TOL 0x1p-40

/* Pass 2: the exact scores of the entries with tmp[y] >= thr, folded by
 * traj's rule (ascending y, the first of the largest). */
__attribute__((target("avx"))) static int traj_candidates(const double *dot, const double *sq, const double *tmp,
                                                          uint32_t n, double st, double thr, double *best)
{
    const __m256d t = _mm256_set1_pd(thr);
    int by = -1;
    double bc = 0;
    uint32_t y = 0;
    for (; y + 4 <= n; y += 4) {
        int m = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(tmp + y), t, _CMP_GE_OQ));
        for (; m; m &= m - 1) {
            uint32_t i = y + (uint32_t)__builtin_ctz((unsigned)m);
            double c = sq[i] > 0 ? dot[i] / (st * sq[i]) : 0.0;
            if (by < 0 || c > bc) {
                by = (int)i;
                bc = c;
            }
        }
    }
    for (; y < n; y++)
        if (tmp[y] >= thr) {
            double c = sq[y] > 0 ? dot[y] / (st * sq[y]) : 0.0;
            if (by < 0 || c > bc) {
                by = (int)y;
                bc = c;
            }
        }
    *best = bc;
    return by;
}

/* scan4 and the step in one pass over whole blocks (two at a time, as
 * scan4), each block's sums going straight into its entries' dot; the last,
 * partial block by scan4_from into a buffer. */
__attribute__((target("avx"))) static int traj_scan4(const float *vals, size_t len, size_t first,
                                                     const uint32_t *restrict cols, const double *restrict w,
                                                     uint32_t nc, double *restrict dot, const fmoe_roots *r,
                                                     uint32_t n, double traj_norm2, double *best)
{
    const double *restrict inv = r->inv;
    double *restrict tmp = r->tmp, st = sqrt(traj_norm2);
    if (n == 0 || !(r->floor >= FMOE_ST_LO && st >= FMOE_ST_LO && st <= FMOE_ST_HI))
        return traj_scan1(vals, len, first, cols, w, nc, dot, r, n, traj_norm2, best); /* exact, one at a time */
    const __m256d zero = _mm256_setzero_pd();
    __m256d top = _mm256_set1_pd(-INFINITY), bad = zero;
    uint32_t full = n / B, b = 0;
    for (; b + 2 <= full; b += 2) {
        const float *p = vals + ((size_t)b * len + first) * B, *q = p + len * B;
        __m256d a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero, a7 = zero;
        for (uint32_t k = 0; k < nc; k++) {
            size_t c = (size_t)cols[k] * B;
            __m256d x = _mm256_set1_pd(w[k]);
            FMOE_AVX_TERM(a0, p + c, 0);
            FMOE_AVX_TERM(a1, p + c, 4);
            FMOE_AVX_TERM(a2, p + c, 8);
            FMOE_AVX_TERM(a3, p + c, 12);
            FMOE_AVX_TERM(a4, q + c, 0);
            FMOE_AVX_TERM(a5, q + c, 4);
            FMOE_AVX_TERM(a6, q + c, 8);
            FMOE_AVX_TERM(a7, q + c, 12);
        }
        uint32_t y = b * B;
        FMOE_AVX_RATIO(a0, y);
        FMOE_AVX_RATIO(a1, y + 4);
        FMOE_AVX_RATIO(a2, y + 8);
        FMOE_AVX_RATIO(a3, y + 12);
        FMOE_AVX_RATIO(a4, y + 16);
        FMOE_AVX_RATIO(a5, y + 20);
        FMOE_AVX_RATIO(a6, y + 24);
        FMOE_AVX_RATIO(a7, y + 28);
    }
    if (b < full) {
        const float *p = vals + ((size_t)b * len + first) * B;
        __m256d a0 = zero, a1 = zero, a2 = zero, a3 = zero;
        for (uint32_t k = 0; k < nc; k++) {
            size_t c = (size_t)cols[k] * B;
            __m256d x = _mm256_set1_pd(w[k]);
            FMOE_AVX_TERM(a0, p + c, 0);
            FMOE_AVX_TERM(a1, p + c, 4);
            FMOE_AVX_TERM(a2, p + c, 8);
            FMOE_AVX_TERM(a3, p + c, 12);
        }
        uint32_t y = b * B;
        FMOE_AVX_RATIO(a0, y);
        FMOE_AVX_RATIO(a1, y + 4);
        FMOE_AVX_RATIO(a2, y + 8);
        FMOE_AVX_RATIO(a3, y + 12);
        b++;
    }
    double v[4], A = -INFINITY;
    int nan = _mm256_movemask_pd(bad) != 0;
    _mm256_storeu_pd(v, top);
    for (int i = 0; i < 4; i++)
        A = v[i] > A ? v[i] : A;
    if (b * B < n) {
        double acc[B];
        scan4_from(vals + (size_t)b * len * B, len, first, 1, cols, w, nc, acc, 0);
        for (uint32_t y = b * B; y < n; y++) {
            dot[y] += acc[y - b * B];
            tmp[y] = dot[y] * inv[y];
            nan |= isnan(tmp[y]);
            A = tmp[y] > A ? tmp[y] : A;
        }
    }
    if (nan || !(fabs(A) >= FMOE_A_LO && fabs(A) <= FMOE_A_HI))
        return -1;
    return traj_candidates(dot, r->sq, tmp, n, st, A - FMOE_FILTER_TOL * fabs(A), best);
}

static const fmoe_kernels kernels_sse2 = {scan2, traj2, scan2_more, NULL, "sse2"},
                          kernels_avx = {scan4, traj4, scan4_more, traj_scan4, "avx"};

const fmoe_kernels *fmoe_kernels_pick(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") ? &kernels_avx : &kernels_sse2;
}

size_t fmoe_kernels_list(const fmoe_kernels **out)
{
    __builtin_cpu_init();
    size_t n = 0;
    out[n++] = &kernels_c;
    out[n++] = &kernels_sse2;
    if (__builtin_cpu_supports("avx"))
        out[n++] = &kernels_avx;
    return n;
}
#else
const fmoe_kernels *fmoe_kernels_pick(void)
{
    return &kernels_c;
}

size_t fmoe_kernels_list(const fmoe_kernels **out)
{
    out[0] = &kernels_c;
    return 1;
}
#endif
