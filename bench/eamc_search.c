/* bench_eamc_search: host time of MoE-Infinity's EAMC search (seed 004
 * §8.5: "we set the limit of memory size as 1.8MB which allows EAMC to
 * accommodate up to 300 EAMs. Searching for the most similar EAM from EAMC
 * costs 21us").  A host-time figure, so it lives here and not in `moesim
 * claims` (a simulation never reads the clock; docs/claims.md).
 *
 * Usage: bench_eamc_search [L J entries [tokens [reps]]]  (default 12 128 300 64 2000:
 * 1.8 MB / 300 EAMs = 6 KB = 12 x 128 fp32 cells, the paper's EAM shape).
 * Builds `entries` EAMs of `tokens` top-1 routed tokens per layer (uniform
 * experts, gsl mt19937 seed 1), then times, per search (median of reps):
 *   full         eam_match, paper mode: Eq. (1) against every entry, O(n L J);
 *   incremental  eam_matcher_match after one new layer row of the query,
 *                which is what the prefetcher does after each layer.
 * Prints the collection's bytes as moesim stores it (double) and as fp32. */
#define _POSIX_C_SOURCE 200809L
#include <gsl/gsl_rng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_clock.h"
#include "policies/lib/eam_common.h"

/* One EAM: per layer, `tokens` tokens each routed to one uniform expert. */
static void random_eam(gsl_rng *r, uint32_t L, uint32_t J, unsigned tokens, double *m)
{
    memset(m, 0, (size_t)L * J * sizeof *m);
    for (uint32_t l = 0; l < L; l++)
        for (unsigned t = 0; t < tokens; t++)
            m[(size_t)l * J + gsl_rng_uniform_int(r, J)] += 1;
}

int main(int argc, char **argv)
{
    uint32_t L = argc > 3 ? (uint32_t)atoi(argv[1]) : 12, J = argc > 3 ? (uint32_t)atoi(argv[2]) : 128;
    uint32_t n = argc > 3 ? (uint32_t)atoi(argv[3]) : 300;
    unsigned tokens = argc > 4 ? (unsigned)atoi(argv[4]) : 64;
    int reps = argc > 5 ? atoi(argv[5]) : 2000;
    if (!L || !J || !n || !tokens || reps < 1) {
        fprintf(stderr, "usage: bench_eamc_search [L J entries [tokens [reps]]]\n");
        return 2;
    }
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 1);
    eam_set c;
    eam_set_init(&c, L, J);
    double *m = malloc((size_t)L * J * sizeof *m), *q = malloc((size_t)L * J * sizeof *q);
    double *t_full = malloc((size_t)reps * sizeof *t_full), *t_inc = malloc((size_t)reps * sizeof *t_inc);
    if (!m || !q || !t_full || !t_inc) {
        fprintf(stderr, "bench_eamc_search: out of memory\n");
        return 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        random_eam(r, L, J, tokens, m);
        eam_set_push(&c, m);
    }
    eam_matcher mt;
    eam_matcher_init(&mt, L, J);
    random_eam(r, L, J, tokens, q);
    volatile uint32_t sink = eam_matcher_match(&mt, &c, q, NULL); /* primes the entry statistics */
    for (int k = 0; k < reps; k++) {
        random_eam(r, 1, J, tokens, q + (size_t)(k % L) * J); /* the query's next layer row */
        double t0 = bench_now_s();
        sink += eam_match(&c, q, EAM_MODE_PAPER, 0);
        double t1 = bench_now_s();
        sink += eam_matcher_match(&mt, &c, q, NULL);
        double t2 = bench_now_s();
        t_full[k] = t1 - t0;
        t_inc[k] = t2 - t1;
    }
    printf("EAMC of %u EAMs, %u x %u cells, %u tokens per layer: %.2f MB as doubles (%.2f MB as fp32)\n", n, L, J,
           tokens, (double)n * L * J * 8 / 1e6, (double)n * L * J * 4 / 1e6);
    printf("search, median of %d: full Eq. (1) scan %.1f us; incremental (one new layer row) %.1f us\n", reps,
           bench_median(t_full, (size_t)reps) * 1e6, bench_median(t_inc, (size_t)reps) * 1e6);
    (void)sink;
    eam_matcher_free(&mt);
    eam_set_free(&c);
    gsl_rng_free(r);
    free(m);
    free(q);
    free(t_full);
    free(t_inc);
    return 0;
}
