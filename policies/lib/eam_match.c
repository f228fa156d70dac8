/* Incremental paper-mode EAM matching (eam_matcher in eam_common.h): the
 * terms of eam_row_cosine split into the parts that depend on the entry
 * (kept until the collection changes) and on cur (one row at a time), each
 * computed by the same operations in the same order as the direct formula,
 * so the argmin and the distance are the same bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/eam_common.h"

#define B EAM_BLOCK

/* Products and sums rounded one by one: no fused multiply-add (GCC does not
 * contract in ISO C mode; clang would). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

void eam_matcher_init(eam_matcher *m, uint32_t L, uint32_t J)
{
    memset(m, 0, sizeof *m);
    m->L = L;
    m->J = J;
    m->last = ms_xcalloc((size_t)L * J, sizeof *m->last);
    m->y = ms_xcalloc(J, sizeof *m->y);
    m->nz = ms_xcalloc(J ? J : 1, sizeof *m->nz);
    m->gen = ms_xcalloc(L ? L : 1, sizeof *m->gen);
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    m->avx = __builtin_cpu_supports("avx");
#endif
}

void eam_matcher_free(eam_matcher *m)
{
    free(m->an);
    free(m->sum);
    free(m->root);
    free(m->cos);
    free(m->pre);
    free(m->dist);
    free(m->last);
    free(m->y);
    free(m->nz);
    free(m->gen);
    memset(m, 0, sizeof *m);
}

/* eam_row_cosine's row sum: +0, then a[0], a[1], ... in order. */
static double row_sum(const double *a, uint32_t J)
{
    double s = 0;
    for (uint32_t e = 0; e < J; e++)
        s += a[e];
    return s;
}

static void grow(eam_matcher *m, uint32_t n)
{
    if (n <= m->n_cap)
        return;
    m->n_cap = n;
    size_t lanes = (size_t)(n + B - 1) / B * B;
    m->an = ms_xrealloc(m->an, lanes * m->L * m->J, sizeof *m->an);
    m->sum = ms_xrealloc(m->sum, (size_t)n * m->L, sizeof *m->sum);
    m->root = ms_xrealloc(m->root, lanes * m->L, sizeof *m->root);
    m->cos = ms_xrealloc(m->cos, lanes * m->L, sizeof *m->cos);
    m->pre = ms_xrealloc(m->pre, lanes * m->L, sizeof *m->pre);
    m->dist = ms_xrealloc(m->dist, lanes, sizeof *m->dist);
}

/* Entry i's row l: its sum, its normalised values into the block layout and
 * the root of their squared norm (eam_row_cosine: x = a[e] / sa, na += x x);
 * a zero row's root is +inf, so that its cosine, +0 / (inf rb), is the +0
 * eam_row_cosine gives a zero row (its normalised values, and so its dot
 * products, are +0). */
static void load_entry_row(eam_matcher *m, const double *row, uint32_t i, uint32_t l)
{
    size_t lanes = (size_t)m->nb * B;
    double *an = m->an + (((size_t)l * m->nb + i / B) * m->J) * B + i % B;
    double sa = row_sum(row, m->J), na = 0;
    m->sum[(size_t)i * m->L + l] = sa;
    for (uint32_t e = 0; e < m->J; e++) {
        double x = sa > 0 ? row[e] / sa : 0.0;
        an[(size_t)e * B] = x;
        na += x * x;
    }
    m->root[(size_t)l * lanes + i] = sa > 0 ? sqrt(na) : INFINITY;
}

static void refresh_entries(eam_matcher *m, const eam_set *c)
{
    grow(m, c->n);
    m->n = c->n;
    m->nb = (c->n + B - 1) / B;
    size_t lanes = (size_t)m->nb * B;
    if (lanes) /* padding lanes: zero rows */
        memset(m->an, 0, lanes * m->L * m->J * sizeof *m->an);
    for (size_t k = 0; k < lanes * m->L; k++)
        m->root[k] = INFINITY;
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t l = 0; l < m->L; l++)
            load_entry_row(m, eam_set_at(c, i) + (size_t)l * m->J, i, l);
    m->set = c;
    m->version = c->version;
    m->primed = 0;
}

/* d[t] = sum over e in order of an[e][t] y[e], from +0, for the B entries of
 * one block's row: one lane per entry, a product then a sum per term, as the
 * scalar loop does (GCC/clang vector types keep the B sums in registers).
 * Only the terms with y[e] != 0 are added, nz[0..n_nz) in ascending e: a
 * skipped term is an[e][t] 0, a zero (an is finite), and adding a zero
 * leaves a sum unchanged unless the sum is -0, which it never is (it starts
 * at +0, and x + y is -0 in round-to-nearest only when x and y both are).
 * cur's rows are token counts, about half zero on Qwen1.5-MoE: a skipped
 * term is also a skipped cache line of an (B doubles). */
#if (defined(__GNUC__) || defined(__clang__)) && EAM_BLOCK == 8
typedef double eam_v2 __attribute__((vector_size(2 * sizeof(double)))); /* one SSE2 / NEON register */

static eam_v2 load2(const double *p)
{
    eam_v2 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void block_dots(const double *restrict an, const double *restrict y, const uint32_t *restrict nz,
                       uint32_t n_nz, double *restrict d)
{
    eam_v2 a0 = {0, 0}, a1 = {0, 0}, a2 = {0, 0}, a3 = {0, 0};
    for (uint32_t k = 0; k < n_nz; k++) {
        uint32_t e = nz[k];
        const double *p = an + (size_t)e * B;
        eam_v2 ye = {y[e], y[e]};
        a0 += load2(p) * ye;
        a1 += load2(p + 2) * ye;
        a2 += load2(p + 4) * ye;
        a3 += load2(p + 6) * ye;
    }
    memcpy(d, &a0, sizeof a0);
    memcpy(d + 2, &a1, sizeof a1);
    memcpy(d + 4, &a2, sizeof a2);
    memcpy(d + 6, &a3, sizeof a3);
}
#if defined(__x86_64__)
typedef double eam_v4 __attribute__((vector_size(4 * sizeof(double)))); /* one AVX register */

/* block_dots on AVX: the same lanes, four per register (no FMA: AVX has none). */
__attribute__((target("avx"))) static void block_dots_avx(const double *restrict an, const double *restrict y,
                                                          const uint32_t *restrict nz, uint32_t n_nz,
                                                          double *restrict d)
{
    eam_v4 a0 = {0, 0, 0, 0}, a1 = {0, 0, 0, 0};
    for (uint32_t k = 0; k < n_nz; k++) {
        uint32_t e = nz[k];
        const double *p = an + (size_t)e * B;
        eam_v4 ye = {y[e], y[e], y[e], y[e]}, v0, v1;
        memcpy(&v0, p, sizeof v0);
        memcpy(&v1, p + 4, sizeof v1);
        a0 += v0 * ye;
        a1 += v1 * ye;
    }
    memcpy(d, &a0, sizeof a0);
    memcpy(d + 4, &a1, sizeof a1);
}
#define EAM_HAVE_AVX 1
#endif
#else
static void block_dots(const double *restrict an, const double *restrict y, const uint32_t *restrict nz,
                       uint32_t n_nz, double *restrict d)
{
    for (uint32_t t = 0; t < B; t++)
        d[t] = 0;
    for (uint32_t k = 0; k < n_nz; k++)
        for (uint32_t t = 0; t < B; t++)
            d[t] += an[(size_t)nz[k] * B + t] * y[nz[k]];
}
#endif

/* c[i] = c[i] / (root[i] rb) and d[i] = 1 - total[i] / L for i < n, n a
 * multiple of EAM_BLOCK: lane by lane, each the scalar expression. */
#if (defined(__GNUC__) || defined(__clang__)) && EAM_BLOCK == 8
static void scale_lanes(double *restrict c, const double *restrict root, double rb, size_t n)
{
    eam_v2 r = {rb, rb};
    for (size_t i = 0; i < n; i += 2) {
        eam_v2 v = load2(c + i) / (load2(root + i) * r);
        memcpy(c + i, &v, sizeof v);
    }
}

static void distance_lanes(const double *restrict total, uint32_t L, double *restrict d, size_t n)
{
    eam_v2 one = {1.0, 1.0}, l = {(double)L, (double)L};
    for (size_t i = 0; i < n; i += 2) {
        eam_v2 v = one - load2(total + i) / l;
        memcpy(d + i, &v, sizeof v);
    }
}
#else
static void scale_lanes(double *restrict c, const double *restrict root, double rb, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = c[i] / (root[i] * rb);
}

static void distance_lanes(const double *restrict total, uint32_t L, double *restrict d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = 1.0 - total[i] / L;
}
#endif

/* cos[l][i] for every entry i against cur's row l (eam_row_cosine(entry row, cur row)). */
static void update_row(eam_matcher *m, const double *cur_row, uint32_t l)
{
    uint32_t J = m->J;
    size_t lanes = (size_t)m->nb * B;
    double *cos = m->cos + (size_t)l * lanes;
    double sb = row_sum(cur_row, J), nb = 0;
    if (!(sb > 0)) {
        for (size_t i = 0; i < lanes; i++)
            cos[i] = 0.0; /* a zero row: cosine 0 (padding lanes too: update_prefix reads them) */
        return;
    }
    uint32_t n_nz = 0;
    for (uint32_t e = 0; e < J; e++) {
        m->y[e] = cur_row[e] / sb;
        nb += m->y[e] * m->y[e];
        m->nz[n_nz] = e;
        n_nz += m->y[e] != 0;
    }
    double rb = sqrt(nb);
    for (uint32_t b = 0; b < m->nb; b++) {
        const double *an = m->an + (((size_t)l * m->nb + b) * J) * B;
#ifdef EAM_HAVE_AVX
        if (m->avx) {
            block_dots_avx(an, m->y, m->nz, n_nz, cos + (size_t)b * B);
            continue;
        }
#endif
        block_dots(an, m->y, m->nz, n_nz, cos + (size_t)b * B);
    }
    scale_lanes(cos, m->root + (size_t)l * lanes, rb, lanes);
}

/* One block's running sums: pre[l][t] = pre[l-1][t] + cos[l][t] for l =
 * from..L-1 (pre[-1] = +0: eam_distance's s = 0; s += cos, and 0 + -0 is +0),
 * the B lanes' sums kept in registers from layer to layer; cos and pre point
 * at the block's lanes of layer 0, rows `lanes` apart. */
static void prefix_block(const double *restrict cos, double *restrict pre, size_t lanes, uint32_t from, uint32_t L)
{
    double acc[B];
    for (uint32_t t = 0; t < B; t++)
        acc[t] = from ? pre[(from - 1) * lanes + t] : 0.0;
    for (uint32_t l = from; l < L; l++)
        for (uint32_t t = 0; t < B; t++) {
            acc[t] += cos[l * lanes + t];
            pre[l * lanes + t] = acc[t];
        }
}

#ifdef EAM_HAVE_AVX
/* prefix_block on AVX: the same lanes, four per register. */
__attribute__((target("avx"))) static void prefix_block_avx(const double *restrict cos, double *restrict pre,
                                                            size_t lanes, uint32_t from, uint32_t L)
{
    eam_v4 a0 = {0, 0, 0, 0}, a1 = {0, 0, 0, 0};
    if (from) {
        memcpy(&a0, pre + (from - 1) * lanes, sizeof a0);
        memcpy(&a1, pre + (from - 1) * lanes + 4, sizeof a1);
    }
    for (uint32_t l = from; l < L; l++) {
        eam_v4 c0, c1;
        memcpy(&c0, cos + l * lanes, sizeof c0);
        memcpy(&c1, cos + l * lanes + 4, sizeof c1);
        a0 += c0;
        a1 += c1;
        memcpy(pre + l * lanes, &a0, sizeof a0);
        memcpy(pre + l * lanes + 4, &a1, sizeof a1);
    }
}
#endif

/* pre[l] = pre[l-1] + cos[l] for l = from..L-1, every lane (whole blocks:
 * padding lanes hold sums of zeros). */
static void update_prefix(eam_matcher *m, uint32_t from)
{
    size_t lanes = (size_t)m->nb * B;
    for (uint32_t b = 0; b < m->nb; b++) {
#ifdef EAM_HAVE_AVX
        if (m->avx) {
            prefix_block_avx(m->cos + (size_t)b * B, m->pre + (size_t)b * B, lanes, from, m->L);
            continue;
        }
#endif
        prefix_block(m->cos + (size_t)b * B, m->pre + (size_t)b * B, lanes, from, m->L);
    }
}

/* Row l of cur against the copy of the last cur: recomputes its cosines
 * and keeps the copy when it differs (or nothing was matched yet); 1 then. */
static int match_row(eam_matcher *m, const double *cur, uint32_t l)
{
    size_t J = m->J;
    const double *row = cur + l * J;
    double *last = m->last + l * J;
    if (m->primed && !memcmp(row, last, J * sizeof *row))
        return 0;
    update_row(m, row, l);
    memcpy(last, row, J * sizeof *row);
    return 1;
}

uint32_t eam_matcher_match(eam_matcher *m, const eam_set *c, const double *cur, double *dist)
{
    return eam_matcher_match_gen(m, c, cur, NULL, dist);
}

uint32_t eam_matcher_match_gen(eam_matcher *m, const eam_set *c, const double *cur, const uint64_t *row_gen,
                               double *dist)
{
    if (c != m->set || c->version != m->version)
        refresh_entries(m, c);
    if (m->n == 0) { /* nothing to match (a later push moves the version: a refresh) */
        if (dist)
            *dist = INFINITY;
        return UINT32_MAX;
    }
    uint32_t first = m->L;
    if (m->primed && row_gen && m->gen_valid) {
        /* only the rows rewritten since the last match (usually one): a
         * tight scan of the generations, most rows skipped at once */
        for (uint32_t l = 0; l < m->L; l++)
            if (m->gen[l] != row_gen[l]) {
                m->gen[l] = row_gen[l];
                if (match_row(m, cur, l) && first == m->L)
                    first = l;
            }
    } else {
        for (uint32_t l = 0; l < m->L; l++) {
            if (row_gen)
                m->gen[l] = row_gen[l];
            if (match_row(m, cur, l) && first == m->L)
                first = l;
        }
    }
    m->primed = 1;
    m->gen_valid = row_gen != NULL;
    update_prefix(m, first);
    uint32_t best = UINT32_MAX;
    double min_d = INFINITY;
    /* eam_distance: the sum over l in order, then 1 - s / L */
    distance_lanes(m->pre + (size_t)(m->L - 1) * m->nb * B, m->L, m->dist, (size_t)m->nb * B); /* L >= 1 */
    for (uint32_t i = 0; i < m->n; i++)
        if (min_d > m->dist[i]) {
            min_d = m->dist[i];
            best = i;
        }
    if (dist)
        *dist = min_d;
    return best;
}
