/* Seeded values for the fMoE store and kernel tests (test_fmoe_scan.c,
 * test_fmoe_dedup.c, test_fmoe_cosfilter.c, ...): a 64-bit LCG and a value generator that makes exact
 * ties and zeros common.  Each test sets fmoe_test_rng to its own seed
 * first thing in main. */
#ifndef MS_TEST_FMOE_VALUES_H
#define MS_TEST_FMOE_VALUES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/fmoe_cosfilter.h"
#include "policies/lib/fmoe_store.h"

static uint64_t fmoe_test_rng;

static inline uint32_t rnd(uint32_t n) /* [0, n) */
{
    fmoe_test_rng = fmoe_test_rng * 6364136223846793005ull + 1442695040888963407ull;
    return n ? (uint32_t)((fmoe_test_rng >> 33) % n) : 0;
}

/* Quarter steps in [-1, 1], a zero one time in three, now and then a value
 * that is not a short binary fraction. */
static inline float value(void)
{
    uint32_t r = rnd(12);
    if (r < 4)
        return 0.0f;
    if (r == 4)
        return (float)rnd(1000003) / 999983.0f;
    return (float)((int)rnd(9) - 4) / 4.0f;
}

/* A seeded map of L rows of J probabilities (non-negative, not short
 * fractions, each row summing to about 1), as a gate's output. */
static inline void fill_probability_rows(float *map, uint32_t L, uint32_t J)
{
    for (uint32_t l = 0; l < L; l++) {
        float sum = 0;
        for (uint32_t j = 0; j < J; j++)
            sum += map[l * J + j] = (float)(1 + rnd(1000));
        for (uint32_t j = 0; j < J; j++)
            map[l * J + j] /= sum;
    }
}

/* What each slot of a test store holds: its embedding and map. */
typedef struct {
    uint32_t L, J, D;
    float *emb, *map; /* [cap][D], [cap][L J] */
} fmoe_shadow;

/* A new (emb, map) for a store of `held` entries: a copy of an entry (exact
 * ties), scaled by 2 or 0.5 (equal cosines, up to rounding), a copy with one
 * value one float step off (a near tie); else random signed values, `n_prob`
 * kinds of probability rows, or zero.  Kinds are drawn from 12 (the first 6
 * copies when something is held, then n_prob of probability rows, one of
 * zeros, the rest random), so a test's stream depends on its n_prob. */
static inline void fmoe_make_entry(const fmoe_shadow *h, uint32_t held, uint32_t n_prob, float *emb, float *map)
{
    uint32_t LJ = h->L * h->J, kind = rnd(12);
    if (held && kind < 6) {
        uint32_t from = rnd(held);
        float f = kind == 0 ? 2.0f : kind == 1 ? 0.5f : 1.0f;
        for (uint32_t i = 0; i < LJ; i++)
            map[i] = f * h->map[(size_t)from * LJ + i];
        for (uint32_t i = 0; i < h->D; i++)
            emb[i] = kind == 2 && rnd(2) ? value() : f * h->emb[(size_t)from * h->D + i];
        if (kind >= 4) { /* a near tie: one non-zero value of the map or the embedding one step off */
            float *v = h->D && rnd(2) ? emb + rnd(h->D) : map + rnd(LJ);
            if (*v != 0)
                *v = kind == 4 ? nextafterf(*v, INFINITY) : nextafterf(*v, -INFINITY);
        }
        return;
    }
    for (uint32_t i = 0; i < h->D; i++)
        emb[i] = rnd(8) ? value() : 0.0f;
    if (kind >= 6 && kind < 6 + n_prob) {
        fill_probability_rows(map, h->L, h->J);
    } else if (kind == 6 + n_prob) {
        for (uint32_t i = 0; i < LJ; i++)
            map[i] = 0.0f;
    } else {
        for (uint32_t i = 0; i < LJ; i++)
            map[i] = value();
    }
}

/* s (with the float kernels f) and ref (without: the exact search), both of
 * capacity cap, filled with cap entries from fmoe_make_entry (n_prob), which
 * h keeps; *e and *m get room for a query.  fmoe_shadow_free frees it all. */
static inline void fmoe_shadow_stores(fmoe_shadow *h, uint32_t cap, uint32_t d, uint32_t n_prob,
                                      const fmoe_cosf_kernels *f, fmoe_store *s, fmoe_store *ref, float **e, float **m)
{
    uint32_t LJ = h->L * h->J;
    fmoe_store_init(s, cap, h->L, h->J, h->D, d);
    fmoe_store_init(ref, cap, h->L, h->J, h->D, d);
    s->cosf = f;
    ref->cosf = NULL;
    h->emb = calloc((size_t)cap * (h->D + 1), sizeof *h->emb);
    h->map = calloc((size_t)cap * LJ, sizeof *h->map);
    *e = calloc(h->D + 1, sizeof **e);
    *m = calloc(LJ, sizeof **m);
    for (uint32_t y = 0; y < cap; y++) {
        fmoe_make_entry(h, y, n_prob, h->emb + (size_t)y * h->D, h->map + (size_t)y * LJ);
        fmoe_store_add(s, h->emb + (size_t)y * h->D, h->map + (size_t)y * LJ);
        fmoe_store_add(ref, h->emb + (size_t)y * h->D, h->map + (size_t)y * LJ);
    }
}

/* After a query (e, m) joined s and ref at slot y (the same in both): h
 * keeps it. */
static inline void fmoe_shadow_keep(fmoe_shadow *h, uint32_t y, const float *e, const float *m)
{
    uint32_t LJ = h->L * h->J;
    memcpy(h->emb + (size_t)y * h->D, e, h->D * sizeof *e);
    memcpy(h->map + (size_t)y * LJ, m, LJ * sizeof *m);
}

static inline void fmoe_shadow_free(fmoe_shadow *h, fmoe_store *s, fmoe_store *ref, float *e, float *m)
{
    free(e);
    free(m);
    free(h->emb);
    free(h->map);
    fmoe_store_free(s);
    fmoe_store_free(ref);
}

/* v[0] = 1, v[i] = x = 2^-12 (1 - 2^-10) for 0 < i < n, the query, and
 * entries hi = v and lo = c v (rounded to floats, c = 1 + 2^-7) with lo[1]
 * 2^-20 higher: cosines 1 and about 1 - 2^-41.  Every small product x^2 is
 * just below 2^-24, half a float step of the running sum 1, so hi's float
 * sum stays 1 while the exact one is S = 1 + (n - 1) x^2: hi's estimate is
 * about 1 / S, (n - 1) x^2 ~ n 2^-24 low, the bound's n u.  Each of lo's
 * products c x^2 is just above half a step of the running sum (in [1, 2)):
 * each rounds up to a whole step, so lo's estimate is about n 2^-24 high.
 * Their estimates are about 2 n 2^-24 apart, in the other order than the
 * exact scores.  far = -e_0 (cosine -1 with v) fills the other entries. */
static inline void fmoe_adversarial_vectors(float *v, float *lo, float *far, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        v[i] = i ? 0x1p-12f * (1.0f - 0x1p-10f) : 1.0f;
        lo[i] = (1.0f + 0x1p-7f) * v[i];
        far[i] = i ? 0.0f : -1.0f;
    }
    lo[1] += 0x1p-20f;
}

/* The trajectory search's definition at observed layer l: adds the layer's
 * terms of every entry's dot product with P and of its squared norm to dot[y]
 * and nn[y] (entry y's map is map[y][L][J], row-major; tt the squared norm of
 * every P so far) and returns the first entry of the largest cosine (0 where
 * a norm is 0), that cosine in *best_c. */
static inline int traj_definition_step(const float *map, uint32_t n, uint32_t L, uint32_t J, uint32_t l,
                                       const float *P, double tt, double *dot, double *nn, double *best_c)
{
    int want = -1;
    double want_c = 0;
    for (uint32_t y = 0; y < n; y++) {
        const float *row = map + ((size_t)y * L + l) * J;
        double d = 0, r = 0;
        for (uint32_t j = 0; j < J; j++) {
            d += (double)P[j] * row[j];
            r += (double)row[j] * row[j];
        }
        dot[y] += d;
        nn[y] += r;
        double c = tt > 0 && nn[y] > 0 ? dot[y] / (sqrt(tt) * sqrt(nn[y])) : 0.0;
        if (want < 0 || c > want_c) {
            want = (int)y;
            want_c = c;
        }
    }
    *best_c = want_c;
    return want;
}

#endif
