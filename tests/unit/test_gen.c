/* Synthetic trace generator: knobs, determinism, shapes, and the statistics
 * each knob controls (docs/generator.md), with stated tolerances. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "sim/core/profile.h"
#include "traces/synth/gen.h"

/* Mixtral-8x7B shape, built by hand (independent of the profile files). */
static ms_model mixtral_model(void)
{
    ms_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "mixtral-test");
    m.layers = 32;
    m.moe_layers = 32;
    m.experts = 8;
    m.top_k = 2;
    m.hidden = 4096;
    m.vocab = 32000;
    m.expert_bytes = 352321536;
    m.dense_bytes = 436207616;
    return m;
}

/* A quick-to-generate trace: short prompts and outputs. */
static ms_gen_params small_params(uint64_t seed)
{
    ms_gen_params p;
    ms_gen_defaults(&p);
    p.seed = seed;
    p.requests = 64;
    p.prompt_median = 24;
    p.prompt_max = 128;
    p.output_median = 32;
    p.output_max = 128;
    return p;
}

/* ---- collected statistics ---- */
typedef struct {
    const ms_trace_meta *meta;
    int check_failures;
    char first_error[1024];
    uint64_t hash;
    uint64_t n_requests, n_rows, n_iters;
    /* popularity */
    double *trace_counts;      /* [L][J] top-k selections over the trace */
    double req_entropy_sum;    /* mean normalised entropy of per-request counts */
    uint64_t req_entropy_n;
    /* decode reuse */
    uint64_t reuse_same, reuse_total;
    /* layer coupling: joint counts of top-1 at (l, l+1) */
    double *joint;             /* [C][L][J][J] top-1 at l vs l+1, per cluster */
    uint32_t C;
    /* sharpness */
    double top1_sum;
    uint64_t top1_n;
    /* spec agreement at distance 1 */
    uint64_t spec_agree, spec_total;
    /* embeddings (prefill) and clusters */
    float *emb;                /* [n_requests][D] */
    uint32_t *cluster;
    uint32_t cap;
    /* arrivals and lengths */
    double last_arrival;
    int arrivals_sorted;
    uint32_t *prompt_len, *output_len;
    uint64_t tokens_in_slice, tokens_total;
    uint32_t token_slice;      /* vocab / clusters */
    int lengths_consistent;
} stats;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static double norm_entropy(const double *c, uint32_t n)
{
    double s = 0, h = 0;
    for (uint32_t j = 0; j < n; j++)
        s += c[j];
    for (uint32_t j = 0; j < n; j++)
        if (c[j] > 0)
            h -= c[j] / s * log(c[j] / s);
    return h / log((double)n);
}

static int set_equal(const int32_t *a, const int32_t *b, uint32_t k)
{
    for (uint32_t i = 0; i < k; i++) {
        int found = 0;
        for (uint32_t j = 0; j < k; j++)
            found |= a[i] == b[j];
        if (!found)
            return 0;
    }
    return 1;
}

static int collect(const ms_request *r, const ms_gen_info *info, void *ctx)
{
    stats *s = ctx;
    const ms_trace_meta *m = s->meta;
    uint32_t L = m->L, J = m->J, K = m->K, D = m->embed_dim;
    ms_err err;
    if (ms_request_check(m, r, "gen", &err)) {
        if (!s->check_failures++)
            snprintf(s->first_error, sizeof s->first_error, "%s", err.msg);
    }
    size_t rlk = (size_t)r->n_rows * L * K;
    s->hash = fnv(s->hash, &r->id, sizeof r->id);
    s->hash = fnv(s->hash, &r->arrival_s, sizeof r->arrival_s);
    s->hash = fnv(s->hash, &r->prompt_len, sizeof r->prompt_len);
    s->hash = fnv(s->hash, &r->output_len, sizeof r->output_len);
    s->hash = fnv(s->hash, r->topk_ids, rlk * sizeof *r->topk_ids);
    s->hash = fnv(s->hash, r->topk_w, rlk * sizeof *r->topk_w);
    if (r->probs)
        s->hash = fnv(s->hash, r->probs, (size_t)r->n_rows * L * J * sizeof *r->probs);
    if (r->embedding)
        s->hash = fnv(s->hash, r->embedding, (size_t)r->n_iters * D * sizeof *r->embedding);
    if (r->spec_ids)
        s->hash = fnv(s->hash, r->spec_ids, rlk * m->spec_depth * sizeof *r->spec_ids);
    if (r->token_ids)
        s->hash = fnv(s->hash, r->token_ids, r->n_tokens * sizeof *r->token_ids);

    if (r->id != s->n_requests || r->n_rows != r->prompt_len + r->output_len || r->n_iters != 1 + r->output_len ||
        r->iters[0].phase != MS_PHASE_PREFILL || r->iters[0].n_rows != r->prompt_len)
        s->lengths_consistent = 0;
    if (r->arrival_s < s->last_arrival)
        s->arrivals_sorted = 0;
    s->last_arrival = r->arrival_s;

    double *req = calloc((size_t)L * J, sizeof *req);
    for (uint32_t row = 0; row < r->n_rows; row++)
        for (uint32_t l = 0; l < L; l++) {
            const int32_t *ids = r->topk_ids + ms_topk_index(m, row, l);
            for (uint32_t k = 0; k < K; k++) {
                s->trace_counts[(size_t)l * J + ids[k]] += 1;
                req[(size_t)l * J + ids[k]] += 1;
            }
            if (row >= r->prompt_len) {
                s->reuse_total++;
                s->reuse_same += set_equal(ids, r->topk_ids + ms_topk_index(m, row - 1, l), K);
            }
            if (l + 1 < L)
                s->joint[(((size_t)info->cluster * L + l) * J + ids[0]) * J + r->topk_ids[ms_topk_index(m, row, l + 1)]] += 1;
            if (r->probs) {
                s->top1_sum += r->probs[ms_probs_index(m, row, l) + ids[0]];
                s->top1_n++;
            }
            if (m->spec_depth && l + 1 < L) {
                s->spec_total++;
                s->spec_agree += set_equal(r->spec_ids + ms_spec_index(m, row, l, 0),
                                           r->topk_ids + ms_topk_index(m, row, l + 1), K);
            }
        }
    for (uint32_t l = 0; l < L; l++) {
        s->req_entropy_sum += norm_entropy(req + (size_t)l * J, J);
        s->req_entropy_n++;
    }
    free(req);
    if (s->n_requests < s->cap) {
        if (D)
            memcpy(s->emb + s->n_requests * D, r->embedding, D * sizeof(float));
        s->cluster[s->n_requests] = info->cluster;
        s->prompt_len[s->n_requests] = r->prompt_len;
        s->output_len[s->n_requests] = r->output_len;
    }
    if (r->token_ids) {
        for (uint32_t t = 0; t < r->n_tokens; t++) {
            s->tokens_total++;
            s->tokens_in_slice += (uint32_t)r->token_ids[t] / s->token_slice == info->cluster;
        }
    }
    s->n_requests++;
    s->n_rows += r->n_rows;
    s->n_iters += r->n_iters;
    return 0;
}

static void stats_free(stats *s)
{
    free(s->trace_counts); free(s->joint); free(s->emb); free(s->cluster);
    free(s->prompt_len); free(s->output_len);
}

/* Runs the generator into s; returns ms_gen_run's result. */
static int run_stats(const ms_gen_params *p, const ms_model *model, stats *s, ms_gen_summary *sum)
{
    ms_trace_meta meta;
    ms_err err;
    memset(s, 0, sizeof *s);
    if (ms_gen_meta(p, model, &meta, &err)) {
        fprintf(stderr, "meta: %s\n", err.msg);
        return -1;
    }
    s->meta = &meta;
    s->hash = 1469598103934665603ull;
    s->arrivals_sorted = 1;
    s->lengths_consistent = 1;
    s->cap = 4096;
    s->trace_counts = calloc((size_t)meta.L * meta.J, sizeof(double));
    s->C = p->clusters;
    s->token_slice = model->vocab / p->clusters;
    s->joint = calloc((size_t)p->clusters * meta.L * meta.J * meta.J, sizeof(double));
    s->emb = calloc((size_t)s->cap * (meta.embed_dim ? meta.embed_dim : 1), sizeof(float));
    s->cluster = calloc(s->cap, sizeof(uint32_t));
    s->prompt_len = calloc(s->cap, sizeof(uint32_t));
    s->output_len = calloc(s->cap, sizeof(uint32_t));
    int rc = ms_gen_run(p, model, &meta, collect, s, sum, &err);
    if (rc)
        fprintf(stderr, "run: %s\n", err.msg);
    if (s->check_failures)
        fprintf(stderr, "first ms_request_check failure: %s\n", s->first_error);
    ms_trace_meta_free(&meta);
    s->meta = NULL;
    return rc;
}

static double trace_entropy(const stats *s, uint32_t L, uint32_t J)
{
    double h = 0;
    for (uint32_t l = 0; l < L; l++)
        h += norm_entropy(s->trace_counts + (size_t)l * J, J);
    return h / L;
}

/* Mutual information (nats) between the top-1 expert at layer l and at
 * l+1 within a cluster, averaged over layer pairs and weighted over clusters:
 * the coupling between consecutive layers beyond the common cause (the
 * cluster's preferences). */
static double layer_mi(const stats *s, uint32_t L, uint32_t J)
{
    double total = 0, weight = 0;
    double *a = calloc(J, sizeof *a), *b = calloc(J, sizeof *b);
    for (uint32_t c = 0; c < s->C; c++)
        for (uint32_t l = 0; l + 1 < L; l++) {
            const double *jt = s->joint + ((size_t)c * L + l) * J * J;
            double n = 0, mi = 0;
            memset(a, 0, J * sizeof *a);
            memset(b, 0, J * sizeof *b);
            for (uint32_t i = 0; i < J; i++)
                for (uint32_t j = 0; j < J; j++) {
                    n += jt[(size_t)i * J + j];
                    a[i] += jt[(size_t)i * J + j];
                    b[j] += jt[(size_t)i * J + j];
                }
            for (uint32_t i = 0; i < J; i++)
                for (uint32_t j = 0; j < J; j++) {
                    double x = jt[(size_t)i * J + j];
                    if (x > 0)
                        mi += x / n * log(x * n / (a[i] * b[j]));
                }
            total += n * mi;
            weight += n;
        }
    free(a);
    free(b);
    return weight > 0 ? total / weight : 0;
}

static double cosine(const float *a, const float *b, uint32_t d)
{
    double ab = 0, aa = 0, bb = 0;
    for (uint32_t i = 0; i < d; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

static double mean_request_entropy(const stats *s)
{
    return s->req_entropy_sum / s->req_entropy_n;
}

static double reuse_rate(const stats *s)
{
    return (double)s->reuse_same / s->reuse_total;
}

/* Generates p on model into s (fresh); 0 on success. */
static int gen_ok(const ms_gen_params *p, const ms_model *m, stats *s)
{
    ms_gen_summary sum;
    int rc = run_stats(p, m, s, &sum);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(s->check_failures, 0);
    CHECK_EQ_INT(sum.requests, s->n_requests);
    CHECK_EQ_INT(sum.rows, s->n_rows);
    CHECK_EQ_INT(sum.iterations, s->n_iters);
    CHECK_EQ_INT(sum.layer_steps, s->n_iters * m->moe_layers);
    return rc;
}

/* ---- knobs ---- */

static void expect_set_error(const char *key, const char *value, const char *needle)
{
    ms_gen_params p;
    ms_err err = {""};
    ms_gen_defaults(&p);
    CHECK_EQ_INT(ms_gen_set(&p, key, value, &err), -1);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK(strchr(err.msg, '\n') == NULL);
}

static void test_knobs(void)
{
    ms_gen_params p;
    ms_err err;
    ms_gen_defaults(&p);
    CHECK_EQ_INT(p.seed, 1);
    CHECK_EQ_INT(p.requests, 64);
    CHECK_EQ_INT(p.clusters, 8);
    CHECK_EQ_INT(p.spec_depth, 3);
    CHECK_EQ_INT(p.embed_dim, 64);
    CHECK_EQ_INT(p.probs, MS_GEN_PROBS_AUTO);
    CHECK_NEAR(p.gate_alpha, 1.0, 0);
    CHECK_NEAR(p.output_sigma, 0.86, 0);
    CHECK_NEAR(p.pref_drift, 0, 0); /* off: every seed's trace as before the knob */

    CHECK_EQ_INT(ms_gen_set(&p, "gate_alpha", "0.25", &err), 0);
    CHECK_NEAR(p.gate_alpha, 0.25, 0);
    CHECK_EQ_INT(ms_gen_set(&p, "seed", "4294967294", &err), 0);
    CHECK_EQ_INT(p.seed, 4294967294ull);
    CHECK_EQ_INT(ms_gen_set(&p, "probs", "topk_raw", &err), 0);
    CHECK_EQ_INT(p.probs, MS_PROBS_TOPK_RAW);
    CHECK_EQ_INT(ms_gen_set(&p, "probs", "auto", &err), 0);
    CHECK_EQ_INT(p.probs, MS_GEN_PROBS_AUTO);

    expect_set_error("gate_alfa", "1", "trace gen: unknown knob 'gate_alfa'");
    expect_set_error("gate_alpha", "abc", "trace gen: knob gate_alpha='abc' is not a number");
    expect_set_error("gate_alpha", "", "trace gen: knob gate_alpha='' is not a number");
    expect_set_error("gate_alpha", "0", "trace gen: knob gate_alpha=0 is out of range [0.01, 1000]");
    expect_set_error("layer_corr", "1.5", "knob layer_corr=1.5 is out of range [0, 1]");
    expect_set_error("layer_corr", "nan", "knob layer_corr='nan' is not a number");
    expect_set_error("clusters", "0", "knob clusters=0 is out of range [1, 4096]");
    expect_set_error("clusters", "-3", "knob clusters='-3' is not a non-negative integer");
    expect_set_error("clusters", "2.5", "knob clusters='2.5' is not a non-negative integer");
    expect_set_error("seed", "4294967295", "knob seed=4294967295 is out of range [0, 4294967294]");
    expect_set_error("pref_drift", "1.5", "knob pref_drift=1.5 is out of range [0, 1]");
    expect_set_error("pref_drift", "-0.01", "knob pref_drift=-0.01 is out of range [0, 1]");
    expect_set_error("balance", "2", "knob balance=2 is out of range [0, 1]");
    expect_set_error("probs", "dense", "knob probs='dense' is not one of auto, full, topk_renorm, topk_raw");
    expect_set_error("", "1", "trace gen: empty knob name");

    /* the help lists every knob with its default */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ms_gen_print_knobs(f);
    fclose(f);
    CHECK_STR_CONTAINS(text, "gate_alpha       default 1 ");
    CHECK_STR_CONTAINS(text, "probs            default auto ");

    /* docs/generator.md documents every knob the help lists, as `name` */
    FILE *doc = fopen(MS_TEST_DATA "/../../docs/generator.md", "r");
    CHECK(doc != NULL);
    if (doc) {
        char *md = calloc(1, 1 << 20);
        size_t n = fread(md, 1, (1 << 20) - 1, doc);
        fclose(doc);
        md[n] = '\0';
        int knobs = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            char name[64], quoted[80];
            if (sscanf(line, " %63s", name) != 1)
                continue;
            snprintf(quoted, sizeof quoted, "`%s`", name);
            CHECK_STR_CONTAINS(md, quoted);
            knobs++;
        }
        CHECK_EQ_INT(knobs, 37);
        free(md);
    }
    free(text);
}

static void expect_validate_error(const ms_gen_params *p, const ms_model *m, const char *needle)
{
    ms_err err = {""};
    ms_trace_meta meta;
    CHECK_EQ_INT(ms_gen_validate(p, m, &err), -1);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK_EQ_INT(ms_gen_meta(p, m, &meta, &err), -1);
}

static void test_validation(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = small_params(1);
    ms_err err;
    CHECK_EQ_INT(ms_gen_validate(&p, &m, &err), 0);

    p.prompt_min = 200;
    expect_validate_error(&p, &m, "prompt_min = 200 exceeds prompt_max = 128");
    p = small_params(1);
    p.output_min = 129;
    expect_validate_error(&p, &m, "output_min = 129 exceeds output_max = 128");
    p = small_params(1);
    p.requests = 0;
    expect_validate_error(&p, &m, "requests = 0 and layer_steps = 0");
    p = small_params(1);
    p.spec_depth = 32;
    expect_validate_error(&p, &m, "spec_depth = 32 must be below the model's 32 MoE layers");
    p = small_params(1);
    m.vocab = 7;
    expect_validate_error(&p, &m, "needs the model's vocab (7, model mixtral-test) >= clusters (8)");
    p.token_ids = 0;
    CHECK_EQ_INT(ms_gen_validate(&p, &m, &err), 0);
    m = mixtral_model();
    m.top_k = 9;
    expect_validate_error(&p, &m, "model mixtral-test: top_k = 9 is out of range [1, experts = 8]");
    m = mixtral_model();
    m.moe_layers = 0;
    expect_validate_error(&p, &m, "model mixtral-test: moe_layers = 0");
}

/* ---- shapes, metadata, determinism ---- */

static void test_meta(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = small_params(5);
    ms_trace_meta meta;
    ms_err err;
    CHECK_EQ_INT(ms_gen_meta(&p, &m, &meta, &err), 0);
    CHECK_EQ_INT(meta.L, 32);
    CHECK_EQ_INT(meta.J, 8);
    CHECK_EQ_INT(meta.K, 2);
    CHECK_EQ_INT(meta.hidden_size, 4096);
    CHECK_EQ_INT(meta.probs_kind, MS_PROBS_FULL);
    CHECK_EQ_INT(meta.embed_dim, 64);
    CHECK_EQ_INT(meta.spec_depth, 3);
    CHECK_EQ_INT(meta.has_token_ids, 1);
    CHECK_EQ_INT(meta.has_text, 0);
    CHECK_EQ_INT(meta.expert_bytes[31], 352321536);
    CHECK_EQ_INT(meta.dense_bytes[0], 436207616);
    CHECK(!strcmp(meta.model_name, "mixtral-test"));
    CHECK_STR_CONTAINS(meta.source, "moesim trace gen v1: seed=5 requests=64 layer_steps=0");
    CHECK_STR_CONTAINS(meta.source, "prompt_median=24");
    CHECK(strstr(meta.source, "gate_alpha") == NULL); /* defaults are not listed */
    ms_trace_meta_free(&meta);

    /* auto probs: top-k only above 128 experts */
    m.experts = 160;
    m.top_k = 6;
    CHECK_EQ_INT(ms_gen_probs_kind(&p, &m), MS_PROBS_TOPK_RENORM);
    m.experts = 128;
    CHECK_EQ_INT(ms_gen_probs_kind(&p, &m), MS_PROBS_FULL);
    p.probs = MS_PROBS_TOPK_RAW;
    CHECK_EQ_INT(ms_gen_probs_kind(&p, &m), MS_PROBS_TOPK_RAW);
}

static void test_shapes_and_determinism(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = small_params(7);
    stats a, b, c;
    gen_ok(&p, &m, &a);
    gen_ok(&p, &m, &b);
    p.seed = 8;
    gen_ok(&p, &m, &c);
    CHECK_EQ_INT(a.n_requests, 64);
    CHECK(a.lengths_consistent);
    CHECK(a.arrivals_sorted);
    CHECK(a.hash == b.hash);
    CHECK_EQ_INT(a.n_rows, b.n_rows);
    CHECK(a.hash != c.hash);
    for (uint32_t i = 0; i < a.n_requests; i++) {
        CHECK(a.prompt_len[i] >= 8 && a.prompt_len[i] <= 128);
        CHECK(a.output_len[i] >= 1 && a.output_len[i] <= 128);
    }
    stats_free(&a);
    stats_free(&b);
    stats_free(&c);

    /* a model above 128 experts: topk_renorm, every request still checks */
    ms_model big = m;
    big.moe_layers = 4;
    big.experts = 160;
    big.top_k = 6;
    p = small_params(9);
    p.requests = 8;
    gen_ok(&p, &big, &a);
    CHECK_EQ_INT(a.n_requests, 8);
    stats_free(&a);
    /* topk_raw and no optional parts */
    p.probs = MS_PROBS_TOPK_RAW;
    p.spec_depth = 0;
    p.embed_dim = 0;
    p.token_ids = 0;
    gen_ok(&p, &big, &a);
    stats_free(&a);
}

/* requests = 0: generate until iterations x L reaches layer_steps; the
 * request that crosses the budget is the last. */
static void test_layer_step_budget(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = small_params(3);
    p.requests = 0;
    p.layer_steps = 20000;
    stats s;
    gen_ok(&p, &m, &s);
    uint64_t steps = s.n_iters * 32;
    uint64_t last = (1 + (uint64_t)s.output_len[s.n_requests - 1]) * 32;
    CHECK(steps >= 20000);
    CHECK(steps - last < 20000);
    stats_free(&s);
    /* both limits: whichever comes first */
    p.requests = 3;
    gen_ok(&p, &m, &s);
    CHECK_EQ_INT(s.n_requests, 3);
    stats_free(&s);
}

/* ---- the statistics each knob controls ---- */

static ms_gen_params stat_params(uint64_t seed)
{
    ms_gen_params p = small_params(seed);
    p.spec_depth = 1;
    p.embed_dim = 0;
    return p;
}

/* Whole-trace popularity near-uniform (load balancing), each request skewed:
 * the coarse- vs fine-grained entropy gap of fMoE Fig. 3. */
static void test_balance_and_request_skew(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = stat_params(11);
    stats s, u;
    gen_ok(&p, &m, &s);
    double trace_h = trace_entropy(&s, 32, 8), req_h = mean_request_entropy(&s);
    printf("balance: trace H %.4f, request H %.4f\n", trace_h, req_h);
    CHECK(trace_h > 0.95);
    CHECK(req_h < trace_h - 0.2);
    p.balance = 0;
    gen_ok(&p, &m, &u);
    printf("balance=0: trace H %.4f\n", trace_entropy(&u, 32, 8));
    CHECK(trace_entropy(&u, 32, 8) < trace_h - 0.02);
    stats_free(&s);
    stats_free(&u);
}

static void test_decode_locality(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = stat_params(12);
    stats lo, hi;
    p.decode_reuse = 0;
    p.decode_mix = 0;
    gen_ok(&p, &m, &lo);
    p.decode_reuse = 0.6;
    p.decode_mix = 0.8;
    gen_ok(&p, &m, &hi);
    printf("decode reuse: %.3f (no locality) vs %.3f\n", reuse_rate(&lo), reuse_rate(&hi));
    CHECK(reuse_rate(&hi) > reuse_rate(&lo) + 0.25);
    stats_free(&lo);
    stats_free(&hi);
}

static void test_layer_coupling(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = stat_params(13);
    stats lo, hi;
    p.layer_corr = 0;
    gen_ok(&p, &m, &lo);
    p.layer_corr = 0.9;
    gen_ok(&p, &m, &hi);
    printf("layer MI within cluster: %.4f (layer_corr 0) vs %.4f (0.9)\n", layer_mi(&lo, 32, 8), layer_mi(&hi, 32, 8));
    CHECK(layer_mi(&hi, 32, 8) > layer_mi(&lo, 32, 8) + 0.05);
    stats_free(&lo);
    stats_free(&hi);
}

static void test_gate_sharpness(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = stat_params(14);
    stats sharp, flat;
    p.gate_alpha = 0.1;
    gen_ok(&p, &m, &sharp);
    p.gate_alpha = 10;
    gen_ok(&p, &m, &flat);
    double t_sharp = sharp.top1_sum / sharp.top1_n, t_flat = flat.top1_sum / flat.top1_n;
    printf("top-1 prob: %.3f (gate_alpha 0.1) vs %.3f (10)\n", t_sharp, t_flat);
    CHECK(t_sharp > t_flat + 0.2);
    CHECK(t_flat > 1.0 / 8);
    stats_free(&sharp);
    stats_free(&flat);
}

static void test_spec_noise(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = stat_params(15);
    stats exact, mid, noisy;
    p.spec_noise = 0;
    gen_ok(&p, &m, &exact);
    p.spec_noise = 0.3;
    gen_ok(&p, &m, &mid);
    p.spec_noise = 0.8;
    gen_ok(&p, &m, &noisy);
    double a0 = (double)exact.spec_agree / exact.spec_total, a1 = (double)mid.spec_agree / mid.spec_total,
           a2 = (double)noisy.spec_agree / noisy.spec_total;
    printf("spec agreement at distance 1: %.3f (noise 0), %.3f (0.3), %.3f (0.8)\n", a0, a1, a2);
    CHECK_EQ_INT(exact.spec_agree, exact.spec_total); /* noise 0: the true next layer's top-k */
    CHECK(a1 < 1.0);
    CHECK(a1 > a2 + 0.3);
    stats_free(&exact);
    stats_free(&mid);
    stats_free(&noisy);
}

/* pref_drift: a request's routing context moves on.  On a model where every
 * row's gates stay within a few hundredths of its preference's cluster's
 * (near one-hot cluster preferences over 8 layers, requests and gates that
 * follow them closely, no layer tilt or decode reuse), the L1 distance of
 * consecutive rows' full gates over the layers is below 1 for the same
 * preference and near 2 per layer whose top expert differs: consecutive rows
 * differ exactly when a renewal drew another cluster: never with pref_drift
 * 0, and at pref_drift x (1 - 1/C) of the row pairs (prompt and decode rows
 * alike) otherwise. */
typedef struct {
    const ms_trace_meta *meta;
    uint64_t pairs[2], changed[2]; /* [0] prompt rows, [1] decode rows */
    double max_same;               /* largest distance of pairs counted unchanged */
    uint32_t first_own;            /* requests whose first row is near their cluster's (sig) */
    float *sig;                    /* [C][L][J]: the first row of each cluster's first request (drift 0) */
    uint32_t *seen;                /* [C] */
    int learn;                     /* 1: fill sig, 0: compare with it */
} drift_stats;

static double gate_distance(const ms_trace_meta *m, const float *a, const float *b)
{
    double d = 0;
    for (size_t i = 0; i < (size_t)m->L * m->J; i++)
        d += fabs((double)a[i] - b[i]);
    return d;
}

static int collect_drift(const ms_request *r, const ms_gen_info *info, void *ctx)
{
    drift_stats *s = ctx;
    const ms_trace_meta *m = s->meta;
    size_t LJ = (size_t)m->L * m->J;
    for (uint32_t row = 1; row < r->n_rows; row++) {
        double d = gate_distance(m, r->probs + ms_probs_index(m, row, 0), r->probs + ms_probs_index(m, row - 1, 0));
        int decode = row >= r->prompt_len;
        s->pairs[decode]++;
        s->changed[decode] += d > 1;
        if (d <= 1 && d > s->max_same)
            s->max_same = d;
    }
    float *sig = s->sig + info->cluster * LJ;
    if (s->learn && !s->seen[info->cluster])
        memcpy(sig, r->probs, LJ * sizeof *sig);
    else if (!s->learn)
        s->first_own += s->seen[info->cluster] && gate_distance(m, r->probs, sig) < 1;
    s->seen[info->cluster] = 1;
    return 0;
}

static void drift_run(const ms_gen_params *p, const ms_model *model, drift_stats *s)
{
    ms_trace_meta meta;
    ms_err err;
    CHECK_EQ_INT(ms_gen_meta(p, model, &meta, &err), 0);
    CHECK_EQ_INT(meta.probs_kind, MS_PROBS_FULL);
    s->meta = &meta;
    CHECK_EQ_INT(ms_gen_run(p, model, &meta, collect_drift, s, NULL, &err), 0);
    ms_trace_meta_free(&meta);
    s->meta = NULL;
}

static void test_pref_drift(void)
{
    ms_model m = mixtral_model();
    m.moe_layers = 8;
    ms_gen_params p = stat_params(21);
    p.requests = 200;
    p.balance = 0;
    p.pref_alpha = 0.01;
    p.request_conc = 1e6;
    p.gate_alpha = 1000;
    p.layer_corr = 0;
    p.decode_reuse = 0;
    p.decode_mix = 0;
    p.spec_depth = 0;
    p.token_ids = 0;
    float sig[8 * 8 * 8];
    uint32_t seen[8] = {0};
    drift_stats still = {.sig = sig, .seen = seen, .learn = 1};
    drift_run(&p, &m, &still);
    printf("pref_drift 0: %llu of %llu prompt and %llu of %llu decode row pairs changed (largest unchanged "
           "distance %.3f)\n", (unsigned long long)still.changed[0], (unsigned long long)still.pairs[0],
           (unsigned long long)still.changed[1], (unsigned long long)still.pairs[1], still.max_same);
    CHECK(still.pairs[0] > 3000 && still.pairs[1] > 3000);
    CHECK_EQ_INT(still.changed[0], 0); /* one preference for the whole request */
    CHECK_EQ_INT(still.changed[1], 0);
    CHECK(still.max_same < 0.5);
    for (uint32_t c = 0; c < 8; c++) {
        CHECK(seen[c]);
        for (uint32_t d = 0; d < c; d++) /* the clusters are told apart */
            CHECK(gate_distance(&(ms_trace_meta){.L = 8, .J = 8}, sig + c * 64, sig + d * 64) > 4);
    }

    p.pref_drift = 0.1;
    drift_stats moving = {.sig = sig, .seen = seen};
    drift_run(&p, &m, &moving);
    double want = 0.1 * (1 - 1.0 / 8);
    for (int d = 0; d < 2; d++) {
        double f = (double)moving.changed[d] / moving.pairs[d];
        double sd = sqrt(want * (1 - want) / moving.pairs[d]);
        printf("pref_drift 0.1: %s row pairs changed %.4f (expected %.4f, sd %.4f)\n", d ? "decode" : "prompt", f,
               want, sd);
        CHECK(fabs(f - want) < 4 * sd);
    }
    CHECK(moving.max_same < 0.5);
    /* a request's first row is drawn before any renewal: near its own cluster's */
    CHECK_EQ_INT(moving.first_own, 200);
}

static void test_embeddings(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = small_params(16);
    p.spec_depth = 0;
    stats s;
    gen_ok(&p, &m, &s);
    double same = 0, cross = 0;
    int n_same = 0, n_cross = 0;
    for (uint32_t i = 0; i < s.n_requests; i++)
        for (uint32_t j = i + 1; j < s.n_requests; j++) {
            double c = cosine(s.emb + i * 64, s.emb + j * 64, 64);
            if (s.cluster[i] == s.cluster[j]) {
                same += c;
                n_same++;
            } else {
                cross += c;
                n_cross++;
            }
        }
    CHECK(n_same > 0 && n_cross > 0);
    same /= n_same;
    cross /= n_cross;
    printf("prefill embedding cosine: same cluster %.3f, across clusters %.3f\n", same, cross);
    CHECK(same > cross + 0.3);
    CHECK(fabs(cross) < 0.2);
    stats_free(&s);
}

/* A one-layer model makes long request streams cheap. */
static ms_model tiny_model(void)
{
    ms_model m = mixtral_model();
    snprintf(m.name, sizeof m.name, "tiny");
    m.moe_layers = 2;
    m.experts = 4;
    m.top_k = 1;
    m.vocab = 8000;
    return m;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void test_arrivals_lengths_tokens(void)
{
    ms_model m = tiny_model();
    ms_gen_params p;
    ms_gen_defaults(&p);
    p.seed = 17;
    p.requests = 2000;
    p.spec_depth = 1;
    p.embed_dim = 0;
    p.arrival_rate = 2.0;
    p.prompt_median = 16;
    p.output_median = 4;
    p.output_sigma = 0.5;
    p.output_max = 32;
    stats s;
    gen_ok(&p, &m, &s);
    CHECK(s.arrivals_sorted);
    /* mean inter-arrival 1/rate: std of the mean of 2000 is 0.011 s */
    CHECK_NEAR(s.last_arrival / 2000, 0.5, 0.05);
    uint32_t *pl = s.prompt_len;
    qsort(pl, 2000, sizeof *pl, cmp_u32);
    CHECK(pl[0] >= 8 && pl[1999] <= 2048);
    CHECK_NEAR(pl[1000], 16, 2); /* sample median of the lognormal */
    /* tokens from the cluster's slice with probability 0.8 (+ 1/8 of the rest) */
    CHECK_NEAR((double)s.tokens_in_slice / s.tokens_total, 0.8 + 0.2 / 8, 0.02);
    stats_free(&s);

    p.arrival_rate = 0;
    p.requests = 5;
    gen_ok(&p, &m, &s);
    CHECK_NEAR(s.last_arrival, 0.0, 0);
    stats_free(&s);
}

/* ---- the HDF5 file ---- */

static long file_bytes(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n);
    if (fread(*out, 1, (size_t)n, f) != (size_t)n)
        n = -1;
    fclose(f);
    return n;
}

static int same_file(const char *a, const char *b)
{
    unsigned char *x = NULL, *y = NULL;
    long na = file_bytes(a, &x), nb = file_bytes(b, &y);
    int same = na > 0 && na == nb && !memcmp(x, y, (size_t)na);
    free(x);
    free(y);
    return same;
}

static void test_write(void)
{
    ms_model m = mixtral_model();
    ms_gen_params p = small_params(21);
    p.requests = 12;
    ms_gen_summary s1, s2;
    ms_err err;
    const char *a = "unit_gen_a.h5", *b = "unit_gen_b.h5", *c = "unit_gen_c.h5";
    remove(a);
    remove(b);
    remove(c);
    CHECK_EQ_INT(ms_gen_write(&p, &m, a, &s1, &err), 0);
    CHECK_EQ_INT(ms_gen_write(&p, &m, b, &s2, &err), 0);
    CHECK_EQ_INT(s1.rows, s2.rows);
    CHECK(same_file(a, b));
    p.seed = 22;
    CHECK_EQ_INT(ms_gen_write(&p, &m, c, NULL, &err), 0);
    CHECK(!same_file(a, c));
    CHECK(access("unit_gen_a.h5.partial", F_OK) != 0);

    /* the file holds exactly what ms_gen_run emits */
    p.seed = 21;
    stats mem, disk;
    gen_ok(&p, &m, &mem);
    ms_trace_reader *rd = ms_reader_open(a, &err);
    CHECK(rd != NULL);
    if (rd) {
        const ms_trace_meta *meta = ms_reader_meta(rd);
        CHECK_EQ_INT(meta->n_requests, 12);
        CHECK_EQ_INT(meta->n_rows, s1.rows);
        CHECK_EQ_INT(meta->probs_kind, MS_PROBS_FULL);
        CHECK_STR_CONTAINS(meta->source, "seed=21 requests=12");
        memset(&disk, 0, sizeof disk);
        disk.hash = 1469598103934665603ull;
        disk.meta = meta;
        disk.C = p.clusters;
        disk.token_slice = m.vocab / p.clusters;
        disk.trace_counts = calloc((size_t)meta->L * meta->J, sizeof(double));
        disk.joint = calloc((size_t)p.clusters * meta->L * meta->J * meta->J, sizeof(double));
        disk.emb = calloc(64, sizeof(float));
        disk.cluster = calloc(1, sizeof(uint32_t));
        disk.prompt_len = calloc(1, sizeof(uint32_t));
        disk.output_len = calloc(1, sizeof(uint32_t));
        ms_request r;
        memset(&r, 0, sizeof r);
        ms_gen_info none = {0};
        while (ms_reader_next(rd, &r, &err) == 1)
            collect(&r, &none, &disk);
        ms_request_free(&r);
        CHECK(disk.hash == mem.hash);
        CHECK_EQ_INT(disk.n_rows, mem.n_rows);
        ms_reader_close(rd);
        stats_free(&disk);
    }
    stats_free(&mem);

    /* failures leave no file and say why in one line */
    CHECK_EQ_INT(ms_gen_write(&p, &m, "no-such-dir/x.h5", NULL, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "no-such-dir/x.h5");
    CHECK(access("no-such-dir", F_OK) != 0);
    p.spec_depth = 40;
    remove("unit_gen_d.h5");
    CHECK_EQ_INT(ms_gen_write(&p, &m, "unit_gen_d.h5", NULL, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "spec_depth = 40");
    CHECK(access("unit_gen_d.h5", F_OK) != 0);
    remove(a);
    remove(b);
    remove(c);
}

/* The shipped Mixtral profile loads into the shape the generator expects. */
static void test_profile_model(void)
{
    ms_model m;
    ms_err err;
    if (ms_model_load("mixtral-8x7b", &m, &err)) {
        fprintf(stderr, "profile: %s\n", err.msg);
        CHECK(0);
        return;
    }
    ms_gen_params p = small_params(1);
    ms_trace_meta meta;
    CHECK_EQ_INT(ms_gen_meta(&p, &m, &meta, &err), 0);
    CHECK_EQ_INT(meta.L, 32);
    CHECK_EQ_INT(meta.J, 8);
    CHECK_EQ_INT(meta.K, 2);
    CHECK_EQ_INT(meta.expert_bytes[0], m.expert_bytes);
    ms_trace_meta_free(&meta);
}

int main(void)
{
    test_knobs();
    test_validation();
    test_meta();
    test_shapes_and_determinism();
    test_layer_step_budget();
    test_balance_and_request_skew();
    test_decode_locality();
    test_layer_coupling();
    test_gate_sharpness();
    test_spec_noise();
    test_pref_drift();
    test_embeddings();
    test_arrivals_lengths_tokens();
    test_write();
    test_profile_model();
    CHECK_DONE();
}
