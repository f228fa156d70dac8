/* Gate distributions from trace rows, and the training split.
 *
 * A full-prob trace gives each row's softmax as stored.  A top-k trace gives
 * the top-k weights and, outside them, 0 (MS_FILL_ZERO) or an even share of
 * the mass the top-k leaves, max(0, 1 - sum of weights) / (J - K)
 * (MS_FILL_EVEN; topk_renorm weights sum to 1, so they leave nothing).
 * Missing cells (id -1) contribute nothing. */
#ifndef MS_GATE_H
#define MS_GATE_H

#include "policies/lib/rank.h"
#include "policies/policy.h"

/* out[J] = layer l's distribution for one token row of r. */
void ms_gate_row(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, ms_topk_fill fill,
                 float *out);
/* out[J] += layer l's distribution for every row of r's iteration `it`;
 * returns the number of rows added. */
uint32_t ms_gate_add_iteration(const ms_trace_meta *m, const ms_request *r, uint32_t it, uint32_t l,
                               ms_topk_fill fill, float *out);

/* The positive entries of a one-row speculative gate (ms_view_spec_gate of a
 * step of one token row) from that row's K cells (ms_view_spec_row):
 * (w[k], ids[k]) for each ids[k] >= 0 with w[k] > 0, in cell order, into
 * c[K]; returns how many, or UINT32_MAX when a present id repeats (the
 * dense gate adds repeats up: use it instead; the trace's checks refuse
 * them). */
uint32_t ms_spec_row_positive(const int32_t *ids, const float *w, uint32_t K, ms_scored *c);

/* Resolves --train: frac < 0 means auto (0.7 when `learns`, else 0).  Fails
 * when the split leaves nothing to replay. */
int ms_split_resolve(const ms_trace_meta *m, double frac, int learns, const char *word, ms_split *out, ms_err *err);

/* Streams the training split in trace order, calling fn once per training
 * iteration (request index, the request, iteration index); the requests carry
 * the top-k ids and the `parts` (MS_PART_*) asked for.  Inside a run
 * (env->reader) the split is read from what the run reads (trace.h
 * ms_reader_open_again: the run's snapshot, or the file streamed again and
 * refused when it was replaced).  A non-zero return from fn stops the walk
 * and is returned; -1 on read errors. */
typedef int (*ms_train_fn)(void *ctx, uint64_t req_index, const ms_request *r, uint32_t it, ms_err *err);
int ms_train_foreach(const ms_policy_env *env, unsigned parts, ms_train_fn fn, void *ctx, ms_err *err);

/* What a policy learned from the training split, kept for the next run of
 * the same trace in this process (a sweep's next point) in the memo of the
 * trace cache's snapshot the run reads (traces/format/trace_cache.h);
 * nothing is kept when the trace is not cached (moesim run).  `key` names the policy, what it keeps
 * and every parameter the value depends on besides the trace and the split
 * (the split is added here).  get: the value and its length, NULL when none;
 * valid until the next trace-cache call, so copy it at once. */
const void *ms_train_memo_get(const ms_policy_env *env, const char *key, size_t *len);
void ms_train_memo_put(const ms_policy_env *env, const char *key, const void *val, size_t len);

#endif
