/* The fast pass of the row checks (traces/format/trace_check_fast.c) must
 * never pass a request the cell-by-cell checks it stands in front of
 * (ms_request_rows_check) refuse, so a bad value always reaches the checks
 * that name it; and it refuses a good one only when a full row's
 * probabilities sum to within J 2^-50 of the tolerance's edge (its sum is
 * taken in another order: test_sum_band).  Seeded
 * random valid requests of every probs kind, K 1..5 and 8 (the constant-K
 * paths and the generic one), J from K to 64, speculative depths 0..3 and
 * recorded hits, each read with random part selections; then each is
 * mutated at one random place to a value chosen to sit on the edge of a
 * condition (NaN, +-inf, -0, -1e-30, the largest weight below 1 + tol and
 * the next float above it, a duplicate id, -1, J, a swapped top-k, a sum
 * just inside or outside the tolerance, ...) and the two verdicts compared
 * again.  K = 17 (beyond the fast pass) must always go to the checks. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "check.h"
#include "traces/format/trace_check.h"

static uint32_t uni(gsl_rng *g, uint32_t n)
{
    return (uint32_t)gsl_rng_uniform_int(g, n);
}

/* K distinct ids of [0, J), some -1 when `holes` (not for full) */
static void random_ids(gsl_rng *g, int32_t *ids, uint32_t J, uint32_t K, int holes)
{
    for (uint32_t k = 0; k < K; k++) {
        int32_t id;
        int dup;
        do {
            id = (int32_t)uni(g, J);
            dup = 0;
            for (uint32_t k2 = 0; k2 < k; k2++)
                dup |= ids[k2] == id;
        } while (dup);
        ids[k] = id;
    }
    if (holes && uni(g, 4) == 0)
        ids[uni(g, K)] = -1;
}

/* Weights of a valid top-k cell of kind `kind` over ids. */
static void random_weights(gsl_rng *g, const int32_t *ids, float *w, uint32_t K, ms_probs_kind kind)
{
    double total = 0;
    uint32_t present = 0;
    for (uint32_t k = 0; k < K; k++) {
        w[k] = ids[k] < 0 ? (uni(g, 2) ? 0.0f : -0.0f) : (float)(0.05 + gsl_rng_uniform(g));
        total += w[k];
        present += ids[k] >= 0;
    }
    for (uint32_t k = 0; k < K; k++) {
        if (ids[k] < 0)
            continue;
        if (kind == MS_PROBS_TOPK_IDS)
            w[k] = (float)(1.0 / K);
        else if (kind == MS_PROBS_TOPK_RENORM && present == K)
            w[k] = (float)(w[k] / total);
        else
            w[k] = (float)(w[k] / total * (0.3 + 0.7 * gsl_rng_uniform(g)));
    }
}

/* A full distribution over J experts; ties common (values from a small
 * pool), one zero now and then; the top-k ids are the K largest (ties to the
 * lower id), topk_w their probabilities. */
static void random_full(gsl_rng *g, float *p, int32_t *ids, float *w, uint32_t J, uint32_t K)
{
    double sum = 0;
    for (uint32_t j = 0; j < J; j++) {
        p[j] = uni(g, 3) == 0 ? (float)(1 + uni(g, 4)) : uni(g, 9) == 0 ? 0.0f : (float)gsl_rng_uniform(g);
        sum += p[j];
    }
    if (sum == 0) {
        p[0] = 1;
        sum = 1;
    }
    for (uint32_t j = 0; j < J; j++)
        p[j] = (float)(p[j] / sum);
    uint8_t taken[64] = {0};
    for (uint32_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (uint32_t j = 0; j < J; j++)
            if (!taken[j] && (best < 0 || p[j] > p[best]))
                best = (int32_t)j;
        taken[best] = 1;
        ids[k] = best;
        w[k] = p[best];
    }
}

static void random_request(gsl_rng *g, const ms_trace_meta *m, ms_request *r)
{
    memset(r, 0, sizeof *r);
    r->n_rows = 1 + uni(g, 6);
    r->n_iters = 1;
    r->prompt_len = r->n_rows;
    ms_request_alloc(r, m);
    for (uint32_t row = 0; row < r->n_rows; row++)
        for (uint32_t l = 0; l < m->L; l++) {
            size_t o = ms_topk_index(m, row, l);
            if (m->probs_kind == MS_PROBS_FULL)
                random_full(g, r->probs + ms_probs_index(m, row, l), r->topk_ids + o, r->topk_w + o, m->J, m->K);
            else {
                random_ids(g, r->topk_ids + o, m->J, m->K, 1);
                random_weights(g, r->topk_ids + o, r->topk_w + o, m->K, m->probs_kind);
            }
            for (uint32_t d = 0; d < m->spec_depth; d++) {
                size_t s = ms_spec_index(m, row, l, d);
                if (l + d + 1 >= m->L) {
                    for (uint32_t k = 0; k < m->K; k++)
                        r->spec_ids[s + k] = -1, r->spec_w[s + k] = 0;
                    continue;
                }
                random_ids(g, r->spec_ids + s, m->J, m->K, 1);
                random_weights(g, r->spec_ids + s, r->spec_w + s, m->K,
                               m->probs_kind == MS_PROBS_FULL ? MS_PROBS_TOPK_RAW : m->probs_kind);
            }
            for (uint32_t k = 0; r->recorded_hit && k < m->K; k++)
                r->recorded_hit[o + k] = r->topk_ids[o + k] < 0 ? -1 : (int8_t)uni(g, 2);
        }
}

static float edge_weight(gsl_rng *g)
{
    float w_max = (float)(1.0 + 1e-3);
    if ((double)w_max > 1.0 + 1e-3)
        w_max = nextafterf(w_max, 0.0f);
    static const float pool[] = {0.0f, -0.0f, -1e-30f, 1.0f, 0.5f, 1e-30f};
    switch (uni(g, 10)) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return w_max;
    case 4: return nextafterf(w_max, INFINITY);
    case 5: return FLT_MAX;
    default: return pool[uni(g, sizeof pool / sizeof pool[0])];
    }
}

static int32_t edge_id(gsl_rng *g, const int32_t *cell, uint32_t J, uint32_t K)
{
    switch (uni(g, 7)) {
    case 0: return -1;
    case 1: return -2;
    case 2: return (int32_t)J;
    case 3: return (int32_t)J - 1;
    case 4: return uni(g, 2) ? INT32_MAX : INT32_MIN;
    case 5: return cell[uni(g, K)]; /* likely a duplicate */
    default: return (int32_t)uni(g, J);
    }
}

/* One change at a random place of a random selected part. */
static void mutate(gsl_rng *g, const ms_trace_meta *m, ms_request *r)
{
    uint32_t row = uni(g, r->n_rows), l = uni(g, m->L), k = uni(g, m->K), J = m->J, K = m->K;
    size_t o = ms_topk_index(m, row, l);
    switch (uni(g, 9)) {
    case 0:
        r->topk_ids[o + k] = edge_id(g, r->topk_ids + o, J, K);
        return;
    case 1:
        r->topk_w[o + k] = edge_weight(g);
        return;
    case 2: /* a weight nudged: sums at the edge of the tolerance */
        r->topk_w[o + k] = (float)(r->topk_w[o + k] + (gsl_rng_uniform(g) - 0.5) * 4e-3);
        return;
    case 3:
    case 4:
        if (m->spec_depth) {
            size_t s = ms_spec_index(m, row, l, uni(g, m->spec_depth));
            if (uni(g, 2))
                r->spec_ids[s + k] = edge_id(g, r->spec_ids + s, J, K);
            else
                r->spec_w[s + k] = uni(g, 2) ? edge_weight(g) : (float)(r->spec_w[s + k] + 2e-3 * gsl_rng_uniform(g));
        }
        return;
    case 5:
        if (r->recorded_hit)
            r->recorded_hit[o + k] = (int8_t)((int)uni(g, 5) - 2);
        return;
    default:
        if (r->probs) {
            float *p = r->probs + ms_probs_index(m, row, l);
            uint32_t j = uni(g, J), sel = (uint32_t)r->topk_ids[o + k];
            if (sel >= J) /* an earlier round put a bad id there */
                sel = 0;
            switch (uni(g, 4)) {
            case 0: p[j] = edge_weight(g); return;
            case 1: p[j] = (float)(p[j] + (gsl_rng_uniform(g) - 0.5) * 4e-3); return;
            case 2: p[j] = p[sel]; return; /* a tie with a selected one (allowed) */
            default: { /* a selected and another swapped: top-k broken unless equal */
                float t = p[j];
                p[j] = p[sel];
                p[sel] = t;
                return;
            }
            }
        }
        r->topk_w[o + k] = edge_weight(g);
    }
}

/* One full row (L = 1, K = 1, J = 64) whose probabilities sum, in doubles,
 * to s_target or at most 2^-46 below it: p0 = the largest float <= s_target,
 * p1 = s_target - p0 rounded down to a float (below 2^-23, so its last bit
 * is at most 2^-46 and p0 + p1 is exact in a double), the rest 0. */
static double full_row_with_sum(ms_trace_meta *m, ms_request *r, double s_target)
{
    memset(m, 0, sizeof *m);
    m->K = 1;
    m->J = 64;
    m->L = 1;
    m->probs_kind = MS_PROBS_FULL;
    memset(r, 0, sizeof *r);
    r->n_rows = r->prompt_len = r->n_iters = 1;
    ms_request_alloc(r, m);
    float p0 = (float)s_target;
    if ((double)p0 > s_target)
        p0 = nextafterf(p0, 0.0f);
    float p1 = (float)(s_target - (double)p0);
    if ((double)p0 + (double)p1 > s_target)
        p1 = nextafterf(p1, 0.0f);
    memset(r->probs, 0, m->J * sizeof *r->probs);
    r->probs[0] = p0;
    r->probs[1] = p1;
    r->topk_ids[0] = 0;
    r->topk_w[0] = p0;
    return (double)p0 + (double)p1;
}

/* Rows summing to within J 2^-50 of 1 + MS_SUM_TOL (the checks pass them)
 * go to the checks; a row a little further inside passes the fast pass;
 * one past the edge is refused by both. */
static void test_sum_band(void)
{
    ms_trace_meta m;
    ms_request r;
    ms_err err = {0};
    double edge = 1.0 + MS_SUM_TOL, s = full_row_with_sum(&m, &r, edge);
    CHECK(s <= edge && s > edge - 64 * 0x1p-50);
    CHECK(ms_request_rows_check(&m, &r, MS_PART_GATE, "t.h5", &err) == 0);
    CHECK(!ms_request_rows_fast_ok(&m, &r, MS_PART_GATE));
    ms_request_free(&r);
    s = full_row_with_sum(&m, &r, edge - 1e-9);
    CHECK(s < edge - 64 * 0x1p-50);
    CHECK(ms_request_rows_check(&m, &r, MS_PART_GATE, "t.h5", &err) == 0);
    CHECK(ms_request_rows_fast_ok(&m, &r, MS_PART_GATE));
    ms_request_free(&r);
    full_row_with_sum(&m, &r, edge + 1e-6);
    CHECK(ms_request_rows_check(&m, &r, MS_PART_GATE, "t.h5", &err) != 0);
    CHECK(!ms_request_rows_fast_ok(&m, &r, MS_PART_GATE));
    ms_request_free(&r);
}

static const unsigned part_sets[] = {0, MS_PART_WEIGHTS, MS_PART_PROBS, MS_PART_GATE, MS_PART_GATE | MS_PART_SPEC,
                                     MS_PART_SPEC, MS_PART_HITS | MS_PART_WEIGHTS, MS_PART_ALL};

int main(void)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 18);
    static const uint32_t Ks[] = {1, 2, 3, 4, 5, 8, 17};
    long same_ok = 0, same_bad = 0, differ = 0, passed_bad = 0, fast_k17 = 0;
    for (int trial = 0; trial < 6000; trial++) {
        ms_trace_meta m = {0};
        m.K = Ks[uni(g, sizeof Ks / sizeof Ks[0])];
        m.J = m.K + uni(g, 64 - m.K + 1);
        m.L = 1 + uni(g, 6);
        m.probs_kind = (ms_probs_kind)uni(g, 4);
        m.spec_depth = uni(g, 4);
        m.has_recorded_hits = m.probs_kind != MS_PROBS_FULL && uni(g, 2);
        ms_request r;
        random_request(g, &m, &r);
        unsigned parts = part_sets[uni(g, sizeof part_sets / sizeof part_sets[0])];
        if (m.probs_kind != MS_PROBS_FULL)
            parts &= ~(unsigned)MS_PART_PROBS;
        for (int round = 0; round < 4; round++) {
            if (round > 0)
                mutate(g, &m, &r);
            ms_err err = {0};
            int slow_ok = ms_request_rows_check(&m, &r, parts, "t.h5", &err) == 0;
            int fast_ok = ms_request_rows_fast_ok(&m, &r, parts);
            if (m.K > 16) {
                fast_k17 += fast_ok;
                continue;
            }
            if (round == 0)
                CHECK(slow_ok); /* the generator makes valid requests */
            passed_bad += fast_ok && !slow_ok;
            if (fast_ok != slow_ok) {
                if (differ++ < 5)
                    fprintf(stderr, "trial %d round %d (K %u J %u L %u kind %d depth %u parts %#x): fast %d, checks %d %s\n",
                            trial, round, m.K, m.J, m.L, (int)m.probs_kind, m.spec_depth, parts, fast_ok, slow_ok,
                            slow_ok ? "" : err.msg);
            }
            if (slow_ok)
                same_ok += fast_ok;
            else
                same_bad += !fast_ok;
        }
        ms_request_free(&r);
    }
    printf("agreed on %ld good and %ld bad requests, %ld disagreements\n", same_ok, same_bad, differ);
    CHECK_EQ_INT(passed_bad, 0);
    CHECK_EQ_INT(differ, 0); /* no seeded sum lands within J 2^-50 of the edge */
    CHECK_EQ_INT(fast_k17, 0);
    CHECK(same_ok > 5000); /* both verdicts are common */
    CHECK(same_bad > 5000);
    gsl_rng_free(g);
    test_sum_band();
    CHECK_DONE();
}
