/* ms_rank_first (policies/lib/rank.c) keeps the best k in one pass; it must
 * put into s[0..k) exactly what the selection it replaced put there (the k
 * best by score descending, ties to the lower id, in that order) and leave
 * s a permutation.  Seeded random inputs with many ties (scores drawn from a
 * handful of values, +0 and -0 among them) and shuffled ids, every k from 0
 * to n + 1, compared with the old selection kept here as the reference. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "check.h"
#include "policies/lib/rank.h"

/* the selection ms_rank_first was before (main d602774) */
static int ref_before(const ms_scored *p, const ms_scored *q)
{
    if (p->score != q->score)
        return p->score > q->score;
    return p->e < q->e;
}

static void ref_rank_first(ms_scored *s, uint32_t n, uint32_t k)
{
    for (uint32_t j = 0; j < k && j < n; j++) {
        uint32_t best = j;
        for (uint32_t i = j + 1; i < n; i++)
            if (ref_before(&s[i], &s[best]))
                best = i;
        ms_scored t = s[j];
        s[j] = s[best];
        s[best] = t;
    }
}

#define NMAX 80

/* width 0: uniform scores (ties unlikely); else drawn from the first width
 * values of a pool (+0 and -0 compare equal). */
static void random_input(gsl_rng *r, ms_scored *s, uint32_t n, uint32_t width)
{
    static const double pool[] = {0.0, -0.0, 1.0, 0.5, 0.25, 2.0, 1e-9, 0.125};
    for (uint32_t i = 0; i < n; i++) {
        double v = width ? pool[gsl_rng_uniform_int(r, width)] : gsl_rng_uniform(r);
        s[i] = (ms_scored){v, i};
    }
    for (uint32_t i = n; i-- > 1;) { /* shuffle the ids with their scores */
        uint32_t j = (uint32_t)gsl_rng_uniform_int(r, i + 1);
        ms_scored t = s[i];
        s[i] = s[j];
        s[j] = t;
    }
}

/* s is a permutation of the ids 0..n-1 */
static int is_permutation(const ms_scored *s, uint32_t n)
{
    uint8_t seen[NMAX] = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].e >= n || seen[s[i].e])
            return 0;
        seen[s[i].e] = 1;
    }
    return 1;
}

static void test_against_selection(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 18);
    uint32_t runs = 0, boundary_ties = 0, mismatches = 0;
    for (int round = 0; round < 600; round++) {
        uint32_t n = (uint32_t)gsl_rng_uniform_int(r, NMAX + 1), width = (uint32_t)round % 9;
        ms_scored in[NMAX], got[NMAX], want[NMAX];
        random_input(r, in, n, width);
        for (uint32_t k = 0; k <= n + 1; k++) {
            memcpy(got, in, sizeof in);
            memcpy(want, in, sizeof in);
            ms_rank_first(got, n, k);
            ref_rank_first(want, n, k);
            uint32_t kk = k < n ? k : n;
            for (uint32_t i = 0; i < kk; i++)
                mismatches += got[i].e != want[i].e || memcmp(&got[i].score, &want[i].score, sizeof(double)) != 0;
            CHECK(is_permutation(got, n));
            /* the k-th and the first one left out have the same score: the id decides */
            boundary_ties += kk > 0 && kk < n && want[kk - 1].score == want[kk].score;
            runs++;
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(runs > 20000);
    CHECK(boundary_ties > 1000); /* the tie rule was exercised where it matters */
    gsl_rng_free(r);
}

/* By hand: scores {1, 3, 3, 2, 3} with ids 0..4; the 3 best are ids 1, 2, 4
 * (score 3, ids ascending), then id 3 (score 2) for k = 4. */
static void test_by_hand(void)
{
    ms_scored s[5] = {{1, 0}, {3, 1}, {3, 2}, {2, 3}, {3, 4}};
    ms_rank_first(s, 5, 4);
    CHECK_EQ_INT(s[0].e, 1);
    CHECK_EQ_INT(s[1].e, 2);
    CHECK_EQ_INT(s[2].e, 4);
    CHECK_EQ_INT(s[3].e, 3);
    CHECK_EQ_INT(s[4].e, 0);
}

int main(void)
{
    test_by_hand();
    test_against_selection();
    CHECK_DONE();
}
