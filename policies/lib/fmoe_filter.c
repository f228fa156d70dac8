/* The float filter of fMoE's in-order trajectory step (fmoe_filter.h).
 *
 * Why the candidates hold every entry with the largest exact score.  Let
 * X_y = S_y / r_y in real numbers: S_y = sum over the N = (l + 1) J terms
 * P_l'[j] m_y[l'][j] observed so far (all >= 0, finite), r_y the real norm
 * of entry y's map prefix (0: X_y = 0).  u = 2^-24 (float), U = 2^-53.
 *  - The exact step's score times st = sqrt(traj_norm2) is X_y (1 +- 2^-38):
 *    its dot is a double sum of N <= 2^12 non-negative exact products
 *    (fewer than 2N roundings of relative size U), its root the correctly
 *    rounded sqrt of a double sum of non-negative terms, then one product
 *    and one quotient.
 *  - The filter reads the maps as bfloat16 (map16): m~ = m (1 +- 2^-8) for
 *    a normal float m (8 significant bits, rounded to nearest: half a step
 *    of 2^-7 relative), m~ = m +- 2^-134 for a subnormal one.  So S~ = sum
 *    P m~ = S (1 +- 2^-8) +- 2^-134 psum, psum = the sum of every observed P
 *    value.
 *  - f_y, float fused multiply-adds of the N exact products P m~: |f_y -
 *    S~_y| <= gamma_N S~_y + N 2^-150 (gamma_N = N u / (1 - N u) <= 2^-11.99:
 *    one rounding per operation, and below the normal range an absolute
 *    error of half a subnormal step, 2^-150).  invf_y = (float) of the
 *    double 1 / sq_y, a normal float below 2^100 or 0 (entries whose inverse
 *    would leave that range are not filtered), within 2^-23.9 relative of
 *    1 / r_y.  a_y = f_y x invf_y rounded once (relative u, or 2^-150 below
 *    the normal range).  So |a_y - X_y| <= eps X_y + eta with eps <= 2^-7.9
 *    and eta <= (2^-133.9 psum + N 2^-150) 1.01 invf_max + 2^-150, below the
 *    code's (2^-133 psum + N 2^-149) invf_max + 2^-149 (invf_max >= every
 *    invf held).
 *  - If y* has the largest exact score (or ties it), X_y* >= X_z (1 -
 *    2^-36) for every z, so with z the entry of A = max a: a_y* >= (1 - eps)
 *    (1 - 2^-36) (A - eta) / (1 + eps) - eta >= A (1 - 2^-6.8) - 2 eta, so
 *    above thr = A (1 - 2^-6) - 2 eta (computed in double, then rounded
 *    down to a float).  (Two entries whose values round by almost half a
 *    step in opposite directions have estimates 2^-7 apart with their exact
 *    scores in the other order: test_fmoe_filter has such a pair.)
 * The candidates (a_y >= thr, in index order) get the exact score, by the
 * exact step's expression from its own dot product, and the first largest
 * wins: the exact step's entry and score.  The guards: finite, non-negative
 * maps and rows (counted per entry at add: `unfilterable`, also when a value
 * rounds to an infinite bfloat16), N <= 2^12, a finite A and thr; else the
 * exact step. */
#include "policies/lib/fmoe_filter.h"

#include <math.h>
#include <string.h>

/* The catch-up's products and sums rounded one by one, as the exact step's
 * (GCC does not contract in ISO C mode; clang would). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define B FMOE_BLOCK
#define FILTER_MAX_TERMS 4096u /* N = (l + 1) J at most this: gamma_N <= 2^-11.99 */

/* ---- kernels ---- */

static float approx1(const uint16_t *layer, uint32_t J, const float *P, uint32_t nb, float *f, const float *invf,
                     float *a)
{
    float top = 0.0f;
    for (uint32_t b = 0; b < nb; b++)
        for (uint32_t t = 0; t < B; t++) {
            uint32_t y = b * B + t;
            float v = f[y];
            for (uint32_t j = 0; j < J; j++)
                v = fmaf(P[j], fmoe_bf16_value(layer[((size_t)b * J + j) * B + fmoe_bf16_pos(t)]), v);
            f[y] = v;
            a[y] = v * invf[y];
            top = a[y] > top ? a[y] : top;
        }
    return top;
}

uint32_t fmoe_pick_c(const float *a, uint32_t n, float thr, uint32_t *idx)
{
    uint32_t k = 0;
    for (uint32_t y = 0; y < n; y++)
        if (a[y] >= thr)
            idx[k++] = y;
    return k;
}

static const fmoe_filter_kernels filter_c = {approx1, fmoe_pick_c, "c"};

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>

/* One block's 16 bfloat16 values of a term as floats: unpacking each
 * 16-bit value under a zero half gives its float; fmoe_bf16_pos stored
 * entries 0-3, 8-11, 4-7, 12-15 so that the low unpack holds entries 0-7
 * and the high one 8-15. */
#define FMOE_BF16_TERM(lo, hi, q)                                                                                  \
    do {                                                                                                           \
        __m256i r_ = _mm256_loadu_si256((const __m256i *)(const void *)(q));                                       \
        lo = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, r_)), lo);                         \
        hi = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, r_)), hi);                         \
    } while (0)

/* Four blocks at a time (eight independent chains hide the multiply-add
 * latency), then one at a time. */
__attribute__((target("avx2,fma"))) static float approx8(const uint16_t *layer, uint32_t J, const float *P,
                                                         uint32_t nb, float *f, const float *invf, float *a)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256 top = _mm256_setzero_ps();
    uint32_t b = 0;
    for (; b < nb;) {
        uint32_t k = nb - b >= 4 ? 4 : 1, y = b * B;
        const uint16_t *p = layer + (size_t)b * J * B;
        __m256 s[8];
        for (uint32_t i = 0; i < 2 * k; i++)
            s[i] = _mm256_loadu_ps(f + y + 8 * i);
        if (k == 4)
            for (uint32_t j = 0; j < J; j++) {
                __m256 x = _mm256_set1_ps(P[j]);
                const uint16_t *q = p + (size_t)j * B;
                FMOE_BF16_TERM(s[0], s[1], q);
                FMOE_BF16_TERM(s[2], s[3], q + (size_t)J * B);
                FMOE_BF16_TERM(s[4], s[5], q + (size_t)2 * J * B);
                FMOE_BF16_TERM(s[6], s[7], q + (size_t)3 * J * B);
            }
        else
            for (uint32_t j = 0; j < J; j++) {
                __m256 x = _mm256_set1_ps(P[j]);
                FMOE_BF16_TERM(s[0], s[1], p + (size_t)j * B);
            }
        for (uint32_t i = 0; i < 2 * k; i++) {
            _mm256_storeu_ps(f + y + 8 * i, s[i]);
            __m256 a_ = _mm256_mul_ps(s[i], _mm256_loadu_ps(invf + y + 8 * i));
            _mm256_storeu_ps(a + y + 8 * i, a_);
            top = _mm256_max_ps(top, a_);
        }
        b += k;
    }
    float v[8], A = 0.0f;
    _mm256_storeu_ps(v, top);
    for (int i = 0; i < 8; i++)
        A = v[i] > A ? v[i] : A;
    return A;
}

__attribute__((target("avx"))) uint32_t fmoe_pick_avx(const float *a, uint32_t n, float thr, uint32_t *idx)
{
    const __m256 t = _mm256_set1_ps(thr);
    uint32_t k = 0, y = 0;
    for (; y + 8 <= n; y += 8)
        for (int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(a + y), t, _CMP_GE_OQ)); m; m &= m - 1)
            idx[k++] = y + (uint32_t)__builtin_ctz((unsigned)m);
    for (; y < n; y++)
        if (a[y] >= thr)
            idx[k++] = y;
    return k;
}

static const fmoe_filter_kernels filter_avx = {approx8, fmoe_pick_avx, "avx2-fma"};

static int has_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const fmoe_filter_kernels *fmoe_filter_pick(void)
{
    return has_avx2_fma() ? &filter_avx : NULL;
}

size_t fmoe_filter_list(const fmoe_filter_kernels **out)
{
    size_t n = 0;
    out[n++] = &filter_c;
    if (has_avx2_fma())
        out[n++] = &filter_avx;
    return n;
}
#else
const fmoe_filter_kernels *fmoe_filter_pick(void)
{
    return NULL;
}

size_t fmoe_filter_list(const fmoe_filter_kernels **out)
{
    out[0] = &filter_c;
    return 1;
}
#endif

/* ---- the step ---- */

/* dot[y] += the exact step's sum of each layer synced[y] .. upto, as its
 * kernels add it: from +0, the row's non-zero terms in j's order (every
 * value is finite here, so the exact step skips exactly those), each the
 * double product of two floats, then added to dot[y].  The zero terms are
 * added too: here rows and maps are >= 0, so such a product is +-0, and
 * adding +-0 to a sum that starts at +0 never changes it (+0 + -0 = +0).
 * Four layers' sums run side by side (independent chains: the same
 * operations each, the latency hidden), then go into dot[y] in order. */
static void catch_up(fmoe_store *s, uint32_t y, uint32_t upto)
{
    uint32_t J = s->J, l = s->synced[y];
    size_t slice = (size_t)s->slots * J, at = ((size_t)(y / B) * J) * B + y % B; /* entry y in a layer's slice */
    for (; l + 4 <= upto + 1; l += 4) {
        const float *r = s->traj_rows + (size_t)l * J, *m = s->map + (size_t)l * slice + at;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (uint32_t j = 0; j < J; j++) {
            size_t k = (size_t)j * B;
            a0 += (double)r[j] * (double)m[k];
            a1 += (double)r[J + j] * (double)m[slice + k];
            a2 += (double)r[2 * J + j] * (double)m[2 * slice + k];
            a3 += (double)r[3 * J + j] * (double)m[3 * slice + k];
        }
        s->dot[y] += a0;
        s->dot[y] += a1;
        s->dot[y] += a2;
        s->dot[y] += a3;
    }
    for (; l <= upto; l++) {
        const float *r = s->traj_rows + (size_t)l * J, *m = s->map + (size_t)l * slice + at;
        double acc = 0;
        for (uint32_t j = 0; j < J; j++)
            acc += (double)r[j] * (double)m[(size_t)j * B];
        s->dot[y] += acc;
    }
    s->synced[y] = upto + 1;
}

void fmoe_traj_sync(fmoe_store *s)
{
    if (!s->filtered)
        return;
    for (uint32_t y = 0; y < s->n && s->observed; y++)
        catch_up(s, y, s->observed - 1);
    s->filtered = 0;
}

/* Whether layer l can be filtered: see the file's header. */
static int filterable(const fmoe_store *s, uint32_t l, const float *P)
{
    if (!s->filter || s->n < FMOE_FILTER_MIN || s->nonfinite || s->unfilterable || (l && !s->filtered) ||
        (uint64_t)(l + 1) * s->J > FILTER_MAX_TERMS || !(s->traj_norm2 > 0 && isfinite(s->traj_norm2)))
        return 0;
    for (uint32_t j = 0; j < s->J; j++)
        if (!(P[j] >= 0 && isfinite(P[j])))
            return 0;
    return 1;
}

/* Every entry caught up to layer l and scored, the first largest by the
 * exact step's NaN fallback rule (traj_scores_in_order, argmax_first); the
 * iteration is then synced. */
static int all_scores(fmoe_store *s, uint32_t l, const double *sq, double st)
{
    int by = -1;
    double bc = 0;
    for (uint32_t y = 0; y < s->n; y++) {
        catch_up(s, y, l);
        double c = s->traj_norm2 > 0 && sq[y] > 0 ? s->dot[y] / (st * sq[y]) : 0.0;
        if (by < 0 || c > bc) {
            by = (int)y;
            bc = c;
        }
    }
    s->filtered = 0;
    s->best = by;
    s->best_score = bc;
    return 1;
}

int fmoe_traj_filtered(fmoe_store *s, uint32_t l, const float *P)
{
    if (!filterable(s, l, P)) {
        fmoe_traj_sync(s);
        return 0;
    }
    if (!s->filtered) { /* layer 0: every dot is +0 (reset), synced 0 */
        memset(s->synced, 0, s->n * sizeof *s->synced);
        s->filtered = 1;
        s->traj_psum = 0;
    }
    memcpy(s->traj_rows + (size_t)l * s->J, P, s->J * sizeof *P);
    uint32_t nb = (s->n + B - 1) / B;
    for (uint32_t j = 0; j < s->J; j++)
        s->traj_psum += P[j];
    float A = s->filter->approx(s->map16 + (size_t)l * s->slots * s->J, s->J, P, nb, s->fdot,
                                s->prefix_invf + (size_t)l * s->slots, s->fscore);
    double N = (double)(l + 1) * s->J;
    double eta = ((s->traj_psum * 0x1p-133 + N * 0x1p-149) * s->invf_max + 0x1p-149);
    double thr = (double)A * (1 - 0x1p-6) - 2 * eta;
    float thr_f = (float)thr;
    if ((double)thr_f > thr)
        thr_f = nextafterf(thr_f, -INFINITY);
    if (!isfinite(A) || !isfinite(thr_f)) {
        fmoe_traj_sync(s); /* layers 0 .. l - 1 (observed); the exact step adds layer l */
        return 0;
    }
    uint32_t k = s->filter->pick(s->fscore, s->n, thr_f, s->cand);
    s->filter_steps++;
    s->filter_candidates += k;
    const double *sq = s->prefix_norm + (size_t)l * s->slots;
    double st = sqrt(s->traj_norm2), bc = 0;
    int by = -1;
    for (uint32_t i = 0; i < k; i++) { /* ascending y: the first largest, as the exact step */
        uint32_t y = s->cand[i];
        catch_up(s, y, l);
        double c = sq[y] > 0 ? s->dot[y] / (st * sq[y]) : 0.0;
        if (by < 0 || c > bc) {
            by = (int)y;
            bc = c;
        }
    }
    if (by < 0 || isnan(bc)) /* not with the guards; else every entry, as the exact step's NaN fallback */
        return all_scores(s, l, sq, st);
    s->best = by;
    s->best_score = bc;
    return 1;
}
