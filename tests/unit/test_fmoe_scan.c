/* fMoE's map store scans (policies/lib/fmoe_scan.h, fmoe_store.h, issue 18):
 *  - every kernel version this CPU runs (C, SSE2, AVX) gives the plain C
 *    version's results bit for bit, ties and NaN included; the fused
 *    in-order trajectory step gives what the scan then the step give;
 *  - the blocked store gives the scalar formulas' results exactly (==, not
 *    within a tolerance) across several blocks: the dedup victim, the
 *    semantic and trajectory scores (the trajectory with every kernel
 *    version, in order, out of order and in order then out of it);
 *  - hand-computed cases: a victim in the second block, a tie to the lowest
 *    index, an infinity that forbids skipping zero terms, a NaN score. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "fmoe_values.h"
#include "policies/lib/fmoe_store.h"

/* ---- kernels against the plain C version ---- */

static void check_scan_kernels(const fmoe_kernels *k, const fmoe_kernels *c)
{
    for (int trial = 0; trial < 300; trial++) {
        uint32_t nb = rnd(4), len = 1 + rnd(40), first = rnd(len), nc = rnd(len - first + 1);
        float *vals = calloc((size_t)(nb ? nb : 1) * len * FMOE_BLOCK, sizeof *vals);
        for (size_t i = 0; i < (size_t)nb * len * FMOE_BLOCK; i++)
            vals[i] = value();
        uint32_t cols[40];
        double w[40];
        for (uint32_t i = 0; i < nc; i++) {
            cols[i] = rnd(len - first);
            w[i] = value();
        }
        double a[4 * FMOE_BLOCK], b[4 * FMOE_BLOCK];
        memset(a, 0x5a, sizeof a);
        memset(b, 0x5a, sizeof b);
        k->scan(vals, len, first, nb, cols, w, nc, a);
        c->scan(vals, len, first, nb, cols, w, nc, b);
        CHECK(memcmp(a, b, sizeof a) == 0);
        free(vals);
    }
}

static void check_traj_kernels(const fmoe_kernels *k, const fmoe_kernels *c)
{
    enum { N = 41 };
    for (int trial = 0; trial < 400; trial++) {
        uint32_t n = rnd(N + 1);
        double dot[2][N], norm2[2][N], score[2][N], acc[N], rn[N];
        for (uint32_t y = 0; y < N; y++) {
            dot[0][y] = value();
            norm2[0][y] = rnd(4) ? fabs(value()) : 0.0; /* some entries with a zero prefix */
            acc[y] = value();
            rn[y] = rnd(3) ? fabs(value()) : 0.0;
            if (y && rnd(4) == 0) { /* equal scores: ties to the lower index */
                dot[0][y] = dot[0][y - 1];
                norm2[0][y] = norm2[0][y - 1];
                acc[y] = acc[y - 1];
                rn[y] = rn[y - 1];
            }
        }
        if (n && trial % 25 == 7)
            acc[rnd(n)] = NAN;
        double t2 = trial % 10 == 3 ? 0.0 : fabs(value()) + 0.25;
        memcpy(dot[1], dot[0], sizeof dot[0]);
        memcpy(norm2[1], norm2[0], sizeof norm2[0]);
        memset(score, 0, sizeof score);
        double best[2] = {-7, -7}, sq[N];
        for (uint32_t y = 0; y < N; y++) /* the sqrt of the value norm2[y] takes */
            sq[y] = sqrt(norm2[0][y] + rn[y]);
        int got = k->traj(dot[0], norm2[0], score[0], acc, rn, trial % 2 ? sq : NULL, n, t2, &best[0]);
        int want = c->traj(dot[1], norm2[1], score[1], acc, rn, NULL, n, t2, &best[1]);
        CHECK_EQ_INT(got, want);
        CHECK(memcmp(&best[0], &best[1], sizeof best[0]) == 0);
        CHECK(memcmp(dot[0], dot[1], sizeof dot[0]) == 0);
        CHECK(memcmp(norm2[0], norm2[1], sizeof norm2[0]) == 0);
        CHECK(memcmp(score[0], score[1], sizeof score[0]) == 0);
    }
}

/* What fmoe_traj_observe does with a -1 from traj_scan: every score from
 * dot and the roots, the first of the largest (NaN never compares greater). */
static int resolve(int got, double *best, const double *dot, const double *sq, uint32_t n, double t2)
{
    if (got >= 0 || n == 0)
        return got;
    int by = -1;
    for (uint32_t y = 0; y < n; y++) {
        double c = t2 > 0 && sq[y] > 0 ? dot[y] / (sqrt(t2) * sq[y]) : 0.0;
        if (by < 0 || c > *best) {
            by = (int)y;
            *best = c;
        }
    }
    return by;
}

/* The fused in-order step (traj_scan) against the C scan, then the C traj
 * with the same roots (its norm2 only decides the zero-prefix mask, so it
 * gets sq itself: positive exactly where sq is): the same dot bit for bit
 * and, after the caller's fallback for a -1, the same best and score;
 * entries in 0 to 4 blocks, the last partial or not, ties (an entry a copy
 * of the one before) and near ties (its dot one ulp away), zero roots, NaN,
 * scores of either sign.  Returns how many the kernel decided itself. */
static int check_traj_scan_kernels(const fmoe_kernels *k, const fmoe_kernels *c)
{
    enum { NB = 5, N = NB * FMOE_BLOCK, LEN = 12 };
    static float vals[NB * LEN * FMOE_BLOCK];
    int decided = 0;
    for (int trial = 0; trial < 3000; trial++) {
        uint32_t n = trial % 7 == 0 ? (uint32_t)(1 + trial % 4) * FMOE_BLOCK : rnd(N - FMOE_BLOCK + 1);
        uint32_t first = rnd(LEN), nc = rnd(LEN - first + 1);
        double dot[2][N], sq[N], norm2[N], score[N], acc[N], zero[N] = {0}, w[LEN];
        uint32_t cols[LEN];
        for (uint32_t y = 0; y < N; y++) {
            int copy = y && rnd(3) == 0; /* equal scores: ties to the lower index */
            for (uint32_t i = 0; i < LEN; i++) {
                size_t at = ((size_t)(y / FMOE_BLOCK) * LEN + i) * FMOE_BLOCK + y % FMOE_BLOCK;
                vals[at] = copy ? vals[((size_t)((y - 1) / FMOE_BLOCK) * LEN + i) * FMOE_BLOCK + (y - 1) % FMOE_BLOCK]
                                : value();
            }
            dot[0][y] = copy ? dot[0][y - 1] : value();
            if (copy && rnd(2)) /* a near tie: the score one or two ulps away */
                dot[0][y] = nextafter(dot[0][y], rnd(2) ? INFINITY : -INFINITY);
            sq[y] = copy ? sq[y - 1] : rnd(5) ? fabs(value()) : 0.0; /* some zero prefixes */
            norm2[y] = sq[y];
        }
        for (uint32_t i = 0; i < nc; i++) {
            cols[i] = rnd(LEN - first);
            w[i] = value();
        }
        if (n && trial % 25 == 7)
            dot[0][rnd(n)] = NAN;
        double t2 = trial % 10 == 3 ? 0.0 : fabs(value()) + 0.25, best[2] = {-7, -7};
        memcpy(dot[1], dot[0], sizeof dot[0]);
        double inv[N], tmp[N], floor = INFINITY;
        for (uint32_t y = 0; y < N; y++) {
            inv[y] = sq[y] > 0 ? 1.0 / sq[y] : 0.0;
            floor = sq[y] > 0 && sq[y] < floor ? sq[y] : floor;
        }
        fmoe_roots roots = {sq, inv, floor, tmp};
        int got = k->traj_scan(vals, LEN, first, cols, w, nc, dot[0], &roots, n, t2, &best[0]);
        decided += got >= 0;
        got = resolve(got, &best[0], dot[0], sq, n, t2);
        c->scan(vals, LEN, first, (n + FMOE_BLOCK - 1) / FMOE_BLOCK, cols, w, nc, acc);
        int want = resolve(c->traj(dot[1], norm2, score, acc, zero, sq, n, t2, &best[1]), &best[1], dot[1], sq, n, t2);
        CHECK_EQ_INT(got, want);
        if (want >= 0)
            CHECK(memcmp(&best[0], &best[1], sizeof best[0]) == 0);
        CHECK(memcmp(dot[0], dot[1], sizeof dot[0]) == 0);
    }
    return decided;
}

static void test_kernels(void)
{
    const fmoe_kernels *list[3];
    size_t n = fmoe_kernels_list(list);
    CHECK(n >= 1 && !strcmp(list[0]->name, "c"));
    int picked_listed = 0;
    for (size_t i = 0; i < n; i++) {
        picked_listed |= list[i] == fmoe_kernels_pick();
        check_scan_kernels(list[i], list[0]);
        check_traj_kernels(list[i], list[0]);
        if (list[i]->traj_scan) {
            int decided = check_traj_scan_kernels(list[i], list[0]);
            CHECK(decided > 2000); /* the filter decided most cases itself */
            printf("traj_scan %s: %d of 3000 decided by the kernel\n", list[i]->name, decided);
        }
    }
    CHECK(list[0]->traj_scan != NULL); /* the C one, the reference of the others */
    CHECK(picked_listed);
    printf("kernels checked:");
    for (size_t i = 0; i < n; i++)
        printf(" %s", list[i]->name);
    printf(" (picked: %s)\n", fmoe_kernels_pick()->name);
}

/* ---- the store against the scalar formulas, exactly ---- */

#define SC_C 40 /* three blocks, the last partial */
#define SC_L 3
#define SC_J 5
#define SC_D 4

static void random_entry(float *emb, float *map)
{
    for (int i = 0; i < SC_D; i++)
        emb[i] = value();
    for (int i = 0; i < SC_L * SC_J; i++)
        map[i] = value();
}

/* Dedup's victim by the pre-issue-18 loop: RDY from fmoe_cosine, entry by entry. */
static uint32_t direct_victim(const fmoe_store *s, const float *emb, const float *map)
{
    float e[SC_D], m[SC_L * SC_J];
    uint32_t best = 0;
    double best_rdy = -INFINITY;
    for (uint32_t y = 0; y < s->n; y++) {
        fmoe_store_get_emb(s, y, e);
        fmoe_store_get_map(s, y, m);
        double r = fmoe_rdy(s->d, s->L, fmoe_cosine(emb, e, SC_D), fmoe_cosine(map, m, SC_L * SC_J));
        CHECK(r == fmoe_store_rdy(s, y, emb, map) || (isnan(r) && isnan(fmoe_store_rdy(s, y, emb, map))));
        if (r > best_rdy) {
            best = y;
            best_rdy = r;
        }
    }
    return best;
}

/* A trajectory through the store, layers in the order given: after each
 * layer, the best entry and its score equal the scalar incremental search's
 * (per layer, P . m_y[l] summed from 0 over j and added to the running dot;
 * |m_y[l]|^2 likewise).  In order 0, 1, 2 the store reads the square roots
 * of its cached prefix norms; in another order it takes them from norm2. */
static void check_trajectory_exact_with(fmoe_store *s, const uint32_t *order)
{
    double dot[SC_C] = {0}, nn[SC_C] = {0}, tt = 0;
    float P[SC_J], m[SC_L * SC_J];
    fmoe_traj_reset(s);
    for (uint32_t step = 0; step < SC_L; step++) {
        uint32_t l = order[step];
        for (int j = 0; j < SC_J; j++) {
            P[j] = value();
            tt += (double)P[j] * P[j];
        }
        fmoe_traj_observe(s, l, P);
        int want = -1;
        double want_c = 0;
        for (uint32_t y = 0; y < s->n; y++) {
            fmoe_store_get_map(s, y, m);
            double d = 0, r = 0;
            for (int j = 0; j < SC_J; j++) {
                d += (double)P[j] * m[l * SC_J + j];
                r += (double)m[l * SC_J + j] * m[l * SC_J + j];
            }
            dot[y] += d;
            nn[y] += r;
            CHECK(s->norm2[y] == nn[y]); /* the running |prefix|^2, whichever array holds it */
            double c = tt > 0 && nn[y] > 0 ? dot[y] / (sqrt(tt) * sqrt(nn[y])) : 0.0;
            if (want < 0 || c > want_c) {
                want = (int)y;
                want_c = c;
            }
        }
        double got_c = -9;
        CHECK_EQ_INT(fmoe_traj_best(s, &got_c), want);
        CHECK(got_c == want_c);
    }
}

/* ... with every kernel version this CPU runs (the fused in-order step of
 * the C and AVX ones, the two-step SSE2 one; norm2 summed when the order
 * breaks after a fused step). */
static void check_trajectory_exact(fmoe_store *s, const uint32_t *order)
{
    const fmoe_kernels *list[3], *picked = s->kernels;
    size_t n = fmoe_kernels_list(list);
    for (size_t i = 0; i < n; i++) {
        s->kernels = list[i];
        check_trajectory_exact_with(s, order);
    }
    s->kernels = picked;
}

static void check_semantic_exact(fmoe_store *s)
{
    float q[SC_D], e[SC_D];
    for (int i = 0; i < SC_D; i++)
        q[i] = value();
    int want = -1;
    double want_c = 0;
    for (uint32_t y = 0; y < s->n; y++) {
        fmoe_store_get_emb(s, y, e);
        double c = fmoe_cosine(q, e, SC_D);
        if (want < 0 || c > want_c) {
            want = (int)y;
            want_c = c;
        }
    }
    double got_c = -9;
    CHECK_EQ_INT(fmoe_semantic_search(s, q, &got_c), want);
    CHECK(got_c == want_c);
}

static void test_store_exact(void)
{
    fmoe_store s;
    fmoe_store_init(&s, SC_C, SC_L, SC_J, SC_D, 1);
    float emb[SC_D], map[SC_L * SC_J], got_map[SC_L * SC_J], got_emb[SC_D];
    uint32_t victims_beyond_block0 = 0;
    for (int k = 0; k < 500; k++) {
        random_entry(emb, map);
        if (k % 9 == 4 && s.n) { /* an exact duplicate of a stored entry */
            uint32_t y = rnd(s.n);
            fmoe_store_get_map(&s, y, map);
            fmoe_store_get_emb(&s, y, emb);
        }
        uint32_t want = s.n < SC_C ? s.n : direct_victim(&s, emb, map);
        uint32_t got = fmoe_store_add(&s, emb, map);
        CHECK_EQ_INT(got, want);
        victims_beyond_block0 += k >= SC_C && got >= FMOE_BLOCK;
        fmoe_store_get_map(&s, got, got_map);
        fmoe_store_get_emb(&s, got, got_emb);
        CHECK(memcmp(got_map, map, sizeof map) == 0);
        CHECK(memcmp(got_emb, emb, sizeof emb) == 0);
        if (k % 23 == 0) {
            static const uint32_t in_order[SC_L] = {0, 1, 2}, shuffled[SC_L] = {1, 0, 2}, repeated[SC_L] = {0, 0, 1},
                                  late[SC_L] = {0, 1, 1};
            check_trajectory_exact(&s, in_order);
            check_trajectory_exact(&s, shuffled);
            check_trajectory_exact(&s, repeated);
            check_trajectory_exact(&s, late);
            check_semantic_exact(&s);
        }
    }
    CHECK(victims_beyond_block0 > 0); /* the later blocks were searched */
    fmoe_store_free(&s);
}

/* ---- hand-computed ---- */

/* C = 20 (blocks of 16: entries 16..19 in the second), L = 2, J = 2, d = 1,
 * no embeddings: RDY = 0.5 x 0 + 0.5 x cos(map, m_y).  Every entry is
 * (1,0, 0,0) except entry 17 = (0,1, 0,1).
 *  - x = (0,1, 0,1): cos 0 with the others, 1 with 17 -> 17 replaced (by x).
 *  - x = (0,1, 1,0): cos 0 with the others, 1 / (sqrt2 sqrt2) = 0.5 with
 *    17 -> 17 replaced again.
 *  - x = (1,0, 0,0): cos 1 with entries 0..16 and 18, 19 (all tie) -> 0. */
static void test_victim_in_second_block(void)
{
    fmoe_store s;
    fmoe_store_init(&s, 20, 2, 2, 0, 1);
    const float e[4] = {1, 0, 0, 0}, m17[4] = {0, 1, 0, 1}, x2[4] = {0, 1, 1, 0};
    for (uint32_t y = 0; y < 20; y++)
        CHECK_EQ_INT(fmoe_store_add(&s, NULL, y == 17 ? m17 : e), y);
    CHECK_NEAR(fmoe_store_rdy(&s, 17, NULL, m17), 0.5, 1e-15);
    CHECK_EQ_INT(fmoe_store_add(&s, NULL, m17), 17);
    CHECK_NEAR(fmoe_store_rdy(&s, 17, NULL, x2), 0.25, 1e-15);
    CHECK_EQ_INT(fmoe_store_add(&s, NULL, x2), 17);
    CHECK_EQ_INT(fmoe_store_add(&s, NULL, e), 0);
    float row[2];
    fmoe_store_get_row(&s, 17, 1, row);
    CHECK(row[0] == 1 && row[1] == 0); /* 17 holds x2 = (0,1, 1,0) */
    fmoe_store_free(&s);
}

/* An infinity in a stored map: y0 = (inf,0, 0,1), y1 = (1,0, 0,0); C = 2,
 * L = 2, J = 2, d = 1, no embeddings.  x = (0,0, 0,-1):
 *  - y0: |y0|^2 = inf; x.y0 = 0 x inf + ... = NaN, so RDY is NaN and never
 *    the argmax (skipping x's zero term would give -1 / inf = -0 instead,
 *    RDY -0 > -inf, and y0 would be taken);
 *  - y1: x.y1 = 0 -> cos 0, RDY 0 -> y1 is the victim. */
static void test_nonfinite_entry(void)
{
    fmoe_store s;
    fmoe_store_init(&s, 2, 2, 2, 0, 1);
    const float y0[4] = {INFINITY, 0, 0, 1}, y1[4] = {1, 0, 0, 0}, x[4] = {0, 0, 0, -1};
    fmoe_store_add(&s, NULL, y0);
    fmoe_store_add(&s, NULL, y1);
    CHECK_EQ_INT(s.nonfinite, 1);
    CHECK(isnan(fmoe_store_rdy(&s, 0, NULL, x)));
    CHECK_EQ_INT(fmoe_store_add(&s, NULL, x), 1);
    /* trajectory with P0 = (1, 0) over y0 = (inf,0,..), y1 = x = (0,0,..):
     * y0: dot inf, |prefix|^2 inf -> inf / inf = NaN; y1: zero prefix -> 0.
     * The scalar rule takes the first entry (NaN) and nothing compares
     * greater than NaN: best 0, score NaN. */
    const float P0[2] = {1, 0};
    fmoe_traj_reset(&s);
    fmoe_traj_observe(&s, 0, P0);
    double score = 0;
    CHECK_EQ_INT(fmoe_traj_best(&s, &score), 0);
    CHECK(isnan(score));
    /* replacing the infinite entry clears the count */
    const float z[4] = {0, 0, 1, 0};
    fmoe_store_free(&s);
    fmoe_store_init(&s, 1, 2, 2, 0, 1);
    fmoe_store_add(&s, NULL, y0);
    CHECK_EQ_INT(s.nonfinite, 1);
    fmoe_store_add(&s, NULL, z);
    CHECK_EQ_INT(s.nonfinite, 0);
    fmoe_store_free(&s);
}

int main(void)
{
    fmoe_test_rng = 0x2545f4914f6cdd1dull;
    test_kernels();
    test_store_exact();
    test_victim_in_second_block();
    test_nonfinite_entry();
    CHECK_DONE();
}
