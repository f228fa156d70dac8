/* Differential test of the fMoE prefetcher's expert order (issue 18, branch
 * i18f): fmoe_top_desc and fmoe_select_paper_top (a heap, popped only as far
 * as the order is used) against fmoe_sort_desc (qsort of every expert) and
 * fmoe_select_paper over its order, on many seeded rows in which ties are
 * the common case (a few distinct values, -0 beside +0, zero rows), of 1 to
 * 70 experts, plus rows holding a NaN (those take the qsort). */
#include <math.h>
#include <stdint.h>

#include "check.h"

#include "policies/lib/fmoe_store.h"

#include "splitmix.h"

enum { JMAX = 70 };

/* A row of J values from few distinct ones (many ties), or spread ones. */
static void make_row(float *P, uint32_t J)
{
    static const float few[] = {0.0f, -0.0f, 0.125f, 0.25f, 0.5f, 0.0625f, 1.0f};
    uint32_t kinds = 1 + below(7), spread = below(4) == 0;
    for (uint32_t j = 0; j < J; j++)
        P[j] = spread ? (float)below(1000) / 997.0f : few[below(kinds)];
    if (below(10) == 0) /* a NaN row: qsort's order */
        P[below(J)] = NAN;
}

int main(void)
{
    uint64_t rows = 0, heap_rows = 0, tied = 0, selections = 0;
    float P[JMAX];
    uint32_t want[JMAX], got[JMAX];
    fmoe_ranked scratch[JMAX];
    for (uint64_t seed = 1; seed <= 20000; seed++) {
        rng_state = seed;
        uint32_t J = 1 + below(JMAX);
        make_row(P, J);
        fmoe_sort_desc(P, J, want);
        int has_nan = 0;
        for (uint32_t j = 0; j < J; j++)
            has_nan |= isnan(P[j]);
        for (uint32_t i = 0; i + 1 < J; i++)
            tied += P[want[i]] == P[want[i + 1]];
        rows++;
        heap_rows += !has_nan;
        /* every prefix length */
        for (uint32_t n = 0; n <= J; n += 1 + (J > 20 ? below(4) : 0)) {
            for (uint32_t i = 0; i < JMAX; i++)
                got[i] = UINT32_MAX;
            fmoe_top_desc(P, J, n, got, scratch);
            CHECK(memcmp(got, want, n * sizeof *got) == 0);
        }
        /* selections: delta from 0 to past the row's sum, K from 1 to J */
        for (int t = 0; t < 8; t++) {
            double delta = t == 0 ? 0.0 : t == 1 ? INFINITY : (double)below(1200) / 1000.0 * (J / 4.0);
            uint32_t K = 1 + below(J), n = fmoe_select_paper(P, want, J, delta, K);
            CHECK_EQ_INT(fmoe_select_paper_top(P, J, delta, K, got, scratch), n);
            CHECK(memcmp(got, want, n * sizeof *got) == 0);
            selections++;
        }
    }
    CHECK(heap_rows > 15000 && heap_rows < rows); /* both paths ran */
    CHECK(tied > 200000);                        /* ties were common */
    printf("fmoe order: %llu rows (%llu by the heap), %llu adjacent ties, %llu selections\n",
           (unsigned long long)rows, (unsigned long long)heap_rows, (unsigned long long)tied,
           (unsigned long long)selections);
    CHECK_DONE();
}
