/* SRP and SCH (traces/stats/segment.h): hand-computed tiny sequences, then
 * random small sequences against a brute-force threshold search (SRP:
 * token-level true/false positives of every threshold) and a direct cache
 * simulation that recounts the future window at every eviction (SCH), then
 * the accumulator on requests (keys l*J + id, SCH's mean over requests). */
#include "check.h"
#include "splitmix.h"
#include "traces/stats/segment.h"

/* ---- brute force ---- */

/* Best F1 over thresholds of the segment router, pooled over nseq sequences
 * of T rows each, counted token by token. */
static double brute_srp(const int32_t *keys, uint32_t nseq, uint32_t T, uint32_t width, uint32_t n_keys, uint32_t m)
{
    double best = -1;
    for (uint32_t a = 0; a <= m; a++) {
        double tp = 0, fp = 0, fn = 0;
        for (uint32_t s = 0; s < nseq; s++) {
            const int32_t *q = keys + (size_t)s * T * width;
            for (uint32_t p = 0; p + m <= T; p++)
                for (uint32_t e = 0; e < n_keys; e++) {
                    uint32_t f = 0;
                    for (uint32_t t = p; t < p + m; t++)
                        for (uint32_t c = 0; c < width; c++)
                            f += q[t * width + c] == (int32_t)e;
                    int pred = f >= a;
                    tp += pred ? f : 0;
                    fp += pred ? m - f : 0;
                    fn += pred ? 0 : f;
                }
        }
        double den = 2 * tp + fp + fn;
        double f1 = 2 * tp / (den < 1 ? 1 : den);
        if (f1 > best)
            best = f1;
    }
    return best;
}

/* Uses of key k left in rows i .. i+m-1 when cell c of row i is served next. */
static uint32_t uses_left(const int32_t *q, uint32_t T, uint32_t width, uint32_t m, uint32_t i, uint32_t c, int32_t k)
{
    uint32_t n = 0;
    for (uint32_t t = i; t < T && t < i + m; t++)
        for (uint32_t d = (t == i ? c : 0); d < width; d++)
            n += q[t * width + d] == k;
    return n;
}

static uint64_t brute_sch(const int32_t *q, uint32_t T, uint32_t width, uint32_t n_keys, uint32_t m, uint32_t C,
                          uint64_t *acc)
{
    int32_t cache[64];
    uint64_t last[64] = {0};
    uint8_t seen[64] = {0};
    uint8_t hit[16];
    uint32_t size = 0, distinct = 0;
    uint64_t clock = 0, hits = 0;
    *acc = 0;
    (void)n_keys;
    for (uint32_t i = 0; i < T; i++) {
        const int32_t *row = q + i * width;
        for (uint32_t c = 0; c < width; c++) {
            if (row[c] < 0)
                continue;
            ++*acc;
            int cached = 0;
            for (uint32_t j = 0; j < size; j++)
                cached |= cache[j] == row[c];
            hit[c] = seen[row[c]] ? cached : distinct < C;
            distinct += !seen[row[c]];
            seen[row[c]] = 1;
            hits += hit[c];
        }
        for (uint32_t c = 0; c < width; c++) {
            int32_t k = row[c];
            if (k < 0)
                continue;
            int cached = 0;
            for (uint32_t j = 0; j < size; j++)
                cached |= cache[j] == k;
            if (!cached) {
                if (size < C) {
                    cache[size++] = k;
                } else {
                    uint32_t v = 0;
                    for (uint32_t j = 1; j < size; j++) {
                        uint32_t uj = uses_left(q, T, width, m, i, c, cache[j]);
                        uint32_t uv = uses_left(q, T, width, m, i, c, cache[v]);
                        if (uj < uv || (uj == uv && last[cache[j]] < last[cache[v]]))
                            v = j;
                    }
                    cache[v] = k;
                }
            }
            last[k] = ++clock;
        }
    }
    return hits;
}

/* Random rows of `width` distinct keys from n_keys, a key missing now and then. */
static void random_rows(int32_t *q, uint32_t T, uint32_t width, uint32_t n_keys)
{
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t c = 0; c < width; c++) {
            int32_t k;
            int dup;
            do {
                k = (int32_t)below(n_keys);
                dup = 0;
                for (uint32_t d = 0; d < c; d++)
                    dup |= q[t * width + d] == k;
            } while (dup);
            q[t * width + c] = below(13) == 0 ? -1 : k;
        }
}

/* ---- tests ---- */

static double srp_of(const int32_t *keys, uint32_t T, uint32_t width, uint32_t n_keys, uint32_t m)
{
    uint32_t cnt[64] = {0};
    uint64_t hist[300] = {0};
    uint64_t w = ms_srp_windows(keys, T, width, m, cnt, hist);
    for (uint32_t k = 0; k < n_keys; k++)
        CHECK_EQ_INT(cnt[k], 0);
    return ms_srp_from_hist(hist, m, w, n_keys);
}

static void test_hand(void)
{
    /* 3 keys, one per row: 0 1 0 0, m = 2.  Windows (0,1) (1,0) (0,0): counts
     * f = 1,1 / 1,1 / 2 (and 4 pairs with f = 0).  Threshold 1: matches 6,
     * predictions 2 * 5 = 10, activations 6 -> 12 / 16; threshold 2: 4 / 8;
     * threshold 0: 12 / (2 * 9 + 6). */
    const int32_t a[] = {0, 1, 0, 0};
    CHECK_NEAR(srp_of(a, 4, 1, 3, 2), 0.75, 1e-12);
    CHECK(isnan(srp_of(a, 4, 1, 3, 5))); /* no window of 5 rows */

    uint64_t acc;
    /* 0 1 2 1, m = 1, C = 2: 0 and 1 fill free slots (hits); at 2 both cached
     * keys have no use left in the window, the older (0) goes; 1 then hits. */
    const int32_t b[] = {0, 1, 2, 1};
    CHECK_EQ_INT(ms_sch_sequence(b, 4, 1, 3, 1, 2, &acc), 3);
    CHECK_EQ_INT(acc, 4);
    /* 0 1 2 0 1, m = 3, C = 2: at 2, keys 0 (next use row 3) and 1 (row 4)
     * both have one use in rows 2..4: the older, 0, goes; at 0 (row 3), 1 has
     * a use left in rows 3..4 and 2 none: 2 goes; 1 hits.  (LRU: 2 hits.) */
    const int32_t c[] = {0, 1, 2, 0, 1};
    CHECK_EQ_INT(ms_sch_sequence(c, 5, 1, 3, 3, 2, &acc), 3);
    /* a batch: rows {0 1} {2 0}, m = 1, C = 2: row 2's hit of 0 is decided at
     * the batch start; serving 2 evicts 1 (0 still has its use in row 2). */
    const int32_t d[] = {0, 1, 2, 0, 1, -1};
    CHECK_EQ_INT(ms_sch_sequence(d, 3, 2, 3, 1, 2, &acc), 3);
    CHECK_EQ_INT(acc, 5);
}

static void test_random(void)
{
    rng_state = 30;
    int32_t q[4 * 40 * 3];
    for (int trial = 0; trial < 300; trial++) {
        uint32_t width = 1 + below(3);
        uint32_t n_keys = width + 1 + below(9);
        uint32_t T = 1 + below(40);
        uint32_t nseq = 1 + below(4);
        uint32_t m = 1 + below(10);
        random_rows(q, T * nseq, width, n_keys);
        uint32_t cnt[64] = {0};
        uint64_t hist[16] = {0}, wins = 0;
        for (uint32_t s = 0; s < nseq; s++)
            wins += ms_srp_windows(q + (size_t)s * T * width, T, width, m, cnt, hist);
        if (wins)
            CHECK_NEAR(ms_srp_from_hist(hist, m, wins, n_keys), brute_srp(q, nseq, T, width, n_keys, m), 1e-12);
        else
            CHECK(T < m);
        for (uint32_t C = 1; C <= n_keys; C++) {
            uint64_t acc, bacc;
            uint64_t h = ms_sch_sequence(q, T, width, n_keys, m, C, &acc);
            uint64_t bh = brute_sch(q, T, width, n_keys, m, C, &bacc);
            if (h != bh)
                fprintf(stderr, "trial %d: T %u width %u keys %u m %u C %u\n", trial, T, width, n_keys, m, C);
            CHECK_EQ_INT(h, bh);
            CHECK_EQ_INT(acc, bacc);
        }
    }
}

static ms_request request_of(int32_t *ids, uint32_t rows)
{
    ms_request r;
    memset(&r, 0, sizeof r);
    r.n_rows = rows;
    r.topk_ids = ids;
    return r;
}

static void test_accumulator(void)
{
    ms_err err;
    CHECK(ms_segment_new(0, 4, 1, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "segment");
    /* L = 2, J = 2, K = 1: rows (0,1) (1,0) (0,1) (1,0) are keys {0,3} {1,2}
     * {0,3} {1,2}: in the one window of 4, each of the 4 keys twice ->
     * SRP(4) = 2 * 8 / (4 * 4 + 8) = 2/3 (ids without their layer: 2 keys
     * 4 times, 1.0).  SCH(4, 2): 4 entries hold all 4 keys: 1.0. */
    ms_segment *sg = ms_segment_new(2, 2, 1, &err);
    int32_t a[] = {0, 1, 1, 0, 0, 1, 1, 0};
    ms_request ra = request_of(a, 4);
    ms_segment_add(sg, &ra);
    CHECK_NEAR(ms_segment_srp(sg, 4), 2.0 / 3, 1e-12);
    CHECK(isnan(ms_segment_srp(sg, 16)));
    CHECK(isnan(ms_segment_srp(sg, 5)));
    CHECK_NEAR(ms_segment_sch(sg, 4, 2), 1.0, 1e-12);
    CHECK(isnan(ms_segment_sch(sg, 4, 1)));
    ms_segment_free(sg);

    /* SCH is the mean over requests of their hit rates: L = 1, J = 8, K = 1,
     * cache 2: request A (rows 0 1 2 3: 2 free-slot hits of 4 = 0.5), request
     * B (rows 0 1 0 1 0 1: all 6 hit) -> (0.5 + 1) / 2, not pooled 8 / 10. */
    sg = ms_segment_new(1, 8, 1, &err);
    int32_t b1[] = {0, 1, 2, 3}, b2[] = {0, 1, 0, 1, 0, 1};
    ms_request r1 = request_of(b1, 4), r2 = request_of(b2, 6);
    ms_segment_add(sg, &r1);
    ms_segment_add(sg, &r2);
    CHECK_NEAR(ms_segment_sch(sg, 4, 2), 0.75, 1e-12);
    /* SRP(4) pooled: A's window has 4 keys at f = 1, B's 3 windows 2 keys at
     * f = 2: threshold 2 -> 2 * 12 / (4 * 6 + 16) = 0.6; threshold 1 -> 2 * 16 / (4 * 10 + 16). */
    CHECK_NEAR(ms_segment_srp(sg, 4), 0.6, 1e-12);
    cJSON *j = ms_segment_to_json(sg);
    char *txt = cJSON_PrintUnformatted(j);
    CHECK_STR_CONTAINS(txt, "\"srp\":{\"4\":0.6,\"16\":null");
    CHECK_STR_CONTAINS(txt, "\"sch_rho_2\":{\"4\":0.75");
    free(txt);
    cJSON_Delete(j);
    ms_segment_free(sg);
}

int main(void)
{
    test_hand();
    test_random();
    test_accumulator();
    CHECK_DONE();
}
