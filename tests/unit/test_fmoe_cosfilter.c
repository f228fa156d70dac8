/* The float filter of fMoE's cosine searches (policies/lib/fmoe_cosfilter.h,
 * issue 18, branch i18p), with every filter version this CPU runs:
 *  - on seeded random stores (32 to 200 entries, signed values, D from 0 to
 *    40, L J up to 96, d from 0 to L) full of exact ties (copies, copies
 *    scaled by 2 or 0.5, queries copying an entry) and near ties (copies with
 *    one value one float step off), fmoe_dedup_filtered picks
 *    fmoe_dedup_full's entry and fmoe_semantic_filtered gives the exact
 *    semantic search's entry and score bit for bit; the filter must have run,
 *    met ties, and met queries whose largest estimate is not the exact
 *    winner's (the margin mattered);
 *  - adversarial pairs near the bound: a vector whose float self product
 *    loses every small term (its estimate about N 2^-24 low) against a
 *    scaled copy whose small terms all round up (about N 2^-24 high); a
 *    third of the margin drops the winner there;
 *  - the fallbacks: no kernels, too few entries, a non-finite entry, norms
 *    out of range (entry and query), d > L: the filter declines and the
 *    exact searches answer;
 *  - fmoe_store_add through the filter replaces the same entries as a store
 *    without it;
 *  - the kernels: every version's sums and estimates equal the plain fmaf
 *    loops' bit for bit, and its candidates are a[y] >= thr. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmoe_values.h"
#include "policies/lib/fmoe_cosfilter.h"
#include "policies/lib/fmoe_store.h"

/* ---- kernels ---- */

static void test_kernels(const fmoe_cosf_kernels *f)
{
    enum { NB = 6, N = NB * FMOE_BLOCK, LEN = 40 };
    for (int trial = 0; trial < 300; trial++) {
        uint32_t len = 1 + rnd(LEN), nb = rnd(NB + 1), nc = rnd(len + 1), n = rnd(nb * FMOE_BLOCK + 1);
        float *vals = calloc((size_t)NB * len * FMOE_BLOCK, sizeof *vals);
        for (size_t i = 0; i < (size_t)NB * len * FMOE_BLOCK; i++)
            vals[i] = value();
        uint32_t cols[LEN];
        float w[LEN], got[N], want[N];
        for (uint32_t k = 0; k < nc; k++) {
            cols[k] = rnd(len);
            w[k] = value();
        }
        memset(got, 0x5a, sizeof got);
        memcpy(want, got, sizeof want);
        f->fscan(vals, len, nb, cols, w, nc, got);
        for (uint32_t y = 0; y < nb * FMOE_BLOCK; y++) {
            float v = 0.0f;
            for (uint32_t k = 0; k < nc; k++)
                v = fmaf(w[k], vals[((size_t)(y / FMOE_BLOCK) * len + cols[k]) * FMOE_BLOCK + y % FMOE_BLOCK], v);
            want[y] = v;
        }
        CHECK(memcmp(got, want, sizeof got) == 0);
        float ie[N], im[N], e1[N], e2[N], ae = value(), am = value();
        for (int y = 0; y < N; y++) {
            ie[y] = rnd(4) ? value() : 0.0f;
            im[y] = rnd(4) ? value() : 0.0f;
        }
        int with_map = (int)rnd(2);
        memset(e1, 0x5a, sizeof e1);
        memcpy(e2, e1, sizeof e2);
        float top = f->estimate(got, ie, ae, with_map ? want : NULL, im, am, n, e1), want_top = -INFINITY;
        for (uint32_t y = 0; y < n; y++) {
            float t = got[y] * ie[y];
            t = t * ae;
            if (with_map) {
                float m = want[y] * im[y];
                m = m * am;
                t = t + m;
            }
            e2[y] = t;
            want_top = t > want_top ? t : want_top;
        }
        CHECK(memcmp(e1, e2, sizeof e1) == 0 && top == want_top);
        uint32_t idx[N], k, at = 0;
        float thr = n && rnd(3) ? e1[rnd(n)] : value(); /* a value present: entries equal to it count */
        k = f->pick(e1, n, thr, idx);
        for (uint32_t y = 0; y < n; y++)
            if (e1[y] >= thr)
                CHECK(at < k && idx[at++] == y);
        CHECK_EQ_INT(k, at);
        free(vals);
    }
}

/* ---- random stores ---- */

static uint64_t queries, ties, reordered, candidates_seen, entries_seen;

/* The exact semantic search (the store without its filter). */
static int semantic_exact(fmoe_store *s, const float *e, double *score)
{
    const fmoe_cosf_kernels *keep = s->cosf;
    s->cosf = NULL;
    int y = fmoe_semantic_search(s, e, score);
    s->cosf = keep;
    return y;
}

/* The entry of the largest estimate after a filtered search (the first). */
static uint32_t top_estimate(const fmoe_store *s)
{
    uint32_t at = 0;
    for (uint32_t y = 1; y < s->n; y++)
        if (s->est[y] > s->est[at])
            at = y;
    return at;
}

static void check_query(fmoe_store *s, const float *e, const float *m)
{
    uint32_t want = fmoe_dedup_full(s, e, m), got = 0xffffffffu;
    uint64_t cands = s->cosf_candidates;
    CHECK(fmoe_dedup_filtered(s, e, m, &got));
    CHECK_EQ_INT(got, want);
    candidates_seen += s->cosf_candidates - cands;
    entries_seen += s->n;
    reordered += top_estimate(s) != want;
    double r = fmoe_store_rdy(s, want, e, m);
    for (uint32_t y = 0; y < s->n; y++)
        if (y != want && fmoe_store_rdy(s, y, e, m) == r) {
            ties++;
            break;
        }
    queries++;
    if (s->D) {
        double ws = -9, gs = -9;
        int wy = semantic_exact(s, e, &ws), gy = -2;
        CHECK(fmoe_semantic_filtered(s, e, &gy, &gs));
        CHECK_EQ_INT(gy, wy);
        CHECK(gs == ws);
        reordered += top_estimate(s) != (uint32_t)wy;
        queries++;
    }
}

static void run_store(const fmoe_cosf_kernels *f)
{
    fmoe_shadow h = {1 + rnd(8), 1 + rnd(12), rnd(4) ? rnd(41) : 0, NULL, NULL};
    uint32_t cap = FMOE_COSF_MIN + rnd(169), d = rnd(h.L + 1);
    fmoe_store s, ref; /* ref: the exact search */
    float *e, *m;
    fmoe_shadow_stores(&h, cap, d, 1, f, &s, &ref, &e, &m);
    for (int query = 0; query < 30; query++) {
        fmoe_make_entry(&h, cap, 1, e, m);
        check_query(&s, e, m);
        uint32_t y = fmoe_store_add(&s, e, m); /* through the filter, against the store without it */
        CHECK_EQ_INT(fmoe_store_add(&ref, e, m), y);
        fmoe_shadow_keep(&h, y, e, m);
    }
    fmoe_shadow_free(&h, &s, &ref, e, m);
}

/* ---- adversarial pairs near the bound ---- */

/* v[0] = 1, v[i] = x = 2^-12 (1 - 2^-10) for 0 < i < N, the query, and
 * entries hi = v and lo = c v (rounded to floats, c = 1 + 2^-7) with lo[1]
 * 2^-20 higher: cosines 1 and about 1 - 2^-41.  Every small product x^2 is just below 2^-24,
 * half a float step of the running sum 1, so hi's float sum stays 1 while
 * the exact one is S = 1 + (N - 1) x^2: hi's estimate is about 1 / S, (N -
 * 1) x^2 ~ N 2^-24 low, the bound's N u.  Each of lo's products c x^2 is just
 * above half a step of the running sum (in [1, 2)): each rounds up to a
 * whole step, so lo's estimate is about N 2^-24 high.  Their estimates are
 * about 2 N 2^-24 apart, in the other order than the exact scores.  The margin 2 E is about 4
 * (N + 8) 2^-24: a third of it drops the winner. */
enum { ADV_N = 257, ADV_C = 64, ADV_HI = 10, ADV_LO = 20 };

static void test_adversarial_semantic(const fmoe_cosf_kernels *f)
{
    fmoe_store s;
    fmoe_store_init(&s, ADV_C, 1, 1, ADV_N, 0);
    s.cosf = f;
    float v[ADV_N], lo[ADV_N], far[ADV_N], map[1] = {1};
    fmoe_adversarial_vectors(v, lo, far, ADV_N);
    for (int y = 0; y < ADV_C; y++)
        fmoe_store_add(&s, y == ADV_HI ? v : y == ADV_LO ? lo : far, map);
    double ws, gs = -9;
    int wy = semantic_exact(&s, v, &ws), gy = -2;
    CHECK_EQ_INT(wy, ADV_HI);
    CHECK(fmoe_semantic_filtered(&s, v, &gy, &gs));
    CHECK_EQ_INT(gy, ADV_HI);
    CHECK(gs == ws);
    CHECK(s.est[ADV_HI] < s.est[ADV_LO] - (ADV_N - 1) * 0x1.ep-24f); /* the estimates in the other order */
    fmoe_store_free(&s);
}

/* The same pair as maps (L = 1, J = N, d = 0: the map cosine alone). */
static void test_adversarial_dedup(const fmoe_cosf_kernels *f)
{
    fmoe_store s;
    fmoe_store_init(&s, ADV_C, 1, ADV_N, 0, 0);
    s.cosf = f;
    float v[ADV_N], lo[ADV_N], far[ADV_N];
    fmoe_adversarial_vectors(v, lo, far, ADV_N);
    for (int y = 0; y < ADV_C; y++)
        fmoe_store_add(&s, NULL, y == ADV_HI ? v : y == ADV_LO ? lo : far);
    uint32_t got = 0;
    CHECK_EQ_INT(fmoe_dedup_full(&s, NULL, v), ADV_HI);
    CHECK(fmoe_dedup_filtered(&s, NULL, v, &got));
    CHECK_EQ_INT(got, ADV_HI);
    CHECK(s.est[ADV_HI] < s.est[ADV_LO] - (ADV_N - 1) * 0x1.ep-24f);
    fmoe_store_free(&s);
}

/* ---- fallbacks ---- */

/* A map of more than FMOE_COSF_DEDUP_MAX_TERMS non-zero terms is left to the
 * staged exact search (cheaper there); fmoe_dedup still finds the entry the
 * plain search finds, and a map of exactly that many terms is filtered. */
static void test_long_maps(const fmoe_cosf_kernels *f)
{
    enum { C = 64 };
    for (uint32_t J = FMOE_COSF_DEDUP_MAX_TERMS; J <= FMOE_COSF_DEDUP_MAX_TERMS + 1; J++) {
        fmoe_store s;
        fmoe_store_init(&s, C, 1, J, 0, 0);
        s.cosf = f;
        float *m = calloc(J, sizeof *m);
        for (int y = 0; y < C; y++) {
            for (uint32_t j = 0; j < J; j++)
                m[j] = 0.001f + value();
            fmoe_store_add(&s, NULL, m);
        }
        for (uint32_t j = 0; j < J; j++)
            m[j] = 0.001f + value();
        uint32_t got = UINT32_MAX, want = fmoe_dedup_full(&s, NULL, m);
        CHECK_EQ_INT(fmoe_dedup_filtered(&s, NULL, m, &got), J <= FMOE_COSF_DEDUP_MAX_TERMS);
        if (J <= FMOE_COSF_DEDUP_MAX_TERMS)
            CHECK_EQ_INT(got, want);
        CHECK_EQ_INT(fmoe_dedup(&s, NULL, m), want);
        free(m);
        fmoe_store_free(&s);
    }
}

/* A store of n entries (D = 4, L = 2, J = 3) with entry 5 set by `poison`
 * (0: nothing) and a query likewise: whether the filters ran, and the
 * exact searches' answers through fmoe_dedup / fmoe_semantic_search. */
static void check_fallback(const fmoe_cosf_kernels *f, uint32_t n, uint32_t d, int entry_poison, int query_poison,
                           int expect, int expect_sem)
{
    enum { D = 4, LJ = 6 };
    fmoe_store s;
    fmoe_store_init(&s, n, 2, 3, D, d);
    s.cosf = f;
    float e[D], m[LJ];
    for (uint32_t y = 0; y < n; y++) {
        for (int i = 0; i < D; i++)
            e[i] = value();
        for (int i = 0; i < LJ; i++)
            m[i] = value();
        if (y == 5 && entry_poison == 1)
            m[2] = NAN;
        if (y == 5 && entry_poison == 2)
            for (int i = 0; i < D; i++)
                e[i] = i ? 0.0f : 0x1p-41f; /* a non-zero norm below 2^-40 */
        if (y == 5 && entry_poison == 3)
            for (int i = 0; i < LJ; i++)
                m[i] = 0x1p39f; /* a norm above 2^40 */
        fmoe_store_add(&s, e, m);
    }
    for (int i = 0; i < D; i++)
        e[i] = value();
    for (int i = 0; i < LJ; i++)
        m[i] = value() + 0.5f;
    if (query_poison == 1)
        e[1] = INFINITY;
    if (query_poison == 2)
        for (int i = 0; i < LJ; i++)
            m[i] = i ? 0.0f : 0x1p-45f;
    uint32_t got;
    int gy;
    double gs;
    CHECK_EQ_INT(fmoe_dedup_filtered(&s, e, m, &got), expect);
    CHECK_EQ_INT(fmoe_semantic_filtered(&s, e, &gy, &gs), expect_sem);
    uint32_t want = fmoe_dedup_full(&s, e, m);
    CHECK_EQ_INT(fmoe_dedup(&s, e, m), want);
    double ws = 0;
    int wy = semantic_exact(&s, e, &ws);
    gs = -9;
    CHECK_EQ_INT(fmoe_semantic_search(&s, e, &gs), wy);
    CHECK(gs == ws || (isnan(gs) && isnan(ws)));
    fmoe_store_free(&s);
}

static void test_fallbacks(const fmoe_cosf_kernels *f)
{
    check_fallback(f, 40, 1, 0, 0, 1, 1);
    check_fallback(NULL, 40, 1, 0, 0, 0, 0);             /* no kernels */
    check_fallback(f, FMOE_COSF_MIN - 1, 1, 0, 0, 0, 0); /* too few entries */
    check_fallback(f, 40, 1, 1, 0, 0, 0);                /* a NaN stored */
    check_fallback(f, 40, 1, 2, 0, 0, 0);                /* an embedding norm below 2^-40 */
    check_fallback(f, 40, 1, 3, 0, 0, 0);                /* a map norm above 2^40 */
    check_fallback(f, 40, 1, 0, 1, 0, 0);                /* an infinite query value */
    check_fallback(f, 40, 1, 0, 2, 0, 1);                /* a query map norm below 2^-40 (the semantic search runs) */
    check_fallback(f, 40, 3, 0, 0, 0, 0);                /* d > L */
}

int main(void)
{
    fmoe_test_rng = 0xbb67ae8584caa73bull;
    const fmoe_cosf_kernels *list[2];
    size_t nf = fmoe_cosf_list(list);
    for (size_t i = 0; i < nf; i++) {
        test_kernels(list[i]);
        test_adversarial_semantic(list[i]);
        test_adversarial_dedup(list[i]);
        test_fallbacks(list[i]);
        test_long_maps(list[i]);
        for (int store = 0; store < 80; store++)
            run_store(list[i]);
    }
    printf("filters checked: %zu (picked: %s); %llu queries, dedup's candidates %llu of %llu entries, %llu won "
           "with a tie, %llu whose largest estimate was not the winner's\n",
           nf, fmoe_cosf_pick() ? fmoe_cosf_pick()->name : "none", (unsigned long long)queries,
           (unsigned long long)candidates_seen, (unsigned long long)entries_seen, (unsigned long long)ties,
           (unsigned long long)reordered);
    CHECK(ties * 10 > queries);      /* exact ties common */
    CHECK(reordered * 50 > queries); /* the margin mattered */
    CHECK(candidates_seen * 4 < entries_seen); /* and the filter dropped most entries */
    CHECK_DONE();
}
