/* libstdc++'s std::sort (GCC 4.9 .. 14: introsort, median of first+1 / mid /
 * last-1, heap-sort fallback at depth 2 floor(log2 n), final insertion sort
 * with threshold 16), written in C from its documented algorithm
 * (docs/policies.md, "std::sort tie order").
 *
 * MoE-Infinity 2024 and FineMoE sort the indices 0..n-1 of their resident
 * experts with std::sort and a comparator on a key; equal keys then come out
 * in the order this algorithm leaves them (stable only for n <= 16), and that
 * order decides their evictions.  ms_introsort reproduces it exactly, element
 * moves included (tests/unit/test_introsort.c compares it with g++'s
 * std::sort where a C++ compiler exists). */
#ifndef MS_INTROSORT_H
#define MS_INTROSORT_H

#include <stddef.h>
#include <stdint.h>

/* less(a, b, ctx): 1 when element a must come before element b (a strict
 * weak order, as std::sort's comparator). */
typedef int (*ms_introsort_less)(uint32_t a, uint32_t b, const void *ctx);

/* Sorts a[0..n) in place exactly as std::sort(a, a + n, less) does. */
void ms_introsort(uint32_t *a, size_t n, ms_introsort_less less, const void *ctx);

/* The comparators the two systems use, on keys indexed by the element:
 * key[i] > key[j] (MoE-Infinity 2024, descending) and key[i] < key[j]
 * (FineMoE, ascending); ctx is the uint64_t key array. */
int ms_introsort_key_greater(uint32_t a, uint32_t b, const void *ctx);
int ms_introsort_key_less(uint32_t a, uint32_t b, const void *ctx);

#endif
