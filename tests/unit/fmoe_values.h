/* Seeded values for the fMoE store and kernel tests (test_fmoe_scan.c,
 * test_fmoe_dedup.c): a 64-bit LCG and a value generator that makes exact
 * ties and zeros common.  Each test sets fmoe_test_rng to its own seed
 * first thing in main. */
#ifndef MS_TEST_FMOE_VALUES_H
#define MS_TEST_FMOE_VALUES_H

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

#endif
