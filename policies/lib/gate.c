#include <math.h>
#include <string.h>

#include "policies/lib/gate.h"
#include "traces/format/trace_cache.h"

void ms_gate_row(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, ms_topk_fill fill,
                 float *out)
{
    if (m->probs_kind == MS_PROBS_FULL && r->probs) {
        memcpy(out, r->probs + ms_probs_index(m, row, l), m->J * sizeof *out);
        return;
    }
    if (!r->topk_w || m->probs_kind == MS_PROBS_FULL)
        ms_request_part_missing("ms_gate_row", m->probs_kind == MS_PROBS_FULL ? "probs" : "topk_w");
    size_t base = ms_topk_index(m, row, l);
    double sum = 0;
    uint32_t present = 0;
    for (uint32_t k = 0; k < m->K; k++)
        if (r->topk_ids[base + k] >= 0) {
            sum += r->topk_w[base + k];
            present++;
        }
    float rest = 0.0f;
    if (fill == MS_FILL_EVEN && present > 0 && m->J > present)
        rest = (float)(fmax(0.0, 1.0 - sum) / (double)(m->J - present));
    for (uint32_t e = 0; e < m->J; e++)
        out[e] = rest;
    for (uint32_t k = 0; k < m->K; k++)
        if (r->topk_ids[base + k] >= 0)
            out[r->topk_ids[base + k]] = r->topk_w[base + k];
}

uint32_t ms_gate_add_iteration(const ms_trace_meta *m, const ms_request *r, uint32_t it, uint32_t l,
                               ms_topk_fill fill, float *out)
{
    const ms_iteration *iter = &r->iters[it];
    if (m->probs_kind == MS_PROBS_FULL && r->probs) { /* ms_gate_row's copy added in place */
        for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++) {
            const float *p = r->probs + ms_probs_index(m, row, l);
            for (uint32_t e = 0; e < m->J; e++)
                out[e] += p[e];
        }
        return iter->n_rows;
    }
    float row_p[m->J];
    for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++) {
        ms_gate_row(m, r, row, l, fill, row_p);
        for (uint32_t e = 0; e < m->J; e++)
            out[e] += row_p[e];
    }
    return iter->n_rows;
}

static inline __attribute__((always_inline)) uint32_t spec_row_positive_k(const int32_t *ids, const float *w,
                                                                          uint32_t K, ms_scored *c)
{
    uint32_t n = 0;
    int repeat = 0;
    for (uint32_t k = 0; k < K; k++) {
        for (uint32_t j = 0; j < k; j++)
            repeat |= ids[j] == ids[k];
        if (ids[k] >= 0 && w[k] > 0) /* the dense entry is 0 + w[k]: positive exactly when w[k] is */
            c[n++] = (ms_scored){w[k], (uint32_t)ids[k]};
    }
    /* a repeat among missing cells (-1) is no repeat: look again, rarely */
    for (uint32_t k = 0; repeat && k < K; k++)
        for (uint32_t j = 0; j < k; j++)
            if (ids[k] >= 0 && ids[j] == ids[k])
                return UINT32_MAX;
    return n;
}

/* The usual K as constants (the loops unrolled; one call per predicted
 * layer of every one-row step). */
uint32_t ms_spec_row_positive(const int32_t *ids, const float *w, uint32_t K, ms_scored *c)
{
    switch (K) {
    case 2:
        return spec_row_positive_k(ids, w, 2, c);
    case 4:
        return spec_row_positive_k(ids, w, 4, c);
    case 8:
        return spec_row_positive_k(ids, w, 8, c);
    default:
        return spec_row_positive_k(ids, w, K, c);
    }
}

int ms_split_resolve(const ms_trace_meta *m, double frac, int learns, const char *word, ms_split *out, ms_err *err)
{
    memset(out, 0, sizeof *out);
    if (frac < 0)
        frac = learns ? 0.7 : 0.0;
    if (!(frac >= 0 && frac < 1))
        return ms_fail(err, "%s must be in [0, 1), got %g", word, frac);
    out->frac = frac;
    if (frac == 0)
        return 0;
    if (m->n_requests >= 2) {
        out->train_requests = (uint64_t)ceil(frac * (double)m->n_requests);
        if (out->train_requests >= m->n_requests)
            return ms_fail(err, "%s %g of %llu requests leaves none to replay", word, frac,
                           (unsigned long long)m->n_requests);
        return 0;
    }
    out->by_iteration = 1;
    uint32_t n = m->n_requests ? m->req_n_iters[0] : 0;
    out->train_iters = (uint32_t)ceil(frac * n);
    if (out->train_iters >= n)
        return ms_fail(err, "%s %g of the single request's %u iterations leaves none to replay", word, frac, n);
    return 0;
}

int ms_train_foreach(const ms_policy_env *env, unsigned parts, ms_train_fn fn, void *ctx, ms_err *err)
{
    const ms_split *s = &env->split;
    if (s->frac == 0)
        return 0;
    ms_trace_reader *rd = env->reader ? ms_reader_open_again(env->reader, err) : ms_reader_open(env->trace_path, err);
    if (!rd)
        return -1;
    ms_reader_select(rd, parts);
    uint64_t n_req = s->by_iteration ? 1 : s->train_requests;
    ms_request r = {0};
    int rc = 0;
    for (uint64_t i = 0; i < n_req && rc == 0; i++) {
        if (ms_reader_read(rd, i, &r, err) != 1) {
            rc = -1;
            break;
        }
        uint32_t n_it = s->by_iteration ? s->train_iters : r.n_iters;
        for (uint32_t it = 0; it < n_it && rc == 0; it++)
            rc = fn(ctx, i, &r, it, err);
    }
    ms_request_free(&r);
    ms_reader_close(rd);
    return rc;
}

/* "train", the policy's key, then the split's fields */
static size_t train_memo_key(const ms_policy_env *env, const char *key, unsigned char *out, size_t cap)
{
    const ms_split *sp = &env->split;
    size_t n = strlen(key) + 1, need = 6 + n + sizeof sp->frac + sizeof(int) + sizeof(uint64_t) + sizeof(uint32_t);
    if (need > cap)
        return 0;
    unsigned char *p = out;
    memcpy(p, "train", 6), p += 6;
    memcpy(p, key, n), p += n;
    memcpy(p, &sp->frac, sizeof sp->frac), p += sizeof sp->frac;
    memcpy(p, &sp->by_iteration, sizeof(int)), p += sizeof(int);
    memcpy(p, &sp->train_requests, sizeof(uint64_t)), p += sizeof(uint64_t);
    memcpy(p, &sp->train_iters, sizeof(uint32_t)), p += sizeof(uint32_t);
    return (size_t)(p - out);
}

/* The trace cache's snapshot the run reads (NULL: it streams). */
static ms_trace_snapshot *run_snapshot(const ms_policy_env *env)
{
    return env->reader ? ms_reader_snapshot(env->reader) : ms_trace_cache_find(env->trace_path);
}

const void *ms_train_memo_get(const ms_policy_env *env, const char *key, size_t *len)
{
    unsigned char k[256];
    size_t kl = train_memo_key(env, key, k, sizeof k);
    ms_trace_snapshot *s = kl ? run_snapshot(env) : NULL;
    return s ? ms_trace_memo_get(s, k, kl, len) : NULL;
}

void ms_train_memo_put(const ms_policy_env *env, const char *key, const void *val, size_t len)
{
    unsigned char k[256];
    size_t kl = train_memo_key(env, key, k, sizeof k);
    ms_trace_snapshot *s = kl ? run_snapshot(env) : NULL;
    if (s)
        ms_trace_memo_put(s, k, kl, val, len);
}
