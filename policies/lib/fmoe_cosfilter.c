/* The float filter of fMoE's cosine searches (fmoe_cosfilter.h).
 *
 * Why the candidates hold every entry with the largest exact score.  Take a
 * query vector q and an entry's vector m (embeddings, or whole maps), every
 * value finite, u = 2^-24, and N the number of the query's terms summed (its
 * non-zero ones: the exact sums skip the same zero terms, which add nothing
 * to a real sum), N <= 2^14 and the vectors' lengths (D, L J) <= 2^14.  Let
 * c = S / (|q| |m|) be the real cosine, S = sum q_i m_i (c = 0 when a norm is
 * 0): |c| <= 1.  The guards keep every non-zero norm within [2^-40, 2^40].
 *  - The float sum f: N fused multiply-adds, one rounding each, so |f - S|
 *    <= gamma_N sum |q_i m_i| + N 2^-150 (gamma_N = N u / (1 - N u) <= 1.001
 *    N u; 2^-150: half a subnormal step, underflow's absolute error), and
 *    sum |q_i m_i| <= |q| |m| by Cauchy-Schwarz, whatever the signs.  No
 *    partial sum overflows (each <= 1.001 |q| |m| <= 2^81).
 *  - The entry's factor ie = (float) (1 / sqrt(|m|^2)) as the store caches
 *    it in double: relative error below u + 2^-38 against 1 / |m| (a double
 *    sum of at most 2^14 squares, a sqrt, a quotient), a normal float
 *    within [2^-40, 2^40] (or 0 with m = 0; then f = 0 too and the estimate
 *    and c are both 0).  The query's factor a = (float) (w / |q|) likewise
 *    (w = d / L <= 1, or 1 for the semantic search).
 *  - The term t = (f x ie) x a, two float roundings (no overflow: |f ie| <=
 *    1.001 |q| <= 2^41; underflow adds at most 2^-149 (1 + a), below
 *    2^-108): |t - w c| <= |w| (gamma_N + N 2^-150 / (|q| |m|)) (1 + 4.01
 *    u) + |w| 4.01 u (1 + gamma_N) <= 1.01 |w| (N + 5) u (N 2^-150 / (|q|
 *    |m|) <= 2^-56).
 *  - The estimate adds the map's term (weight 1 - w, N_m terms) to the
 *    embedding's (w, N_e terms), one more rounding of a value below 1.01
 *    (|w| + |1 - w|): |est - (w c_e + (1 - w) c_m)| <= 1.01 (|w| (N_e + 6) +
 *    |1 - w| (N_m + 6)) u.
 *  - The exact search's score (double dot products of at most 2^14 terms,
 *    whose errors are below 2^14 2^-53 |q| |m| by Cauchy-Schwarz again;
 *    sqrt, products, the quotient, RDY's three roundings) is within 2^-36
 *    of w c_e + (1 - w) c_m.
 * So |est_y - exact_y| < E = (|w| (N_e + 8) + |1 - w| (N_m + 8)) 2^-23 +
 * 2^-30, twice the bound plus slack.  With A = max est (attained at z) and
 * thr <= A - 2 E (computed in double, rounded down to a float): the first
 * entry y* with the largest exact score has est_y* >= exact_y* - E >=
 * exact_z - E >= A - 2 E >= thr, a candidate; an entry with est_x < thr has
 * exact_x < est_x + E < A - E <= exact_z <= exact_y*, so it can neither win
 * nor tie.  Among the candidates, in index order, the exact scores by the
 * exact search's expressions and its rule (the largest, the first of
 * equals) give its entry and score.  (Exact and one-ulp near ties are both
 * candidates: test_fmoe_cosfilter has them, and pairs whose estimates are in
 * the other order than their exact scores.)
 *
 * The exact dot products of a candidate's block: the store's scan kernel
 * over that block alone with the exact search's terms (each lane sums its
 * entry's terms from +0 in order, independently of the other blocks), so
 * they are the exact search's bit for bit. */
#include "policies/lib/fmoe_cosfilter.h"

#include <math.h>
#include <string.h>

#include "policies/lib/fmoe_filter.h"
#include "policies/lib/fmoe_store_priv.h"

/* The estimate's products and sum rounded one by one, as the AVX kernel's
 * (GCC does not contract in ISO C mode; clang would). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define B FMOE_BLOCK
#define NORM_MIN 0x1p-40 /* the non-zero norms the bound allows */
#define NORM_MAX 0x1p40

/* ---- kernels ---- */

/* more = 1: each chain continues from out's value instead of +0. */
static void fscan1_from(const float *vals, size_t len, uint32_t nb, const uint32_t *cols, const float *w,
                        uint32_t nc, float *out, int more)
{
    for (uint32_t b = 0; b < nb; b++)
        for (uint32_t t = 0; t < B; t++) {
            float v = more ? out[(size_t)b * B + t] : 0.0f;
            for (uint32_t k = 0; k < nc; k++)
                v = fmaf(w[k], vals[((size_t)b * len + cols[k]) * B + t], v);
            out[(size_t)b * B + t] = v;
        }
}

static void fscan1(const float *vals, size_t len, uint32_t nb, const uint32_t *cols, const float *w, uint32_t nc,
                   float *out)
{
    fscan1_from(vals, len, nb, cols, w, nc, out, 0);
}

static void fscan1_more(const float *vals, size_t len, uint32_t nb, const uint32_t *cols, const float *w,
                        uint32_t nc, float *out)
{
    fscan1_from(vals, len, nb, cols, w, nc, out, 1);
}

static float estimate_one(const float *fe, const float *ie, float ae, const float *fm, const float *im, float am,
                          uint32_t y)
{
    float t = fe[y] * ie[y] * ae;
    if (fm)
        t = t + fm[y] * im[y] * am;
    return t;
}

static float estimate1(const float *fe, const float *ie, float ae, const float *fm, const float *im, float am,
                       uint32_t n, float *est)
{
    float top = -INFINITY;
    for (uint32_t y = 0; y < n; y++) {
        est[y] = estimate_one(fe, ie, ae, fm, im, am, y);
        top = est[y] > top ? est[y] : top;
    }
    return top;
}

static const fmoe_cosf_kernels cosf_c = {fscan1, estimate1, fmoe_pick_c, fscan1_more, "c"};

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>

/* The starting sums of out[off .. off + 8): +0, or out's (more = 1). */
#define FMOE_FSTART(off) (more ? _mm256_loadu_ps(o + (off)) : _mm256_setzero_ps())

/* Four blocks at a time (eight independent chains hide the multiply-add
 * latency), then one at a time. */
__attribute__((target("avx2,fma"))) static inline void fscan8_from(const float *vals, size_t len, uint32_t nb,
                                                                   const uint32_t *cols, const float *w, uint32_t nc,
                                                                   float *out, int more)
{
    size_t st = len * B; /* one block to the next */
    uint32_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        const float *p = vals + (size_t)b * st;
        float *o = out + (size_t)b * B;
        __m256 s0 = FMOE_FSTART(0), s1 = FMOE_FSTART(8), s2 = FMOE_FSTART(16), s3 = FMOE_FSTART(24);
        __m256 s4 = FMOE_FSTART(32), s5 = FMOE_FSTART(40), s6 = FMOE_FSTART(48), s7 = FMOE_FSTART(56);
        for (uint32_t k = 0; k < nc; k++) {
            const float *q = p + (size_t)cols[k] * B;
            __m256 x = _mm256_set1_ps(w[k]);
            s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q), s0);
            s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + 8), s1);
            s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + st), s2);
            s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + st + 8), s3);
            s4 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + 2 * st), s4);
            s5 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + 2 * st + 8), s5);
            s6 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + 3 * st), s6);
            s7 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + 3 * st + 8), s7);
        }
        _mm256_storeu_ps(o, s0);
        _mm256_storeu_ps(o + 8, s1);
        _mm256_storeu_ps(o + 16, s2);
        _mm256_storeu_ps(o + 24, s3);
        _mm256_storeu_ps(o + 32, s4);
        _mm256_storeu_ps(o + 40, s5);
        _mm256_storeu_ps(o + 48, s6);
        _mm256_storeu_ps(o + 56, s7);
    }
    for (; b < nb; b++) {
        const float *p = vals + (size_t)b * st;
        float *o = out + (size_t)b * B;
        __m256 s0 = FMOE_FSTART(0), s1 = FMOE_FSTART(8);
        for (uint32_t k = 0; k < nc; k++) {
            const float *q = p + (size_t)cols[k] * B;
            __m256 x = _mm256_set1_ps(w[k]);
            s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q), s0);
            s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + 8), s1);
        }
        _mm256_storeu_ps(o, s0);
        _mm256_storeu_ps(o + 8, s1);
    }
}

__attribute__((target("avx2,fma"))) static void fscan8(const float *vals, size_t len, uint32_t nb,
                                                       const uint32_t *cols, const float *w, uint32_t nc, float *out)
{
    fscan8_from(vals, len, nb, cols, w, nc, out, 0);
}

__attribute__((target("avx2,fma"))) static void fscan8_more(const float *vals, size_t len, uint32_t nb,
                                                            const uint32_t *cols, const float *w, uint32_t nc,
                                                            float *out)
{
    fscan8_from(vals, len, nb, cols, w, nc, out, 1);
}

__attribute__((target("avx2,fma"))) static float estimate8(const float *fe, const float *ie, float ae,
                                                           const float *fm, const float *im, float am, uint32_t n,
                                                           float *est)
{
    const __m256 a = _mm256_set1_ps(ae), m = _mm256_set1_ps(am);
    __m256 top = _mm256_set1_ps(-INFINITY);
    uint32_t y = 0;
    for (; y + 8 <= n; y += 8) {
        __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(fe + y), _mm256_loadu_ps(ie + y)), a);
        if (fm)
            t = _mm256_add_ps(t, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(fm + y), _mm256_loadu_ps(im + y)), m));
        _mm256_storeu_ps(est + y, t);
        top = _mm256_max_ps(top, t);
    }
    float v[8], A = -INFINITY;
    _mm256_storeu_ps(v, top);
    for (int i = 0; i < 8; i++)
        A = v[i] > A ? v[i] : A;
    for (; y < n; y++) {
        est[y] = estimate_one(fe, ie, ae, fm, im, am, y);
        A = est[y] > A ? est[y] : A;
    }
    return A;
}

static const fmoe_cosf_kernels cosf_avx = {fscan8, estimate8, fmoe_pick_avx, fscan8_more, "avx2-fma"};

static int has_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const fmoe_cosf_kernels *fmoe_cosf_pick(void)
{
    return has_avx2_fma() ? &cosf_avx : NULL;
}

size_t fmoe_cosf_list(const fmoe_cosf_kernels **out)
{
    size_t n = 0;
    out[n++] = &cosf_c;
    if (has_avx2_fma())
        out[n++] = &cosf_avx;
    return n;
}
#else
const fmoe_cosf_kernels *fmoe_cosf_pick(void)
{
    return NULL;
}

size_t fmoe_cosf_list(const fmoe_cosf_kernels **out)
{
    out[0] = &cosf_c;
    return 1;
}
#endif

/* ---- the searches ---- */

static int norm_ok(double r)
{
    return r == 0 || (r >= NORM_MIN && r <= NORM_MAX);
}

int fmoe_cosf_norms_ok(double emb_norm, double map_norm)
{
    return norm_ok(emb_norm) && norm_ok(map_norm);
}

/* Whether the store can be filtered: see the file's header. */
static int store_filterable(const fmoe_store *s)
{
    return s->cosf && s->n >= FMOE_COSF_MIN && !s->nonfinite && !s->cos_unfilterable && s->d <= s->L &&
           s->D <= FMOE_COSF_MAX_TERMS && (uint64_t)s->L * s->J <= FMOE_COSF_MAX_TERMS;
}

/* A query's squared norm (as the exact search sums it) that the bound
 * allows: finite (then so is every value) and its root 0 or in range. */
static int query_ok(double norm2)
{
    return isfinite(norm2) && norm_ok(sqrt(norm2));
}

int fmoe_cosf_applies(const fmoe_store *s, double ee, double mm)
{
    return store_filterable(s) && query_ok(ee) && query_ok(mm);
}

/* The float estimates' sums of the query terms held in s->cols / s->w
 * (nc of them) over `vals` (blocks of `len` values per entry) into out. */
static void float_sums(fmoe_store *s, const float *vals, size_t len, uint32_t nc, float *out)
{
    for (uint32_t k = 0; k < nc; k++)
        s->wf[k] = (float)s->w[k]; /* exact: the query's floats */
    s->cosf->fscan(vals, len, (s->n + B - 1) / B, s->cols, s->wf, nc, out);
}

/* The same with the terms given (cols, wf: nc of them). */
static void float_sums_of(fmoe_store *s, const float *vals, size_t len, const uint32_t *cols, const float *wf,
                          uint32_t nc, float *out)
{
    s->cosf->fscan(vals, len, (s->n + B - 1) / B, cols, wf, nc, out);
}

/* The factor (float) (weight / sqrt(norm2)), 0 for a zero query. */
static float query_factor(double weight, double norm2)
{
    return norm2 > 0 ? (float)(weight / sqrt(norm2)) : 0.0f;
}

/* The candidates: every entry whose estimate is at least A - 2 E (rounded
 * down to a float); their count, 0 when A or the threshold is not finite. */
static uint32_t candidates(fmoe_store *s, float A, double E)
{
    double thr = (double)A - 2 * E;
    float thr_f = (float)thr;
    if ((double)thr_f > thr)
        thr_f = nextafterf(thr_f, -INFINITY);
    if (!isfinite(A) || !isfinite(thr_f))
        return 0;
    uint32_t k = s->cosf->pick(s->est, s->n, thr_f, s->cos_cand);
    s->cosf_queries++;
    s->cosf_candidates += k;
    return k;
}

/* The candidates' blocks, ascending, into s->blocks; their count. */
static uint32_t candidate_blocks(fmoe_store *s, uint32_t k)
{
    uint32_t nb = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t b = s->cos_cand[i] / B;
        if (!nb || s->blocks[nb - 1] != b)
            s->blocks[nb++] = b;
    }
    return nb;
}

/* The exact scan of the terms cols / w (nc of them) over the listed blocks
 * of `vals` (len values per entry; a block at vals + b stride, stride = len
 * B for embeddings, J B for the layer-major maps), into out: one kernel call
 * per run of consecutive blocks. */
static void exact_sums(fmoe_store *s, const float *vals, size_t len, size_t stride, uint32_t nb,
                       const uint32_t *cols, const double *w, uint32_t nc, double *out)
{
    for (uint32_t i = 0, run; i < nb; i += run) {
        for (run = 1; i + run < nb && s->blocks[i + run] == s->blocks[i] + run; run++)
            ;
        uint32_t b = s->blocks[i];
        s->kernels->scan(vals + (size_t)b * stride, len, 0, run, cols, w, nc, out + (size_t)b * B);
    }
}

int fmoe_dedup_filtered(fmoe_store *s, const float *emb, const float *map, uint32_t *out)
{
    if (!store_filterable(s))
        return 0;
    return fmoe_dedup_filtered_terms(s, emb, map, fmoe_map_terms(s, map), out);
}

int fmoe_dedup_filtered_terms(fmoe_store *s, const float *emb, const float *map, uint32_t nm, uint32_t *out)
{
    if (!store_filterable(s) || nm > FMOE_COSF_DEDUP_MAX_TERMS)
        return 0; /* long maps: the staged searches prune them for less (fmoe_cosfilter.h) */
    uint32_t LJ = s->L * s->J, D = s->D;
    double ee = D ? fmoe_norm2_of(emb, D) : 0.0, mm = fmoe_norm2_of(map, LJ);
    if (!query_ok(ee) || !query_ok(mm))
        return 0;
    double w = (double)s->d / s->L;
    uint32_t ne = 0;
    if (D) {
        ne = fmoe_emb_terms(s, emb);
        float_sums_of(s, s->emb, D, s->ecols, s->ewf, ne, s->fe);
    }
    float_sums_of(s, s->map, s->J, s->cols, s->wf, nm, s->fm);
    float am = query_factor(1.0 - w, mm), A;
    if (D)
        A = s->cosf->estimate(s->fe, s->inv_emb_f, query_factor(w, ee), s->fm, s->inv_map_f, am, s->n, s->est);
    else /* the semantic term is 0 */
        A = s->cosf->estimate(s->fm, s->inv_map_f, am, NULL, NULL, 0.0f, s->n, s->est);
    double E = (w * (ne + 8) + (1.0 - w) * (nm + 8)) * 0x1p-23 + 0x1p-30;
    uint32_t k = candidates(s, A, E);
    if (!k)
        return 0;
    uint32_t nb = candidate_blocks(s, k);
    exact_sums(s, s->map, s->J, (size_t)s->J * B, nb, s->cols, s->w, nm, s->acc);
    if (D)
        exact_sums(s, s->emb, D, (size_t)D * B, nb, s->ecols, s->ew, ne, s->acc2);
    uint32_t best = 0;
    double best_rdy = -INFINITY;
    for (uint32_t i = 0; i < k; i++) { /* ascending y: fmoe_dedup_full's rule */
        uint32_t y = s->cos_cand[i];
        double r = fmoe_rdy_of(s, y, fmoe_sem_of(s, y, s->acc2, ee), s->acc[y], mm);
        if (r > best_rdy) {
            best = y;
            best_rdy = r;
        }
    }
    *out = best;
    return 1;
}

int fmoe_semantic_filtered(fmoe_store *s, const float *e_new, int *best, double *score)
{
    if (!s->D || !store_filterable(s))
        return 0;
    double aa = fmoe_norm2_of(e_new, s->D);
    if (!query_ok(aa))
        return 0;
    uint32_t ne = fmoe_query_terms(s, e_new, s->D);
    float_sums(s, s->emb, s->D, ne, s->fe);
    float A = s->cosf->estimate(s->fe, s->inv_emb_f, query_factor(1.0, aa), NULL, NULL, 0.0f, s->n, s->est);
    uint32_t k = candidates(s, A, (ne + 8) * 0x1p-23 + 0x1p-30);
    if (!k)
        return 0;
    exact_sums(s, s->emb, s->D, (size_t)s->D * B, candidate_blocks(s, k), s->cols, s->w, ne, s->acc);
    int by = -1;
    double bc = 0;
    for (uint32_t i = 0; i < k; i++) { /* ascending y: argmax_first's rule */
        uint32_t y = s->cos_cand[i];
        double c = fmoe_cosine_of(s->acc[y], aa, s->emb_norm2[y], s->emb_norm[y]);
        if (by < 0 || c > bc) {
            by = (int)y;
            bc = c;
        }
    }
    *best = by;
    *score = bc;
    return 1;
}
