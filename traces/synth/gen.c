/* Seeded synthetic trace generator: the model behind `moesim trace gen`.
 * traces/GENERATOR.md describes every knob and the statistic it controls. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "sim/core/params.h"
#include "traces/synth/gen.h"

#define GEN_VERSION 1
#define GEN_MAX_LEN 65536u      /* prompt / output tokens of one request */
#define GEN_MAX_EXPERTS 512u     /* transition maps are dense: L x J x J doubles */
#define GEN_MAX_LAYERS 4096u
#define PREF_FLOOR 1e-9         /* keeps every Dirichlet parameter > 0 */
#define SINKHORN_MAX_ITERS 2000
#define SINKHORN_TOL 1e-12

/* ---------------------------------------------------------------- knobs */

typedef enum { KNOB_U64, KNOB_U32, KNOB_DOUBLE, KNOB_PROBS } knob_type;

typedef struct {
    const char *key;
    knob_type type;
    size_t offset;
    const char *def;
    double min, max;
    const char *help;
} knob;

#define AT(field) offsetof(ms_gen_params, field)

static const knob knobs[] = {
    {"seed", KNOB_U64, AT(seed), "1", 0, 4294967294.0,
     "mt19937 seed (the RNG gets seed+1: GSL maps seed 0 to 4357)"},
    {"requests", KNOB_U64, AT(requests), "64", 0, 1e9,
     "requests to generate; 0 = until layer_steps is reached"},
    {"layer_steps", KNOB_U64, AT(layer_steps), "0", 0, 1e12,
     "stop after the request that brings iterations x L to this; 0 = no cap"},
    {"clusters", KNOB_U32, AT(clusters), "8", 1, 4096,
     "semantic clusters (prompt topics), each with its own expert preferences"},
    {"cluster_skew", KNOB_DOUBLE, AT(cluster_skew), "0", 0, 4,
     "Zipf exponent of cluster popularity; 0 = every cluster equally likely"},
    {"pref_alpha", KNOB_DOUBLE, AT(pref_alpha), "0.3", 0.01, 100,
     "Dirichlet concentration per expert of a cluster's per-layer preference (low = skewed requests)"},
    {"request_conc", KNOB_DOUBLE, AT(request_conc), "20", 0.01, 1e6,
     "concentration (per expert) of a request's preference around its cluster's (high = same as cluster)"},
    {"balance", KNOB_U32, AT(balance), "1", 0, 1,
     "1 = Sinkhorn-balance cluster preferences so trace-wide expert popularity is uniform"},
    {"layer_corr", KNOB_DOUBLE, AT(layer_corr), "0.5", 0, 1,
     "weight of the transition from layer l's chosen experts in layer l+1's preference"},
    {"trans_alpha", KNOB_DOUBLE, AT(trans_alpha), "0.2", 0.01, 100,
     "Dirichlet concentration per expert of transition-map rows (low = deterministic paths)"},
    {"decode_reuse", KNOB_DOUBLE, AT(decode_reuse), "0.2", 0, 1,
     "probability that a decode step copies the previous step's gate at a layer"},
    {"decode_mix", KNOB_DOUBLE, AT(decode_mix), "0.4", 0, 1,
     "weight of the previous step's gate in a decode step's preference"},
    {"gate_alpha", KNOB_DOUBLE, AT(gate_alpha), "1", 0.01, 1000,
     "per-expert Dirichlet concentration of one gate draw (low = sharp gates, high = follows preference)"},
    {"prompt_median", KNOB_DOUBLE, AT(prompt_median), "256", 1, 65536,
     "median prompt tokens (lognormal exp(mu))"},
    {"prompt_sigma", KNOB_DOUBLE, AT(prompt_sigma), "1", 0, 4,
     "log-space standard deviation of prompt tokens"},
    {"prompt_min", KNOB_U32, AT(prompt_min), "8", 1, GEN_MAX_LEN, "prompt tokens are clipped to >= this"},
    {"prompt_max", KNOB_U32, AT(prompt_max), "2048", 1, GEN_MAX_LEN, "prompt tokens are clipped to <= this"},
    {"output_median", KNOB_DOUBLE, AT(output_median), "129", 1, 65536,
     "median output tokens (= decode iterations; Azure LLM 2023 conversation)"},
    {"output_sigma", KNOB_DOUBLE, AT(output_sigma), "0.86", 0, 4,
     "log-space standard deviation of output tokens (Azure LLM 2023 conversation)"},
    {"output_min", KNOB_U32, AT(output_min), "1", 0, GEN_MAX_LEN, "output tokens are clipped to >= this"},
    {"output_max", KNOB_U32, AT(output_max), "1024", 0, GEN_MAX_LEN, "output tokens are clipped to <= this"},
    {"arrival_rate", KNOB_DOUBLE, AT(arrival_rate), "1", 0, 1e9,
     "Poisson arrival rate in requests per second; 0 = every request arrives at t = 0"},
    {"embed_dim", KNOB_U32, AT(embed_dim), "64", 0, 8192,
     "per-iteration semantic embedding size; 0 = no embeddings"},
    {"embed_req_noise", KNOB_DOUBLE, AT(embed_req_noise), "0.5", 0, 100,
     "norm of a request's offset from its (unit) cluster centroid"},
    {"embed_tok_noise", KNOB_DOUBLE, AT(embed_tok_noise), "0.5", 0, 100,
     "norm of a token's offset from its request's embedding"},
    {"spec_depth", KNOB_U32, AT(spec_depth), "3", 0, 64,
     "speculative gate outputs gate_{l+i}(h_l), i = 1..spec_depth; 0 = none (must be < L)"},
    {"spec_noise", KNOB_DOUBLE, AT(spec_noise), "0.2", 0, 1,
     "weight of random experts in the speculative view of layer l+1; 1-(1-spec_noise)^i at distance i"},
    {"probs", KNOB_PROBS, AT(probs), "auto", 0, 0,
     "stored gate: full | topk_renorm | topk_raw | topk_ids | auto (full when J <= 128, else topk_renorm)"},
    {"token_ids", KNOB_U32, AT(token_ids), "1", 0, 1,
     "1 = store prompt token ids (needs the model's vocab >= clusters)"},
    {"token_affinity", KNOB_DOUBLE, AT(token_affinity), "0.8", 0, 1,
     "probability that a prompt token id comes from its cluster's slice of the vocabulary"},
    {"weight_power", KNOB_DOUBLE, AT(weight_power), "1", 0.05, 20,
     "stored gate = gate^weight_power renormalised: > 1 sharper, < 1 flatter weights; ids unchanged"},
};

#define N_KNOBS (sizeof knobs / sizeof knobs[0])

static const knob *find_knob(const char *key)
{
    for (size_t i = 0; i < N_KNOBS; i++)
        if (!strcmp(knobs[i].key, key))
            return &knobs[i];
    return NULL;
}

static int set_knob_value(ms_gen_params *p, const knob *k, const char *value, ms_err *err)
{
    char *field = (char *)p + k->offset;
    if (k->type == KNOB_PROBS) {
        ms_probs_kind kind;
        if (!strcmp(value, "auto"))
            *(int *)field = MS_GEN_PROBS_AUTO;
        else if (ms_probs_kind_parse(value, &kind) == 0)
            *(int *)field = (int)kind;
        else
            return ms_fail(err, "trace gen: knob probs='%s' is not one of auto, full, topk_renorm, topk_raw, topk_ids",
                           value);
        return 0;
    }
    if (k->type == KNOB_DOUBLE) {
        double v;
        if (ms_parse_double(value, &v))
            return ms_fail(err, "trace gen: knob %s='%s' is not a number", k->key, value);
        if (v < k->min || v > k->max)
            return ms_fail(err, "trace gen: knob %s=%s is out of range [%g, %g]", k->key, value, k->min, k->max);
        *(double *)field = v;
        return 0;
    }
    unsigned long long v;
    if (ms_parse_u64(value, &v))
        return ms_fail(err, "trace gen: knob %s='%s' is not a non-negative integer", k->key, value);
    if ((double)v < k->min || (double)v > k->max)
        return ms_fail(err, "trace gen: knob %s=%s is out of range [%.0f, %.0f]", k->key, value, k->min, k->max);
    if (k->type == KNOB_U64)
        *(uint64_t *)field = v;
    else
        *(uint32_t *)field = (uint32_t)v;
    return 0;
}

int ms_gen_set(ms_gen_params *p, const char *key, const char *value, ms_err *err)
{
    if (!key || !*key)
        return ms_fail(err, "trace gen: empty knob name");
    const knob *k = find_knob(key);
    if (!k)
        return ms_fail(err, "trace gen: unknown knob '%s' (moesim trace gen --help lists them)", key);
    if (!value)
        return ms_fail(err, "trace gen: knob %s has no value", key);
    return set_knob_value(p, k, value, err);
}

void ms_gen_defaults(ms_gen_params *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < N_KNOBS; i++) {
        ms_err err;
        if (set_knob_value(p, &knobs[i], knobs[i].def, &err)) {
            fprintf(stderr, "moesim: bad generator default (a bug): %s\n", err.msg);
            abort();
        }
    }
}

void ms_gen_print_knobs(FILE *out)
{
    for (size_t i = 0; i < N_KNOBS; i++) {
        const knob *k = &knobs[i];
        char range[64];
        if (k->type == KNOB_PROBS)
            snprintf(range, sizeof range, "(see meaning)");
        else if (k->type == KNOB_DOUBLE)
            snprintf(range, sizeof range, "[%g, %g]", k->min, k->max);
        else
            snprintf(range, sizeof range, "[%.0f, %.0f]", k->min, k->max);
        fprintf(out, "  %-16s default %-6s %-22s %s\n", k->key, k->def, range, k->help);
    }
}

/* ------------------------------------------------------------ validation */

static int validate_model(const ms_model *m, ms_err *err)
{
    const char *n = m->name[0] ? m->name : "(unnamed)";
    if (m->moe_layers < 1 || m->moe_layers > GEN_MAX_LAYERS)
        return ms_fail(err, "trace gen: model %s: moe_layers = %u is out of range [1, %u]", n, m->moe_layers, GEN_MAX_LAYERS);
    if (m->experts < 1 || m->experts > GEN_MAX_EXPERTS)
        return ms_fail(err, "trace gen: model %s: experts = %u is out of range [1, %u]", n, m->experts, GEN_MAX_EXPERTS);
    if (m->top_k < 1 || m->top_k > m->experts)
        return ms_fail(err, "trace gen: model %s: top_k = %u is out of range [1, experts = %u]", n, m->top_k, m->experts);
    return 0;
}

int ms_gen_validate(const ms_gen_params *p, const ms_model *m, ms_err *err)
{
    if (validate_model(m, err))
        return -1;
    if (p->requests == 0 && p->layer_steps == 0)
        return ms_fail(err, "trace gen: requests = 0 and layer_steps = 0: set at least one of them");
    if (p->prompt_min > p->prompt_max)
        return ms_fail(err, "trace gen: prompt_min = %u exceeds prompt_max = %u", p->prompt_min, p->prompt_max);
    if (p->output_min > p->output_max)
        return ms_fail(err, "trace gen: output_min = %u exceeds output_max = %u", p->output_min, p->output_max);
    if (p->spec_depth >= m->moe_layers)
        return ms_fail(err, "trace gen: spec_depth = %u must be below the model's %u MoE layers (model %s)",
                       p->spec_depth, m->moe_layers, m->name);
    if (p->token_ids && m->vocab < p->clusters)
        return ms_fail(err, "trace gen: token_ids = 1 needs the model's vocab (%u, model %s) >= clusters (%u)",
                       m->vocab, m->name, p->clusters);
    return 0;
}

ms_probs_kind ms_gen_probs_kind(const ms_gen_params *p, const ms_model *m)
{
    if (p->probs != MS_GEN_PROBS_AUTO)
        return (ms_probs_kind)p->probs;
    return m->experts <= 128 ? MS_PROBS_FULL : MS_PROBS_TOPK_RENORM;
}

/* ------------------------------------------------------------------ meta */

static void format_knob(const ms_gen_params *p, const knob *k, char *buf, size_t cap)
{
    const char *field = (const char *)p + k->offset;
    switch (k->type) {
    case KNOB_U64: snprintf(buf, cap, "%s=%llu", k->key, (unsigned long long)*(const uint64_t *)field); break;
    case KNOB_U32: snprintf(buf, cap, "%s=%u", k->key, *(const uint32_t *)field); break;
    case KNOB_DOUBLE: snprintf(buf, cap, "%s=%.9g", k->key, *(const double *)field); break;
    case KNOB_PROBS: {
        int v = *(const int *)field;
        snprintf(buf, cap, "%s=%s", k->key, v == MS_GEN_PROBS_AUTO ? "auto" : ms_probs_kind_name((ms_probs_kind)v));
        break;
    }
    }
}

void ms_gen_write_knobs(FILE *out, const ms_gen_params *p)
{
    for (size_t i = 0; i < N_KNOBS; i++) {
        char item[96];
        format_knob(p, &knobs[i], item, sizeof item);
        char *eq = strchr(item, '=');
        *eq = '\0';
        fprintf(out, "%s = %s\n", item, eq + 1);
    }
}

/* "moesim trace gen v1: seed=.. requests=.. layer_steps=.. <non-default knobs>" */
static void describe_source(const ms_gen_params *p, char *out, size_t cap)
{
    ms_gen_params def;
    ms_gen_defaults(&def);
    size_t len = (size_t)snprintf(out, cap, "moesim trace gen v%d:", GEN_VERSION);
    for (size_t i = 0; i < N_KNOBS && len < cap; i++) {
        const knob *k = &knobs[i];
        int always = i < 3; /* seed, requests, layer_steps */
        if (!always && !memcmp((const char *)p + k->offset, (const char *)&def + k->offset,
                               k->type == KNOB_U64 ? sizeof(uint64_t)
                               : k->type == KNOB_DOUBLE ? sizeof(double)
                               : k->type == KNOB_U32 ? sizeof(uint32_t) : sizeof(int)))
            continue;
        char item[96];
        format_knob(p, k, item, sizeof item);
        if (len + strlen(item) + 5 >= cap) {
            snprintf(out + len, cap - len, " ...");
            return;
        }
        len += (size_t)snprintf(out + len, cap - len, " %s", item);
    }
    if (p->popularity && len + 24 < cap)
        snprintf(out + len, cap - len, " popularity=per-layer");
}

int ms_gen_meta(const ms_gen_params *p, const ms_model *m, ms_trace_meta *meta, ms_err *err)
{
    memset(meta, 0, sizeof *meta);
    if (ms_gen_validate(p, m, err))
        return -1;
    snprintf(meta->model_name, sizeof meta->model_name, "%s", m->name);
    describe_source(p, meta->source, sizeof meta->source);
    meta->L = m->moe_layers;
    meta->J = m->experts;
    meta->K = m->top_k;
    meta->shared_experts = m->shared_experts;
    meta->hidden_size = m->hidden;
    meta->probs_kind = ms_gen_probs_kind(p, m);
    meta->embed_dim = p->embed_dim;
    meta->spec_depth = p->spec_depth;
    meta->has_token_ids = p->token_ids != 0;
    ms_trace_meta_alloc_layers(meta);
    for (uint32_t l = 0; l < meta->L; l++) {
        meta->expert_bytes[l] = p->layer_expert_bytes ? p->layer_expert_bytes[l] : m->expert_bytes;
        meta->dense_bytes[l] = p->layer_dense_bytes ? p->layer_dense_bytes[l] : m->dense_bytes;
    }
    return 0;
}

/* ------------------------------------------------------ generator state */

typedef struct {
    const ms_gen_params *p;
    const ms_trace_meta *meta;
    uint32_t L, J, K, C, D, S;
    gsl_rng *rng;
    gsl_ran_discrete_t *cluster_table;
    double *cluster_w;   /* [C] popularity, sums to 1 */
    double *pref;        /* [C][L][J] cluster preferences */
    double *trans;       /* [L][J][J] row-stochastic maps from layer l-1 to l (l = 0 unused) */
    double *centroid;    /* [C][D] unit vectors */
    /* per-request / per-row scratch */
    double *req_pref;    /* [L][J] */
    double *cur, *prev;  /* [L][J] gate of the current / previous token row */
    double *alpha, *base;  /* [J] Dirichlet parameters, row preference */
    double *trans_mix;     /* [J] transition rows of the experts chosen at l-1 */
    float *pf;           /* [J] float view of one gate */
    double *req_emb;     /* [D] */
    double *emb_tmp;     /* [D] */
    double *spec_eta;    /* [S+1] noise weight at distance i */
    int32_t *cand;       /* [2K] speculative candidates */
    double *cand_val;    /* [2K] */
} gen_state;

/* Dirichlet with every parameter equal to a. */
static void dirichlet_symmetric(gsl_rng *rng, uint32_t n, double a, double *alpha, double *out)
{
    for (uint32_t j = 0; j < n; j++)
        alpha[j] = a;
    gsl_ran_dirichlet(rng, n, alpha, out);
}

/* Scales a positive rows x cols matrix so that row i sums to row_target[i]
 * and column j sums to col_target[j] (iterative proportional fitting; the
 * targets must have the same total). */
static void sinkhorn(double *m, uint32_t rows, uint32_t cols, const double *row_target, const double *col_target)
{
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        if (m[i] < PREF_FLOOR)
            m[i] = PREF_FLOOR;
    for (int it = 0; it < SINKHORN_MAX_ITERS; it++) {
        for (uint32_t j = 0; j < cols; j++) {
            double s = 0;
            for (uint32_t i = 0; i < rows; i++)
                s += m[(size_t)i * cols + j];
            for (uint32_t i = 0; i < rows; i++)
                m[(size_t)i * cols + j] *= col_target[j] / s;
        }
        double worst = 0;
        for (uint32_t i = 0; i < rows; i++) {
            double s = 0;
            for (uint32_t j = 0; j < cols; j++)
                s += m[(size_t)i * cols + j];
            double f = row_target[i] / s;
            if (fabs(f - 1) > worst)
                worst = fabs(f - 1);
            for (uint32_t j = 0; j < cols; j++)
                m[(size_t)i * cols + j] *= f;
        }
        if (worst < SINKHORN_TOL)
            break;
    }
}

/* Transition maps: row i of layer l is where tokens that chose expert i at
 * layer l-1 tend to go.  Balanced to doubly stochastic, so a uniform layer
 * stays uniform. */
static void build_transitions(gen_state *g)
{
    uint32_t J = g->J;
    double *ones = ms_xcalloc(J, sizeof *ones);
    for (uint32_t j = 0; j < J; j++)
        ones[j] = 1.0;
    for (uint32_t l = 1; l < g->L; l++) {
        double *t = g->trans + (size_t)l * J * J;
        for (uint32_t i = 0; i < J; i++)
            dirichlet_symmetric(g->rng, J, g->p->trans_alpha, g->alpha, t + (size_t)i * J);
        if (g->p->balance)
            sinkhorn(t, J, J, ones, ones);
    }
    free(ones);
}

/* Layer l's target popularity over the J experts, summing to 1: the
 * params' popularity row (normalised), else uniform. */
static void layer_popularity(const gen_state *g, uint32_t l, double *out)
{
    uint32_t J = g->J;
    double s = 0;
    for (uint32_t j = 0; j < J; j++)
        s += out[j] = g->p->popularity ? g->p->popularity[(size_t)l * J + j] : 1.0;
    for (uint32_t j = 0; j < J; j++)
        out[j] = s > 0 ? out[j] / s : 1.0 / J;
}

/* Per layer, draws each cluster's preference and (optionally) balances the
 * cluster x expert matrix so that the popularity-weighted mean preference is
 * the layer's target popularity (uniform unless the params carry one), as a
 * load-balancing loss makes it: every expert gets its share over the trace,
 * while each cluster stays skewed.  Without balancing, a cluster's preference
 * is a Dirichlet draw around the target popularity. */
static void build_cluster_prefs(gen_state *g)
{
    uint32_t C = g->C, L = g->L, J = g->J;
    double *mat = ms_xcalloc((size_t)C * J, sizeof *mat);
    double *pop = ms_xcalloc(J, sizeof *pop);
    for (uint32_t l = 0; l < L; l++) {
        layer_popularity(g, l, pop);
        for (uint32_t c = 0; c < C; c++) {
            double *row = mat + (size_t)c * J;
            if (g->p->popularity && !g->p->balance) {
                for (uint32_t j = 0; j < J; j++)
                    g->alpha[j] = g->p->pref_alpha * J * (pop[j] > PREF_FLOOR ? pop[j] : PREF_FLOOR);
                gsl_ran_dirichlet(g->rng, J, g->alpha, row);
            } else {
                dirichlet_symmetric(g->rng, J, g->p->pref_alpha, g->alpha, row);
            }
            for (uint32_t j = 0; j < J; j++)
                row[j] *= g->cluster_w[c];
        }
        if (g->p->balance)
            sinkhorn(mat, C, J, g->cluster_w, pop);
        for (uint32_t c = 0; c < C; c++)
            for (uint32_t j = 0; j < J; j++) {
                double v = mat[(size_t)c * J + j] / g->cluster_w[c];
                g->pref[((size_t)c * L + l) * J + j] = v > PREF_FLOOR ? v : PREF_FLOOR;
            }
    }
    free(pop);
    free(mat);
}

static void normalise(double *v, uint32_t n)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += v[i] * v[i];
    s = sqrt(s);
    if (s > 0)
        for (uint32_t i = 0; i < n; i++)
            v[i] /= s;
}

static void build_centroids(gen_state *g)
{
    for (uint32_t c = 0; c < g->C; c++) {
        double *v = g->centroid + (size_t)c * g->D;
        for (uint32_t d = 0; d < g->D; d++)
            v[d] = gsl_ran_gaussian_ziggurat(g->rng, 1.0);
        normalise(v, g->D);
    }
}

static void gen_state_free(gen_state *g)
{
    if (g->rng)
        gsl_rng_free(g->rng);
    if (g->cluster_table)
        gsl_ran_discrete_free(g->cluster_table);
    free(g->cluster_w); free(g->pref); free(g->trans); free(g->centroid);
    free(g->req_pref); free(g->cur); free(g->prev); free(g->alpha); free(g->base);
    free(g->trans_mix); free(g->pf); free(g->req_emb); free(g->emb_tmp);
    free(g->spec_eta); free(g->cand); free(g->cand_val);
}

static void gen_state_init(gen_state *g, const ms_gen_params *p, const ms_trace_meta *meta)
{
    memset(g, 0, sizeof *g);
    g->p = p;
    g->meta = meta;
    g->L = meta->L; g->J = meta->J; g->K = meta->K;
    g->C = p->clusters; g->D = p->embed_dim; g->S = p->spec_depth;
    size_t LJ = (size_t)g->L * g->J;
    g->cluster_w = ms_xcalloc(g->C, sizeof(double));
    g->pref = ms_xcalloc((size_t)g->C * LJ, sizeof(double));
    g->trans = ms_xcalloc(LJ * g->J, sizeof(double));
    g->centroid = ms_xcalloc((size_t)g->C * g->D, sizeof(double));
    g->req_pref = ms_xcalloc(LJ, sizeof(double));
    g->cur = ms_xcalloc(LJ, sizeof(double));
    g->prev = ms_xcalloc(LJ, sizeof(double));
    g->alpha = ms_xcalloc(g->J, sizeof(double));
    g->base = ms_xcalloc(g->J, sizeof(double));
    g->trans_mix = ms_xcalloc(g->J, sizeof(double));
    g->pf = ms_xcalloc(g->J, sizeof(float));
    g->req_emb = ms_xcalloc(g->D, sizeof(double));
    g->emb_tmp = ms_xcalloc(g->D, sizeof(double));
    g->spec_eta = ms_xcalloc(g->S + 1, sizeof(double));
    g->cand = ms_xcalloc(2 * (size_t)g->K, sizeof(int32_t));
    g->cand_val = ms_xcalloc(2 * (size_t)g->K, sizeof(double));
    for (uint32_t i = 1; i <= g->S; i++)
        g->spec_eta[i] = 1 - pow(1 - p->spec_noise, i);

    g->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!g->rng) {
        fputs("moesim: out of memory\n", stderr);
        abort();
    }
    gsl_rng_set(g->rng, (unsigned long)(p->seed + 1));

    double total = 0;
    for (uint32_t c = 0; c < g->C; c++)
        total += g->cluster_w[c] = pow(c + 1.0, -p->cluster_skew);
    for (uint32_t c = 0; c < g->C; c++)
        g->cluster_w[c] /= total;
    g->cluster_table = gsl_ran_discrete_preproc(g->C, g->cluster_w);
    /* The draw order below is part of the format of a seed: keep it. */
    build_transitions(g);
    build_cluster_prefs(g);
    build_centroids(g);
}

/* --------------------------------------------------------- one token row */

/* Top-k of a float vector, largest first, ties to the lower id. */
static void topk_float(const float *v, uint32_t n, uint32_t k, int32_t *ids)
{
    uint32_t have = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (have == k && !(v[j] > v[ids[k - 1]]))
            continue;
        uint32_t pos = have < k ? have++ : k - 1;
        while (pos > 0 && v[j] > v[ids[pos - 1]]) {
            ids[pos] = ids[pos - 1];
            pos--;
        }
        ids[pos] = (int32_t)j;
    }
}

/* Weights of the chosen ids: raw values, or renormalised over the k. */
static void topk_weights(const float *v, const int32_t *ids, uint32_t k, int renorm, float *w)
{
    double s = 0;
    for (uint32_t i = 0; i < k; i++)
        s += v[ids[i]];
    for (uint32_t i = 0; i < k; i++)
        w[i] = renorm && s > 0 ? (float)(v[ids[i]] / s) : v[ids[i]];
}

/* Preference of layer l for the current row before the gate draw: the
 * request's preference tilted towards where the experts chosen at layer l-1
 * lead, base_j ~ pref_j * ((1 - layer_corr) + layer_corr * J * trans_j) with
 * trans = the chosen experts' transition rows weighted by their gate weights.
 * A tilt, not a mixture: the row stays on the request's preferred experts,
 * and the transition picks among them. */
static void row_preference(gen_state *g, uint32_t l, const int32_t *prev_layer_ids, const float *prev_layer_w)
{
    uint32_t J = g->J, K = g->K;
    const double *rp = g->req_pref + (size_t)l * J;
    double lc = g->p->layer_corr;
    if (l == 0 || lc == 0) {
        memcpy(g->base, rp, J * sizeof *g->base);
        return;
    }
    double wsum = 0;
    for (uint32_t i = 0; i < K; i++)
        wsum += prev_layer_w[i];
    for (uint32_t j = 0; j < J; j++)
        g->trans_mix[j] = 0;
    const double *t = g->trans + (size_t)l * J * J;
    for (uint32_t i = 0; i < K; i++) {
        double f = wsum > 0 ? prev_layer_w[i] / wsum : 1.0 / K;
        const double *row = t + (size_t)prev_layer_ids[i] * J;
        for (uint32_t j = 0; j < J; j++)
            g->trans_mix[j] += f * row[j];
    }
    double s = 0;
    for (uint32_t j = 0; j < J; j++)
        s += g->base[j] = rp[j] * ((1 - lc) + lc * J * g->trans_mix[j]);
    if (!(s > 0)) { /* layer_corr = 1 and no overlap (unbalanced maps): keep the request's */
        memcpy(g->base, rp, J * sizeof *g->base);
        return;
    }
    for (uint32_t j = 0; j < J; j++)
        g->base[j] /= s;
}

/* The stored view of a gate: as drawn, or sharpened / flattened by
 * gate^power renormalised (order, hence the top-k ids, unchanged). */
static void store_gate(double power, const double *gate, uint32_t J, float *pf)
{
    if (power == 1) {
        for (uint32_t j = 0; j < J; j++)
            pf[j] = (float)gate[j];
        return;
    }
    double s = 0;
    for (uint32_t j = 0; j < J; j++)
        s += pow(gate[j], power);
    for (uint32_t j = 0; j < J; j++)
        pf[j] = (float)(s > 0 ? pow(gate[j], power) / s : 1.0 / J);
}

/* probs_kind topk_ids: every present id gets the 1/K placeholder. */
static void ids_only_weights(const ms_trace_meta *m, const int32_t *ids, float *w)
{
    if (m->probs_kind != MS_PROBS_TOPK_IDS)
        return;
    for (uint32_t k = 0; k < m->K; k++)
        w[k] = ids[k] >= 0 ? (float)(1.0 / m->K) : 0.0f;
}

/* Draws the gate of every layer for one token row into g->cur and fills the
 * row's top-k (and full probs when stored). */
static void gen_row(gen_state *g, ms_request *r, uint32_t row, int decode)
{
    const ms_trace_meta *m = g->meta;
    uint32_t L = g->L, J = g->J, K = g->K;
    int renorm = m->probs_kind == MS_PROBS_TOPK_RENORM;
    const int32_t *prev_ids = NULL;
    const float *prev_w = NULL;
    for (uint32_t l = 0; l < L; l++) {
        double *gate = g->cur + (size_t)l * J;
        const double *before = g->prev + (size_t)l * J;
        if (decode && g->p->decode_reuse > 0 && gsl_rng_uniform(g->rng) < g->p->decode_reuse) {
            memcpy(gate, before, J * sizeof *gate);
        } else {
            row_preference(g, l, prev_ids, prev_w);
            double dm = decode ? g->p->decode_mix : 0;
            double scale = g->p->gate_alpha * J;
            for (uint32_t j = 0; j < J; j++) {
                double b = (1 - dm) * g->base[j] + dm * before[j];
                g->alpha[j] = scale * (b > PREF_FLOOR ? b : PREF_FLOOR);
            }
            gsl_ran_dirichlet(g->rng, J, g->alpha, gate);
        }
        float *pf = m->probs_kind == MS_PROBS_FULL ? r->probs + ms_probs_index(m, row, l) : g->pf;
        store_gate(g->p->weight_power, gate, J, pf);
        int32_t *ids = r->topk_ids + ms_topk_index(m, row, l);
        float *w = r->topk_w + ms_topk_index(m, row, l);
        topk_float(pf, J, K, ids);
        topk_weights(pf, ids, K, renorm, w);
        ids_only_weights(m, ids, w);
        prev_ids = ids;
        prev_w = w;
    }
}

/* Speculative outputs of one row: for layer l and distance i, the top-k of
 * q = (1 - eta_i) * gate_{l+i} + eta_i * u, where u spreads 1/K over K
 * experts drawn uniformly (with replacement) and eta_i = 1 - (1 -
 * spec_noise)^i, so the view of farther layers is noisier.  Scaling keeps the
 * order of gate_{l+i}, so q's top-k lies among that layer's true top-k and the
 * K drawn experts: O(K^2) per cell instead of O(J).  Cells past the last
 * layer stay -1 / 0. */
static void gen_spec(gen_state *g, ms_request *r, uint32_t row)
{
    const ms_trace_meta *m = g->meta;
    uint32_t L = g->L, J = g->J, K = g->K;
    int renorm = m->probs_kind == MS_PROBS_TOPK_RENORM;
    int32_t *cand = g->cand;   /* [2K] candidate experts */
    double *val = g->cand_val; /* [2K] their q */
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t i = 1; i <= g->S; i++) {
            int32_t *ids = r->spec_ids + ms_spec_index(m, row, l, i - 1);
            float *w = r->spec_w + ms_spec_index(m, row, l, i - 1);
            if (l + i >= L) {
                for (uint32_t k = 0; k < K; k++) {
                    ids[k] = -1;
                    w[k] = 0;
                }
                continue;
            }
            const double *truth = g->cur + (size_t)(l + i) * J;
            const int32_t *true_ids = r->topk_ids + ms_topk_index(m, row, l + i);
            double eta = g->spec_eta[i];
            uint32_t n = 0;
            for (uint32_t k = 0; k < K; k++) {
                cand[n] = true_ids[k];
                val[n++] = (1 - eta) * truth[true_ids[k]];
            }
            if (eta > 0)
                for (uint32_t k = 0; k < K; k++) {
                    int32_t e = (int32_t)gsl_rng_uniform_int(g->rng, J);
                    uint32_t c = 0;
                    while (c < n && cand[c] != e)
                        c++;
                    if (c == n) {
                        cand[n] = e;
                        val[n++] = (1 - eta) * truth[e];
                    }
                    val[c] += eta / K;
                }
            /* stable selection: the first K of cand by q, ties keep true order first */
            double s = 0;
            for (uint32_t k = 0; k < K; k++) {
                uint32_t best = k;
                for (uint32_t c = k + 1; c < n; c++)
                    if (val[c] > val[best])
                        best = c;
                int32_t te = cand[k]; cand[k] = cand[best]; cand[best] = te;
                double tv = val[k]; val[k] = val[best]; val[best] = tv;
                ids[k] = cand[k];
                s += val[k];
            }
            for (uint32_t k = 0; k < K; k++)
                w[k] = (float)(renorm && s > 0 ? val[k] / s : val[k]);
            ids_only_weights(m, ids, w);
        }
}

/* ------------------------------------------------------------ a request */

static uint32_t draw_length(gen_state *g, double median, double sigma, uint32_t lo, uint32_t hi)
{
    double x = gsl_ran_lognormal(g->rng, log(median), sigma);
    if (!(x >= lo))
        return lo;
    if (x >= hi)
        return hi;
    uint32_t n = (uint32_t)llround(x);
    return n < lo ? lo : n > hi ? hi : n;
}

/* Embedding = normalise(req_emb + gaussian noise of norm ~ sigma). */
static void draw_embedding(gen_state *g, double sigma, float *out)
{
    uint32_t D = g->D;
    double s = 0, per_dim = sigma / sqrt((double)D);
    for (uint32_t d = 0; d < D; d++) {
        g->emb_tmp[d] = g->req_emb[d] + gsl_ran_gaussian_ziggurat(g->rng, per_dim);
        s += g->emb_tmp[d] * g->emb_tmp[d];
    }
    s = s > 0 ? sqrt(s) : 1;
    for (uint32_t d = 0; d < D; d++)
        out[d] = (float)(g->emb_tmp[d] / s);
}

static void draw_request_embedding(gen_state *g, uint32_t cluster)
{
    const double *c = g->centroid + (size_t)cluster * g->D;
    double per_dim = g->p->embed_req_noise / sqrt((double)g->D);
    for (uint32_t d = 0; d < g->D; d++)
        g->req_emb[d] = c[d] + gsl_ran_gaussian_ziggurat(g->rng, per_dim);
}

static void draw_request_prefs(gen_state *g, uint32_t cluster)
{
    uint32_t L = g->L, J = g->J;
    double scale = g->p->request_conc * J;
    for (uint32_t l = 0; l < L; l++) {
        const double *cp = g->pref + ((size_t)cluster * L + l) * J;
        for (uint32_t j = 0; j < J; j++)
            g->alpha[j] = scale * cp[j];
        gsl_ran_dirichlet(g->rng, J, g->alpha, g->req_pref + (size_t)l * J);
    }
}

/* Prompt token ids: from the cluster's slice of the vocabulary with
 * probability token_affinity, else uniform over the vocabulary. */
static void draw_token_ids(gen_state *g, const ms_model *model, uint32_t cluster, ms_request *r)
{
    uint32_t V = model->vocab, slice = V / g->C;
    for (uint32_t t = 0; t < r->n_tokens; t++) {
        if (gsl_rng_uniform(g->rng) < g->p->token_affinity)
            r->token_ids[t] = (int32_t)(cluster * slice + gsl_rng_uniform_int(g->rng, slice));
        else
            r->token_ids[t] = (int32_t)gsl_rng_uniform_int(g->rng, V);
    }
}

static void gen_request(gen_state *g, const ms_model *model, uint64_t id, double arrival, ms_request *r,
                        uint32_t *cluster_out)
{
    const ms_gen_params *p = g->p;
    uint32_t cluster = (uint32_t)gsl_ran_discrete(g->rng, g->cluster_table);
    uint32_t prompt = draw_length(g, p->prompt_median, p->prompt_sigma, p->prompt_min, p->prompt_max);
    uint32_t output = draw_length(g, p->output_median, p->output_sigma, p->output_min, p->output_max);

    memset(r, 0, sizeof *r);
    r->id = id;
    r->arrival_s = arrival;
    r->prompt_len = prompt;
    r->output_len = output;
    r->n_iters = 1 + output;
    r->n_rows = prompt + output;
    r->n_tokens = p->token_ids ? prompt : 0;
    ms_request_alloc(r, g->meta);
    r->iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, prompt};
    for (uint32_t t = 1; t <= output; t++)
        r->iters[t] = (ms_iteration){MS_PHASE_DECODE, prompt + t - 1, 1};

    draw_request_prefs(g, cluster);
    if (g->D)
        draw_request_embedding(g, cluster);
    if (p->token_ids)
        draw_token_ids(g, model, cluster, r);

    for (uint32_t row = 0; row < r->n_rows; row++) {
        int decode = row >= prompt;
        gen_row(g, r, row, decode);
        if (g->S)
            gen_spec(g, r, row);
        double *t = g->prev;
        g->prev = g->cur;
        g->cur = t;
    }
    if (g->D) {
        /* prefill: mean of the prompt's token embeddings, whose noise
         * averages down by sqrt(prompt); decode: the current token's */
        draw_embedding(g, p->embed_tok_noise / sqrt((double)prompt), r->embedding);
        for (uint32_t t = 1; t <= output; t++)
            draw_embedding(g, p->embed_tok_noise, r->embedding + (size_t)t * g->D);
    }
    *cluster_out = cluster;
}

int ms_gen_run(const ms_gen_params *p, const ms_model *model, const ms_trace_meta *meta,
               ms_gen_emit_fn emit, void *ctx, ms_gen_summary *sum, ms_err *err)
{
    if (ms_gen_validate(p, model, err))
        return -1;
    if (meta->L != model->moe_layers || meta->J != model->experts || meta->K != model->top_k ||
        meta->spec_depth != p->spec_depth || meta->embed_dim != p->embed_dim)
        return ms_fail(err, "trace gen: metadata does not match the model %s and knobs (a bug)", model->name);
    gen_state g;
    gen_state_init(&g, p, meta);
    ms_gen_summary total = {0, 0, 0, 0};
    double arrival = 0;
    int rc = 0;
    while ((p->requests == 0 || total.requests < p->requests) &&
           (p->layer_steps == 0 || total.layer_steps < p->layer_steps)) {
        if (p->arrival_rate > 0)
            arrival += gsl_ran_exponential(g.rng, 1.0 / p->arrival_rate);
        ms_request r;
        ms_gen_info info;
        gen_request(&g, model, total.requests, arrival, &r, &info.cluster);
        total.requests++;
        total.iterations += r.n_iters;
        total.rows += r.n_rows;
        total.layer_steps += (uint64_t)r.n_iters * g.L;
        rc = emit(&r, &info, ctx);
        ms_request_free(&r);
        if (rc) {
            rc = -1;
            break;
        }
    }
    gen_state_free(&g);
    if (sum)
        *sum = total;
    return rc;
}

/* ---------------------------------------------------------------- write */

static int emit_to_writer(const ms_request *req, const ms_gen_info *info, void *ctx)
{
    (void)info;
    void **c = ctx;
    return ms_writer_add((ms_trace_writer *)c[0], req, (ms_err *)c[1]) ? -1 : 0;
}

int ms_gen_write(const ms_gen_params *p, const ms_model *model, const char *out_path,
                 ms_gen_summary *sum, ms_err *err)
{
    ms_trace_meta meta;
    if (ms_gen_meta(p, model, &meta, err))
        return -1;
    int rc = -1;
    ms_trace_writer *w = ms_writer_open(out_path, &meta, err);
    if (w) {
        void *ctx[2] = {w, err};
        if (ms_gen_run(p, model, &meta, emit_to_writer, ctx, sum, err) == 0)
            rc = ms_writer_close(w, err);
        else
            ms_writer_abort(w);
    }
    ms_trace_meta_free(&meta);
    return rc;
}
