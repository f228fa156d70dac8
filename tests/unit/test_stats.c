/* Trace statistics on hand-built requests; every expected value is worked out
 * by hand in the comment beside it. */
#include "check.h"
#include "traces/stats/stats.h"

#define MAXC 128

/* A request on stack storage: iteration 0 is prefill, the others decode. */
typedef struct {
    ms_request r;
    ms_iteration it[16];
    int32_t ids[MAXC];
    float w[MAXC];
} req_buf;

/* rows[i] = rows of iteration i; ids / w hold [row][layer][slot] (w NULL =
 * all weights 1). */
static ms_request *build(req_buf *b, uint64_t id, uint32_t L, uint32_t K, uint32_t n_iters,
                         const uint32_t *rows, const int32_t *ids, const float *w)
{
    memset(b, 0, sizeof *b);
    uint32_t row = 0;
    for (uint32_t i = 0; i < n_iters; i++) {
        b->it[i].phase = i == 0 ? MS_PHASE_PREFILL : MS_PHASE_DECODE;
        b->it[i].row0 = row;
        b->it[i].n_rows = rows[i];
        row += rows[i];
    }
    for (uint32_t c = 0; c < row * L * K; c++) {
        b->ids[c] = ids[c];
        b->w[c] = ids[c] < 0 ? 0.0f : (w ? w[c] : 1.0f);
    }
    b->r.id = id;
    b->r.n_iters = n_iters;
    b->r.iters = b->it;
    b->r.n_rows = row;
    b->r.topk_ids = b->ids;
    b->r.topk_w = b->w;
    return &b->r;
}

static ms_trace_meta meta_of(uint32_t L, uint32_t J, uint32_t K)
{
    ms_trace_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.model_name, sizeof m.model_name, "hand");
    m.L = L;
    m.J = J;
    m.K = K;
    return m;
}

static const double H_THIRD = 0.918295834054489611; /* H(2/3, 1/3) */

/* L=2, J=4, K=1; one request: prefill row then 3 decode rows.
 *   layer 0: 0 0 1 1     layer 1: 1 1 2 3 */
static void test_k1_sequence(void)
{
    ms_trace_meta m = meta_of(2, 4, 1);
    ms_err err;
    ms_stats *s = ms_stats_new(&m, &err);
    CHECK(s != NULL);
    const uint32_t rows[] = {1, 1, 1, 1};
    const int32_t ids[] = {0, 1, 0, 1, 1, 2, 1, 3};
    req_buf b;
    CHECK(ms_stats_add(s, build(&b, 7, 2, 1, 4, rows, ids, NULL), &err) == 0);
    CHECK(ms_stats_report_get(s) == NULL);
    ms_stats_finish(s);
    const ms_stats_report *rp = ms_stats_report_get(s);
    CHECK(rp != NULL);
    CHECK_EQ_INT(rp->n_requests, 1);
    CHECK_EQ_INT(rp->n_iterations, 4);
    CHECK_EQ_INT(rp->n_decode_steps, 3);
    CHECK_EQ_INT(rp->n_rows, 4);
    CHECK_EQ_INT(rp->activations_total, 8);
    CHECK_EQ_INT(rp->missing_total, 0);
    CHECK_NEAR(rp->h_max, 2.0, 1e-12);
    /* K = 1: one expert per iteration, entropy 0 */
    CHECK_NEAR(rp->h_iter[0], 0.0, 1e-12);
    CHECK_NEAR(rp->h_iter[1], 0.0, 1e-12);
    /* request counts {2,2} -> 1 bit; {2,1,1} -> 1.5 bits; one request = trace */
    CHECK_NEAR(rp->h_req[0], 1.0, 1e-12);
    CHECK_NEAR(rp->h_req[1], 1.5, 1e-12);
    CHECK_NEAR(rp->h_trace[0], 1.0, 1e-12);
    CHECK_NEAR(rp->h_trace[1], 1.5, 1e-12);
    CHECK_NEAR(rp->hw_req[1], 1.5, 1e-12); /* weights all 1 */
    CHECK_NEAR(rp->mean.h_req, 1.25, 1e-12);
    /* layer 0 decode sets {0} {1} {1}: prev 1 of 2, earlier 2 of 3 (0 in prefill, 1 in step 2)
     * layer 1 decode sets {1} {2} {3}: prev 0 of 2, earlier 1 of 3 (1 in prefill) */
    CHECK_NEAR(rp->reuse_prev[0], 0.5, 1e-12);
    CHECK_NEAR(rp->reuse_any[0], 2.0 / 3.0, 1e-12);
    CHECK_NEAR(rp->reuse_prev[1], 0.0, 1e-12);
    CHECK_NEAR(rp->reuse_any[1], 1.0 / 3.0, 1e-12);
    CHECK_EQ_INT(rp->reuse_prev_den[0], 2);
    CHECK_EQ_INT(rp->reuse_any_den[0], 3);
    CHECK_NEAR(rp->mean.reuse_prev, 0.25, 1e-12);
    CHECK_NEAR(rp->mean.reuse_any, 0.5, 1e-12);
    /* top-1 pairs (0,1) (0,1) (1,2) (1,3): H(X) = 1, H(Y) = 1.5, H(X,Y) = 1.5,
     * I = 1, NMI = 2 / 2.5 */
    CHECK_EQ_INT(rp->n_pairs, 1);
    CHECK_NEAR(rp->mi_top1[0], 1.0, 1e-12);
    CHECK_NEAR(rp->nmi_top1[0], 0.8, 1e-12);
    /* succ(0) = 1 (2 of 2 rows), succ(1) = 2 on a tie (1 of 2): 3/4;
     * baseline: expert 1 in 2 of 4 rows */
    CHECK_NEAR(rp->succ_hit[0], 0.75, 1e-12);
    CHECK_NEAR(rp->succ_base[0], 0.5, 1e-12);
    /* layer 0 counts [2,2,0,0]: top-1 (= ceil(4/10)) share 1/2, gini
     * (-3*0 - 0 + 2 + 3*2) / (4*4) = 1/2, max/mean 2;
     * layer 1 [0,2,1,1]: gini (-1 + 1 + 6) / 16 = 0.375 */
    CHECK_EQ_INT(rp->top10_n, 1);
    CHECK_NEAR(rp->top10_share[0], 0.5, 1e-12);
    CHECK_NEAR(rp->topk_share[0], 0.5, 1e-12);
    CHECK_NEAR(rp->gini[0], 0.5, 1e-12);
    CHECK_NEAR(rp->gini[1], 0.375, 1e-12);
    CHECK_NEAR(rp->max_mean[0], 2.0, 1e-12);
    CHECK_NEAR(rp->max_mean[1], 2.0, 1e-12);
    /* curve: i=1,2 one expert per layer -> 0; i=3 {2,1} both layers;
     * i=4 the request-level values (1 + 1.5) / 2 */
    CHECK_EQ_INT(rp->curve.len, 4);
    CHECK_NEAR(rp->curve.mean[0], 0.0, 1e-12);
    CHECK_NEAR(rp->curve.mean[1], 0.0, 1e-12);
    CHECK_NEAR(rp->curve.mean[2], H_THIRD, 1e-12);
    CHECK_NEAR(rp->curve.mean[3], 1.25, 1e-12);
    CHECK_NEAR(rp->curve.layer[1 * 4 + 3], 1.5, 1e-12);
    CHECK_EQ_INT(rp->curve.requests[3], 1);
    /* decode-only curve: layer 0 steps 0 1 1, layer 1 steps 1 2 3:
     * d=1 0; d=2 1 bit both; d=3 H(2/3,1/3) and log2(3) */
    CHECK_EQ_INT(rp->curve_decode.len, 3);
    CHECK_NEAR(rp->curve_decode.mean[0], 0.0, 1e-12);
    CHECK_NEAR(rp->curve_decode.mean[1], 1.0, 1e-12);
    CHECK_NEAR(rp->curve_decode.mean[2], (H_THIRD + log2(3.0)) / 2, 1e-12);
    CHECK_NEAR(rp->curve_decode.layer[1 * 3 + 2], log2(3.0), 1e-12);
    ms_stats_free(s);
}

/* L=2, J=4, K=2 with weights; two identical requests of one prefill row
 * {0,1} and one decode row {2,3} at both layers. */
static void test_k2_weights_two_requests(void)
{
    ms_trace_meta m = meta_of(2, 4, 2);
    ms_err err;
    ms_stats *s = ms_stats_new(&m, &err);
    const uint32_t rows[] = {1, 1};
    const int32_t ids[] = {0, 1, 0, 1, /* row 0 */ 2, 3, 3, 2 /* row 1 */};
    const float w[] = {0.5f, 0.5f, 0.5f, 0.5f, 0.75f, 0.25f, 0.75f, 0.25f};
    req_buf b;
    CHECK(ms_stats_add(s, build(&b, 1, 2, 2, 2, rows, ids, w), &err) == 0);
    CHECK(ms_stats_add(s, build(&b, 2, 2, 2, 2, rows, ids, w), &err) == 0);
    ms_stats_finish(s);
    const ms_stats_report *rp = ms_stats_report_get(s);
    /* each iteration activates 2 experts once: 1 bit; weighted (.5,.5) -> 1,
     * (.75,.25) -> 0.811278 */
    double h_3_1 = 0.811278124459132864;
    CHECK_NEAR(rp->h_iter[0], 1.0, 1e-12);
    CHECK_NEAR(rp->hw_iter[0], (1.0 + h_3_1) / 2, 1e-12);
    /* request: 4 experts once each: 2 bits; weighted (.25,.25,.375,.125) */
    double hw_req = 2 * 0.5 + 0.375 * log2(1 / 0.375) + 0.125 * 3;
    CHECK_NEAR(rp->h_req[0], 2.0, 1e-12);
    CHECK_NEAR(rp->hw_req[0], hw_req, 1e-12);
    CHECK_NEAR(rp->h_trace[1], 2.0, 1e-12);
    CHECK_NEAR(rp->hw_trace[1], hw_req, 1e-12);
    CHECK_NEAR(rp->mean.h_iter, 1.0, 1e-12);
    /* one decode step per request: no previous step; nothing earlier */
    CHECK(isnan(rp->reuse_prev[0]));
    CHECK_NEAR(rp->reuse_any[0], 0.0, 1e-12);
    CHECK_EQ_INT(rp->reuse_any_den[0], 4);
    /* top-1 (largest weight, lowest slot on ties): row 0 (0,0), row 1 (2,3):
     * X = Y up to relabelling, I = H = 1, NMI = 1 */
    CHECK_NEAR(rp->mi_top1[0], 1.0, 1e-12);
    CHECK_NEAR(rp->nmi_top1[0], 1.0, 1e-12);
    /* co-activation rows: {0,1}x{0,1} twice, {2,3}x{2,3} twice; every e's
     * successor is certain: 8/8; baseline expert 0: 4 of 8 pairs */
    CHECK_NEAR(rp->succ_hit[0], 1.0, 1e-12);
    CHECK_NEAR(rp->succ_base[0], 0.5, 1e-12);
    /* even counts [2,2,2,2]: gini 0, topK (2) share 1/2, max/mean 1 */
    CHECK_NEAR(rp->gini[0], 0.0, 1e-12);
    CHECK_NEAR(rp->topk_share[0], 0.5, 1e-12);
    CHECK_NEAR(rp->max_mean[0], 1.0, 1e-12);
    CHECK_EQ_INT(rp->curve.requests[0], 2);
    CHECK_EQ_INT(rp->curve.requests[1], 2);
    CHECK_NEAR(rp->curve.mean[0], 1.0, 1e-12);
    CHECK_NEAR(rp->curve.mean[1], 2.0, 1e-12);
    ms_stats_free(s);
}

/* Missing cells and a single (prefill-only) iteration; L=2, J=4, K=2.
 * Prefill of 3 rows: row 0 {0,-1}/{1,2}, row 1 {0,1}/{-1,-1}, row 2 {0,1}/{1,3}. */
static void test_missing_single_iteration(void)
{
    ms_trace_meta m = meta_of(2, 4, 2);
    ms_err err;
    ms_stats *s = ms_stats_new(&m, &err);
    const uint32_t rows[] = {3};
    const int32_t ids[] = {0, -1, 1, 2, 0, 1, -1, -1, 0, 1, 1, 3};
    req_buf b;
    CHECK(ms_stats_add(s, build(&b, 3, 2, 2, 1, rows, ids, NULL), &err) == 0);
    ms_stats_finish(s);
    const ms_stats_report *rp = ms_stats_report_get(s);
    CHECK_EQ_INT(rp->missing[0], 1);
    CHECK_EQ_INT(rp->missing[1], 2);
    CHECK_EQ_INT(rp->missing_total, 3);
    CHECK_EQ_INT(rp->activations[0], 5);
    CHECK_EQ_INT(rp->activations[1], 4);
    /* layer 0 counts {0:3, 1:2}; layer 1 {1:2, 2:1, 3:1} */
    double h32 = -(0.6 * log2(0.6) + 0.4 * log2(0.4));
    CHECK_NEAR(rp->h_iter[0], h32, 1e-12);
    CHECK_NEAR(rp->h_req[0], h32, 1e-12);
    CHECK_NEAR(rp->h_iter[1], 1.5, 1e-12);
    /* no decode step: reuse undefined */
    CHECK(isnan(rp->reuse_prev[0]) && isnan(rp->reuse_any[1]));
    CHECK(isnan(rp->mean.reuse_any));
    /* pairs use rows 0 and 2 only (row 1 has no layer-1 activation):
     * top-1 (0,1), (0,1): constant, NMI 1, MI 0 */
    CHECK_NEAR(rp->mi_top1[0], 0.0, 1e-12);
    CHECK_NEAR(rp->nmi_top1[0], 1.0, 1e-12);
    /* pairs (e at 0, row): (0,r0) (0,r2) (1,r2) = 3; succ(0) = 1 (in r0 and r2),
     * succ(1) = 1 (r2): 3/3 */
    CHECK_NEAR(rp->succ_hit[0], 1.0, 1e-12);
    CHECK_EQ_INT(rp->curve.len, 1);
    CHECK_EQ_INT(rp->curve_decode.len, 0);
    CHECK_NEAR(rp->curve.mean[0], (h32 + 1.5) / 2, 1e-12);
    ms_stats_free(s);
}

/* L = 1: no layer pairs; a request of zero iterations counts but adds nothing. */
static void test_one_layer_and_empty(void)
{
    ms_trace_meta m = meta_of(1, 2, 1);
    ms_err err;
    ms_stats *s = ms_stats_new(&m, &err);
    req_buf b;
    CHECK(ms_stats_add(s, build(&b, 0, 1, 1, 0, NULL, NULL, NULL), &err) == 0);
    ms_stats_finish(s);
    const ms_stats_report *rp = ms_stats_report_get(s);
    CHECK_EQ_INT(rp->n_requests, 1);
    CHECK_EQ_INT(rp->n_pairs, 0);
    CHECK(isnan(rp->mean.nmi_top1));
    CHECK(isnan(rp->h_trace[0]) && isnan(rp->gini[0]));
    CHECK_EQ_INT(rp->curve.len, 0);
    cJSON *j = ms_stats_to_json(s);
    char *txt = cJSON_PrintUnformatted(j);
    CHECK_STR_CONTAINS(txt, "\"entropy_trace\":[null]");
    CHECK_STR_CONTAINS(txt, "\"nmi_top1\":[]");
    free(txt);
    cJSON_Delete(j);
    ms_stats_free(s);
}

static void test_reuse_union_and_long_request(void)
{
    /* L=1, J=4, K=1, 300 iterations: prefill then decode alternating 0,1:
     * expert e at step t never equals step t-1's; any-earlier is 1 after the
     * first occurrence of each.  Curve capped at MS_STATS_CURVE_MAX. */
    enum { N = 300 };
    static ms_iteration it[N];
    static int32_t ids[N];
    static float w[N];
    for (uint32_t i = 0; i < N; i++) {
        it[i].phase = i ? MS_PHASE_DECODE : MS_PHASE_PREFILL;
        it[i].row0 = i;
        it[i].n_rows = 1;
        ids[i] = (int32_t)(i % 2);
        w[i] = 1.0f;
    }
    ms_request r = {0};
    r.n_iters = N;
    r.iters = it;
    r.n_rows = N;
    r.topk_ids = ids;
    r.topk_w = w;
    ms_trace_meta m = meta_of(1, 4, 1);
    ms_err err;
    ms_stats *s = ms_stats_new(&m, &err);
    CHECK(ms_stats_add(s, &r, &err) == 0);
    ms_stats_finish(s);
    const ms_stats_report *rp = ms_stats_report_get(s);
    /* decode steps 1..299 use 1,0,1,...: step 1 uses 1, not in prefill (0) */
    CHECK_NEAR(rp->reuse_prev[0], 0.0, 1e-12);
    CHECK_NEAR(rp->reuse_any[0], 298.0 / 299.0, 1e-12);
    CHECK_EQ_INT(rp->curve.len, MS_STATS_CURVE_MAX);
    CHECK_NEAR(rp->curve.mean[0], 0.0, 1e-12);
    CHECK_NEAR(rp->curve.mean[1], 1.0, 1e-12);
    CHECK_NEAR(rp->curve.mean[2], H_THIRD, 1e-12);
    CHECK_NEAR(rp->curve.mean[MS_STATS_CURVE_MAX - 1], 1.0, 1e-12);
    /* decode steps 1 0 1 0 ...: 0, 1, H(2/3,1/3), ... 128 each at 256 */
    CHECK_EQ_INT(rp->curve_decode.len, MS_STATS_CURVE_MAX);
    CHECK_NEAR(rp->curve_decode.mean[0], 0.0, 1e-12);
    CHECK_NEAR(rp->curve_decode.mean[1], 1.0, 1e-12);
    CHECK_NEAR(rp->curve_decode.mean[2], H_THIRD, 1e-12);
    CHECK_NEAR(rp->curve_decode.mean[MS_STATS_CURVE_MAX - 1], 1.0, 1e-12);
    CHECK_EQ_INT(rp->curve_decode.requests[MS_STATS_CURVE_MAX - 1], 1);
    CHECK_NEAR(rp->h_req[0], 1.0, 1e-12);
    ms_stats_free(s);
}

static void test_bad_input(void)
{
    ms_err err;
    ms_trace_meta m = meta_of(2, 4, 5);
    CHECK(ms_stats_new(&m, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "L=2 J=4 K=5");
    m = meta_of(0, 4, 1);
    CHECK(ms_stats_new(&m, &err) == NULL);

    m = meta_of(2, 4, 1);
    ms_stats *s = ms_stats_new(&m, &err);
    const uint32_t rows[] = {1, 1};
    req_buf b;
    const int32_t out_of_range[] = {0, 1, 2, 4};
    CHECK(ms_stats_add(s, build(&b, 9, 2, 1, 2, rows, out_of_range, NULL), &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "request 9: topk_ids[row 1][layer 1][slot 0] = 4 outside [-1, 4)");
    const int32_t below[] = {0, -2, 2, 3};
    CHECK(ms_stats_add(s, build(&b, 9, 2, 1, 2, rows, below, NULL), &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "= -2 outside");
    const int32_t ok[] = {0, 1, 2, 3};
    build(&b, 10, 2, 1, 2, rows, ok, NULL);
    b.w[2] = NAN;
    CHECK(ms_stats_add(s, &b.r, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "topk_w[row 1][layer 0][slot 0] = nan");
    build(&b, 11, 2, 1, 2, rows, ok, NULL);
    b.it[1].n_rows = 2;
    CHECK(ms_stats_add(s, &b.r, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "iteration 1: rows [1, 3) outside n_rows = 2");
    build(&b, 12, 2, 1, 2, rows, ok, NULL);
    b.it[1].phase = (ms_phase)5;
    CHECK(ms_stats_add(s, &b.r, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "phase = 5");
    /* rejected requests left nothing behind */
    ms_stats_finish(s);
    CHECK_EQ_INT(ms_stats_report_get(s)->n_requests, 0);
    CHECK_EQ_INT(ms_stats_report_get(s)->activations_total, 0);
    CHECK(ms_stats_add(s, build(&b, 13, 2, 1, 2, rows, ok, NULL), &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "after ms_stats_finish");
    ms_stats_free(s);

    /* duplicate id within one (row, layer) */
    m = meta_of(1, 4, 2);
    s = ms_stats_new(&m, &err);
    const uint32_t one[] = {1};
    const int32_t dup[] = {3, 3};
    CHECK(ms_stats_add(s, build(&b, 14, 1, 2, 1, one, dup, NULL), &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "expert 3 in slots 0 and 1");
    ms_stats_free(s);
}

static void test_json_and_table(void)
{
    ms_trace_meta m = meta_of(2, 4, 1);
    ms_err err;
    ms_stats *s = ms_stats_new(&m, &err);
    const uint32_t rows[] = {1, 1, 1, 1};
    const int32_t ids[] = {0, 1, 0, 1, 1, 2, 1, 3};
    req_buf b;
    CHECK(ms_stats_add(s, build(&b, 7, 2, 1, 4, rows, ids, NULL), &err) == 0);
    CHECK(ms_stats_to_json(s) == NULL); /* not finished */
    ms_stats_finish(s);
    cJSON *j = ms_stats_to_json(s);
    CHECK(j != NULL);
    CHECK_NEAR(cJSON_GetObjectItem(j, "entropy_max")->valuedouble, 2.0, 1e-12);
    cJSON *mean = cJSON_GetObjectItem(j, "mean");
    CHECK_NEAR(cJSON_GetObjectItem(mean, "entropy_request")->valuedouble, 1.25, 1e-12);
    CHECK_NEAR(cJSON_GetObjectItem(mean, "reuse_any_earlier")->valuedouble, 0.5, 1e-12);
    CHECK_NEAR(cJSON_GetObjectItem(mean, "nmi_top1")->valuedouble, 0.8, 1e-12);
    cJSON *per = cJSON_GetObjectItem(j, "per_layer");
    cJSON *gini = cJSON_GetObjectItem(per, "gini");
    CHECK_EQ_INT(cJSON_GetArraySize(gini), 2);
    CHECK_NEAR(cJSON_GetArrayItem(gini, 1)->valuedouble, 0.375, 1e-12);
    cJSON *pairs = cJSON_GetObjectItem(j, "layer_pairs");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(pairs, "successor_hit")), 1);
    cJSON *curve = cJSON_GetObjectItem(j, "entropy_curve");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(curve, "mean")), 4);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(curve, "per_layer")), 2);
    cJSON *dcurve = cJSON_GetObjectItem(j, "entropy_curve_decode");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(dcurve, "mean")), 3);
    CHECK_NEAR(cJSON_GetArrayItem(cJSON_GetObjectItem(dcurve, "mean"), 1)->valuedouble, 1.0, 1e-12);
    cJSON_Delete(j);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ms_stats_print(s, f);
    fclose(f);
    CHECK_STR_CONTAINS(buf, "model hand: L=2 J=4 K=1; 1 requests, 4 iterations (3 decode), 4 rows");
    /* layer 1 row: pair columns are "-" (no layer 2) */
    CHECK_STR_CONTAINS(buf, "    1        4      0  0.000  1.500  1.500  0.000  1.500  1.500  0.000  0.333"
                            "      -      -      -      -  0.500  0.500  0.375  2.000");
    CHECK_STR_CONTAINS(buf, "reuse: previous decode step 0.250, any earlier iteration 0.500");
    CHECK_STR_CONTAINS(buf, "all iterations (i=1 prefill): i=1 0.000 i=2 0.000 i=4 1.250\n");
    CHECK_STR_CONTAINS(buf, "decode steps only: i=1 0.000 i=2 1.000 i=3 1.252\n");
    free(buf);
    ms_stats_free(s);
}

/* The K = 1 sequence of test_k1_sequence, twice, written with the trace
 * writer and streamed back through the reader: the same numbers come out.
 * The file stays in the working directory as the fixture of the CLI tests in
 * tests/stats.cmake. */
#define HAND_TRACE "stats_hand.h5"
static void test_reader_round_trip(void)
{
    ms_trace_meta m = meta_of(2, 4, 1);
    m.probs_kind = MS_PROBS_TOPK_RENORM;
    ms_trace_meta_alloc_layers(&m);
    for (uint32_t l = 0; l < 2; l++) {
        m.expert_bytes[l] = 1000;
        m.dense_bytes[l] = 100;
    }
    ms_err err;
    ms_trace_writer *w = ms_writer_open(HAND_TRACE, &m, &err);
    CHECK(w != NULL);
    if (!w) {
        fprintf(stderr, "%s\n", err.msg);
        ms_trace_meta_free(&m);
        return;
    }
    const int32_t ids[] = {0, 1, 0, 1, 1, 2, 1, 3};
    for (uint32_t q = 0; q < 2; q++) {
        ms_request r;
        memset(&r, 0, sizeof r);
        r.id = q;
        r.arrival_s = q;
        r.prompt_len = 1;
        r.output_len = 3;
        r.n_iters = 4;
        r.n_rows = 4;
        ms_request_alloc(&r, &m);
        for (uint32_t i = 0; i < 4; i++) {
            r.iters[i].phase = i ? MS_PHASE_DECODE : MS_PHASE_PREFILL;
            r.iters[i].row0 = i;
            r.iters[i].n_rows = 1;
        }
        for (uint32_t c = 0; c < 8; c++) {
            r.topk_ids[c] = ids[c];
            r.topk_w[c] = 1.0f;
        }
        CHECK(ms_writer_add(w, &r, &err) == 0);
        ms_request_free(&r);
    }
    CHECK(ms_writer_close(w, &err) == 0);
    ms_trace_meta_free(&m);

    ms_trace_reader *rd = ms_reader_open(HAND_TRACE, &err);
    CHECK(rd != NULL);
    if (!rd) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    ms_stats *s = ms_stats_new(ms_reader_meta(rd), &err);
    ms_request req;
    memset(&req, 0, sizeof req);
    int rc;
    while ((rc = ms_reader_next(rd, &req, &err)) == 1)
        CHECK(ms_stats_add(s, &req, &err) == 0);
    CHECK_EQ_INT(rc, 0);
    ms_request_free(&req);
    ms_reader_close(rd);
    ms_stats_finish(s);
    const ms_stats_report *rp = ms_stats_report_get(s);
    CHECK_EQ_INT(rp->n_requests, 2);
    CHECK_EQ_INT(rp->n_decode_steps, 6);
    CHECK_NEAR(rp->mean.h_req, 1.25, 1e-12);
    CHECK_NEAR(rp->mean.h_trace, 1.25, 1e-12); /* same counts, doubled */
    CHECK_NEAR(rp->mean.reuse_prev, 0.25, 1e-12);
    CHECK_NEAR(rp->reuse_any[0], 2.0 / 3.0, 1e-12);
    CHECK_NEAR(rp->nmi_top1[0], 0.8, 1e-12);
    CHECK_NEAR(rp->succ_hit[0], 0.75, 1e-12);
    CHECK_NEAR(rp->gini[1], 0.375, 1e-12);
    CHECK_EQ_INT(rp->curve.requests[3], 2);
    CHECK_NEAR(rp->curve_decode.mean[2], (H_THIRD + log2(3.0)) / 2, 1e-12);
    ms_stats_free(s);
}

int main(void)
{
    double even[] = {1, 1, 1, 1}, zero[] = {0, 0};
    CHECK_NEAR(ms_entropy_bits(even, 4), 2.0, 1e-12);
    CHECK(isnan(ms_entropy_bits(zero, 2)));
    test_k1_sequence();
    test_k2_weights_two_requests();
    test_missing_single_iteration();
    test_one_layer_and_empty();
    test_reuse_union_and_long_request();
    test_bad_input();
    test_json_and_table();
    test_reader_round_trip();
    CHECK_DONE();
}
