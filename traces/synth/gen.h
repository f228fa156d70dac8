/* Seeded synthetic routing traces (`moesim trace gen`).
 *
 * The generator draws, from one gsl_rng_mt19937 seeded by `seed`:
 *   - semantic clusters, each with a per-layer preference distribution over
 *     the J experts, balanced (Sinkhorn scaling) so that the trace-wide expert
 *     popularity is near-uniform while each cluster, and so each request, is
 *     skewed (the coarse- vs fine-grained entropy gap of fMoE Fig. 3);
 *   - per-layer expert transition maps that couple layer l+1's routing to the
 *     experts chosen at layer l;
 *   - requests: cluster, lognormal prompt / output lengths, Poisson arrivals,
 *     prompt token ids, per-iteration semantic embeddings (cluster centroid +
 *     noise), a preference that may be redrawn within the request
 *     (pref_drift), and per token row and layer a gate distribution drawn
 *     from a Dirichlet around the row's preference, with decode steps reusing or
 *     mixing in the previous step's routing, and speculative gate outputs as
 *     noisy views of the next spec_depth layers.
 * docs/generator.md documents every knob and the statistic it controls.
 * Same knobs + same seed => the same requests and a byte-identical file. */
#ifndef MS_GEN_H
#define MS_GEN_H

#include <stdint.h>
#include <stdio.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"
#include "traces/format/trace.h"

#define MS_GEN_PROBS_AUTO (-1) /* full when J <= 128, else topk_renorm */

/* Every knob; ms_gen_defaults() fills the documented defaults. */
typedef struct {
    uint64_t seed;           /* mt19937 seed, 0 .. 4294967294 */
    uint64_t requests;       /* requests to generate; 0 = until layer_steps */
    uint64_t layer_steps;    /* stop once iterations x L reaches this; 0 = no cap */
    /* semantic clusters and expert preferences */
    uint32_t clusters;       /* number of semantic clusters */
    double cluster_skew;     /* Zipf exponent of cluster popularity (0 = uniform) */
    double pref_alpha;       /* Dirichlet concentration per expert of a cluster's preference */
    double request_conc;     /* concentration of a request's preference around its cluster's (x J) */
    double pref_drift;       /* probability per token row after a request's first that its routing
                                context moves on: the preference is redrawn as a new request's
                                (cluster, then per-layer Dirichlet); 0 = never, no draws */
    uint32_t balance;        /* 1: Sinkhorn-balance preferences so trace-wide popularity is uniform */
    /* structure across layers and steps */
    double layer_corr;       /* weight of the layer-transition term in the preference of layer l+1 */
    double trans_alpha;      /* Dirichlet concentration per expert of transition-map rows */
    double decode_reuse;     /* probability a decode step copies the previous step's gate (per layer) */
    double decode_mix;       /* weight of the previous step's gate in a decode step's preference */
    double decode_recall;    /* probability a decode step's layer repeats the routing of an earlier
                                row of its request, lag d with P(d) ~ 1/d (0 = off, no draws) */
    double gate_alpha;       /* per-expert Dirichlet concentration of one gate draw (low = sharp) */
    /* lengths and arrivals */
    double prompt_median, prompt_sigma;
    uint32_t prompt_min, prompt_max;
    double output_median, output_sigma;
    uint32_t output_min, output_max;
    double arrival_rate;     /* Poisson arrivals per second; 0 = every request at t = 0 */
    /* side information */
    uint32_t embed_dim;      /* semantic embedding size; 0 = none */
    double embed_req_noise;  /* norm of a request's offset from its cluster centroid */
    double embed_tok_noise;  /* norm of a token's offset from its request's embedding */
    uint32_t spec_depth;     /* speculative gate outputs per row and layer; 0 = none */
    double spec_noise;       /* noise of the speculative view of layer l+1 (grows with distance) */
    int probs;               /* MS_GEN_PROBS_AUTO or an ms_probs_kind */
    uint32_t token_ids;      /* 1: store prompt token ids drawn from the cluster's vocabulary slice */
    double token_affinity;   /* probability a prompt token comes from its cluster's slice */
    double weight_power;     /* stored gate = gate^weight_power renormalised (1 = as drawn) */
    /* repeated tokens (traces/synth/gen_repeat.c; 0 = off: no draws, no memory) */
    uint32_t decode_period;  /* P: a request's decode routing loops with period P (0 = none) */
    double period_repeat;    /* probability a decode step s > P copies every layer's gate and the
                                embedding of step s - P (a greedy loop repeating its tokens) */
    double token_repeat;     /* probability a decode row repeats a decode row of an earlier request
                                (every layer's gate and the embedding: the same token again),
                                drawn uniformly from the first MS_GEN_TOKEN_POOL such rows */
    double token_noise;      /* sd of the log-weight noise on every expert of a token_repeat copy
                                (the same token in another context: close ranks swap); 0 = exact */
    /* Not knobs (no text form; a params file carries them, traces/synth/gen_params.h).
     * Borrowed: the caller keeps them alive while the params are used. */
    const double *popularity;        /* [L][J] per-layer expert popularity (each layer's
                                        row is normalised on use), NULL = uniform */
    const uint64_t *layer_expert_bytes; /* [L] bytes of one expert per layer, NULL = model's */
    const uint64_t *layer_dense_bytes;  /* [L] dense bytes per layer, NULL = model's */
    const double *decode_popularity;    /* [decode_phases][L][J] popularity of decode rows
                                           by phase of the generation (ms_gen_decode_phase):
                                           a decode row's preference is the request's
                                           tilted by its phase's decode_popularity /
                                           popularity; NULL = none */
    uint32_t decode_phases;             /* phases in decode_popularity, 1 .. MS_GEN_MAX_PHASES
                                           (0 when it is NULL) */
    const uint32_t *prompt_lens, *output_lens; /* [n_lens]: request i takes entry i mod n_lens
                                                  instead of lognormal draws; NULL = draws */
    uint32_t n_lens;
    const uint32_t *periods;         /* [n_periods]: request i loops with period entry i mod n */
    const double *period_repeats;    /* [n_periods]: and copies with this probability (instead of
                                        decode_period / period_repeat); NULL = the knobs */
    uint32_t n_periods;
} ms_gen_params;

#define MS_GEN_TOKEN_POOL 2048 /* decode rows token_repeat draws from (the trace's first) */
#define MS_GEN_MAX_PERIOD 4096
#define MS_GEN_MAX_PHASES 16 /* decode phases a params file may give */

/* The phase (0 .. phases-1) of decode step t (1 .. steps) of a request:
 * the number of boundaries (i * steps) / phases, i = 1 .. phases-1 (integer
 * division), that t lies beyond.  Two phases: t > steps / 2 is the second
 * half. */
static inline uint32_t ms_gen_decode_phase(uint32_t t, uint32_t steps, uint32_t phases)
{
    uint32_t k = 0;
    for (uint32_t i = 1; i < phases; i++)
        k += t > (uint32_t)(((uint64_t)i * steps) / phases);
    return k;
}

/* Totals of one generation run. */
typedef struct {
    uint64_t requests, iterations, rows, layer_steps;
} ms_gen_summary;

/* Ground truth the trace itself does not store, for tests and analyses. */
typedef struct {
    uint32_t cluster;        /* semantic cluster the request was drawn from */
} ms_gen_info;

typedef int (*ms_gen_emit_fn)(const ms_request *req, const ms_gen_info *info, void *ctx);

void ms_gen_defaults(ms_gen_params *p);
/* The defaults, then the model profile's [routing] knobs (docs/generator.md
 * "Per-model routing"): a knob that is not a routing knob, unknown, malformed
 * or out of range is one line naming the profile, line, knob and value. */
int ms_gen_model_defaults(ms_gen_params *p, const ms_model *m, ms_err *err);
/* 1 when a [routing] section may set this knob. */
int ms_gen_is_routing_knob(const char *key);
/* Sets one knob from text (CLI `--set k=v`, params files): unknown key,
 * malformed or out-of-range value are one-line errors naming knob and value. */
int ms_gen_set(ms_gen_params *p, const char *key, const char *value, ms_err *err);
/* Checks the knobs against each other and against the model. */
int ms_gen_validate(const ms_gen_params *p, const ms_model *model, ms_err *err);
/* Writes every knob as an INI line "key = value" (doubles to 9 digits). */
void ms_gen_write_knobs(FILE *out, const ms_gen_params *p);
/* Prints one line per knob: name, default, range, meaning. */
void ms_gen_print_knobs(FILE *out);
/* The probs kind the knobs select for this model (resolves auto). */
ms_probs_kind ms_gen_probs_kind(const ms_gen_params *p, const ms_model *model);

/* Builds the trace metadata (dimensions, layer sizes, flags, source line);
 * the request table stays empty.  Free with ms_trace_meta_free. */
int ms_gen_meta(const ms_gen_params *p, const ms_model *model, ms_trace_meta *meta, ms_err *err);
/* Generates the requests in order and hands each to emit (a non-zero return
 * from emit stops generation and is returned as -1, err left as emit set it).
 * meta must come from ms_gen_meta with the same p and model.  sum may be NULL. */
int ms_gen_run(const ms_gen_params *p, const ms_model *model, const ms_trace_meta *meta,
               ms_gen_emit_fn emit, void *ctx, ms_gen_summary *sum, ms_err *err);
/* Generates into an HDF5 trace at out_path (ms_writer_open: a temporary
 * beside it, renamed on success, so a failed or killed run leaves no file).
 * sum may be NULL. */
int ms_gen_write(const ms_gen_params *p, const ms_model *model, const char *out_path,
                 ms_gen_summary *sum, ms_err *err);

#endif
