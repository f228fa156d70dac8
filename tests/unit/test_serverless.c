/* Serverless cost model (seed 002): each time formula on hand-computed
 * cases, the posterior of eq. (1) on a hand-built key-value table, and the
 * per-design solver and ODS against brute force on a small instance. */
#include <math.h>

#include "sim/serverless/serverless_ods.h"
#include "sim/serverless/serverless_predict.h"
#include "check.h"

/* Round numbers: 1 vCPU = 1000 MB = 1e9 FLOP/s; B^s = 100 B/s; B^f = 50 B/s. */
static ms_sl_platform platform(void)
{
    ms_sl_platform p = {.n_mem = 2, .mem_mb = {1000, 2000}, .mb_per_vcpu = 1000, .vcpu_flops = 1e9,
                        .warm_start_s = 0.5, .storage_delay_s = 0.25, .storage_bw = 100, .function_bw = 50,
                        .payload_bytes = 30, .price_per_gb_s = 1, .max_replicas = 2, .runtime_bytes = 0,
                        .act_bytes = 1, .nonmoe_mb = 1000};
    return p;
}
/* expert: 100 B, 1e9 FLOPs/token (1 s at 1000 MB); token 10 B; no dense part */
static ms_sl_model model(void)
{
    return (ms_sl_model){.L = 2, .J = 2, .K = 1, .expert_bytes = 100, .expert_flops = 1e9, .dense_bytes = 0,
                         .dense_flops = 0, .token_bytes = 10};
}

static void test_formulas(void)
{
    ms_sl_platform p = platform();
    ms_sl_model m = model();
    CHECK_NEAR(ms_sl_tcal(&p, &m, 1000), 1.0, 1e-12);
    CHECK_NEAR(ms_sl_tcal(&p, &m, 2000), 0.5, 1e-12);
    /* T^h = 100/100 + 0.25 + 0.5 */
    CHECK_NEAR(ms_sl_head(&p, &m), 1.75, 1e-12);
    CHECK_EQ_INT(ms_sl_per_replica(5, 2), 3);
    /* (6): r = 5, beta = 2: blk = 0.25 + 2 max(0.1 + 1, 0.1) = 2.45; nblk = 0.25 + 2*0.1 = 0.45;
     * 3 blocks: 1.75 + 0.45 + 3*2.45 = 9.55 */
    CHECK_NEAR(ms_sl_rep_time(&p, &m, MS_SL_PIPE, 1000, 5, 2), 9.55, 1e-12);
    /* (8): 1.75 + 0.5 + 5 (20/100 + 1) = 8.25 */
    CHECK_NEAR(ms_sl_rep_time(&p, &m, MS_SL_INDIRECT, 1000, 5, 1), 8.25, 1e-12);
    /* (10): 1.75 + 5 (10/50 + 0.5) = 5.25 at 2000 MB */
    CHECK_NEAR(ms_sl_rep_time(&p, &m, MS_SL_DIRECT, 2000, 5, 1), 5.25, 1e-12);
    /* (4)-(5): 2 replicas x 5.25 s x 2000/1024 GB x 1 */
    CHECK_NEAR(ms_sl_expert_cost(&p, 2000, 2, 5.25), 2 * 5.25 * 2000 / 1024.0, 1e-12);
    /* (12f): 3 x 10 B <= 30 B, 4 x 10 > 30 */
    CHECK(ms_sl_fits_payload(&p, &m, 3));
    CHECK(!ms_sl_fits_payload(&p, &m, 4));
    /* (12c): 100 + r 20 B <= 1000 MB always; a 1e-4 MB function holds 100 B + 0 tokens only */
    CHECK(ms_sl_fits_memory(&p, &m, 1000, 1000));
    CHECK(!ms_sl_fits_memory(&p, &m, 100.0 / 1048576, 1));
    CHECK(ms_sl_fits_memory(&p, &m, 100.0 / 1048576, 0));
    /* (7)/(9): T^load = 0.5 + 0.25 + 0 = 0.75; max{9.55, 0.75} + 0.25 + 8 tokens x 10/100 = 10.6 */
    CHECK_NEAR(ms_sl_layer_latency(&p, &m, MS_SL_PIPE, 9.55, 5, 8), 10.6, 1e-12);
    CHECK_NEAR(ms_sl_layer_latency(&p, &m, MS_SL_INDIRECT, 0.1, 5, 8), 0.75 + 0.25 + 0.8, 1e-12);
    /* (11): 5 x 10/50 + 5.25 + 0.75 = 7.0 */
    CHECK_NEAR(ms_sl_layer_latency(&p, &m, MS_SL_DIRECT, 5.25, 5, 8), 7.0, 1e-12);
}

/* Hand-built table, one layer, two experts, with attention ids:
 * token 7 at position 0 with f3 = 7: expert0 3, expert1 1
 * token 7 at position 0 with f3 = 9: expert1 4
 * token 7 at position 1 with f3 = 7: expert0 2
 * Batch tokens {7, 7, 9, 5}: P'(f3=7) = 0.5, P'(f3=9) = 0.25.  Positions {0, 1}: P'(f2) = 1/2.
 * n(f1) = 10; f2=0: n12 = 8; f2=1: n12 = 2.
 * key (0,7): w = 4/8 * 0.5 * 8/10 * 0.5 = 0.1  -> e0 += 0.75*0.1, e1 += 0.25*0.1
 * key (0,9): w = 4/8 * 0.25 * 0.8 * 0.5 = 0.05 -> e1 += 0.05
 * key (1,7): w = 2/2 * 0.5 * 0.2 * 0.5 = 0.05  -> e0 += 0.05
 * unnormalised e0 = 0.125, e1 = 0.075 -> 0.625 / 0.375.  Lina: e0 5/10, e1 5/10. */
static void test_posterior(void)
{
    ms_sl_table t;
    ms_sl_table_init(&t, 1, 2, 1);
    ms_sl_table_add(&t, (ms_sl_feat){7, 0, 7}, 0, 0, 3);
    ms_sl_table_add(&t, (ms_sl_feat){7, 0, 7}, 0, 1, 1);
    ms_sl_table_add(&t, (ms_sl_feat){7, 0, 9}, 0, 1, 4);
    ms_sl_table_add(&t, (ms_sl_feat){7, 1, 7}, 0, 0, 2);
    ms_sl_table_sort(&t);
    CHECK_EQ_INT(t.n, 3);
    CHECK_EQ_INT(t.npos, 2);
    ms_sl_feat feat[4] = {{7, 0, -1}, {7, 1, -1}, {9, 0, -1}, {5, 0, -1}};
    int32_t sorted[4] = {5, 7, 7, 9};
    int32_t route[4] = {0, 0, 1, 1};
    ms_sl_batch b = {.L = 1, .J = 2, .K = 1, .n = 4, .feat = feat, .route = route, .sorted_ids = sorted};
    double post[2];
    CHECK_EQ_INT(ms_sl_posterior(&t, &b, 7, 0, post), 0);
    CHECK_NEAR(post[0], 0.625, 1e-12);
    CHECK_NEAR(post[1], 0.375, 1e-12);
    CHECK_EQ_INT(ms_sl_posterior(&t, &b, 8, 0, post), -1); /* unseen token id */
    /* predictions: tokens 7 -> expert 0 (paper); 9, 5 unseen -> prior (e0 5, e1 5: tie -> e0) */
    uint32_t d[2];
    ms_sl_predict(&t, MS_SL_PRED_PAPER, &b, d);
    CHECK_EQ_INT(d[0], 4);
    CHECK_EQ_INT(d[1], 0);
    uint32_t real[2];
    ms_sl_real_counts(&b, real);
    CHECK_EQ_INT(real[0], 2);
    CHECK_EQ_INT(real[1], 2);
    CHECK_NEAR(ms_sl_pred_error(d, real, 2), 2.0, 1e-12);
    /* set() inserts a new key in order and overrides a value */
    ms_sl_table_set(&t, (ms_sl_feat){5, 0, -1}, 0, 1, 6);
    CHECK_EQ_INT(t.n, 4);
    CHECK_EQ_INT(t.key[0].f1, 5);
    ms_sl_predict(&t, MS_SL_PRED_LINA, &b, d); /* 5 -> e1 now; 7 -> tie 5/5 -> e0; 9 -> prior e0 5 < e1 11 */
    CHECK_EQ_INT(d[0], 2);
    CHECK_EQ_INT(d[1], 2);
    ms_sl_table_free(&t);
}

/* Brute force over every (memory, replicas) per expert for design a. */
static double brute_design(const ms_sl_platform *p, const ms_sl_model *m, int a, const uint32_t *d, double budget,
                           uint32_t beta)
{
    int per = p->n_mem * p->max_replicas, n = 1;
    for (uint32_t k = 0; k < m->L * m->J; k++)
        n *= per;
    double best = INFINITY;
    for (int code = 0; code < n; code++) {
        int c = code;
        double cost = 0, lat = 0;
        int ok = 1;
        for (uint32_t e = 0; e < m->L && ok; e++) {
            double max_rep = 0;
            uint32_t max_r = 0, tok = 0;
            for (uint32_t i = 0; i < m->J; i++, c /= per) {
                int j = (c % per) / p->max_replicas, g = (c % per) % p->max_replicas + 1;
                uint32_t de = d[e * m->J + i], r = ms_sl_per_replica(de, (uint32_t)g);
                tok += de;
                if (!de)
                    continue;
                if (!ms_sl_fits_memory(p, m, p->mem_mb[j], r) || (a == MS_SL_DIRECT && !ms_sl_fits_payload(p, m, r)))
                    ok = 0;
                double t = ms_sl_rep_time(p, m, a, p->mem_mb[j], r, beta);
                cost += ms_sl_expert_cost(p, p->mem_mb[j], (uint32_t)g, t);
                max_rep = fmax(max_rep, t);
                max_r = r > max_r ? r : max_r;
            }
            lat += ms_sl_layer_latency(p, m, a, max_rep, max_r, tok);
        }
        if (ok && lat <= budget && cost < best)
            best = cost;
    }
    return best;
}

static void test_ods_vs_brute(void)
{
    ms_sl_platform p = platform();
    ms_sl_model m = model();
    uint32_t d[4] = {4, 1, 0, 6}; /* layer 0: 4 and 1 tokens; layer 1: 0 and 6 */
    double fixed = ms_sl_fixed_latency(&p, &m, 6);
    ms_sl_plan plan;
    ms_sl_plan_alloc(&plan, 2, 2);
    double lc[2], ll[2];
    int checked = 0;
    /* targets from loose to tight; grid fine enough that rounding never binds here */
    for (double target = 40.0123; target >= 8; target -= 2) { /* off the round latencies: no grid slack */
        for (int a = 1; a <= 3; a++) {
            double brute = INFINITY;
            for (uint32_t beta = 1;; beta = beta * 2 > 6 ? 6 : beta * 2) {
                brute = fmin(brute, brute_design(&p, &m, a, d, target - fixed, beta));
                if (a != MS_SL_PIPE || beta == 6)
                    break;
            }
            int rc = ms_sl_solve_design(&p, &m, a, d, 6, target, 200000, &plan, lc, ll);
            CHECK_EQ_INT(rc, isfinite(brute) ? 0 : 1);
            if (!rc) {
                CHECK_NEAR(lc[0] + lc[1], brute, 1e-9);
                ms_sl_eval ev;
                ms_err err;
                CHECK_EQ_INT(ms_sl_evaluate(&p, &m, &plan, d, 6, &ev, &err), 0);
                CHECK_NEAR(ev.cost, brute, 1e-9);
                CHECK(ev.latency <= target + 1e-9);
                CHECK_EQ_INT(ev.fixes, 0);
                checked++;
            }
        }
        /* ODS meets the target; its first mix is never above the best single design */
        ms_sl_ods_info info;
        ms_err err;
        if (!ms_sl_ods(&p, &m, d, 6, target, 200000, &plan, &info, &err)) {
            double single = fmin(info.design_cost[1], fmin(info.design_cost[2], info.design_cost[3]));
            if (info.rounds == 1) /* first mix: each layer at its cheapest design */
                CHECK(info.planned_cost <= single + 1e-9);
            CHECK(info.planned_latency <= target + 1e-9);
        }
    }
    CHECK(checked >= 20);
    /* infeasible: below the fixed latency */
    ms_sl_ods_info info;
    ms_err err;
    CHECK_EQ_INT(ms_sl_ods(&p, &m, d, 6, 1.0, 1000, &plan, &info, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "latency target 1000.0 ms is infeasible: the fastest deployment needs");
    ms_sl_plan_free(&plan);
}

int main(void)
{
    test_formulas();
    test_posterior();
    test_ods_vs_brute();
    CHECK_DONE();
}
