/* fMoE's pruned RDY deduplication (policies/lib/fmoe_dedup.c, issue 18):
 *  - scan_more continues a scan bit for bit, on every kernel this CPU runs;
 *  - fmoe_dedup_pruned picks the entry fmoe_dedup_full picks, on seeded
 *    random stores with many equal scores (short binary fractions,
 *    duplicated and scaled entries, zero maps and embeddings, queries that
 *    copy an entry), several shapes, d from 0 to L; the pruning must have
 *    skipped work and met ties for the comparison to mean something;
 *  - a hand-made tie across blocks where the later block is finished first:
 *    the lower index must still win. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmoe_values.h"
#include "policies/lib/fmoe_store.h"

/* ---- scan_more against scan ---- */

static void check_scan_more(const fmoe_kernels *k, const fmoe_kernels *c)
{
    for (int trial = 0; trial < 300; trial++) {
        uint32_t nb = 1 + rnd(4), len = 1 + rnd(40), nc = rnd(len + 1), cut = rnd(nc + 1);
        float *vals = calloc((size_t)nb * len * FMOE_BLOCK, sizeof *vals);
        for (size_t i = 0; i < (size_t)nb * len * FMOE_BLOCK; i++)
            vals[i] = value();
        uint32_t cols[40];
        double w[40];
        for (uint32_t i = 0; i < nc; i++) {
            cols[i] = rnd(len);
            w[i] = value();
        }
        double whole[4 * FMOE_BLOCK], parts[4 * FMOE_BLOCK];
        memset(whole, 0x5a, sizeof whole);
        memset(parts, 0x5a, sizeof parts);
        c->scan(vals, len, 0, nb, cols, w, nc, whole);
        k->scan(vals, len, 0, nb, cols, w, cut, parts);
        k->scan_more(vals, len, 0, nb, cols + cut, w + cut, nc - cut, parts);
        CHECK(memcmp(whole, parts, sizeof whole) == 0);
        free(vals);
    }
}

/* ---- pruned against full on random stores ---- */

typedef struct {
    uint32_t L, J, D;
    float *emb, *map; /* [cap][D], [cap][L J]: what was added, to copy from */
} shadow;

/* A new (emb, map): random, a copy or a scaled copy of an earlier one, a
 * probability-like map, or zero. */
static void make_entry(const shadow *h, uint32_t held, float *emb, float *map)
{
    uint32_t LJ = h->L * h->J, kind = rnd(10);
    if (held && kind < 3) { /* a copy (ties), now and then scaled by 2 (the same cosines) */
        uint32_t from = rnd(held);
        float f = kind == 0 ? 2.0f : 1.0f;
        for (uint32_t i = 0; i < LJ; i++)
            map[i] = f * h->map[(size_t)from * LJ + i];
        for (uint32_t i = 0; i < h->D; i++)
            emb[i] = rnd(2) ? h->emb[(size_t)from * h->D + i] : value();
        return;
    }
    for (uint32_t i = 0; i < h->D; i++)
        emb[i] = rnd(8) ? value() : 0.0f;
    if (kind == 3) {
        fill_probability_rows(map, h->L, h->J);
    } else if (kind == 4) {
        memset(map, 0, LJ * sizeof *map);
    } else {
        for (uint32_t i = 0; i < LJ; i++)
            map[i] = value();
    }
}

/* Whether another entry has the winner's RDY (the tie rule decided). */
static int tie_at(const fmoe_store *s, uint32_t win, const float *emb, const float *map)
{
    double r = fmoe_store_rdy(s, win, emb, map);
    for (uint32_t y = 0; y < s->n; y++)
        if (y != win && fmoe_store_rdy(s, y, emb, map) == r)
            return 1;
    return 0;
}

static void test_random_stores(void)
{
    uint64_t calls = 0, ties = 0, skipped = 0, stages = 0;
    for (int store = 0; store < 120; store++) {
        shadow h = {1 + rnd(10), 1 + rnd(7), rnd(3) ? rnd(6) : 0, NULL, NULL};
        uint32_t cap = 17 + rnd(64), d = rnd(h.L + 1), LJ = h.L * h.J;
        fmoe_store s;
        fmoe_store_init(&s, cap, h.L, h.J, h.D, d);
        h.emb = calloc((size_t)cap * (h.D + 1), sizeof *h.emb);
        h.map = calloc((size_t)cap * LJ, sizeof *h.map);
        float *e = calloc(h.D + 1, sizeof *e), *m = calloc(LJ, sizeof *m);
        for (uint32_t y = 0; y < cap; y++) {
            make_entry(&h, y, h.emb + (size_t)y * h.D, h.map + (size_t)y * LJ);
            CHECK_EQ_INT(fmoe_store_add(&s, h.emb + (size_t)y * h.D, h.map + (size_t)y * LJ), y);
        }
        for (int query = 0; query < 40; query++) {
            make_entry(&h, cap, e, m);
            uint64_t before = s.dedup_stages_skipped;
            uint32_t want = fmoe_dedup_full(&s, e, m), got = fmoe_dedup_pruned(&s, e, m);
            CHECK_EQ_INT(got, want);
            calls++;
            skipped += s.dedup_stages_skipped > before;
            ties += tie_at(&s, want, e, m);
            /* the store changes: add through fmoe_store_add (the pruned path) */
            uint32_t y = fmoe_store_add(&s, e, m);
            CHECK_EQ_INT(y, want);
            memcpy(h.emb + (size_t)y * h.D, e, h.D * sizeof *e);
            memcpy(h.map + (size_t)y * LJ, m, LJ * sizeof *m);
        }
        stages += s.dedup_block_stages;
        free(e);
        free(m);
        free(h.emb);
        free(h.map);
        fmoe_store_free(&s);
    }
    printf("random stores: %llu queries, %llu with work skipped, %llu won with a tie\n", (unsigned long long)calls,
           (unsigned long long)skipped, (unsigned long long)ties);
    CHECK(skipped > calls / 10); /* the pruning ran, so the comparison tests it */
    CHECK(ties > calls / 20);
    CHECK(stages > 0);
}

/* ---- a tie across blocks, the later block finished first ----
 * L = 2, J = 2, D = 2, d = 1: RDY = 0.5 sem + 0.5 cos(map).  Query map
 * (1,0 | 1,0), embedding (1,0).  Entries 5 and 40: map (1,0 | 1,0) (cosine
 * 1), embedding (1,1) (cosine 1/sqrt 2): RDY = 0.854 each.  Entry 41: map
 * (1,0 | 0,1) (cosine 1/2), embedding (1,0) (cosine 1): RDY 0.75, but after
 * layer 0 its bound is 0.5 x 1 + 0.5 x (1 + 1) / 2 = 1, above entries 5 and
 * 40 (0.854): its block (entries 32..47) is finished first and holds 40.
 * Every other entry: map (0,1 | 0,1), embedding (0,1): RDY 0.  The
 * reference takes the first largest: entry 5. */
static void test_tie_across_blocks(void)
{
    fmoe_store s;
    fmoe_store_init(&s, 48, 2, 2, 2, 1);
    const float far_m[4] = {0, 1, 0, 1}, far_e[2] = {0, 1};
    const float best_m[4] = {1, 0, 1, 0}, best_e[2] = {1, 1};
    const float lure_m[4] = {1, 0, 0, 1}, lure_e[2] = {1, 0};
    for (uint32_t y = 0; y < 48; y++) {
        int best = y == 5 || y == 40, lure = y == 41;
        fmoe_store_add(&s, best ? best_e : lure ? lure_e : far_e, best ? best_m : lure ? lure_m : far_m);
    }
    const float q_m[4] = {1, 0, 1, 0}, q_e[2] = {1, 0};
    CHECK_EQ_INT(fmoe_dedup_full(&s, q_e, q_m), 5);
    CHECK_EQ_INT(fmoe_dedup_pruned(&s, q_e, q_m), 5);
    CHECK(fmoe_store_rdy(&s, 41, q_e, q_m) < fmoe_store_rdy(&s, 40, q_e, q_m));
    CHECK(fmoe_store_rdy(&s, 5, q_e, q_m) == fmoe_store_rdy(&s, 40, q_e, q_m));
    CHECK_EQ_INT(fmoe_store_add(&s, q_e, q_m), 5);
    fmoe_store_free(&s);
}

int main(void)
{
    fmoe_test_rng = 0x9e3779b97f4a7c15ull;
    const fmoe_kernels *list[3];
    size_t n = fmoe_kernels_list(list);
    for (size_t i = 0; i < n; i++)
        check_scan_more(list[i], list[0]);
    test_random_stores();
    test_tie_across_blocks();
    CHECK_DONE();
}
