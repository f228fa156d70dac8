/* MoE-Infinity EAM machinery: see eam_common.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/eam_common.h"
#include "policies/lib/gate.h"

int eam_mode_parse(const char *s)
{
    if (!strcmp(s, "paper"))
        return EAM_MODE_PAPER;
    if (!strcmp(s, "code"))
        return EAM_MODE_CODE;
    if (!strcmp(s, "code-head"))
        return EAM_MODE_CODE_HEAD;
    return -1;
}

/* ------------------------------------------------------------------ */
/* formulas */

static double row_sum(const double *a, uint32_t J)
{
    double s = 0;
    for (uint32_t e = 0; e < J; e++)
        s += a[e];
    return s;
}

double eam_row_cosine(const double *a, const double *b, uint32_t J)
{
    double sa = row_sum(a, J), sb = row_sum(b, J);
    if (!(sa > 0) || !(sb > 0))
        return 0.0; /* a zero row: cosine 0 */
    double dot = 0, na = 0, nb = 0;
    for (uint32_t e = 0; e < J; e++) {
        double x = a[e] / sa, y = b[e] / sb; /* Eq. (1): M[l] / sum M[l] */
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    return dot / (sqrt(na) * sqrt(nb));
}

double eam_distance(const double *m1, const double *m2, uint32_t L, uint32_t J)
{
    /* Eq. (1): 1 - (1/L) sum_{l in [0, L)} CosineSimilarity(M1[l]/sum M1[l], M2[l]/sum M2[l]) */
    double s = 0;
    for (uint32_t l = 0; l < L; l++)
        s += eam_row_cosine(m1 + (size_t)l * J, m2 + (size_t)l * J, J);
    return 1.0 - s / L;
}

double eam_distance_code(const double *entry, const double *cur, uint32_t L, uint32_t J, uint32_t l_now)
{
    /* 2024 code: trace_collection_copy[:, :(layer_idx + 1), :] = 1e-9, then row-normalise */
    double *masked = ms_xcalloc(J, sizeof *masked);
    for (uint32_t e = 0; e < J; e++)
        masked[e] = EAM_CODE_MASK;
    double s = 0;
    for (uint32_t l = 0; l < L; l++) {
        const double *row = l <= l_now ? masked : entry + (size_t)l * J;
        s += eam_row_cosine(row, cur + (size_t)l * J, J);
    }
    free(masked);
    return 1.0 - s / L;
}

double eam_priority_code(double count, uint32_t l, uint32_t l_now, uint32_t L)
{
    return (count + EAM_EPSILON) * (1.0 - (double)(l - l_now) / (L + 1));
}

/* ------------------------------------------------------------------ */
/* EAM sets */

void eam_set_init(eam_set *s, uint32_t L, uint32_t J)
{
    memset(s, 0, sizeof *s);
    s->L = L;
    s->J = J;
}

void eam_set_free(eam_set *s)
{
    free(s->m);
    memset(s, 0, sizeof *s);
}

void eam_set_clear(eam_set *s)
{
    s->n = 0;
    s->version++;
}

void eam_set_push(eam_set *s, const double *m)
{
    size_t dim = (size_t)s->L * s->J;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->m = ms_xrealloc(s->m, (size_t)s->cap * dim, sizeof *s->m);
    }
    memcpy(s->m + (size_t)s->n * dim, m, dim * sizeof *m);
    s->n++;
    s->version++;
}

uint32_t eam_match(const eam_set *c, const double *cur, eam_mode mode, uint32_t l_now)
{
    /* Algorithm 1 lines 16-21: min_d = MAX_DISTANCE; for eam in eamc: if min_d > d: min_d, p_eam = d, eam */
    uint32_t best = UINT32_MAX;
    double min_d = INFINITY;
    for (uint32_t i = 0; i < c->n; i++) {
        double d = mode == EAM_MODE_CODE ? eam_distance_code(eam_set_at(c, i), cur, c->L, c->J, l_now)
                                         : eam_distance(eam_set_at(c, i), cur, c->L, c->J);
        if (min_d > d) {
            min_d = d;
            best = i;
        }
    }
    return best;
}

/* ------------------------------------------------------------------ */
/* k-means */

static void normalise_rows(const double *m, double *out, uint32_t L, uint32_t J)
{
    for (uint32_t l = 0; l < L; l++) {
        const double *row = m + (size_t)l * J;
        double s = row_sum(row, J);
        for (uint32_t e = 0; e < J; e++)
            out[(size_t)l * J + e] = s > 0 ? row[e] / s : 0.0;
    }
}

/* Nearest of k centroids to x, ties to the lower index; its distance in *d. */
static uint32_t nearest(const double *x, const double *cent, uint32_t k, uint32_t L, uint32_t J, double *d)
{
    size_t dim = (size_t)L * J;
    uint32_t best = 0;
    double bd = INFINITY;
    for (uint32_t c = 0; c < k; c++) {
        double dc = eam_distance(x, cent + c * dim, L, J);
        if (dc < bd) {
            bd = dc;
            best = c;
        }
    }
    if (d)
        *d = bd;
    return best;
}

/* k-means++: first centre uniform, next ones with probability D(x)^2 / sum D^2
 * (uniform over the samples not yet chosen when every D is 0). */
static void kmeanspp_init(const double *norm, uint32_t n, uint32_t k, uint32_t L, uint32_t J, gsl_rng *rng,
                          double *cent)
{
    size_t dim = (size_t)L * J;
    double *d2 = ms_xcalloc(n, sizeof *d2);
    uint8_t *chosen = ms_xcalloc(n, 1);
    uint32_t first = (uint32_t)gsl_rng_uniform_int(rng, n);
    memcpy(cent, norm + first * dim, dim * sizeof *cent);
    chosen[first] = 1;
    for (uint32_t i = 0; i < n; i++) {
        double d = eam_distance(norm + i * dim, cent, L, J);
        d2[i] = d * d;
    }
    for (uint32_t c = 1; c < k; c++) {
        double total = 0;
        for (uint32_t i = 0; i < n; i++)
            total += chosen[i] ? 0.0 : d2[i];
        uint32_t pick = UINT32_MAX;
        if (total > 0) {
            double u = gsl_rng_uniform(rng) * total, acc = 0;
            for (uint32_t i = 0; i < n && pick == UINT32_MAX; i++) {
                if (chosen[i] || d2[i] <= 0)
                    continue;
                acc += d2[i];
                if (u < acc)
                    pick = i;
            }
            for (uint32_t i = n; pick == UINT32_MAX && i-- > 0;) /* rounding: the last candidate */
                if (!chosen[i] && d2[i] > 0)
                    pick = i;
        } else {
            uint32_t left = 0;
            for (uint32_t i = 0; i < n; i++)
                left += !chosen[i];
            uint32_t r = (uint32_t)gsl_rng_uniform_int(rng, left);
            for (uint32_t i = 0; i < n && pick == UINT32_MAX; i++)
                if (!chosen[i] && r-- == 0)
                    pick = i;
        }
        chosen[pick] = 1;
        memcpy(cent + c * dim, norm + pick * dim, dim * sizeof *cent);
        for (uint32_t i = 0; i < n; i++) {
            double d = eam_distance(norm + i * dim, cent + c * dim, L, J);
            if (d * d < d2[i])
                d2[i] = d * d;
        }
    }
    free(d2);
    free(chosen);
}

static int assign_all(const double *norm, uint32_t n, const double *cent, uint32_t k, uint32_t L, uint32_t J,
                      uint32_t *assign)
{
    size_t dim = (size_t)L * J;
    int changed = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t c = nearest(norm + i * dim, cent, k, L, J, NULL);
        if (c != assign[i]) {
            assign[i] = c;
            changed = 1;
        }
    }
    return changed;
}

/* Centroid = mean of its members' row-normalised EAMs; empty clusters keep theirs. */
static void update_centroids(const double *norm, uint32_t n, const uint32_t *assign, uint32_t k, size_t dim,
                             double *cent)
{
    uint32_t *members = ms_xcalloc(k, sizeof *members);
    for (uint32_t i = 0; i < n; i++)
        members[assign[i]]++;
    for (uint32_t c = 0; c < k; c++)
        if (members[c])
            memset(cent + c * dim, 0, dim * sizeof *cent);
    for (uint32_t i = 0; i < n; i++)
        for (size_t j = 0; j < dim; j++)
            cent[assign[i] * dim + j] += norm[i * dim + j] / members[assign[i]];
    free(members);
}

void eam_kmeans(const eam_set *s, uint32_t k, gsl_rng *rng, uint32_t max_iter, uint32_t *assign, double *centroids)
{
    uint32_t n = s->n, L = s->L, J = s->J;
    size_t dim = (size_t)L * J;
    double *norm = ms_xcalloc(n * dim, sizeof *norm);
    for (uint32_t i = 0; i < n; i++)
        normalise_rows(eam_set_at(s, i), norm + i * dim, L, J);
    kmeanspp_init(norm, n, k, L, J, rng, centroids);
    for (uint32_t i = 0; i < n; i++)
        assign[i] = UINT32_MAX;
    assign_all(norm, n, centroids, k, L, J, assign);
    for (uint32_t it = 0; it < max_iter; it++) {
        update_centroids(norm, n, assign, k, dim, centroids);
        if (!assign_all(norm, n, centroids, k, L, J, assign))
            break;
    }
    free(norm);
}

void eam_build_collection(const eam_set *s, uint32_t P, gsl_rng *rng, uint32_t max_iter, eam_set *out)
{
    eam_set_clear(out);
    if (s->n <= P) {
        for (uint32_t i = 0; i < s->n; i++)
            eam_set_push(out, eam_set_at(s, i));
        return;
    }
    size_t dim = (size_t)s->L * s->J;
    uint32_t *assign = ms_xcalloc(s->n, sizeof *assign);
    double *cent = ms_xcalloc(P * dim, sizeof *cent);
    eam_kmeans(s, P, rng, max_iter, assign, cent);
    /* "For each cluster, the EAM that is closest to the centroid is stored in the EAMC." */
    for (uint32_t c = 0; c < P; c++) {
        uint32_t best = UINT32_MAX;
        double bd = INFINITY;
        for (uint32_t i = 0; i < s->n; i++) {
            if (assign[i] != c)
                continue;
            double d = eam_distance(eam_set_at(s, i), cent + c * dim, s->L, s->J);
            if (d < bd) {
                bd = d;
                best = i;
            }
        }
        if (best != UINT32_MAX)
            eam_set_push(out, eam_set_at(s, best));
    }
    free(assign);
    free(cent);
}

/* ------------------------------------------------------------------ */
/* tracker */

void eam_tracker_init(eam_tracker *t, uint32_t L, uint32_t J, uint32_t window)
{
    memset(t, 0, sizeof *t);
    t->L = L;
    t->J = J;
    t->window = window;
    t->cur = ms_xcalloc((size_t)L * J, sizeof *t->cur);
    t->cur_sum = ms_xcalloc(L, sizeof *t->cur_sum);
    t->row_gen = ms_xcalloc(L, sizeof *t->row_gen);
    t->mark = ms_xcalloc(J, sizeof *t->mark);
}

void eam_tracker_free(eam_tracker *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->seq[i].m);
    free(t->seq);
    free(t->item_seq);
    free(t->cur);
    free(t->cur_sum);
    free(t->row_gen);
    free(t->mark);
    memset(t, 0, sizeof *t);
}

static int seq_finished(const eam_tracker *t, const eam_seq *s)
{
    return s->last_iter + 1 >= s->n_iters || (t->window && (s->last_iter + 1) % t->window == 0);
}

/* Drops the finished sequences; 1 when there was any. */
static int drop_finished(eam_tracker *t, eam_done_fn done, void *ctx)
{
    uint32_t w = 0, n = t->n;
    for (uint32_t i = 0; i < t->n; i++) {
        if (seq_finished(t, &t->seq[i])) {
            if (done)
                done(ctx, &t->seq[i]);
            free(t->seq[i].m);
        } else {
            t->seq[w++] = t->seq[i];
        }
    }
    t->n = w;
    return w != n;
}

static uint32_t find_or_add(eam_tracker *t, uint64_t req, uint32_t seg)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (t->seq[i].req == req && t->seq[i].seg == seg)
            return i;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 8;
        t->seq = ms_xrealloc(t->seq, t->cap, sizeof *t->seq);
    }
    eam_seq *s = &t->seq[t->n];
    memset(s, 0, sizeof *s);
    s->req = req;
    s->seg = seg;
    s->m = ms_xcalloc((size_t)t->L * t->J, sizeof *s->m);
    return t->n++;
}

static void sum_row(eam_tracker *t, uint32_t l)
{
    double *row = t->cur + (size_t)l * t->J;
    memset(row, 0, t->J * sizeof *row);
    for (uint32_t i = 0; i < t->n_items; i++) {
        const double *src = t->seq[t->item_seq[i]].m + (size_t)l * t->J;
        for (uint32_t e = 0; e < t->J; e++)
            row[e] += src[e];
    }
    t->cur_sum[l] = row_sum(row, t->J);
    t->row_gen[l]++;
}

void eam_tracker_sync(eam_tracker *t, const ms_view *v, eam_done_fn done, void *ctx)
{
    if (t->started && ms_view_iteration(v) == t->iter)
        return;
    t->started = 1;
    t->iter = ms_view_iteration(v);
    /* cur is the sum of the bound sequences' EAMs; add_layer keeps it so
     * row by row.  When the batch holds the same sequences in the same
     * order as before (none dropped, none new: the indices still name the
     * same ones), cur is already that sum, bit for bit, and its rows keep
     * their generations (the matcher and the victim order then skip them). */
    int rebound = drop_finished(t, done, ctx) || !t->primed;
    uint32_t n = ms_view_items(v), n_seq = t->n;
    if (n > t->item_cap) {
        t->item_cap = n;
        t->item_seq = ms_xrealloc(t->item_seq, n, sizeof *t->item_seq);
    }
    rebound |= n != t->n_items;
    t->n_items = n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t it = ms_view_item_iter(v, i);
        uint32_t k = find_or_add(t, ms_view_item_index(v, i), t->window ? it / t->window : 0);
        t->seq[k].last_iter = it;
        t->seq[k].n_iters = ms_view_item_request(v, i)->n_iters;
        if (!rebound && t->item_seq[i] != k) /* (n unchanged: item_seq[i] was set) */
            rebound = 1;
        t->item_seq[i] = k;
    }
    rebound |= t->n != n_seq;
    t->primed = 1;
    if (!rebound)
        return;
    for (uint32_t l = 0; l < t->L; l++)
        sum_row(t, l);
}

/* Adds one iteration's layer-l routing of r to m's row l. */
static void add_iteration_layer(const ms_trace_meta *meta, const ms_request *r, uint32_t it, uint32_t l, double *m)
{
    const ms_iteration *iter = &r->iters[it];
    for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++)
        for (uint32_t k = 0; k < meta->K; k++) {
            int32_t e = r->topk_ids[ms_topk_index(meta, row, l) + k];
            if (e >= 0)
                m[(size_t)l * meta->J + (uint32_t)e] += 1.0;
        }
}

void eam_tracker_add_layer(eam_tracker *t, const ms_view *v, uint32_t l)
{
    /* Algorithm 1 lines 6-7: for e, t in expert_token_map: cur_eam[l][e] += t.size() */
    const ms_trace_meta *meta = ms_view_meta(v);
    for (uint32_t i = 0; i < t->n_items; i++)
        add_iteration_layer(meta, ms_view_item_request(v, i), ms_view_item_iter(v, i), l, t->seq[t->item_seq[i]].m);
    sum_row(t, l);
}

void eam_tracker_note_hits(eam_tracker *t, const ms_view *v, uint32_t l)
{
    const ms_trace_meta *meta = ms_view_meta(v);
    for (uint32_t i = 0; i < t->n_items; i++) {
        const ms_request *r = ms_view_item_request(v, i);
        const ms_iteration *iter = &r->iters[ms_view_item_iter(v, i)];
        eam_seq *s = &t->seq[t->item_seq[i]];
        t->stamp++;
        for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++)
            for (uint32_t k = 0; k < meta->K; k++) {
                int32_t e = r->topk_ids[ms_topk_index(meta, row, l) + k];
                if (e < 0 || t->mark[e] == t->stamp)
                    continue;
                t->mark[e] = t->stamp;
                s->accesses++;
                s->hits += ms_view_resident(v, l, (uint32_t)e) ? 1 : 0;
            }
    }
}

uint32_t eam_window_for(const ms_policy_env *env, uint32_t window)
{
    return env->meta->n_requests == 1 ? window : 0;
}

/* ------------------------------------------------------------------ */
/* training samples */

typedef struct {
    const ms_trace_meta *meta;
    uint32_t window;
    eam_set *out;
    double *m;
    uint64_t req;
    uint32_t seg;
    int open;
} train_ctx;

static void flush_sample(train_ctx *c)
{
    if (c->open)
        eam_set_push(c->out, c->m);
    memset(c->m, 0, (size_t)c->meta->L * c->meta->J * sizeof *c->m);
    c->open = 0;
}

static int add_training_iteration(void *ctx, uint64_t req_index, const ms_request *r, uint32_t it, ms_err *err)
{
    (void)err;
    train_ctx *c = ctx;
    uint32_t seg = c->window ? it / c->window : 0;
    if (c->open && (req_index != c->req || seg != c->seg))
        flush_sample(c);
    c->open = 1;
    c->req = req_index;
    c->seg = seg;
    for (uint32_t l = 0; l < c->meta->L; l++)
        add_iteration_layer(c->meta, r, it, l, c->m);
    return 0;
}

int eam_collect_training(const ms_policy_env *env, uint32_t window, eam_set *out, ms_err *err)
{
    train_ctx c = {.meta = env->meta, .window = window, .out = out};
    c.m = ms_xcalloc((size_t)env->meta->L * env->meta->J, sizeof *c.m);
    int rc = ms_train_foreach(env, 0, add_training_iteration, &c, err);
    if (rc == 0)
        flush_sample(&c);
    free(c.m);
    return rc ? -1 : 0;
}
