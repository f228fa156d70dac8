/* Expert-popularity predictors of seed paper 002 (Sec. III-B) over a
 * profiled key-value table, and the trace batches they are evaluated on.
 *
 * Key-value table Omega: key = (token features f, layer e, expert i), value =
 * how often that token-to-expert mapping occurred in the profiled (training)
 * tokens.  Token features: f1 token id, f2 position id, f3 attention id (-1
 * when the trace has none; no moesim trace records one, so f3 drops out).
 * Predictors (top-k per token and layer, ties to the lower expert index;
 * a token id absent from the table falls back to the layer's prior, the
 * experts' total counts):
 *  - MS_SL_PRED_PAPER: MAP of the posterior of eq. (1)-(2);
 *  - MS_SL_PRED_POSITION: the same, conditioned on the known position id
 *    (f2' known) instead of integrating it, backing off to PAPER when the
 *    table has no (f1', f2') key (our variant, not in the paper);
 *  - MS_SL_PRED_LINA: Lina's MAP of P(expert | token id).
 * Batches hold prompt tokens only: the trace keeps the token ids of the
 * prompt, so decode rows (whose input token id is unknown) are left out. */
#ifndef MS_SERVERLESS_PREDICT_H
#define MS_SERVERLESS_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/err.h"

typedef struct {
    int32_t f1, f2, f3;
} ms_sl_feat;

typedef struct {
    uint32_t L, J, K;
    size_t n, cap;
    ms_sl_feat *key; /* [n], sorted by (f1, f2, f3) after ms_sl_table_sort */
    double *cnt;     /* [n][L*J] */
    size_t npos;     /* distinct position ids (set by ms_sl_table_sort) */
} ms_sl_table;

void ms_sl_table_init(ms_sl_table *t, uint32_t L, uint32_t J, uint32_t K);
void ms_sl_table_free(ms_sl_table *t);
void ms_sl_table_copy(ms_sl_table *dst, const ms_sl_table *src);
/* Adds v to Omega(f, e, i) (inserting the key; call ms_sl_table_sort before lookups). */
void ms_sl_table_add(ms_sl_table *t, ms_sl_feat f, uint32_t e, uint32_t i, double v);
/* Sets Omega(f, e, i) = v (inserting the key).  Keeps the table sorted. */
void ms_sl_table_set(ms_sl_table *t, ms_sl_feat f, uint32_t e, uint32_t i, double v);
void ms_sl_table_sort(ms_sl_table *t);

/* A batch of tokens with their features and real routing. */
typedef struct {
    uint32_t L, J, K;
    size_t n;
    ms_sl_feat *feat;  /* [n] */
    int32_t *route;    /* [n][L][K], -1 = missing */
    int32_t *sorted_ids; /* [n] token ids sorted, for P'(f3) */
} ms_sl_batch;

void ms_sl_batch_free(ms_sl_batch *b);
/* Loads the prompt tokens of requests [r0, r1) of a trace; fails with a
 * one-line error when the trace has no token ids. */
int ms_sl_batch_load(const char *trace_path, uint64_t r0, uint64_t r1, ms_sl_batch *b, ms_err *err);
/* Number of requests in a trace (and its L, J, K); fails without token ids. */
int ms_sl_trace_shape(const char *trace_path, uint64_t *n_requests, uint32_t *L, uint32_t *J, uint32_t *K,
                      char *model_name, size_t cap, ms_err *err);
/* Profiles a table from a batch (every routed (token, layer, expert) adds 1). */
void ms_sl_table_profile(ms_sl_table *t, const ms_sl_batch *b);
/* Real counts [L*J] of a batch. */
void ms_sl_real_counts(const ms_sl_batch *b, uint32_t *d);

typedef enum { MS_SL_PRED_PAPER = 0, MS_SL_PRED_POSITION = 1, MS_SL_PRED_LINA = 2 } ms_sl_pred_kind;

/* Posterior P(N_{e,i} | f1') of eq. (1) (kind PAPER), normalised over i;
 * fills post[J].  batch supplies P'(f3) (token-id frequency among the batch's
 * tokens); P'(f2) is uniform over the table's positions.  Returns 0, or -1
 * when the table has no key with this token id. */
int ms_sl_posterior(const ms_sl_table *t, const ms_sl_batch *batch, int32_t f1, uint32_t e, double *post);

/* Predicted counts [L*J] of a batch. */
void ms_sl_predict(const ms_sl_table *t, ms_sl_pred_kind kind, const ms_sl_batch *b, uint32_t *d);

/* Mean over (layer, expert) of |predicted - real| token counts (Fig. 10). */
double ms_sl_pred_error(const uint32_t *pred, const uint32_t *real, size_t n);

#endif
