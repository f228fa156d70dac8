/* Timing helpers shared by the benchmarks (host time: benchmarks only, never
 * a simulation).  Each bench defines _POSIX_C_SOURCE before including it. */
#ifndef MS_BENCH_CLOCK_H
#define MS_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

/* Seconds of CLOCK_MONOTONIC. */
static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (the upper one for even n); sorts v. */
static inline double bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

#endif
