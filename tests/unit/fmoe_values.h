/* Seeded values for the fMoE store and kernel tests (test_fmoe_scan.c,
 * test_fmoe_dedup.c, test_fmoe_cosfilter.c, ...): a 64-bit LCG and a value generator that makes exact
 * ties and zeros common.  Each test sets fmoe_test_rng to its own seed
 * first thing in main. */
#ifndef MS_TEST_FMOE_VALUES_H
#define MS_TEST_FMOE_VALUES_H

#include <math.h>
#include <stdint.h>

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
