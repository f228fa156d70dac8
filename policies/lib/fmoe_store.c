#include "policies/lib/fmoe_store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/fmoe_cosfilter.h"
#include "policies/lib/fmoe_filter.h"
#include "policies/lib/fmoe_scan.h"
#include "policies/lib/fmoe_store_priv.h"
#include "sim/core/err.h"

#define B FMOE_BLOCK

/* ---- layout ---- */

static size_t round64(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Carves 64-byte aligned arrays out of one zeroed allocation: the first
 * pass (base NULL) only sums their sizes. */
typedef struct {
    char *base;
    size_t used;
} carver;

static void *carve(carver *c, size_t n, size_t size)
{
    void *p = c->base ? c->base + c->used : NULL;
    c->used += round64(n * size);
    return p;
}

static void carve_all(fmoe_store *s, carver *c)
{
    size_t LJ = (size_t)s->L * s->J, S = s->slots, q = LJ > s->D ? LJ : s->D;
    s->emb = s->D ? carve(c, S * s->D, sizeof *s->emb) : NULL;
    s->map = carve(c, S * LJ, sizeof *s->map);
    s->emb_norm2 = carve(c, S, sizeof *s->emb_norm2);
    s->emb_norm = carve(c, S, sizeof *s->emb_norm);
    s->map_norm2 = carve(c, S, sizeof *s->map_norm2);
    s->map_norm = carve(c, S, sizeof *s->map_norm);
    s->row_norm2 = carve(c, S * s->L, sizeof *s->row_norm2);
    s->prefix_norm2 = carve(c, S * s->L, sizeof *s->prefix_norm2);
    s->prefix_norm = carve(c, S * s->L, sizeof *s->prefix_norm);
    s->prefix_inv = carve(c, S * s->L, sizeof *s->prefix_inv);
    s->row_norm_up = carve(c, S * s->L, sizeof *s->row_norm_up);
    s->layer_ids = carve(c, s->L ? s->L : 1, sizeof *s->layer_ids);
    s->layer_norm = carve(c, s->L ? s->L : 1, sizeof *s->layer_norm);
    s->inv_map_norm = carve(c, S, sizeof *s->inv_map_norm);
    s->inv_emb_norm = carve(c, S, sizeof *s->inv_emb_norm);
    s->thr = carve(c, S, sizeof *s->thr);
    s->stage_bound = carve(c, S * FMOE_STAGES, sizeof *s->stage_bound);
    s->blocks = carve(c, S / B, sizeof *s->blocks);
    s->entry_nonfinite = carve(c, S, sizeof *s->entry_nonfinite);
    s->dot = carve(c, S, sizeof *s->dot);
    s->norm2_own = carve(c, S, sizeof *s->norm2_own);
    s->score = carve(c, S, sizeof *s->score);
    s->acc = carve(c, S, sizeof *s->acc);
    s->acc2 = carve(c, S, sizeof *s->acc2);
    s->cols = carve(c, q ? q : 1, sizeof *s->cols);
    s->map16 = carve(c, S * LJ, sizeof *s->map16);
    s->fdot = carve(c, S, sizeof *s->fdot);
    s->fscore = carve(c, S, sizeof *s->fscore);
    s->prefix_invf = carve(c, S * s->L, sizeof *s->prefix_invf);
    s->synced = carve(c, S, sizeof *s->synced);
    s->cand = carve(c, S, sizeof *s->cand);
    s->traj_rows = carve(c, LJ ? LJ : 1, sizeof *s->traj_rows);
    s->entry_unfilterable = carve(c, S, sizeof *s->entry_unfilterable);
    s->w = carve(c, q ? q : 1, sizeof *s->w);
    s->inv_emb_f = carve(c, S, sizeof *s->inv_emb_f);
    s->inv_map_f = carve(c, S, sizeof *s->inv_map_f);
    s->fe = carve(c, S, sizeof *s->fe);
    s->fm = carve(c, S, sizeof *s->fm);
    s->est = carve(c, S, sizeof *s->est);
    s->wf = carve(c, q ? q : 1, sizeof *s->wf);
    s->cos_cand = carve(c, S, sizeof *s->cos_cand);
    s->entry_cos_unfilterable = carve(c, S, sizeof *s->entry_cos_unfilterable);
    s->ecols = carve(c, s->D ? s->D : 1, sizeof *s->ecols);
    s->ew = carve(c, s->D ? s->D : 1, sizeof *s->ew);
    s->ewf = carve(c, s->D ? s->D : 1, sizeof *s->ewf);
    s->fstage_bound = carve(c, S * FMOE_STAGES, sizeof *s->fstage_bound);
    s->layer_norm_f = carve(c, s->L ? s->L : 1, sizeof *s->layer_norm_f);
}

void fmoe_store_init(fmoe_store *s, uint32_t cap, uint32_t L, uint32_t J, uint32_t D, uint32_t d)
{
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->L = L;
    s->J = J;
    s->D = D;
    s->d = d;
    s->slots = (uint32_t)(((uint64_t)cap + B - 1) / B * B);
    if (!fmoe_store_fits(cap, L, J)) { /* callers check first (fmoe_create) */
        fputs("moesim: fmoe map store beyond its 2^32 map columns\n", stderr);
        abort();
    }
    s->kernels = fmoe_kernels_pick();
    s->filter = fmoe_filter_pick();
    s->cosf = fmoe_cosf_pick();
    carver c = {NULL, 0};
    carve_all(s, &c);
    s->mem = ms_xcalloc(c.used + 63, 1);
    uintptr_t p = (uintptr_t)s->mem;
    c = (carver){(char *)s->mem + (round64(p) - p), 0};
    carve_all(s, &c);
    for (uint32_t l = 0; l < L; l++)
        s->layer_ids[l] = l;
    s->norm2 = s->norm2_own;
    s->prefix_floor = INFINITY;
}

void fmoe_store_free(fmoe_store *s)
{
    free(s->mem);
    memset(s, 0, sizeof *s);
}

int fmoe_store_fits(uint32_t cap, uint32_t L, uint32_t J)
{
    uint64_t blocks = ((uint64_t)cap + B - 1) / B;
    return blocks * L * J <= UINT32_MAX;
}

size_t fmoe_store_bytes_of(uint64_t n, uint32_t L, uint32_t J, uint32_t D)
{
    return (size_t)n * ((size_t)D + (size_t)L * J) * sizeof(float);
}

size_t fmoe_store_bytes(const fmoe_store *s)
{
    return fmoe_store_bytes_of(s->n, s->L, s->J, s->D);
}

/* Value i of entry y in a blocked array of `len` values per entry. */
static size_t at(uint32_t y, size_t i, size_t len)
{
    return ((size_t)(y / B) * len + i) * B + y % B;
}

/* Entry y's value j of layer l's row in the layer-major map array: block
 * y / B of layer l's slice (column fmoe_map_col(l J) + j of a blocked array
 * of J values per entry); the row's values are B floats apart. */
static float *map_row_at(const fmoe_store *s, uint32_t y, uint32_t l)
{
    return s->map + (size_t)l * s->slots * s->J + at(y, 0, s->J);
}

static void gather(const float *blocked, size_t len, uint32_t y, size_t i0, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = blocked[at(y, i0 + i, len)];
}

void fmoe_store_get_map(const fmoe_store *s, uint32_t y, float *out)
{
    for (uint32_t l = 0; l < s->L; l++) {
        const float *row = map_row_at(s, y, l);
        for (uint32_t j = 0; j < s->J; j++)
            out[(size_t)l * s->J + j] = row[(size_t)j * B];
    }
}

void fmoe_store_get_row(const fmoe_store *s, uint32_t y, uint32_t l, float *out)
{
    gather(fmoe_map_layer(s, l), s->J, y, 0, s->J, out);
}

void fmoe_store_get_emb(const fmoe_store *s, uint32_t y, float *out)
{
    gather(s->emb, s->D, y, 0, s->D, out);
}

/* The terms of q[0..n) into cols / w (and wf when not NULL), column
 * col0 + i for q[i]: the non-zero ones, or all when `all`; their count.
 * Each value is written at the next free place and kept by advancing past
 * it (no branch per value: gate rows are mostly non-zero; the place is at
 * most i, inside the arrays).  (Locals, not s->: the stores through cols
 * could alias the store's fields and force a reload per value.) */
static uint32_t terms_into(const float *q, uint32_t n, int all, uint32_t col0, uint32_t *restrict cols,
                           double *restrict w, float *restrict wf)
{
    uint32_t nc = 0;
    if (wf)
        for (uint32_t i = 0; i < n; i++) {
            cols[nc] = col0 + i;
            w[nc] = q[i];
            wf[nc] = q[i];
            nc += q[i] != 0 || all;
        }
    else
        for (uint32_t i = 0; i < n; i++) {
            cols[nc] = col0 + i;
            w[nc] = q[i];
            nc += q[i] != 0 || all;
        }
    return nc;
}

uint32_t fmoe_query_terms(fmoe_store *s, const float *q, uint32_t n)
{
    return terms_into(q, n, s->nonfinite != 0, 0, s->cols, s->w, NULL);
}

uint32_t fmoe_map_terms(fmoe_store *s, const float *map)
{
    uint32_t nc = 0;
    int all = s->nonfinite != 0;
    for (uint32_t l = 0; l < s->L; l++) /* layer l's row: columns fmoe_map_col(l J) + j */
        nc += terms_into(map + (size_t)l * s->J, s->J, all, fmoe_map_col(s, l * s->J), s->cols + nc, s->w + nc,
                         s->wf + nc);
    return nc;
}

uint32_t fmoe_emb_terms(fmoe_store *s, const float *emb)
{
    return terms_into(emb, s->D, s->nonfinite != 0, 0, s->ecols, s->ew, s->ewf);
}

void fmoe_scan_query(fmoe_store *s, const float *vals, size_t len, size_t first, const float *q, uint32_t n,
                     double *out)
{
    uint32_t nc = fmoe_query_terms(s, q, n);
    s->kernels->scan(vals, len, first, (s->n + B - 1) / B, s->cols, s->w, nc, out);
}

/* ---- formulas ---- */

double fmoe_cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / (sqrt(aa) * sqrt(bb)) : 0.0;
}

/* First index of the largest value, as `if (best < 0 || c > best_c)` picks it. */
static int argmax_first(const double *c, uint32_t n, double *best_c)
{
    int best = -1;
    double bc = 0;
    for (uint32_t y = 0; y < n; y++)
        if (best < 0 || c[y] > bc) {
            best = (int)y;
            bc = c[y];
        }
    *best_c = bc;
    return best;
}

int fmoe_semantic_search(fmoe_store *s, const float *e_new, double *score)
{
    if (!s->n || !s->D)
        return -1;
    int best;
    if (fmoe_semantic_filtered(s, e_new, &best, score)) /* the same entry and score (fmoe_cosfilter.h) */
        return best;
    double aa = fmoe_norm2_of(e_new, s->D);
    fmoe_scan_query(s, s->emb, s->D, 0, e_new, s->D, s->acc);
    for (uint32_t y = 0; y < s->n; y++)
        s->acc[y] = fmoe_cosine_of(s->acc[y], aa, s->emb_norm2[y], s->emb_norm[y]);
    return argmax_first(s->acc, s->n, score);
}

double fmoe_rdy(uint32_t d, uint32_t L, double score_sem, double score_map)
{
    double w = (double)d / L;
    return w * score_sem + (1.0 - w) * score_map;
}

double fmoe_store_rdy(const fmoe_store *s, uint32_t y, const float *emb, const float *map)
{
    size_t LJ = (size_t)s->L * s->J;
    float *m = ms_xcalloc(LJ + s->D + 1, sizeof *m), *e = m + LJ;
    fmoe_store_get_map(s, y, m);
    fmoe_store_get_emb(s, y, e);
    double sem = s->D ? fmoe_cosine(emb, e, s->D) : 0.0;
    double r = fmoe_rdy(s->d, s->L, sem, fmoe_cosine(map, m, LJ));
    free(m);
    return r;
}

int fmoe_all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

static void scatter(float *blocked, size_t len, uint32_t y, const float *v)
{
    for (size_t i = 0; i < len; i++)
        blocked[at(y, i, len)] = v[i];
}

/* Entry y's map into map16; returns 1 when the filter cannot take the
 * entry: a negative value, or one whose bfloat16 overflows (a non-finite
 * one is counted apart). */
static uint8_t write_bf16(fmoe_store *s, uint32_t y, const float *map)
{
    uint8_t bad = 0;
    for (uint32_t l = 0; l < s->L; l++)
        for (uint32_t j = 0; j < s->J; j++) {
            float v = map[(size_t)l * s->J + j];
            bad |= v < 0;
            uint16_t h = fmoe_bf16(v);
            bad |= isfinite(v) && !isfinite(fmoe_bf16_value(h));
            s->map16[(size_t)l * s->slots * s->J + ((size_t)(y / B) * s->J + j) * B + fmoe_bf16_pos(y % B)] = h;
        }
    return bad;
}

uint32_t fmoe_store_add(fmoe_store *s, const float *emb, const float *map)
{
    size_t LJ = (size_t)s->L * s->J;
    uint32_t y = s->n < s->cap ? s->n++ : fmoe_dedup(s, emb, map);
    if (s->D)
        scatter(s->emb, s->D, y, emb);
    for (uint32_t l = 0; l < s->L; l++) {
        float *row = map_row_at(s, y, l);
        for (uint32_t j = 0; j < s->J; j++)
            row[(size_t)j * B] = map[(size_t)l * s->J + j];
    }
    uint8_t unfilterable = write_bf16(s, y, map);
    s->emb_norm2[y] = s->D ? fmoe_norm2_of(emb, s->D) : 0.0;
    s->emb_norm[y] = sqrt(s->emb_norm2[y]);
    s->map_norm2[y] = fmoe_norm2_of(map, LJ);
    s->map_norm[y] = sqrt(s->map_norm2[y]);
    s->inv_map_norm[y] = s->map_norm[y] > 0 ? 1.0 / s->map_norm[y] : 0.0;
    s->inv_emb_norm[y] = s->emb_norm[y] > 0 ? 1.0 / s->emb_norm[y] : 0.0;
    s->inv_map_f[y] = (float)s->inv_map_norm[y];
    s->inv_emb_f[y] = (float)s->inv_emb_norm[y];
    uint8_t cos_bad = !fmoe_cosf_norms_ok(s->emb_norm[y], s->map_norm[y]);
    s->cos_unfilterable = s->cos_unfilterable - s->entry_cos_unfilterable[y] + cos_bad;
    s->entry_cos_unfilterable[y] = cos_bad;
    double prefix = 0; /* summed as the trajectory search sums norm2[y] over layers 0, 1, ... */
    for (uint32_t l = 0; l < s->L; l++) {
        double r = fmoe_norm2_of(map + (size_t)l * s->J, s->J);
        s->row_norm2[(size_t)l * s->slots + y] = r;
        float up = (float)sqrt(r); /* an upper bound: what is dropped must not be able to win */
        s->row_norm_up[at(y, l, s->L)] = (double)up < sqrt(r) ? nextafterf(up, INFINITY) : up;
        prefix += r;
        s->prefix_norm2[(size_t)l * s->slots + y] = prefix;
        double root = sqrt(prefix);
        s->prefix_norm[(size_t)l * s->slots + y] = root;
        s->prefix_inv[(size_t)l * s->slots + y] = root > 0 ? 1.0 / root : 0.0;
        float invf = (float)s->prefix_inv[(size_t)l * s->slots + y]; /* the filter's: normal or 0 */
        unfilterable |= invf != 0 && !(isnormal(invf) && invf < 0x1p100f);
        s->prefix_invf[(size_t)l * s->slots + y] = invf;
        s->invf_max = invf > s->invf_max ? invf : s->invf_max;
        if (root > 0 && root < s->prefix_floor)
            s->prefix_floor = root;
    }
    uint8_t bad = !fmoe_all_finite(map, LJ) || (s->D && !fmoe_all_finite(emb, s->D));
    s->nonfinite = s->nonfinite - s->entry_nonfinite[y] + bad;
    s->entry_nonfinite[y] = bad;
    s->unfilterable = s->unfilterable - s->entry_unfilterable[y] + unfilterable;
    s->entry_unfilterable[y] = unfilterable;
    fmoe_traj_reset(s);
    return y;
}

void fmoe_traj_reset(fmoe_store *s)
{
    s->norm2 = s->norm2_own;
    if (!s->traj_zeroed) { /* else nothing wrote them since they were zeroed (a run of adds) */
        memset(s->dot, 0, s->slots * sizeof *s->dot);
        memset(s->norm2, 0, s->slots * sizeof *s->norm2);
        memset(s->fdot, 0, s->slots * sizeof *s->fdot);
        s->traj_zeroed = 1;
    }
    s->filtered = 0;
    s->traj_norm2 = 0;
    s->observed = 0;
    s->in_order = 1;
}

/* norm2 back in its own array, to be summed into: it held the cached prefix
 * row of the layers observed so far, 0 .. observed - 1 in order, whose value
 * is what the steps would have summed (the same additions, in the same order,
 * from +0). */
static void traj_norm2_own(fmoe_store *s)
{
    if (s->norm2 == s->norm2_own)
        return;
    memcpy(s->norm2_own, s->norm2, s->slots * sizeof *s->norm2);
    s->norm2 = s->norm2_own;
}

/* Scores as the traj kernels compute them, from dot and the cached prefix
 * roots (the fused kernel stores none): for its NaN fallback. */
static void traj_scores_in_order(fmoe_store *s, const double *sq)
{
    double st = sqrt(s->traj_norm2);
    for (uint32_t y = 0; y < s->n; y++)
        s->score[y] = s->traj_norm2 > 0 && sq[y] > 0 ? s->dot[y] / (st * sq[y]) : 0.0;
}

void fmoe_traj_observe(fmoe_store *s, uint32_t l, const float *P)
{
    s->traj_zeroed = 0;
    for (uint32_t j = 0; j < s->J; j++)
        s->traj_norm2 += (double)P[j] * P[j];
    /* layers 0..l observed in order: norm2[y] becomes the cached prefix sum, whose sqrt is cached too */
    s->in_order = s->in_order && s->observed == l;
    const double *sq = s->in_order ? s->prefix_norm + (size_t)l * s->slots : NULL;
    if (sq && fmoe_traj_filtered(s, l, P)) { /* the same entry and score (fmoe_filter.h) */
        s->norm2 = s->prefix_norm2 + (size_t)l * s->slots;
        s->observed++;
        return;
    }
    fmoe_traj_sync(s); /* the exact step: every dot up to date */
    if (sq && s->kernels->traj_scan) {
        /* in order, one pass: acc[y] = P . m_y[l] added to dot[y] as it is summed; norm2 is the
         * cached prefix sum then (copied into norm2_own if the order breaks) */
        uint32_t nc = fmoe_query_terms(s, P, s->J);
        fmoe_roots r = {sq, s->prefix_inv + (size_t)l * s->slots, s->prefix_floor, s->acc};
        s->best = s->kernels->traj_scan(fmoe_map_layer(s, l), s->J, 0, s->cols, s->w, nc, s->dot, &r, s->n,
                                        s->traj_norm2, &s->best_score);
        s->norm2 = s->prefix_norm2 + (size_t)l * s->slots;
        if (s->best < 0 && s->n) { /* a NaN score (or the filter undecided): the scalar rule over score[] */
            traj_scores_in_order(s, sq);
            s->best = argmax_first(s->score, s->n, &s->best_score);
        }
        s->observed++;
        return;
    }
    traj_norm2_own(s);
    /* acc[y] = P . m_y[l], from 0 over j, then added to the running sums */
    fmoe_scan_query(s, fmoe_map_layer(s, l), s->J, 0, P, s->J, s->acc);
    const double *rn = s->row_norm2 + (size_t)l * s->slots; /* cached |m_y[l]|^2 */
    s->best = s->kernels->traj(s->dot, s->norm2, s->score, s->acc, rn, sq, s->n, s->traj_norm2, &s->best_score);
    if (s->best < 0 && s->n) /* a NaN score: the scalar rule over score[] */
        s->best = argmax_first(s->score, s->n, &s->best_score);
    s->observed++;
}

int fmoe_traj_best(const fmoe_store *s, double *score)
{
    if (!s->n || !s->observed)
        return -1;
    *score = s->best_score;
    return s->best;
}

double fmoe_delta(double score)
{
    return fmax(0.0, fmin(1.0 - score, 1.0));
}

typedef struct {
    float p;
    uint32_t e;
} ranked_p;

static int by_p_desc(const void *a, const void *b)
{
    const ranked_p *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? 1 : -1;
    return x->e < y->e ? -1 : 1;
}

void fmoe_sort_desc(const float *P, uint32_t J, uint32_t *order)
{
    ranked_p *r = ms_xcalloc(J, sizeof *r);
    for (uint32_t j = 0; j < J; j++)
        r[j] = (ranked_p){P[j], j};
    qsort(r, J, sizeof *r, by_p_desc);
    for (uint32_t j = 0; j < J; j++)
        order[j] = r[j].e;
    free(r);
}

/* a ranks before b: larger p, or equal p and the lower id */
static inline int ranks_before(fmoe_ranked a, fmoe_ranked b)
{
    return a.p > b.p || (a.p == b.p && a.e < b.e);
}

static void sift_down(fmoe_ranked *h, uint32_t n, uint32_t i)
{
    fmoe_ranked x = h[i];
    for (uint32_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && ranks_before(h[c + 1], h[c]))
            c++;
        if (!ranks_before(h[c], x))
            break;
        h[i] = h[c];
    }
    h[i] = x;
}

/* The heap of (P[j], j); 0 when P holds a NaN (no heap: the caller sorts). */
static int heap_of(const float *P, uint32_t J, fmoe_ranked *h)
{
    for (uint32_t j = 0; j < J; j++) {
        if (isnan(P[j]))
            return 0;
        h[j] = (fmoe_ranked){P[j], j};
    }
    for (uint32_t i = J / 2; i-- > 0;)
        sift_down(h, J, i);
    return 1;
}

static uint32_t heap_pop(fmoe_ranked *h, uint32_t *n)
{
    uint32_t top = h[0].e;
    h[0] = h[--*n];
    sift_down(h, *n, 0);
    return top;
}

void fmoe_top_desc(const float *P, uint32_t J, uint32_t n, uint32_t *order, fmoe_ranked *scratch)
{
    if (!heap_of(P, J, scratch)) {
        fmoe_sort_desc(P, J, order);
        return;
    }
    uint32_t left = J;
    for (uint32_t i = 0; i < n && left; i++)
        order[i] = heap_pop(scratch, &left);
}

uint32_t fmoe_select_paper_top(const float *P, uint32_t J, double delta, uint32_t K, uint32_t *order,
                               fmoe_ranked *scratch)
{
    if (!heap_of(P, J, scratch)) {
        fmoe_sort_desc(P, J, order);
        return fmoe_select_paper(P, order, J, delta, K);
    }
    double sum = 0; /* fmoe_select_paper's loop, each next expert popped when it needs it */
    uint32_t n = 0, left = J;
    while (n < J && (n < K || sum < delta)) {
        order[n] = heap_pop(scratch, &left);
        sum += P[order[n++]];
    }
    return n;
}

uint32_t fmoe_select_paper(const float *P, const uint32_t *order, uint32_t J, double delta, uint32_t K)
{
    double sum = 0;
    uint32_t n = 0;
    while (n < J && (n < K || sum < delta))
        sum += P[order[n++]];
    return n;
}

uint32_t fmoe_select_code(const float *P, const uint32_t *order, uint32_t J, double delta, uint32_t K)
{
    double sum = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < J; i++) {
        sum += P[order[i]];
        if (sum <= delta)
            k++;
    }
    if (k < K)
        k = K;
    return k > J ? J : k;
}

double fmoe_priority_paper(double p, int64_t t, int64_t l_now)
{
    return p / (double)(t - l_now);
}

double fmoe_priority_code(double p, uint32_t t, uint32_t start, uint32_t end)
{
    return p * (1.0 - (double)(t - start) / (double)(end + 1));
}

double fmoe_evict_key_code(double p, double count)
{
    return trunc(p * count);
}

uint64_t fmoe_evict_key_code_f32(float p, uint64_t count)
{
    float prod = p * (float)count;
    return prod > 0 ? (uint64_t)prod : 0;
}
