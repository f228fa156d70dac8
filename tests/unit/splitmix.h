/* A seeded splitmix64 stream for unit tests that compare a fast policy
 * structure with a direct scan on many random sequences (test_evict_heap.c,
 * test_fmoe_victim.c, test_fmoe_order.c): set rng_state to the seed, then
 * draw with rnd() (64 bits) or below(n) ([0, n)). */
#ifndef MS_TEST_SPLITMIX_H
#define MS_TEST_SPLITMIX_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint32_t below(uint32_t n) { return (uint32_t)(rnd() % n); }

#endif
