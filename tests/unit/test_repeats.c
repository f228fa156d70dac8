/* Repeated tokens: the period / cross-request statistics
 * (traces/stats/repeats.h), the generator's repeat knobs
 * (traces/synth/gen_repeat.c) and the [periods] section of params files.
 * Hand-computed cases, worked out in the comments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "traces/stats/repeats.h"
#include "traces/synth/gen.h"
#include "traces/synth/gen_params.h"

/* L = 1, J = 8, K = 1 meta. */
static ms_trace_meta small_meta(void)
{
    ms_trace_meta m;
    memset(&m, 0, sizeof m);
    m.L = 1;
    m.J = 8;
    m.K = 1;
    m.probs_kind = MS_PROBS_TOPK_RENORM;
    return m;
}

/* One request: a 1-row prefill (expert 7) then one decode row per entry of ids. */
static void decode_request(const ms_trace_meta *m, uint64_t id, const int *ids, uint32_t n, ms_request *r)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    r->prompt_len = 1;
    r->output_len = n;
    r->n_iters = 1 + n;
    r->n_rows = 1 + n;
    ms_request_alloc(r, m);
    r->iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, 1};
    r->topk_ids[0] = 7;
    r->topk_w[0] = 1;
    for (uint32_t t = 0; t < n; t++) {
        r->iters[t + 1] = (ms_iteration){MS_PHASE_DECODE, 1 + t, 1};
        r->topk_ids[1 + t] = ids[t];
        r->topk_w[1 + t] = 1;
    }
}

static void periods(void)
{
    ms_trace_meta m = small_meta();
    ms_request r;
    ms_period pd;
    /* 0 1 2 0 1 2 ... (12 steps): W = 11, r(d) = 1 at d = 3, 6, 9 and 0 at
     * every other lag.  P = 2: multiples 2 4 6 8 10 -> M = 1/5, others 3 5 7
     * 9 11 -> 2/5: contrast < 0.  P = 3: M = 1, b = 0, sd = 0: contrast 1,
     * the largest (P = 4, 5 give M <= 1/2) -> period 3; (M - b)/(1 - b) = 1
     * -> repeat 1. */
    int loop3[12] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2};
    decode_request(&m, 0, loop3, 12, &r);
    ms_period_of_request(&m, &r, &pd);
    CHECK_EQ_INT(pd.period, 3);
    CHECK_NEAR(pd.repeat, 1.0, 1e-9);
    CHECK_NEAR(pd.r_mult, 1.0, 1e-12);
    CHECK_NEAR(pd.r_other, 0.0, 1e-12);
    ms_request_free(&r);
    /* the same expert every step: r(d) = 1 at every lag, no contrast: no loop */
    int flat[12] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    decode_request(&m, 0, flat, 12, &r);
    ms_period_of_request(&m, &r, &pd);
    CHECK_EQ_INT(pd.period, 0);
    CHECK_NEAR(pd.repeat, 0.0, 0);
    ms_request_free(&r);
    /* 0 1 0 1 0 1 0 2 (8 steps, W = 7): lag 2: steps 2..7 vs 0..5: 0=0, 1=1,
     * 0=0, 1=1, 0=0, 2!=1 -> 5/6; lag 4: steps 4..7 vs 0..3: 3/4; lag 6: steps
     * 6, 7: 0=0, 2!=1 -> 1/2; odd lags 3 5 7: step t vs t-d differ in
     * parity, except step 7 (2) which matches nothing -> 0.  P = 2: M =
     * (5/6 + 3/4 + 1/2) / 3 = 25/36, b = 0, sd 0 -> period 2; y = 25/36 =
     * (q + q^2 + q^3) / 3 with m = 3: solved by bisection. */
    int loop2[8] = {0, 1, 0, 1, 0, 1, 0, 2};
    decode_request(&m, 0, loop2, 8, &r);
    ms_period_of_request(&m, &r, &pd);
    CHECK_EQ_INT(pd.period, 2);
    CHECK_NEAR(pd.r_mult, 25.0 / 36, 1e-12);
    double q = pd.repeat;
    CHECK_NEAR((q + q * q + q * q * q) / 3, 25.0 / 36, 1e-9);
    ms_request_free(&r);
    /* fewer than 4 decode steps: nothing to measure */
    decode_request(&m, 0, loop3, 3, &r);
    ms_period_of_request(&m, &r, &pd);
    CHECK_EQ_INT(pd.period, 0);
    ms_request_free(&r);
}

static void xreq(void)
{
    ms_trace_meta m = small_meta();
    ms_xreq *x = ms_xreq_new(&m);
    ms_request a, b;
    /* request 0: decode experts 0, 1 (nothing earlier to compare with);
     * request 1: 1 (in request 0: overlap 1), 5 (0), 0 (1), and its own
     * steps are not compared with each other -> mean 2/3 */
    int ia[2] = {0, 1}, ib[3] = {1, 5, 0};
    decode_request(&m, 0, ia, 2, &a);
    decode_request(&m, 1, ib, 3, &b);
    ms_xreq_add(x, &a);
    CHECK(isnan(ms_xreq_mean(x)));
    CHECK(isnan(ms_xreq_exact(x)));
    ms_xreq_add(x, &b);
    CHECK_NEAR(ms_xreq_mean(x), 2.0 / 3, 1e-12);
    CHECK_NEAR(ms_xreq_exact(x), 2.0 / 3, 1e-12); /* steps 1 and 0 are found whole */
    ms_xreq_free(x);
    ms_request_free(&a);
    ms_request_free(&b);
}

static ms_model tiny_model(void)
{
    ms_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "tiny");
    m.layers = m.moe_layers = 3;
    m.experts = 8;
    m.top_k = 2;
    m.vocab = 1000;
    m.expert_bytes = 1000;
    m.dense_bytes = 1000;
    return m;
}

typedef struct {
    ms_trace_meta meta;
    ms_request req[8];
    uint32_t n;
} kept;

static int keep(const ms_request *r, const ms_gen_info *info, void *ctx)
{
    (void)info;
    kept *k = ctx;
    ms_request *d = &k->req[k->n++];
    memset(d, 0, sizeof *d);
    d->id = r->id;
    d->prompt_len = r->prompt_len;
    d->output_len = r->output_len;
    d->n_iters = r->n_iters;
    d->n_rows = r->n_rows;
    d->n_tokens = r->n_tokens;
    ms_request_alloc(d, &k->meta);
    memcpy(d->iters, r->iters, r->n_iters * sizeof *r->iters);
    size_t cells = (size_t)r->n_rows * k->meta.L * k->meta.K;
    memcpy(d->topk_ids, r->topk_ids, cells * sizeof *r->topk_ids);
    memcpy(d->embedding, r->embedding, (size_t)r->n_iters * k->meta.embed_dim * sizeof *r->embedding);
    return 0;
}

static void gen_into(const ms_gen_params *p, const ms_model *m, kept *k)
{
    ms_err err;
    memset(k, 0, sizeof *k);
    CHECK(ms_gen_meta(p, m, &k->meta, &err) == 0);
    CHECK(ms_gen_run(p, m, &k->meta, keep, k, NULL, &err) == 0);
}

static void kept_free(kept *k)
{
    for (uint32_t i = 0; i < k->n; i++)
        ms_request_free(&k->req[i]);
    ms_trace_meta_free(&k->meta);
}

static int same_row(const kept *k, const ms_request *a, uint32_t ra, const ms_request *b, uint32_t rb)
{
    size_t LK = (size_t)k->meta.L * k->meta.K;
    return !memcmp(a->topk_ids + ra * LK, b->topk_ids + rb * LK, LK * sizeof *a->topk_ids);
}

static int same_emb(const kept *k, const ms_request *a, uint32_t ia, const ms_request *b, uint32_t ib)
{
    uint32_t D = k->meta.embed_dim;
    return !memcmp(a->embedding + (size_t)ia * D, b->embedding + (size_t)ib * D, D * sizeof *a->embedding);
}

static ms_gen_params base_params(void)
{
    ms_gen_params p;
    ms_gen_defaults(&p);
    p.requests = 3;
    p.prompt_min = p.prompt_max = 4;
    p.output_min = p.output_max = 20;
    p.embed_dim = 8;
    p.spec_depth = 1;
    return p;
}

static void generator(void)
{
    ms_model m = tiny_model();
    kept k;
    /* period 3, repeat 1: every decode step s > 3 copies step s - 3 (row
     * prompt + s - 1), its routing and its embedding (iteration s) */
    ms_gen_params p = base_params();
    p.decode_period = 3;
    p.period_repeat = 1;
    gen_into(&p, &m, &k);
    CHECK_EQ_INT(k.n, 3);
    for (uint32_t i = 0; i < k.n; i++)
        for (uint32_t s = 4; s <= 20; s++) {
            CHECK(same_row(&k, &k.req[i], 4 + s - 1, &k.req[i], 4 + s - 4));
            CHECK(same_emb(&k, &k.req[i], s, &k.req[i], s - 3));
        }
    kept_free(&k);
    /* token_repeat 1: every decode row of requests 1 and 2 is some decode
     * row of an earlier request, with its embedding */
    p = base_params();
    p.token_repeat = 1;
    gen_into(&p, &m, &k);
    for (uint32_t i = 1; i < k.n; i++)
        for (uint32_t s = 1; s <= 20; s++) {
            int found = 0;
            for (uint32_t j = 0; j < i && !found; j++)
                for (uint32_t t = 1; t <= 20 && !found; t++)
                    found = same_row(&k, &k.req[i], 4 + s - 1, &k.req[j], 4 + t - 1) &&
                            same_emb(&k, &k.req[i], s, &k.req[j], t);
            CHECK(found);
        }
    kept_free(&k);
    /* validation: a repeat probability without a period */
    p = base_params();
    p.period_repeat = 0.5;
    ms_err err = {""};
    CHECK(ms_gen_validate(&p, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "period_repeat = 0.5 needs decode_period >= 1");
    CHECK(ms_gen_set(&p, "token_repeat", "1.5", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "knob token_repeat=1.5 is out of range [0, 1]");
}

/* xreq_exact of a generation kept in k. */
static double kept_exact(const kept *k)
{
    ms_xreq *x = ms_xreq_new(&k->meta);
    for (uint32_t i = 0; i < k->n; i++)
        ms_xreq_add(x, &k->req[i]);
    double e = ms_xreq_exact(x);
    ms_xreq_free(x);
    return e;
}

/* token_noise: a token_repeat copy keeps its token (the embedding of an
 * earlier request's decode step) but not always its whole routing: the share
 * of decode steps found whole in an earlier request (xreq_exact) is 1 for
 * exact copies and falls as the noise grows. */
static void token_noise(void)
{
    ms_model m = tiny_model();
    kept k;
    double exact[3];
    const double noise[3] = {0, 0.3, 3};
    for (int n = 0; n < 3; n++) {
        ms_gen_params p = base_params();
        p.requests = 6;
        p.token_repeat = 1;
        p.token_noise = noise[n];
        gen_into(&p, &m, &k);
        exact[n] = kept_exact(&k);
        if (n == 2) /* the token, its embedding, comes back whole */
            for (uint32_t i = 1; i < k.n; i++)
                for (uint32_t s = 1; s <= 20; s++) {
                    int found = 0;
                    for (uint32_t j = 0; j < i && !found; j++)
                        for (uint32_t t = 1; t <= 20 && !found; t++)
                            found = same_emb(&k, &k.req[i], s, &k.req[j], t);
                    CHECK(found);
                }
        kept_free(&k);
    }
    CHECK_NEAR(exact[0], 1, 0);
    CHECK(exact[1] < 1);
    CHECK(exact[2] < exact[1]);
    CHECK(exact[2] < 0.5);
    /* validation */
    ms_gen_params p = base_params();
    p.token_noise = 0.5;
    ms_err err = {""};
    CHECK(ms_gen_validate(&p, &m, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "token_noise = 0.5 needs token_repeat > 0");
    CHECK(ms_gen_set(&p, "token_noise", "11", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "knob token_noise=11 is out of range [0, 10]");
}

/* [periods] written by ms_gen_file_write reads back; request i takes entry i mod n. */
static void params_periods(void)
{
    ms_model m = tiny_model();
    ms_gen_params p = base_params();
    uint32_t per[2] = {2, 0};
    double rep[2] = {1, 0};
    p.periods = per;
    p.period_repeats = rep;
    p.n_periods = 2;
    FILE *f = fopen("repeats_periods.ini", "w");
    CHECK(f != NULL);
    uint64_t eb[3] = {1000, 1000, 1000}, db[3] = {1000, 1000, 1000};
    CHECK(ms_gen_file_write(f, "test", &m, eb, db, &p) == 0);
    fclose(f);
    ms_gen_file g;
    ms_err err;
    CHECK(ms_gen_file_load("repeats_periods.ini", NULL, &g, &err) == 0);
    CHECK_EQ_INT(g.n_periods, 2);
    CHECK_EQ_INT(g.p.periods[0], 2);
    CHECK_NEAR(g.p.period_repeats[0], 1, 0);
    CHECK_EQ_INT(g.p.periods[1], 0);
    kept k;
    gen_into(&g.p, &g.model, &k);
    /* request 0 and 2 loop with period 2 (entry 0), request 1 does not */
    for (uint32_t s = 3; s <= 20; s++) {
        CHECK(same_row(&k, &k.req[0], 4 + s - 1, &k.req[0], 4 + s - 3));
        CHECK(same_row(&k, &k.req[2], 4 + s - 1, &k.req[2], 4 + s - 3));
    }
    int differs = 0;
    for (uint32_t s = 3; s <= 20; s++)
        differs |= !same_row(&k, &k.req[1], 4 + s - 1, &k.req[1], 4 + s - 3);
    CHECK(differs);
    kept_free(&k);
    ms_gen_file_free(&g);
}

int main(void)
{
    periods();
    xreq();
    generator();
    token_noise();
    params_periods();
    CHECK_DONE();
}
