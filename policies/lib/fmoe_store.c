#include "policies/lib/fmoe_store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/err.h"

void fmoe_store_init(fmoe_store *s, uint32_t cap, uint32_t L, uint32_t J, uint32_t D, uint32_t d)
{
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->L = L;
    s->J = J;
    s->D = D;
    s->d = d;
    s->emb = D ? ms_xcalloc((size_t)cap * D, sizeof *s->emb) : NULL;
    s->map = ms_xcalloc((size_t)cap * L * J, sizeof *s->map);
    s->dot = ms_xcalloc(cap, sizeof *s->dot);
    s->norm2 = ms_xcalloc(cap, sizeof *s->norm2);
    s->emb_norm2 = ms_xcalloc(cap, sizeof *s->emb_norm2);
    s->map_norm2 = ms_xcalloc(cap, sizeof *s->map_norm2);
    s->row_norm2 = ms_xcalloc((size_t)cap * L, sizeof *s->row_norm2);
}

void fmoe_store_free(fmoe_store *s)
{
    free(s->emb);
    free(s->map);
    free(s->dot);
    free(s->norm2);
    free(s->emb_norm2);
    free(s->map_norm2);
    free(s->row_norm2);
    memset(s, 0, sizeof *s);
}

size_t fmoe_store_bytes(const fmoe_store *s)
{
    return (size_t)s->n * ((size_t)s->D + (size_t)s->L * s->J) * sizeof(float);
}

const float *fmoe_store_map(const fmoe_store *s, uint32_t y)
{
    return s->map + (size_t)y * s->L * s->J;
}

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

int fmoe_semantic_search(const fmoe_store *s, const float *e_new, double *score)
{
    if (!s->n || !s->D)
        return -1;
    int best = -1;
    double best_score = 0;
    for (uint32_t y = 0; y < s->n; y++) {
        double c = fmoe_cosine(e_new, s->emb + (size_t)y * s->D, s->D);
        if (best < 0 || c > best_score) {
            best = (int)y;
            best_score = c;
        }
    }
    *score = best_score;
    return best;
}

double fmoe_rdy(uint32_t d, uint32_t L, double score_sem, double score_map)
{
    double w = (double)d / L;
    return w * score_sem + (1.0 - w) * score_map;
}

/* |a|^2 summed in fmoe_cosine's order. */
static double norm2_of(const float *a, size_t n)
{
    double aa = 0;
    for (size_t i = 0; i < n; i++)
        aa += (double)a[i] * a[i];
    return aa;
}

/* fmoe_cosine(a, b, n) given aa = |a|^2 and bb = |b|^2. */
static double cosine_with_norms(const float *a, double aa, const float *b, double bb, size_t n)
{
    if (!(aa > 0 && bb > 0))
        return 0.0;
    double ab = 0;
    for (size_t i = 0; i < n; i++)
        ab += (double)a[i] * b[i];
    return ab / (sqrt(aa) * sqrt(bb));
}

/* RDY against entry y; ee = |emb|^2, mm = |map|^2. */
static double rdy_cached(const fmoe_store *s, uint32_t y, const float *emb, double ee, const float *map, double mm)
{
    size_t LJ = (size_t)s->L * s->J;
    double sem = s->D ? cosine_with_norms(emb, ee, s->emb + (size_t)y * s->D, s->emb_norm2[y], s->D) : 0.0;
    double map_score = cosine_with_norms(map, mm, s->map + (size_t)y * LJ, s->map_norm2[y], LJ);
    return fmoe_rdy(s->d, s->L, sem, map_score);
}

double fmoe_store_rdy(const fmoe_store *s, uint32_t y, const float *emb, const float *map)
{
    double ee = s->D ? norm2_of(emb, s->D) : 0.0;
    return rdy_cached(s, y, emb, ee, map, norm2_of(map, (size_t)s->L * s->J));
}

static uint32_t most_redundant(const fmoe_store *s, const float *emb, const float *map)
{
    double ee = s->D ? norm2_of(emb, s->D) : 0.0, mm = norm2_of(map, (size_t)s->L * s->J);
    uint32_t best = 0;
    double best_rdy = -INFINITY;
    for (uint32_t y = 0; y < s->n; y++) {
        double r = rdy_cached(s, y, emb, ee, map, mm);
        if (r > best_rdy) {
            best = y;
            best_rdy = r;
        }
    }
    return best;
}

uint32_t fmoe_store_add(fmoe_store *s, const float *emb, const float *map)
{
    size_t LJ = (size_t)s->L * s->J;
    uint32_t y = s->n < s->cap ? s->n++ : most_redundant(s, emb, map);
    if (s->D)
        memcpy(s->emb + (size_t)y * s->D, emb, s->D * sizeof *emb);
    memcpy(s->map + (size_t)y * LJ, map, LJ * sizeof *map);
    s->emb_norm2[y] = s->D ? norm2_of(emb, s->D) : 0.0;
    s->map_norm2[y] = norm2_of(map, LJ);
    for (uint32_t l = 0; l < s->L; l++)
        s->row_norm2[(size_t)y * s->L + l] = norm2_of(map + (size_t)l * s->J, s->J);
    fmoe_traj_reset(s);
    return y;
}

void fmoe_traj_reset(fmoe_store *s)
{
    memset(s->dot, 0, s->cap * sizeof *s->dot);
    memset(s->norm2, 0, s->cap * sizeof *s->norm2);
    s->traj_norm2 = 0;
    s->observed = 0;
}

void fmoe_traj_observe(fmoe_store *s, uint32_t l, const float *P)
{
    for (uint32_t j = 0; j < s->J; j++)
        s->traj_norm2 += (double)P[j] * P[j];
    for (uint32_t y = 0; y < s->n; y++) {
        const float *row = s->map + ((size_t)y * s->L + l) * s->J;
        double dot = 0;
        for (uint32_t j = 0; j < s->J; j++)
            dot += (double)P[j] * row[j];
        s->dot[y] += dot;
        s->norm2[y] += s->row_norm2[(size_t)y * s->L + l]; /* cached |m_y[l]|^2 */
    }
    s->observed++;
}

int fmoe_traj_best(const fmoe_store *s, double *score)
{
    if (!s->n || !s->observed)
        return -1;
    int best = -1;
    double best_score = 0;
    for (uint32_t y = 0; y < s->n; y++) {
        double c = s->traj_norm2 > 0 && s->norm2[y] > 0 ? s->dot[y] / (sqrt(s->traj_norm2) * sqrt(s->norm2[y])) : 0.0;
        if (best < 0 || c > best_score) {
            best = (int)y;
            best_score = c;
        }
    }
    *score = best_score;
    return best;
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

double fmoe_evict_key_paper(double p, double freq)
{
    return p * freq;
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
