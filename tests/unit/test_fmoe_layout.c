/* The layer-major map layout of fMoE's store (policies/lib/fmoe_store.h,
 * issue 18, branch i18m), on seeded random stores of several shapes
 * (capacities that end in a partial block, J from 1 to 70, L from 1 to 9):
 *  - every stored map value sits where the plain definition puts it:
 *    map[((l x slots / B + y / B) x J + j) x B + y % B] for value (l, j) of
 *    entry y, B = FMOE_BLOCK; fmoe_map_layer(l) is the start of layer l's
 *    slice and fmoe_map_col(l J + j) the column of (l, j) from s->map with
 *    J values per entry; fmoe_store_get_map / _row give back what was added;
 *    map16 holds each value's bfloat16 at the same place, the entries of a
 *    block in fmoe_bf16_pos order;
 *  - the searches that read the layout give the scalar definitions' results
 *    exactly, computed from copies of the added maps (not from the store):
 *    the dedup victim (full and pruned, the largest RDY, ties to the lower
 *    index) and the in-order trajectory search after every layer;
 *  - fmoe_store_fits: the largest shape whose columns fit in 32 bits fits,
 *    one more block of entries does not. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmoe_values.h"
#include "policies/lib/fmoe_filter.h"
#include "policies/lib/fmoe_store.h"

#define B FMOE_BLOCK

typedef struct {
    uint32_t cap, L, J, D, d;
    float *emb, *map; /* [cap][D], [cap][L J]: what each slot holds, row-major */
} shadow;

/* The plain definition of the layout: where value (l, j) of entry y is. */
static size_t plain_at(const fmoe_store *s, uint32_t y, uint32_t l, uint32_t j)
{
    return (((size_t)l * (s->slots / B) + y / B) * s->J + j) * B + y % B;
}

static void check_layout(const fmoe_store *s, const shadow *h)
{
    uint32_t LJ = h->L * h->J;
    float *row = calloc(h->J, sizeof *row), *whole = calloc(LJ, sizeof *whole);
    for (uint32_t y = 0; y < s->n; y++) {
        const float *m = h->map + (size_t)y * LJ;
        for (uint32_t l = 0; l < h->L; l++)
            for (uint32_t j = 0; j < h->J; j++) {
                size_t at = plain_at(s, y, l, j), col = fmoe_map_col(s, l * h->J + j);
                CHECK(s->map[at] == m[l * h->J + j]);
                CHECK(fmoe_map_layer(s, l) + (((size_t)(y / B) * h->J + j) * B + y % B) == s->map + at);
                CHECK_EQ_INT(((size_t)(y / B) * h->J + col) * B + y % B, at);
                /* the filter's bfloat16 copy: the same place, entries of a block in fmoe_bf16_pos order */
                CHECK(s->map16[at - y % B + fmoe_bf16_pos(y % B)] == fmoe_bf16(m[l * h->J + j]));
            }
        fmoe_store_get_map(s, y, whole);
        CHECK(memcmp(whole, m, LJ * sizeof *whole) == 0);
        uint32_t l = rnd(h->L);
        fmoe_store_get_row(s, y, l, row);
        CHECK(memcmp(row, m + (size_t)l * h->J, h->J * sizeof *row) == 0);
    }
    free(row);
    free(whole);
}

/* The dedup victim by its definition: argmax RDY, ties to the lower index. */
static uint32_t plain_victim(const shadow *h, uint32_t n, const float *emb, const float *map)
{
    uint32_t LJ = h->L * h->J, best = 0;
    double best_rdy = -INFINITY;
    for (uint32_t y = 0; y < n; y++) {
        double sem = h->D ? fmoe_cosine(emb, h->emb + (size_t)y * h->D, h->D) : 0.0;
        double r = fmoe_rdy(h->d, h->L, sem, fmoe_cosine(map, h->map + (size_t)y * LJ, LJ));
        if (r > best_rdy) {
            best = y;
            best_rdy = r;
        }
    }
    return best;
}

/* The in-order trajectory after each layer against the incremental
 * definition (dot and |prefix|^2 per entry, summed layer by layer). */
static void check_trajectory(fmoe_store *s, const shadow *h)
{
    double *dot = calloc(s->n, sizeof *dot), *nn = calloc(s->n, sizeof *nn), tt = 0;
    float *P = calloc(h->J, sizeof *P);
    fmoe_traj_reset(s);
    for (uint32_t l = 0; l < h->L; l++) {
        for (uint32_t j = 0; j < h->J; j++) {
            P[j] = value();
            tt += (double)P[j] * P[j];
        }
        fmoe_traj_observe(s, l, P);
        double want_c;
        int want = traj_definition_step(h->map, s->n, h->L, h->J, l, P, tt, dot, nn, &want_c);
        double got_c = -9;
        CHECK_EQ_INT(fmoe_traj_best(s, &got_c), want);
        CHECK(got_c == want_c);
    }
    free(dot);
    free(nn);
    free(P);
}

static void random_entry(const shadow *h, uint32_t held, float *emb, float *map)
{
    uint32_t LJ = h->L * h->J;
    for (uint32_t i = 0; i < h->D; i++)
        emb[i] = value();
    for (uint32_t i = 0; i < LJ; i++)
        map[i] = value();
    if (held && rnd(5) == 0) { /* a copy of a held map: ties */
        uint32_t from = rnd(held);
        memcpy(map, h->map + (size_t)from * LJ, LJ * sizeof *map);
    }
}

static void test_random_stores(void)
{
    uint32_t victims_beyond_block0 = 0;
    for (int shape = 0; shape < 24; shape++) {
        shadow h = {.cap = 1 + rnd(70), .L = 1 + rnd(9), .J = 1 + rnd(70), .D = rnd(3) ? rnd(9) : 0};
        h.d = rnd(h.L + 1);
        uint32_t LJ = h.L * h.J;
        h.emb = calloc((size_t)h.cap * (h.D + 1), sizeof *h.emb);
        h.map = calloc((size_t)h.cap * LJ, sizeof *h.map);
        float *emb = calloc(h.D + 1, sizeof *emb), *map = calloc(LJ, sizeof *map);
        fmoe_store s;
        fmoe_store_init(&s, h.cap, h.L, h.J, h.D, h.d);
        for (uint32_t k = 0; k < h.cap + 40; k++) {
            random_entry(&h, s.n, emb, map);
            uint32_t want = s.n < h.cap ? s.n : plain_victim(&h, s.n, emb, map);
            if (s.n == h.cap) { /* both searches, whichever fmoe_store_add takes */
                CHECK_EQ_INT(fmoe_dedup_full(&s, emb, map), want);
                if (s.n > 1)
                    CHECK_EQ_INT(fmoe_dedup_pruned(&s, emb, map), want);
            }
            uint32_t got = fmoe_store_add(&s, h.D ? emb : NULL, map);
            CHECK_EQ_INT(got, want);
            victims_beyond_block0 += k >= h.cap && got >= B;
            memcpy(h.emb + (size_t)got * h.D, emb, h.D * sizeof *emb);
            memcpy(h.map + (size_t)got * LJ, map, LJ * sizeof *map);
            if (k % 17 == 0 || k == h.cap + 39) {
                check_layout(&s, &h);
                check_trajectory(&s, &h);
            }
        }
        fmoe_store_free(&s);
        free(h.emb);
        free(h.map);
        free(emb);
        free(map);
    }
    CHECK(victims_beyond_block0 > 0); /* later blocks were searched and replaced */
}

static void test_fits(void)
{
    /* blocks x L x J <= 2^32 - 1: 65535 blocks x 65537 (= 2^32 - 1) fits */
    CHECK(fmoe_store_fits(65535u * B, 1, 65537));
    CHECK(fmoe_store_fits(65535u * B - 3, 65537, 1));
    CHECK(!fmoe_store_fits(65535u * B + 1, 1, 65537)); /* one more block */
    CHECK(fmoe_store_fits(1000000, 32, 8));
    CHECK(fmoe_store_fits(1000000, 61, 256));
}

int main(void)
{
    fmoe_test_rng = 0x9e3779b97f4a7c15ull;
    test_random_stores();
    test_fits();
    CHECK_DONE();
}
