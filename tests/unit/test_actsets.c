/* The activated sets counted row by row (sim/engine/actsets.h) against the
 * direct build they replaced (loop.c of main 3a263ec, kept here as the
 * reference): for each layer, each item of the batch, each of its rows, each
 * slot, append the expert on its first slot (mark != stamp) and add a token
 * and the slot's weight to its entry.  Seeded random batches: 1-5 items of
 * 0-40 rows, shapes from 1 layer x 1 expert to 6 x 70 with K 1-8, empty
 * slots (-1), repeated experts within a row and heavy skew so tokens pile
 * up, with and without weights, several builds in a row on the same scratch
 * (the scratch must come back to 0 and old marks must not leak).  Lists,
 * tokens, weight sums (bit for bit), marks and positions must be equal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "check.h"
#include "sim/engine/actsets.h"

/* ---- the reference: layer by layer, as loop.c built them ---- */

static uint32_t ref_add_row_layer(const int32_t *ids, const float *w, uint32_t K, uint32_t x0, uint64_t stamp,
                                  uint64_t *mark, uint32_t *act_pos, ms_act *acts, uint32_t n)
{
    for (uint32_t k = 0; k < K; k++) {
        int32_t e = ids[k];
        if (e < 0)
            continue;
        uint32_t x = x0 + (uint32_t)e;
        if (mark[x] != stamp) {
            mark[x] = stamp;
            act_pos[x] = n;
            acts[n++] = (ms_act){(uint32_t)e, 0, 0.0f};
        }
        ms_act *a = &acts[act_pos[x]];
        a->tokens++;
        if (w)
            a->weight_sum += w[k];
    }
    return n;
}

typedef struct {
    const int32_t *ids;
    const float *w;
    uint32_t rows;
} item;

static void ref_build(uint32_t L, uint32_t J, uint32_t K, const item *items, uint32_t n_items, uint64_t stamp,
                      uint64_t *mark, uint32_t *act_pos, ms_act *acts, uint32_t *n_acts)
{
    for (uint32_t l = 0; l < L; l++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < n_items; i++)
            for (uint32_t row = 0; row < items[i].rows; row++) {
                size_t base = ((size_t)row * L + l) * K;
                n = ref_add_row_layer(items[i].ids + base, items[i].w ? items[i].w + base : NULL, K, l * J, stamp,
                                      mark, act_pos, acts + (size_t)l * J, n);
            }
        n_acts[l] = n;
    }
}

/* ---- random batches ---- */

static int32_t draw_expert(gsl_rng *g, uint32_t J, int skew)
{
    if (gsl_rng_uniform(g) < 0.1)
        return -1;
    if (skew && gsl_rng_uniform(g) < 0.7)
        return (int32_t)gsl_rng_uniform_int(g, J < 3 ? J : 3);
    return (int32_t)gsl_rng_uniform_int(g, J);
}

static int same_acts(const ms_act *a, const ms_act *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (a[i].expert != b[i].expert || a[i].tokens != b[i].tokens ||
            memcmp(&a[i].weight_sum, &b[i].weight_sum, sizeof a[i].weight_sum))
            return 0;
    return 1;
}

int main(void)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 18);
    uint64_t builds = 0, slots = 0, weighted = 0;
    for (int round = 0; round < 300; round++) {
        uint32_t L = 1 + (uint32_t)gsl_rng_uniform_int(g, 6), J = 1 + (uint32_t)gsl_rng_uniform_int(g, 70);
        uint32_t K = 1 + (uint32_t)gsl_rng_uniform_int(g, 8);
        int skew = round % 3 == 0, weights = round % 2 == 0;
        size_t nx = (size_t)L * J;
        uint64_t *mark = calloc(nx, sizeof *mark), *ref_mark = calloc(nx, sizeof *ref_mark);
        uint32_t *pos = calloc(nx, sizeof *pos), *ref_pos = calloc(nx, sizeof *ref_pos);
        uint32_t *tok = calloc(nx, sizeof *tok), *n = calloc(L, sizeof *n), *ref_n = calloc(L, sizeof *ref_n);
        float *wsum = calloc(nx, sizeof *wsum);
        ms_act *acts = calloc(nx, sizeof *acts), *ref_acts = calloc(nx, sizeof *ref_acts);
        eng_actsets s = {.L = L, .J = J, .K = K, .tok = tok, .wsum = wsum, .acts = acts, .n = n};
        for (uint64_t stamp = 1; stamp <= 8; stamp++) {
            item items[5];
            uint32_t n_items = 1 + (uint32_t)gsl_rng_uniform_int(g, 5);
            for (uint32_t i = 0; i < n_items; i++) {
                uint32_t rows = (uint32_t)gsl_rng_uniform_int(g, 41);
                size_t cells = (size_t)rows * L * K;
                int32_t *ids = malloc((cells ? cells : 1) * sizeof *ids);
                float *w = weights ? malloc((cells ? cells : 1) * sizeof *w) : NULL;
                for (size_t c = 0; c < cells; c++) {
                    ids[c] = draw_expert(g, J, skew);
                    if (w) /* weights of mixed magnitudes: the summation order shows in the bits */
                        w[c] = (float)(gsl_rng_uniform(g) * (gsl_rng_uniform(g) < 0.2 ? 1e4 : 1e-3));
                }
                items[i] = (item){ids, w, rows};
                slots += cells;
            }
            ref_build(L, J, K, items, n_items, stamp, ref_mark, ref_pos, ref_acts, ref_n);
            eng_actsets_begin(&s);
            for (uint32_t i = 0; i < n_items; i++)
                eng_actsets_add_rows(&s, items[i].ids, items[i].w, items[i].rows);
            eng_actsets_finish(&s, mark, stamp, pos);
            for (uint32_t l = 0; l < L; l++) {
                CHECK_EQ_INT(n[l], ref_n[l]);
                CHECK(n[l] == ref_n[l] && same_acts(acts + (size_t)l * J, ref_acts + (size_t)l * J, n[l]));
            }
            for (size_t x = 0; x < nx; x++) {
                CHECK(mark[x] == ref_mark[x]);
                CHECK(tok[x] == 0 && wsum[x] == 0.0f);
                if (ref_mark[x] == stamp)
                    CHECK_EQ_INT(pos[x], ref_pos[x]);
            }
            for (uint32_t i = 0; i < n_items; i++) {
                free((void *)items[i].ids);
                free((void *)items[i].w);
            }
            builds++;
            weighted += weights;
        }
        free(mark), free(ref_mark), free(pos), free(ref_pos), free(tok), free(n), free(ref_n), free(wsum);
        free(acts), free(ref_acts);
    }
    gsl_rng_free(g);
    printf("%llu builds (%llu with weights), %llu slots\n", (unsigned long long)builds, (unsigned long long)weighted,
           (unsigned long long)slots);
    CHECK(builds == 2400);
    CHECK_DONE();
}
