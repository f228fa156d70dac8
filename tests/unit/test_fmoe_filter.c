/* The float filter of fMoE's trajectory step (policies/lib/fmoe_filter.h,
 * issue 18, branch i18m), on seeded random stores of non-negative maps
 * (64 to 200 entries, L up to 12, J up to 70, and one shape whose L J passes
 * the filter's 2^12 terms mid-iteration): with every filter version this CPU
 * runs and with none (the exact step), after every observed layer
 *  - the best entry and its score equal the scalar definition's (dot and
 *    |prefix|^2 summed layer by layer in double, the first largest cosine),
 *    with exact ties (copies, copies scaled by 2) and near ties (copies with
 *    one value one float step off) common;
 *  - after fmoe_traj_sync every dot product is the exact step's bit for bit;
 * trajectories in order, with a zero first row, with a negative row halfway
 * (the filter hands over to the exact step), out of order after filtered
 * layers; and the filter must have run and dropped most entries.
 * The kernels: every version's estimates equal the plain fmaf loop's over
 * the bfloat16 values bit for bit, and its candidates are the plain
 * definition's (a[y] >= thr, with values equal to thr common); fmoe_bf16
 * against hand values (rounding to nearest even, overflow). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmoe_values.h"
#include "policies/lib/fmoe_filter.h"
#include "policies/lib/fmoe_store.h"

typedef struct {
    uint32_t cap, L, J;
    float *map; /* [cap][L J] what each slot holds */
} shadow;

static float nonneg(void)
{
    if (rnd(2)) /* 24 significant bits: bfloat16 rounds them */
        return (float)(rnd(1u << 24) + 1) * 0x1p-24f;
    float v = fabsf(value());
    return rnd(7) ? v : v * 0x1p-20f; /* now and then a small value */
}

static void make_map(const shadow *h, uint32_t held, float *map)
{
    uint32_t LJ = h->L * h->J, kind = rnd(9);
    if (held && kind == 4) { /* every value moved by up to 2^-8 of itself: scores close, bfloat16 errors apart */
        const float *from = h->map + (size_t)rnd(held) * LJ;
        for (uint32_t i = 0; i < LJ; i++)
            map[i] = from[i] * (1.0f + ((float)rnd(513) - 256.0f) * 0x1p-16f);
        return;
    }
    if (held && kind < 4) {
        const float *from = h->map + (size_t)rnd(held) * LJ;
        for (uint32_t i = 0; i < LJ; i++)
            map[i] = kind == 1 ? 2 * from[i] : from[i]; /* a copy, or scaled by 2: the same scores */
        if (kind >= 2) { /* one value one float step off: a near tie */
            uint32_t i = rnd(LJ);
            map[i] = kind == 2 ? nextafterf(map[i], INFINITY) : (map[i] > 0 ? nextafterf(map[i], 0) : map[i]);
        }
        return;
    }
    for (uint32_t i = 0; i < LJ; i++)
        map[i] = nonneg();
}

/* Observes the layers in `order` with random rows (row `neg` negative, row
 * `zero` all zero; -1: none) and checks every best against the scalar
 * definition; then syncs and compares dot with the exact step's (ref: the
 * same store without a filter, fed the same rows). */
static void check_iteration(fmoe_store *s, fmoe_store *ref, const shadow *h, const uint32_t *order, uint32_t steps,
                            int neg, int zero)
{
    double *dot = calloc(s->n, sizeof *dot), *nn = calloc(s->n, sizeof *nn), tt = 0;
    float *P = calloc(h->J, sizeof *P);
    fmoe_traj_reset(s);
    fmoe_traj_reset(ref);
    for (uint32_t step = 0; step < steps; step++) {
        uint32_t l = order[step];
        for (uint32_t j = 0; j < h->J; j++) {
            P[j] = (int)step == zero ? 0.0f : nonneg();
            if ((int)step == neg && j == 0)
                P[j] = -0.25f;
            tt += (double)P[j] * P[j];
        }
        fmoe_traj_observe(s, l, P);
        fmoe_traj_observe(ref, l, P);
        double want_c;
        int want = traj_definition_step(h->map, s->n, h->L, h->J, l, P, tt, dot, nn, &want_c);
        double got_c = -9;
        CHECK_EQ_INT(fmoe_traj_best(s, &got_c), want);
        CHECK(got_c == want_c);
    }
    if (rnd(2)) { /* else the next reset finds the iteration still filtered */
        fmoe_traj_sync(s);
        CHECK(memcmp(s->dot, ref->dot, s->n * sizeof *s->dot) == 0);
    }
    free(dot);
    free(nn);
    free(P);
}

/* A map with a negative value makes the store unfilterable until it is
 * replaced: no filtered step meanwhile, and the exact step's answers. */
static void test_negative_entry(const fmoe_filter_kernels *f)
{
    enum { C = 70, L = 3, J = 4 };
    fmoe_store s;
    fmoe_store_init(&s, C, L, J, 0, 1);
    s.filter = f;
    float map[L * J], P[J] = {0.5f, 0.25f, 0.125f, 0.125f};
    for (int y = 0; y < C; y++) {
        for (int i = 0; i < L * J; i++)
            map[i] = nonneg();
        if (y == 5)
            map[7] = -0.5f;
        fmoe_store_add(&s, NULL, map);
    }
    CHECK_EQ_INT(s.unfilterable, 1);
    fmoe_traj_reset(&s);
    for (uint32_t l = 0; l < L; l++)
        fmoe_traj_observe(&s, l, P);
    CHECK_EQ_INT(s.filter_steps, 0);
    fmoe_store_free(&s);
}

/* Entries 10 and 20 of 64 (J = 2, L = 1, the others (0, 1): score 0), the
 * row P = (1, 0), so a score is m0 / |m|:
 *  - entry 10 = (1 + 2^-8 - 2^-20, 0.5): its exact score is the largest, and
 *    m0 rounds down to 1 in bfloat16 (2^-8 below, relative);
 *  - entry 20 = (1 + 2^-8 + 2^-20, 0.5 + 2^-18): 0.5 / m0 larger, so its
 *    exact score is below entry 10's by about 2^-19 relative, and m0 rounds
 *    up to 1 + 2^-7.
 * The estimates: entry 20's about 2^-7 above entry 10's: a margin below that
 * (2^-8, say) drops the best entry. */
static void test_opposite_roundings(const fmoe_filter_kernels *f)
{
    fmoe_store s;
    fmoe_store_init(&s, 64, 1, 2, 0, 1);
    s.filter = f;
    const float zero[2] = {0, 1}, x[2] = {1 + 0x1p-8f - 0x1p-20f, 0.5f}, y[2] = {1 + 0x1p-8f + 0x1p-20f, 0.5f + 0x1p-18f};
    for (int k = 0; k < 64; k++)
        fmoe_store_add(&s, NULL, k == 10 ? x : k == 20 ? y : zero);
    CHECK(fmoe_bf16_value(fmoe_bf16(x[0])) == 1.0f && fmoe_bf16_value(fmoe_bf16(y[0])) == 1 + 0x1p-7f);
    const float P[2] = {1, 0};
    fmoe_traj_reset(&s);
    fmoe_traj_observe(&s, 0, P);
    double got = 0, want = (double)x[0] / (1.0 * sqrt((double)x[0] * x[0] + (double)x[1] * x[1]));
    CHECK_EQ_INT(fmoe_traj_best(&s, &got), 10);
    CHECK(got == want);
    CHECK_EQ_INT(s.filter_steps, f ? 1 : 0);
    fmoe_store_free(&s);
}

static uint64_t shape_steps; /* filtered steps in run_shape's stores */

static void run_shape(uint32_t cap, uint32_t L, uint32_t J, const fmoe_filter_kernels *f)
{
    shadow h = {cap, L, J, calloc((size_t)cap * L * J, sizeof(float))};
    float *map = calloc((size_t)L * J, sizeof *map);
    fmoe_store s, ref;
    fmoe_store_init(&s, cap, L, J, 0, 1);
    fmoe_store_init(&ref, cap, L, J, 0, 1);
    s.filter = f;
    ref.filter = NULL;
    uint32_t *order = calloc(L + 2, sizeof *order);
    for (uint32_t k = 0; k < cap + 30; k++) {
        make_map(&h, s.n, map);
        uint32_t y = fmoe_store_add(&s, NULL, map);
        CHECK_EQ_INT(fmoe_store_add(&ref, NULL, map), y);
        memcpy(h.map + (size_t)y * L * J, map, (size_t)L * J * sizeof *map);
        if (s.n < FMOE_FILTER_MIN || k % 5)
            continue;
        for (uint32_t l = 0; l < L; l++)
            order[l] = l;
        check_iteration(&s, &ref, &h, order, L, -1, -1);
        check_iteration(&s, &ref, &h, order, L, L > 2 ? (int)(L / 2) : -1, -1); /* a negative row */
        check_iteration(&s, &ref, &h, order, L, -1, rnd(3) ? -1 : 0);          /* a zero first row */
        order[L] = L / 2; /* back to an earlier layer after filtered ones: out of order */
        order[L + 1] = L - 1;
        check_iteration(&s, &ref, &h, order, L + 2, -1, -1);
    }
    shape_steps += s.filter_steps;
    CHECK_EQ_INT(ref.filter_steps, 0);
    fmoe_store_free(&s);
    fmoe_store_free(&ref);
    free(h.map);
    free(map);
    free(order);
}

static void test_kernels(const fmoe_filter_kernels *f)
{
    enum { NB = 5, N = NB * FMOE_BLOCK };
    for (int trial = 0; trial < 300; trial++) {
        uint32_t J = 1 + rnd(40), nb = rnd(NB + 1);
        uint16_t *layer = calloc((size_t)NB * J * FMOE_BLOCK, sizeof *layer);
        float P[40];
        float fa[N], fb[N], inv[N], a[N], b[N];
        for (size_t i = 0; i < (size_t)NB * J * FMOE_BLOCK; i++)
            layer[i] = fmoe_bf16(nonneg());
        for (uint32_t j = 0; j < J; j++)
            P[j] = nonneg();
        for (int y = 0; y < N; y++) {
            fa[y] = fb[y] = rnd(2) ? nonneg() : 0.0f;
            inv[y] = rnd(5) ? nonneg() : 0.0f;
        }
        memset(a, 0x5a, sizeof a);
        memcpy(b, a, sizeof b);
        float top = f->approx(layer, J, P, nb, fa, inv, a), want_top = 0.0f;
        for (uint32_t y = 0; y < nb * FMOE_BLOCK; y++) { /* the plain definition */
            for (uint32_t j = 0; j < J; j++)
                fb[y] = fmaf(P[j], fmoe_bf16_value(layer[((size_t)(y / FMOE_BLOCK) * J + j) * FMOE_BLOCK +
                                                         fmoe_bf16_pos(y % FMOE_BLOCK)]),
                             fb[y]);
            b[y] = fb[y] * inv[y];
            want_top = b[y] > want_top ? b[y] : want_top;
        }
        CHECK(memcmp(fa, fb, sizeof fa) == 0 && memcmp(a, b, sizeof a) == 0 && top == want_top);
        uint32_t n = rnd(N + 1), idx[N], k, want = 0;
        float thr = rnd(3) ? a[rnd(N)] : 0.0f; /* a value present: entries equal to it count */
        for (int y = 0; y < N; y++)
            a[y] = rnd(3) ? thr : nonneg();
        k = f->pick(a, n, thr, idx);
        for (uint32_t y = 0; y < n; y++)
            if (a[y] >= thr)
                CHECK(want < k && idx[want++] == y);
        CHECK_EQ_INT(k, want);
        free(layer);
    }
}

/* fmoe_bf16 by hand: 8 significant bits, ties to even, overflow */
static void test_bf16(void)
{
    CHECK_EQ_INT(fmoe_bf16(0.0f), 0);
    CHECK_EQ_INT(fmoe_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(fmoe_bf16(1.0f + 0x1p-7f), 0x3f81);           /* representable */
    CHECK_EQ_INT(fmoe_bf16(1.0f + 0x1p-8f), 0x3f80);           /* a tie: to even */
    CHECK_EQ_INT(fmoe_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82); /* a tie: to even (up) */
    CHECK_EQ_INT(fmoe_bf16(1.0f + 0x1p-8f + 0x1p-9f), 0x3f81); /* above half */
    CHECK_EQ_INT(fmoe_bf16(0x1p-133f), 0x0001);                /* a subnormal: bfloat16's smallest step */
    CHECK_EQ_INT(fmoe_bf16(0x1p-140f), 0);                     /* below half of it: 0, off by 2^-140 <= 2^-134 */
    CHECK(isinf(fmoe_bf16_value(fmoe_bf16(0x1.fffffep127f)))); /* FLT_MAX overflows */
    CHECK(fmoe_bf16_value(fmoe_bf16(0.75f)) == 0.75f);
    for (uint32_t t = 0, seen = 0; t < FMOE_BLOCK; t++) { /* a permutation */
        CHECK(fmoe_bf16_pos(t) < FMOE_BLOCK && !(seen >> fmoe_bf16_pos(t) & 1));
        seen |= 1u << fmoe_bf16_pos(t);
    }
}

int main(void)
{
    fmoe_test_rng = 0x6a09e667f3bcc909ull;
    const fmoe_filter_kernels *list[2];
    size_t nf = fmoe_filter_list(list);
    uint64_t steps = 0, cands = 0, entry_steps = 0;
    test_bf16();
    for (size_t i = 0; i < nf; i++)
        test_negative_entry(list[i]);
    for (size_t i = 0; i <= nf; i++)
        test_opposite_roundings(i < nf ? list[i] : NULL);
    for (size_t i = 0; i < nf; i++)
        test_kernels(list[i]);
    for (size_t i = 0; i <= nf; i++) {
        const fmoe_filter_kernels *f = i < nf ? list[i] : NULL;
        shape_steps = 0;
        for (int shape = 0; shape < 10; shape++) {
            uint32_t cap = 64 + rnd(137), L = 1 + rnd(12), J = 1 + rnd(70);
            run_shape(cap, L, J, f);
        }
        run_shape(80, 40, 120, f); /* (l + 1) J passes 2^12 at layer 34: the exact step from there */
        CHECK(f ? shape_steps > 1000 : shape_steps == 0);
    }
    /* the filter ran and dropped most entries: counted on one more store */
    for (size_t i = 0; i < nf; i++) {
        fmoe_store s;
        fmoe_store_init(&s, 100, 4, 8, 0, 1);
        s.filter = list[i];
        float map[32], P[8];
        for (int k = 0; k < 100; k++) {
            for (int v = 0; v < 32; v++)
                map[v] = nonneg();
            fmoe_store_add(&s, NULL, map);
        }
        for (int it = 0; it < 20; it++) {
            fmoe_traj_reset(&s);
            for (uint32_t l = 0; l < 4; l++) {
                for (int j = 0; j < 8; j++)
                    P[j] = nonneg() + 0.25f;
                fmoe_traj_observe(&s, l, P);
                entry_steps += s.n;
            }
        }
        steps += s.filter_steps;
        cands += s.filter_candidates;
        fmoe_store_free(&s);
    }
    printf("filters checked: %zu (picked: %s); counted: %llu steps, %llu candidates of %llu entries\n", nf,
           fmoe_filter_pick() ? fmoe_filter_pick()->name : "none", (unsigned long long)steps,
           (unsigned long long)cands, (unsigned long long)entry_steps);
    CHECK(steps == 80 * nf);
    CHECK(cands * 4 < entry_steps); /* fewer than a quarter of the entries scored exactly */
    CHECK_DONE();
}
