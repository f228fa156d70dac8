/* The generator's knobs (table, text form, defaults, validation) and the
 * trace metadata a generation run writes: the half of `moesim trace gen`
 * that draws nothing.  docs/generator.md describes every knob. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/params.h"
#include "traces/synth/gen.h"

#define GEN_VERSION 1
#define GEN_MAX_LEN 65536u      /* prompt / output tokens of one request */
#define GEN_MAX_EXPERTS 512u     /* transition maps are dense: L x J x J doubles */
#define GEN_MAX_LAYERS 4096u

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
    {"pref_drift", KNOB_DOUBLE, AT(pref_drift), "0", 0, 1,
     "probability per token row that a request's preference is redrawn as a new request's (topic drift); 0 = never"},
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
    {"decode_recall", KNOB_DOUBLE, AT(decode_recall), "0", 0, 1,
     "probability that a decode step repeats, at a layer, the routing of an earlier row (lag d, P(d) ~ 1/d)"},
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
    {"decode_period", KNOB_U32, AT(decode_period), "0", 0, MS_GEN_MAX_PERIOD,
     "period P of a request's looping decode routing (with period_repeat); 0 = none"},
    {"period_repeat", KNOB_DOUBLE, AT(period_repeat), "0", 0, 1,
     "probability a decode step s > P copies every layer's gate and the embedding of step s - P; 0 = off"},
    {"token_repeat", KNOB_DOUBLE, AT(token_repeat), "0", 0, 1,
     "probability a decode row repeats a decode row (gates, embedding) of an earlier request; 0 = off"},
    {"token_noise", KNOB_DOUBLE, AT(token_noise), "0", 0, 10,
     "sd of the log-weight noise on each expert of a token_repeat copy (another context); 0 = exact"},
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

/* The knobs a model profile's [routing] section may set: those of the
 * routing's generative model, not a run's size, seed, lengths or storage. */
static const char *const routing_knobs[] = {
    "clusters",     "cluster_skew",  "pref_alpha",      "request_conc",    "pref_drift",     "balance",
    "layer_corr",   "trans_alpha",   "decode_reuse",    "decode_recall",   "decode_mix",     "gate_alpha",
    "weight_power", "token_repeat",  "token_noise",     "decode_period",   "period_repeat",  "spec_noise",
    "embed_req_noise", "embed_tok_noise", "token_affinity", NULL};

int ms_gen_is_routing_knob(const char *key)
{
    for (int i = 0; routing_knobs[i]; i++)
        if (!strcmp(routing_knobs[i], key))
            return 1;
    return 0;
}

int ms_gen_model_defaults(ms_gen_params *p, const ms_model *m, ms_err *err)
{
    ms_gen_defaults(p);
    for (int i = 0; i < m->n_routing; i++) {
        const ms_routing_knob *k = &m->routing[i];
        ms_err e;
        if (!ms_gen_is_routing_knob(k->key)) {
            if (find_knob(k->key))
                return ms_fail(err, "%s:%d: [routing] %s: not a routing knob (a run's choice: trace gen --set or a flag)",
                               m->file, k->line, k->key);
            return ms_fail(err, "%s:%d: [routing] %s: unknown knob (moesim trace gen --help lists them)", m->file,
                           k->line, k->key);
        }
        if (ms_gen_set(p, k->key, k->value, &e)) {
            const char *why = strncmp(e.msg, "trace gen: ", 11) ? e.msg : e.msg + 11;
            return ms_fail(err, "%s:%d: [routing] %s = %s: %s", m->file, k->line, k->key, k->value, why);
        }
    }
    return 0;
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
    if (p->decode_popularity ? p->decode_phases < 1 || p->decode_phases > MS_GEN_MAX_PHASES : p->decode_phases != 0)
        return ms_fail(err, "trace gen: %u decode phases with%s a decode popularity (a bug)", p->decode_phases,
                       p->decode_popularity ? "" : "out");
    if (p->n_lens && (!p->prompt_lens || !p->output_lens))
        return ms_fail(err, "trace gen: a length list without its prompt or output lengths (a bug)");
    for (uint32_t i = 0; i < p->n_lens; i++)
        if (p->prompt_lens[i] < 1 || p->prompt_lens[i] > GEN_MAX_LEN || p->output_lens[i] > GEN_MAX_LEN)
            return ms_fail(err, "trace gen: length list entry %u: prompt %u, output %u out of range "
                                "(prompt 1 .. %u, output 0 .. %u)", i, p->prompt_lens[i], p->output_lens[i],
                           GEN_MAX_LEN, GEN_MAX_LEN);
    if (p->period_repeat > 0 && p->decode_period == 0 && !p->n_periods)
        return ms_fail(err, "trace gen: period_repeat = %g needs decode_period >= 1 (or a [periods] list)",
                       p->period_repeat);
    if (p->token_noise > 0 && !(p->token_repeat > 0))
        return ms_fail(err, "trace gen: token_noise = %g needs token_repeat > 0", p->token_noise);
    if (p->n_periods && (!p->periods || !p->period_repeats))
        return ms_fail(err, "trace gen: a period list without its periods or repeat probabilities (a bug)");
    for (uint32_t i = 0; i < p->n_periods; i++)
        if (p->periods[i] > MS_GEN_MAX_PERIOD || !(p->period_repeats[i] >= 0 && p->period_repeats[i] <= 1))
            return ms_fail(err, "trace gen: period list entry %u: period %u, repeat %g out of range "
                                "(period 0 .. %u, repeat 0 .. 1)", i, p->periods[i], p->period_repeats[i],
                           MS_GEN_MAX_PERIOD);
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
        len += (size_t)snprintf(out + len, cap - len, " popularity=per-layer");
    if (p->decode_popularity && len + 32 < cap)
        len += (size_t)snprintf(out + len, cap - len, " decode_popularity=per-layer");
    if (p->decode_phases > 1 && len + 24 < cap)
        len += (size_t)snprintf(out + len, cap - len, " decode_phases=%u", p->decode_phases);
    if (p->n_lens && len + 32 < cap)
        len += (size_t)snprintf(out + len, cap - len, " lengths=list(%u)", p->n_lens);
    if (p->n_periods && len + 32 < cap)
        snprintf(out + len, cap - len, " periods=list(%u)", p->n_periods);
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

