/* Key-value table, trace batches and the expert-popularity predictors. */
#include "sim/serverless/serverless_predict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/format/trace.h"

void ms_sl_table_init(ms_sl_table *t, uint32_t L, uint32_t J, uint32_t K)
{
    memset(t, 0, sizeof *t);
    t->L = L;
    t->J = J;
    t->K = K;
}

void ms_sl_table_free(ms_sl_table *t)
{
    free(t->key);
    free(t->cnt);
    memset(t, 0, sizeof *t);
}

void ms_sl_table_copy(ms_sl_table *dst, const ms_sl_table *src)
{
    *dst = *src;
    dst->cap = src->n ? src->n : 1;
    dst->key = ms_xcalloc(dst->cap, sizeof *dst->key);
    dst->cnt = ms_xcalloc(dst->cap * src->L * src->J, sizeof *dst->cnt);
    memcpy(dst->key, src->key, src->n * sizeof *src->key);
    memcpy(dst->cnt, src->cnt, src->n * src->L * src->J * sizeof *src->cnt);
}

static int feat_cmp(const ms_sl_feat *a, const ms_sl_feat *b)
{
    if (a->f1 != b->f1)
        return a->f1 < b->f1 ? -1 : 1;
    if (a->f2 != b->f2)
        return a->f2 < b->f2 ? -1 : 1;
    return (a->f3 > b->f3) - (a->f3 < b->f3);
}

/* First index whose key is >= f (the table is sorted). */
static size_t lower_bound(const ms_sl_table *t, ms_sl_feat f)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (feat_cmp(&t->key[mid], &f) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t append_key(ms_sl_table *t, ms_sl_feat f)
{
    size_t row = (size_t)t->L * t->J;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->key = ms_xrealloc(t->key, t->cap, sizeof *t->key);
        t->cnt = ms_xrealloc(t->cnt, t->cap * row, sizeof *t->cnt);
    }
    t->key[t->n] = f;
    memset(t->cnt + t->n * row, 0, row * sizeof *t->cnt);
    return t->n++;
}

void ms_sl_table_add(ms_sl_table *t, ms_sl_feat f, uint32_t e, uint32_t i, double v)
{
    /* unsorted append with a check of the last key (profiling adds runs of one token) */
    size_t k = t->n && !feat_cmp(&t->key[t->n - 1], &f) ? t->n - 1 : append_key(t, f);
    t->cnt[k * t->L * t->J + (size_t)e * t->J + i] += v;
}

void ms_sl_table_set(ms_sl_table *t, ms_sl_feat f, uint32_t e, uint32_t i, double v)
{
    size_t row = (size_t)t->L * t->J, k = lower_bound(t, f);
    if (k == t->n || feat_cmp(&t->key[k], &f)) {
        append_key(t, f);
        memmove(t->key + k + 1, t->key + k, (t->n - 1 - k) * sizeof *t->key);
        memmove(t->cnt + (k + 1) * row, t->cnt + k * row, (t->n - 1 - k) * row * sizeof *t->cnt);
        t->key[k] = f;
        memset(t->cnt + k * row, 0, row * sizeof *t->cnt);
        if (f.f2 >= 0)
            t->npos = t->npos ? t->npos : 1;
    }
    t->cnt[k * row + (size_t)e * t->J + i] = v;
}

static const ms_sl_table *g_sort_table; /* qsort context (single-threaded) */

static int idx_cmp(const void *a, const void *b)
{
    return feat_cmp(&g_sort_table->key[*(const size_t *)a], &g_sort_table->key[*(const size_t *)b]);
}

static int int_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorts keys, merges duplicates, counts distinct positions. */
void ms_sl_table_sort(ms_sl_table *t)
{
    size_t row = (size_t)t->L * t->J, n = t->n;
    size_t *idx = ms_xcalloc(n ? n : 1, sizeof *idx);
    for (size_t k = 0; k < n; k++)
        idx[k] = k;
    g_sort_table = t;
    qsort(idx, n, sizeof *idx, idx_cmp);
    ms_sl_feat *key = ms_xcalloc(n ? n : 1, sizeof *key);
    double *cnt = ms_xcalloc((n ? n : 1) * row, sizeof *cnt);
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if (!m || feat_cmp(&key[m - 1], &t->key[idx[k]]))
            key[m++] = t->key[idx[k]];
        for (size_t c = 0; c < row; c++)
            cnt[(m - 1) * row + c] += t->cnt[idx[k] * row + c];
    }
    free(idx);
    free(t->key);
    free(t->cnt);
    t->key = key;
    t->cnt = cnt;
    t->n = m;
    t->cap = n ? n : 1;
    int32_t *pos = ms_xcalloc(m ? m : 1, sizeof *pos);
    for (size_t k = 0; k < m; k++)
        pos[k] = t->key[k].f2;
    qsort(pos, m, sizeof *pos, int_cmp);
    t->npos = 0;
    for (size_t k = 0; k < m; k++)
        t->npos += !k || pos[k] != pos[k - 1];
    free(pos);
}

void ms_sl_batch_free(ms_sl_batch *b)
{
    free(b->feat);
    free(b->route);
    free(b->sorted_ids);
    memset(b, 0, sizeof *b);
}

int ms_sl_trace_shape(const char *trace_path, uint64_t *n_requests, uint32_t *L, uint32_t *J, uint32_t *K,
                      char *model_name, size_t cap, ms_err *err)
{
    ms_trace_reader *r = ms_reader_open(trace_path, err);
    if (!r)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(r);
    int rc = 0;
    if (!m->has_token_ids)
        rc = ms_fail(err, "serverless: %s has no token ids (the predictors need them; `moesim trace gen` writes them, "
                          "route-csv imports have none)", trace_path);
    *n_requests = m->n_requests;
    *L = m->L;
    *J = m->J;
    *K = m->K;
    snprintf(model_name, cap, "%s", m->model_name);
    ms_reader_close(r);
    return rc;
}

int ms_sl_batch_load(const char *trace_path, uint64_t r0, uint64_t r1, ms_sl_batch *b, ms_err *err)
{
    memset(b, 0, sizeof *b);
    ms_trace_reader *rd = ms_reader_open(trace_path, err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    if (!m->has_token_ids) {
        ms_reader_close(rd);
        return ms_fail(err, "serverless: %s has no token ids", trace_path);
    }
    b->L = m->L;
    b->J = m->J;
    b->K = m->K;
    size_t cap = 0, per = (size_t)m->L * m->K;
    ms_request req = {0};
    int rc = 0;
    for (uint64_t q = r0; q < r1 && q < m->n_requests; q++) {
        if (ms_reader_read(rd, q, &req, err) != 1) {
            rc = -1;
            break;
        }
        uint32_t n = req.n_iters ? req.iters[0].n_rows : 0;
        if (n > req.n_tokens)
            n = req.n_tokens;
        for (uint32_t t = 0; t < n; t++) {
            if (b->n == cap) {
                cap = cap ? 2 * cap : 256;
                b->feat = ms_xrealloc(b->feat, cap, sizeof *b->feat);
                b->route = ms_xrealloc(b->route, cap * per, sizeof *b->route);
            }
            b->feat[b->n] = (ms_sl_feat){req.token_ids[t], (int32_t)t, -1};
            memcpy(b->route + b->n * per, req.topk_ids + ms_topk_index(m, req.iters[0].row0 + t, 0),
                   per * sizeof *b->route);
            b->n++;
        }
    }
    ms_request_free(&req);
    ms_reader_close(rd);
    if (rc)
        return rc;
    b->sorted_ids = ms_xcalloc(b->n ? b->n : 1, sizeof *b->sorted_ids);
    for (size_t k = 0; k < b->n; k++)
        b->sorted_ids[k] = b->feat[k].f1;
    qsort(b->sorted_ids, b->n, sizeof *b->sorted_ids, int_cmp);
    return 0;
}

void ms_sl_table_profile(ms_sl_table *t, const ms_sl_batch *b)
{
    for (size_t k = 0; k < b->n; k++)
        for (uint32_t e = 0; e < b->L; e++)
            for (uint32_t s = 0; s < b->K; s++) {
                int32_t i = b->route[(k * b->L + e) * b->K + s];
                if (i >= 0)
                    ms_sl_table_add(t, b->feat[k], e, (uint32_t)i, 1);
            }
    ms_sl_table_sort(t);
}

void ms_sl_real_counts(const ms_sl_batch *b, uint32_t *d)
{
    memset(d, 0, (size_t)b->L * b->J * sizeof *d);
    for (size_t k = 0; k < b->n; k++)
        for (uint32_t e = 0; e < b->L; e++)
            for (uint32_t s = 0; s < b->K; s++) {
                int32_t i = b->route[(k * b->L + e) * b->K + s];
                if (i >= 0)
                    d[(size_t)e * b->J + i]++;
            }
}

/* P'(f3 = v): frequency of token id v among the batch's tokens ("the
 * probability of f3 at any value can be approximated by the probability of f1
 * at that value"); 1 when there is no attention id (f3 = -1). */
static double p_attention(const ms_sl_batch *b, int32_t v)
{
    if (v < 0)
        return 1;
    if (!b || !b->n)
        return 0;
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->sorted_ids[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t c = 0;
    while (lo + c < b->n && b->sorted_ids[lo + c] == v)
        c++;
    return (double)c / b->n;
}

static double key_layer_sum(const ms_sl_table *t, size_t k, uint32_t e)
{
    const double *c = t->cnt + k * t->L * t->J + (size_t)e * t->J;
    double s = 0;
    for (uint32_t i = 0; i < t->J; i++)
        s += c[i];
    return s;
}

/* Eq. (1) as read: P(N|f1') = sum_f2 sum_f3 P*(N|f1',f2,f3)
 *   [P*(f1',f2,f3) P'(f3) / P*(f1',f2)] [P*(f1',f2) P'(f2) / P*(f1')]
 * with P* from the table's counts at layer e.  only_f2 >= 0 restricts the
 * outer sum to that position (the POSITION variant).  Normalised over i. */
static int posterior_keys(const ms_sl_table *t, const ms_sl_batch *b, int32_t f1, int32_t only_f2, uint32_t e,
                          double *post)
{
    memset(post, 0, t->J * sizeof *post);
    size_t k0 = lower_bound(t, (ms_sl_feat){f1, INT32_MIN, INT32_MIN}), k1 = k0;
    while (k1 < t->n && t->key[k1].f1 == f1)
        k1++;
    double n1 = 0;
    for (size_t k = k0; k < k1; k++)
        n1 += key_layer_sum(t, k, e);
    if (n1 <= 0)
        return -1;
    double pf2 = t->npos ? 1.0 / t->npos : 1;
    for (size_t g0 = k0; g0 < k1;) {
        size_t g1 = g0;
        double n12 = 0;
        while (g1 < k1 && t->key[g1].f2 == t->key[g0].f2)
            n12 += key_layer_sum(t, g1++, e);
        if (n12 > 0 && (only_f2 < 0 || t->key[g0].f2 == only_f2))
            for (size_t k = g0; k < g1; k++) {
                double n123 = key_layer_sum(t, k, e);
                if (n123 <= 0)
                    continue;
                double w = (n123 / n12) * p_attention(b, t->key[k].f3) * (n12 / n1) * pf2;
                const double *c = t->cnt + k * t->L * t->J + (size_t)e * t->J;
                for (uint32_t i = 0; i < t->J; i++)
                    post[i] += c[i] / n123 * w;
            }
        g0 = g1;
    }
    double s = 0;
    for (uint32_t i = 0; i < t->J; i++)
        s += post[i];
    if (s <= 0)
        return -1;
    for (uint32_t i = 0; i < t->J; i++)
        post[i] /= s;
    return 0;
}

int ms_sl_posterior(const ms_sl_table *t, const ms_sl_batch *batch, int32_t f1, uint32_t e, double *post)
{
    return posterior_keys(t, batch, f1, -1, e, post);
}

/* Lina: P(N_{e,i} | f1') = n(e,i,f1') / n_e(f1'). */
static int lina_posterior(const ms_sl_table *t, int32_t f1, uint32_t e, double *post)
{
    memset(post, 0, t->J * sizeof *post);
    double s = 0;
    for (size_t k = lower_bound(t, (ms_sl_feat){f1, INT32_MIN, INT32_MIN}); k < t->n && t->key[k].f1 == f1; k++)
        for (uint32_t i = 0; i < t->J; i++) {
            post[i] += t->cnt[k * t->L * t->J + (size_t)e * t->J + i];
            s += t->cnt[k * t->L * t->J + (size_t)e * t->J + i];
        }
    if (s <= 0)
        return -1;
    for (uint32_t i = 0; i < t->J; i++)
        post[i] /= s;
    return 0;
}

/* Adds one to the K experts with the highest score (ties: lower index). */
static void add_topk(const double *score, uint32_t J, uint32_t K, uint32_t *d)
{
    uint8_t taken[1024] = {0};
    for (uint32_t s = 0; s < K && s < J; s++) {
        int best = -1;
        for (uint32_t i = 0; i < J; i++)
            if (!taken[i] && (best < 0 || score[i] > score[best]))
                best = (int)i;
        taken[best] = 1;
        d[best]++;
    }
}

void ms_sl_predict(const ms_sl_table *t, ms_sl_pred_kind kind, const ms_sl_batch *b, uint32_t *d)
{
    uint32_t L = t->L, J = t->J;
    memset(d, 0, (size_t)L * J * sizeof *d);
    double *prior = ms_xcalloc((size_t)L * J, sizeof *prior), *post = ms_xcalloc(J, sizeof *post);
    for (size_t k = 0; k < t->n; k++)
        for (size_t c = 0; c < (size_t)L * J; c++)
            prior[c] += t->cnt[k * L * J + c];
    for (size_t k = 0; k < b->n; k++)
        for (uint32_t e = 0; e < L; e++) {
            int rc;
            if (kind == MS_SL_PRED_LINA)
                rc = lina_posterior(t, b->feat[k].f1, e, post);
            else {
                rc = -1;
                if (kind == MS_SL_PRED_POSITION)
                    rc = posterior_keys(t, b, b->feat[k].f1, b->feat[k].f2, e, post);
                if (rc)
                    rc = posterior_keys(t, b, b->feat[k].f1, -1, e, post);
            }
            add_topk(rc ? prior + (size_t)e * J : post, J, t->K, d + (size_t)e * J);
        }
    free(prior);
    free(post);
}

double ms_sl_pred_error(const uint32_t *pred, const uint32_t *real, size_t n)
{
    double s = 0;
    for (size_t k = 0; k < n; k++)
        s += fabs((double)pred[k] - (double)real[k]);
    return n ? s / n : 0;
}
