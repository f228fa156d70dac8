/* The fast path of the row checks (trace_check.h): one pass over a
 * request's cells that only answers "all good", with no branch inside a
 * cell.  Each condition of trace.c's check_topk_cell, check_full_cell,
 * check_recorded_hits and check_spec_cells becomes a 0/1 value OR-ed into
 * `bad`; the loop stops at the end of a row whose cells had one.  Then
 * ms_request_check_parts runs the cell-by-cell checks, which name the first
 * bad value in one line (and pass the request if it has none).  Conditions
 * are written as "not (the good case)" so that NaN, which fails every
 * comparison, is always bad.  The top-k weight sums are the checks' own:
 * doubles, added in index order, so the verdict on every sum is the same.
 * A full row's probabilities are summed in doubles eight lanes at a time
 * (a chain of J dependent additions would set the pace); that sum differs
 * from the checks' index-order one by less than J 2^-51 (each is within
 * (J - 1) 2^-53 S of the exact sum S <= 2 of the floats), so the fast path
 * calls a row good only within MS_SUM_TOL - J 2^-50 of 1 and leaves rows
 * closer to the limit to the checks: it never passes a row they refuse.
 * Ids index the probabilities only after a clamp into
 * [0, J), so a bad id reads nothing out of bounds (it is bad anyway).
 * tests/unit/test_check_fast.c compares the verdict with the checks'. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "traces/format/trace_check.h"

#define FAST_MAX_K 16

typedef struct {
    uint32_t J, L, depth;
    double sum_tol;   /* MS_SUM_TOL - J 2^-50: the fast path's bound on |sum of a row's probabilities - 1| */
    int renorm;       /* 2: topk_ids (weights 1/K); 1: topk_renorm; 0: raw or full */
    float one_over_k; /* (float)(1.0 / K) */
    float w_max;      /* the largest float x with (double)x <= 1 + MS_SUM_TOL */
} cell_shape;

/* ---- element-wise conditions, 4 elements at a time (GCC vector extensions:
 * SSE2 on x86-64, NEON on arm64), the tail one by one ---- */

typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef double vd4 __attribute__((vector_size(32)));

static inline vf4 load_f4(const float *p)
{
    vf4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline vi4 load_i4(const int32_t *p)
{
    vi4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t any4(vi4 v)
{
    return (uint32_t)((v[0] | v[1] | v[2] | v[3]) != 0);
}

/* Every id in [-1, J): (uint32_t)id + 1 <= J. */
static uint32_t ids_flat_bad(const int32_t *ids, size_t n, uint32_t J)
{
    typedef uint32_t vu4 __attribute__((vector_size(16)));
    vi4 acc = {0, 0, 0, 0};
    vu4 one = {1, 1, 1, 1}, lim = {J, J, J, J};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        acc |= (vi4)((vu4)load_i4(ids + i) + one > lim);
    uint32_t bad = any4(acc);
    for (; i < n; i++)
        bad |= (uint32_t)ids[i] + 1u > J;
    return bad;
}

/* Every weight finite in [0, 1 + tol] (NaN fails both comparisons), 0
 * where its id is -1, and 1/K where present when renorm == 2. */
static uint32_t weights_flat_bad(const cell_shape *c, const int32_t *ids, const float *w, size_t n)
{
    vi4 acc = {0, 0, 0, 0}, minus1 = {-1, -1, -1, -1}, izero = {0, 0, 0, 0};
    vf4 zero = {0, 0, 0, 0}, hi = {c->w_max, c->w_max, c->w_max, c->w_max};
    vf4 ok = {c->one_over_k, c->one_over_k, c->one_over_k, c->one_over_k};
    vi4 r2 = c->renorm == 2 ? minus1 : izero;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vf4 x = load_f4(w + i);
        vi4 id = load_i4(ids + i);
        acc |= ~(x >= zero) | ~(x <= hi);
        acc |= (id == minus1) & (x != zero);
        acc |= r2 & (id > minus1) & (x != ok);
    }
    uint32_t bad = any4(acc);
    for (; i < n; i++) {
        float x = w[i];
        bad |= (uint32_t)!(x >= 0.0f) | (uint32_t)!(x <= c->w_max);
        bad |= (uint32_t)(ids[i] == -1) & (uint32_t)(x != 0.0f);
        bad |= (uint32_t)(c->renorm == 2) & (uint32_t)(ids[i] >= 0) & (uint32_t)(x != c->one_over_k);
    }
    return bad;
}

/* Every probability finite and >= 0. */
static uint32_t probs_flat_bad(const float *p, size_t n)
{
    vi4 acc = {0, 0, 0, 0};
    vf4 zero = {0, 0, 0, 0}, hi = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vf4 x = load_f4(p + i);
        acc |= ~(x >= zero) | ~(x <= hi);
    }
    uint32_t bad = any4(acc);
    for (; i < n; i++)
        bad |= (uint32_t)!(p[i] >= 0.0f) | (uint32_t)!(p[i] <= FLT_MAX);
    return bad;
}

/* ---- per-cell conditions (the element-wise ones passed) ---- */

/* No present id twice; with weights, the sum at most 1 + tol, within tol
 * of 1 when renormalised and all K present.  A missing slot's weight is 0
 * (weights_flat_bad), so adding it leaves the checks' sum unchanged. */
static inline __attribute__((always_inline)) uint32_t topk_cell_bad(const cell_shape *c, const int32_t *ids,
                                                                     const float *w, uint32_t K)
{
    uint32_t bad = 0, present = 0;
    double sum = 0;
    for (uint32_t k = 0; k < K; k++) {
        int32_t id = ids[k];
        for (uint32_t k2 = 0; k2 < k; k2++)
            bad |= (uint32_t)(ids[k2] == id) & (uint32_t)(id >= 0);
        present += id >= 0;
        if (w)
            sum += w[k];
    }
    if (w) {
        bad |= (uint32_t)(c->renorm != 0 && present == K) & (uint32_t)!(fabs(sum - 1.0) <= MS_SUM_TOL);
        bad |= (uint32_t)!(sum <= 1.0 + MS_SUM_TOL);
    }
    return bad;
}

/* p[0..J) summed in doubles, eight lanes (two chains) at a time. */
static inline __attribute__((always_inline)) double probs_sum(const float *p, uint32_t J)
{
    vd4 s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
    uint32_t j = 0;
    for (; j + 8 <= J; j += 8) {
        s0 += __builtin_convertvector(load_f4(p + j), vd4);
        s1 += __builtin_convertvector(load_f4(p + j + 4), vd4);
    }
    s0 += s1;
    double sum = (s0[0] + s0[1]) + (s0[2] + s0[3]);
    for (; j < J; j++)
        sum += p[j];
    return sum;
}

/* The probabilities (finite, >= 0: probs_flat_bad) sum to 1 within tol;
 * every top-k slot present, topk_w (when read) within MS_TOPK_PROB_TOL of
 * its probability, and no other expert's probability above the smallest
 * selected one: with distinct ids (topk_cell_bad), the experts above it are
 * exactly the selected ones above it.  Ids index p after a clamp into
 * [0, J): an id out of range reads nothing outside (and is bad anyway). */
static inline __attribute__((always_inline)) uint32_t full_cell_bad(const cell_shape *c, const float *p,
                                                                     const int32_t *ids, const float *w, uint32_t K)
{
    uint32_t bad = 0, J = c->J;
    uint32_t at[FAST_MAX_K];
    float min_sel = INFINITY;
    for (uint32_t k = 0; k < K; k++) {
        uint32_t u = (uint32_t)ids[k];
        at[k] = u < J ? u : 0;
        bad |= (uint32_t)(ids[k] < 0);
        float pk = p[at[k]];
        if (w)
            bad |= (uint32_t)!(fabs((double)w[k] - (double)pk) <= MS_TOPK_PROB_TOL);
        min_sel = pk < min_sel ? pk : min_sel;
    }
    int32_t above_sel = 0;
    for (uint32_t k = 0; k < K; k++)
        above_sel += p[at[k]] > min_sel;
    bad |= (uint32_t)!(fabs(probs_sum(p, J) - 1.0) <= c->sum_tol);
    vi4 acc = {0, 0, 0, 0};
    vf4 m4 = {min_sel, min_sel, min_sel, min_sel};
    uint32_t j = 0;
    for (; j + 4 <= J; j += 4)
        acc += (vi4)(load_f4(p + j) > m4); /* -1 per element above */
    int32_t above = -(acc[0] + acc[1] + acc[2] + acc[3]);
    for (; j < J; j++)
        above += p[j] > min_sel;
    bad |= (uint32_t)(above != above_sel);
    return bad;
}

static inline __attribute__((always_inline)) uint32_t hits_cell_bad(const int32_t *ids, const int8_t *hit,
                                                                     uint32_t K)
{
    uint32_t bad = 0;
    for (uint32_t k = 0; k < K; k++) {
        bad |= (uint32_t)(hit[k] < -1) | (uint32_t)(hit[k] > 1);
        bad |= (uint32_t)(ids[k] == -1) & (uint32_t)(hit[k] != -1);
    }
    return bad;
}

/* gate_{l+d}(h_l) for d = 1..depth: a top-k cell while l + d < L; beyond,
 * every id -1 (so every weight 0: weights_flat_bad). */
static inline __attribute__((always_inline)) uint32_t spec_cells_bad(const cell_shape *c, const int32_t *ids,
                                                                      const float *w, uint32_t l, uint32_t K)
{
    uint32_t bad = 0;
    for (uint32_t d = 0; d < c->depth; d++, ids += K, w += K) {
        if (l + d + 1 < c->L) {
            bad |= topk_cell_bad(c, ids, w, K);
            continue;
        }
        for (uint32_t k = 0; k < K; k++)
            bad |= (uint32_t)(ids[k] != -1);
    }
    return bad;
}

typedef struct {
    const float *w, *probs;
    const int8_t *hits;
    const int32_t *spec_ids;
    const float *spec_w;
} row_arrays;

/* 0 when every row is good; K is a constant in each caller below. */
static inline __attribute__((always_inline)) uint32_t rows_bad(const cell_shape *c, const ms_request *r,
                                                                const row_arrays *a, uint32_t K)
{
    const int32_t *ids = r->topk_ids;
    size_t spec_cell = (size_t)c->depth * K;
    for (uint32_t row = 0; row < r->n_rows; row++) {
        uint32_t bad = 0;
        for (uint32_t l = 0; l < c->L; l++) {
            size_t cell = (size_t)row * c->L + l, o = cell * K;
            bad |= topk_cell_bad(c, ids + o, a->w ? a->w + o : NULL, K);
            if (a->probs)
                bad |= full_cell_bad(c, a->probs + cell * c->J, ids + o, a->w ? a->w + o : NULL, K);
            if (a->hits)
                bad |= hits_cell_bad(ids + o, a->hits + o, K);
            if (a->spec_ids)
                bad |= spec_cells_bad(c, a->spec_ids + cell * spec_cell, a->spec_w + cell * spec_cell, l, K);
        }
        if (bad)
            return 1;
    }
    return 0;
}

static uint32_t rows_bad_k1(const cell_shape *c, const ms_request *r, const row_arrays *a)
{
    return rows_bad(c, r, a, 1);
}
static uint32_t rows_bad_k2(const cell_shape *c, const ms_request *r, const row_arrays *a)
{
    return rows_bad(c, r, a, 2);
}
static uint32_t rows_bad_k4(const cell_shape *c, const ms_request *r, const row_arrays *a)
{
    return rows_bad(c, r, a, 4);
}
static uint32_t rows_bad_k8(const cell_shape *c, const ms_request *r, const row_arrays *a)
{
    return rows_bad(c, r, a, 8);
}
static uint32_t rows_bad_any(const cell_shape *c, const ms_request *r, const row_arrays *a, uint32_t K)
{
    return rows_bad(c, r, a, K);
}

int ms_request_rows_fast_ok(const ms_trace_meta *m, const ms_request *r, unsigned parts)
{
    if (m->K == 0 || m->K > FAST_MAX_K || !r->topk_ids)
        return 0;
    cell_shape c = {m->J, m->L, 0, MS_SUM_TOL - (double)m->J * 0x1p-50,
                    m->probs_kind == MS_PROBS_TOPK_IDS ? 2 : m->probs_kind == MS_PROBS_TOPK_RENORM,
                    (float)(1.0 / m->K), (float)(1.0 + MS_SUM_TOL)};
    if ((double)c.w_max > 1.0 + MS_SUM_TOL)
        c.w_max = nextafterf(c.w_max, 0.0f);
    row_arrays a = {0};
    a.w = parts & MS_PART_WEIGHTS ? r->topk_w : NULL;
    if (m->probs_kind == MS_PROBS_FULL && (parts & MS_PART_PROBS))
        a.probs = r->probs;
    if (parts & MS_PART_HITS)
        a.hits = r->recorded_hit;
    if (m->spec_depth && (parts & MS_PART_SPEC)) {
        a.spec_ids = r->spec_ids;
        a.spec_w = r->spec_w;
        c.depth = m->spec_depth;
    }
    if ((a.probs == NULL) != !(m->probs_kind == MS_PROBS_FULL && (parts & MS_PART_PROBS)) ||
        (c.depth && (!a.spec_ids || !a.spec_w)) || ((parts & MS_PART_WEIGHTS) && !a.w))
        return 0; /* a selected part is missing: the checks say which */
    size_t cells = (size_t)r->n_rows * m->L, spec = cells * c.depth * m->K;
    if (ids_flat_bad(r->topk_ids, cells * m->K, m->J) || (a.w && weights_flat_bad(&c, r->topk_ids, a.w, cells * m->K)) ||
        (a.probs && probs_flat_bad(a.probs, cells * m->J)) ||
        (spec && (ids_flat_bad(a.spec_ids, spec, m->J) || weights_flat_bad(&c, a.spec_ids, a.spec_w, spec))))
        return 0;
    uint32_t bad;
    switch (m->K) {
    case 1: bad = rows_bad_k1(&c, r, &a); break;
    case 2: bad = rows_bad_k2(&c, r, &a); break;
    case 4: bad = rows_bad_k4(&c, r, &a); break;
    case 8: bad = rows_bad_k8(&c, r, &a); break;
    default: bad = rows_bad_any(&c, r, &a, m->K); break;
    }
    return !bad;
}
