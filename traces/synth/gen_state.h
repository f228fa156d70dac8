/* The generator's state, shared by traces/synth/gen.c (the draws) and
 * traces/synth/gen_repeat.c (repeated tokens: a request's looping decode
 * routing, decode_period / period_repeat, and tokens of earlier requests,
 * token_repeat).  Internal to traces/synth. */
#ifndef MS_GEN_STATE_H
#define MS_GEN_STATE_H

#include <stdint.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "traces/synth/gen.h"

/* Decode rows of earlier requests that token_repeat draws from: the first
 * MS_GEN_TOKEN_POOL of the trace, each as stored (top-k ids and weights,
 * full probs when the trace stores them) with its embedding. */
typedef struct {
    uint32_t n, cap;
    int32_t *ids;     /* [cap][L][K] */
    float *w;         /* [cap][L][K] */
    float *probs;     /* [cap][L][J] or NULL */
    float *emb;       /* [cap][D] or NULL */
} gen_pool;

typedef struct {
    int on;               /* any repeat knob set */
    uint32_t period;      /* this request's period (0 = none) */
    double repeat;        /* and its copy probability */
    int64_t *emb_src;     /* [output + 1] per decode step: -1 drawn, >= 0 the own step it copies,
                             <= -2 pool entry -(2 + i) */
    gen_pool pool;
} gen_repeats;

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
    double *req_pref_dec; /* [P][L][J] decode rows' preference by phase (decode_popularity), else NULL */
    double *dec_tilt;    /* [P][L][J] decode_popularity / popularity by phase, else NULL */
    const double *row_pref; /* req_pref or a phase of req_pref_dec: the current row's */
    uint32_t row_lag;    /* decode_recall: the current row's lag, 0 = not drawn yet */
    double *cur, *prev;  /* [L][J] gate of the current / previous token row */
    double *alpha, *base;  /* [J] Dirichlet parameters, row preference */
    double *trans_mix;     /* [J] transition rows of the experts chosen at l-1 */
    float *pf;           /* [J] float view of one gate */
    double *req_emb;     /* [D] */
    double *emb_tmp;     /* [D] */
    double *spec_eta;    /* [S+1] noise weight at distance i */
    int32_t *cand;       /* [2K] speculative candidates */
    double *cand_val;    /* [2K] */
    gen_repeats rep;     /* repeated tokens (gen_repeat.c) */
} gen_state;

/* gen.c: the gate of a stored view (full probs when probs != NULL, else the
 * top-k weights with 0 elsewhere), undoing weight_power and normalised. */
void gen_gate_from_view(const gen_state *g, const float *probs, const int32_t *ids, const float *w, double *gate);
/* gen.c: stores the gate of layer l of a row (probs, top-k ids and weights). */
void gen_store_layer(gen_state *g, ms_request *r, uint32_t row, uint32_t l, const double *gate);

/* gen_repeat.c (each a no-op without draws when the repeat knobs are 0) */
void gen_repeat_init(gen_state *g);
void gen_repeat_request_start(gen_state *g, const ms_request *r);
/* Fills decode row `row` (decode step s = row - prompt + 1) by a repeat and
 * returns 1, or returns 0 (the caller draws the row). */
int gen_repeat_row(gen_state *g, ms_request *r, uint32_t row);
/* Copies the embedding of decode step t of a repeated row and returns 1, or 0. */
int gen_repeat_embedding(gen_state *g, ms_request *r, uint32_t t);
void gen_repeat_request_end(gen_state *g, const ms_request *r);
void gen_repeat_free(gen_state *g);

#endif
