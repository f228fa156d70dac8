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
