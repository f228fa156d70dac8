/* ms_introsort (policies/lib/introsort.c) reproduces libstdc++'s std::sort
 * tie order.  Reference permutations recorded from g++ 12's std::sort over
 * iota (research notes of issue 16; docs/policies.md, "std::sort tie
 * order"); tests/cxx/introsort_vs_std.cpp compares with the compiler's own
 * std::sort on many more inputs where a C++ compiler exists.  Also: every
 * output on seeded random inputs is a permutation sorted by the key. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "policies/lib/introsort.h"

static void sort_iota(uint32_t *a, uint64_t *key, size_t n, uint64_t (*k)(size_t), int greater)
{
    for (size_t i = 0; i < n; i++) {
        a[i] = (uint32_t)i;
        key[i] = k(i);
    }
    ms_introsort(a, n, greater ? ms_introsort_key_greater : ms_introsort_key_less, key);
}

static uint64_t zero(size_t i) { (void)i; return 0; }
static uint64_t mod2(size_t i) { return i % 2; }
static uint64_t mod3(size_t i) { return i % 3; }

static void check_perm(const uint32_t *got, const uint32_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_INT(got[i], want[i]);
}

/* n <= 16: a stable insertion sort, ties keep their input order */
static void check_small_is_stable(void)
{
    uint32_t a[16];
    uint64_t key[16];
    sort_iota(a, key, 16, zero, 1);
    for (uint32_t i = 0; i < 16; i++)
        CHECK_EQ_INT(a[i], i);
}

static void check_reference_tables(void)
{
    uint32_t a[40];
    uint64_t key[40];
    static const uint32_t eq17[] = {8, 16, 15, 14, 13, 12, 11, 10, 9, 0, 7, 6, 5, 4, 3, 2, 1};
    static const uint32_t eq20[] = {10, 19, 18, 17, 16, 15, 14, 13, 12, 11, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    static const uint32_t lt24[] = {0, 2, 22, 4, 6, 20, 8, 10, 18, 12, 14, 16, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1};
    static const uint32_t gt24[] = {1, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 8, 10, 12, 6, 14, 16, 4, 18, 20, 2, 22, 0};
    static const uint32_t lt40[] = {0, 21, 18, 24, 15, 27, 12, 30, 9, 33, 6, 36, 3, 39, 31, 34, 28, 37, 25, 22,
                                    1, 19, 16, 4, 13, 7, 10, 2, 20, 38, 5, 35, 8, 32, 11, 29, 14, 26, 17, 23};
    for (int g = 0; g < 2; g++) { /* all keys equal: either comparator */
        sort_iota(a, key, 17, zero, g);
        check_perm(a, eq17, 17);
        sort_iota(a, key, 20, zero, g);
        check_perm(a, eq20, 20);
        sort_iota(a, key, 32, zero, g); /* 16 31 30 ... 17 0 15 14 ... 1 */
        CHECK_EQ_INT(a[0], 16);
        for (uint32_t i = 1; i <= 15; i++)
            CHECK_EQ_INT(a[i], 32 - i);
        CHECK_EQ_INT(a[16], 0);
        for (uint32_t i = 17; i < 32; i++)
            CHECK_EQ_INT(a[i], 32 - i);
    }
    sort_iota(a, key, 24, mod2, 0);
    check_perm(a, lt24, 24);
    sort_iota(a, key, 24, mod2, 1);
    check_perm(a, gt24, 24);
    sort_iota(a, key, 40, mod3, 0);
    check_perm(a, lt40, 40);
}

/* Random inputs of up to 700 elements come out sorted, as a permutation. */
static void check_sorted_permutation(void)
{
    enum { N = 700 };
    uint32_t a[N];
    uint64_t key[N];
    unsigned seed = 16;
    for (int round = 0; round < 50; round++) {
        size_t n = 1 + (size_t)(rand_r(&seed) % N);
        uint64_t mod = 1 + (uint64_t)(rand_r(&seed) % 50);
        for (size_t i = 0; i < n; i++) {
            a[i] = (uint32_t)i;
            key[i] = (uint64_t)rand_r(&seed) % mod;
        }
        int greater = round & 1;
        ms_introsort(a, n, greater ? ms_introsort_key_greater : ms_introsort_key_less, key);
        uint8_t seen[N] = {0};
        for (size_t i = 0; i < n; i++) {
            CHECK(a[i] < n && !seen[a[i]]);
            seen[a[i]] = 1;
            if (i)
                CHECK(greater ? key[a[i - 1]] >= key[a[i]] : key[a[i - 1]] <= key[a[i]]);
        }
    }
}

int main(void)
{
    check_small_is_stable();
    check_reference_tables();
    check_sorted_permutation();
    CHECK_DONE();
}
