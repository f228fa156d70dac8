/* Seeded synthetic trace generator: the model behind `moesim trace gen`.
 * docs/generator.md describes every knob and the statistic it controls. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "traces/synth/gen_state.h"

#define PREF_FLOOR 1e-9         /* keeps every Dirichlet parameter > 0 */
#define SINKHORN_MAX_ITERS 2000
#define SINKHORN_TOL 1e-12

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

/* dec_tilt[l][j] = decode popularity / layer popularity (both normalised):
 * a decode row's preference is its request's times this tilt, so decode rows
 * of the whole trace follow the decode popularity while each request keeps
 * its own skew.  No draws. */
static void build_decode_tilt(gen_state *g, const double *decode_pop, double *tilt)
{
    uint32_t J = g->J;
    double *pop = ms_xcalloc(J, sizeof *pop);
    for (uint32_t l = 0; l < g->L; l++) {
        layer_popularity(g, l, pop);
        const double *dec = decode_pop + (size_t)l * J;
        double s = 0;
        for (uint32_t j = 0; j < J; j++)
            s += dec[j];
        for (uint32_t j = 0; j < J; j++) {
            double d = s > 0 ? dec[j] / s : 1.0 / J;
            tilt[(size_t)l * J + j] = d / (pop[j] > PREF_FLOOR ? pop[j] : PREF_FLOOR);
        }
    }
    free(pop);
}

static void gen_state_free(gen_state *g)
{
    if (g->rng)
        gsl_rng_free(g->rng);
    if (g->cluster_table)
        gsl_ran_discrete_free(g->cluster_table);
    free(g->cluster_w); free(g->pref); free(g->trans); free(g->centroid);
    free(g->req_pref); free(g->req_pref_dec); free(g->dec_tilt); free(g->cur); free(g->prev); free(g->alpha); free(g->base);
    free(g->trans_mix); free(g->pf); free(g->req_emb); free(g->emb_tmp);
    free(g->spec_eta); free(g->cand); free(g->cand_val);
    gen_repeat_free(g);
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
    if (p->decode_popularity) {
        g->req_pref_dec = ms_xcalloc(p->decode_phases * LJ, sizeof(double));
        g->dec_tilt = ms_xcalloc(p->decode_phases * LJ, sizeof(double));
    }
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
    for (uint32_t k = 0; g->dec_tilt && k < p->decode_phases; k++)
        build_decode_tilt(g, p->decode_popularity + k * LJ, g->dec_tilt + k * LJ);
    gen_repeat_init(g);
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
    const double *rp = g->row_pref + (size_t)l * J;
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

void gen_gate_from_view(const gen_state *g, const float *probs, const int32_t *ids, const float *w, double *gate)
{
    uint32_t J = g->J, K = g->K;
    double inv = 1.0 / g->p->weight_power, s = 0;
    if (probs) {
        for (uint32_t j = 0; j < J; j++)
            s += gate[j] = probs[j] > 0 ? pow(probs[j], inv) : 0;
    } else {
        for (uint32_t j = 0; j < J; j++)
            gate[j] = 0;
        for (uint32_t k = 0; k < K; k++)
            if (ids[k] >= 0)
                s += gate[ids[k]] = w[k] > 0 ? pow(w[k], inv) : 0;
    }
    for (uint32_t j = 0; j < J; j++)
        gate[j] = s > 0 ? gate[j] / s : 1.0 / J;
}

/* The gate of layer l in an earlier row of the request, d rows back with
 * P(d) ~ 1/d on [1, row] (d = floor((row+1)^u), u uniform): as many recalls
 * from 2-3 rows back as from 4-7 or 8-15, the scale-free recency of real
 * decode routing.  One lag per row (drawn at its first recall), so the
 * recalled layers of a row come from one earlier row and keep its path
 * through the layers.  Rebuilt from the stored view (full probs, else the top-k
 * weights with 0 elsewhere) undoing weight_power, so storing it again gives
 * the same top-k ids. */
static void recall_gate(gen_state *g, const ms_request *r, uint32_t row, uint32_t l, double *gate)
{
    const ms_trace_meta *m = g->meta;
    if (!g->row_lag) {
        uint32_t d = (uint32_t)floor(exp(gsl_rng_uniform(g->rng) * log(row + 1.0)));
        g->row_lag = d < 1 ? 1 : d > row ? row : d;
    }
    uint32_t src = row - g->row_lag;
    gen_gate_from_view(g, m->probs_kind == MS_PROBS_FULL ? r->probs + ms_probs_index(m, src, l) : NULL,
                       r->topk_ids + ms_topk_index(m, src, l), r->topk_w + ms_topk_index(m, src, l), gate);
}

void gen_store_layer(gen_state *g, ms_request *r, uint32_t row, uint32_t l, const double *gate)
{
    const ms_trace_meta *m = g->meta;
    uint32_t J = g->J, K = g->K;
    float *pf = m->probs_kind == MS_PROBS_FULL ? r->probs + ms_probs_index(m, row, l) : g->pf;
    store_gate(g->p->weight_power, gate, J, pf);
    int32_t *ids = r->topk_ids + ms_topk_index(m, row, l);
    float *w = r->topk_w + ms_topk_index(m, row, l);
    topk_float(pf, J, K, ids);
    topk_weights(pf, ids, K, m->probs_kind == MS_PROBS_TOPK_RENORM, w);
    ids_only_weights(m, ids, w);
}

/* Draws the gate of every layer for one token row into g->cur and fills the
 * row's top-k (and full probs when stored). */
static void gen_row(gen_state *g, ms_request *r, uint32_t row, int decode)
{
    const ms_trace_meta *m = g->meta;
    uint32_t L = g->L, J = g->J;
    const int32_t *prev_ids = NULL;
    const float *prev_w = NULL;
    for (uint32_t l = 0; l < L; l++) {
        double *gate = g->cur + (size_t)l * J;
        const double *before = g->prev + (size_t)l * J;
        if (decode && g->p->decode_reuse > 0 && gsl_rng_uniform(g->rng) < g->p->decode_reuse) {
            memcpy(gate, before, J * sizeof *gate);
        } else if (decode && g->p->decode_recall > 0 && gsl_rng_uniform(g->rng) < g->p->decode_recall) {
            recall_gate(g, r, row, l, gate);
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
        gen_store_layer(g, r, row, l, gate);
        prev_ids = r->topk_ids + ms_topk_index(m, row, l);
        prev_w = r->topk_w + ms_topk_index(m, row, l);
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

/* out[l] = the request's preference times tilt[l], renormalised. */
static void tilt_request_prefs(gen_state *g, const double *tilt_all, double *out_all)
{
    uint32_t J = g->J;
    for (size_t l = 0; l < g->L; l++) {
        const double *rp = g->req_pref + l * J, *tilt = tilt_all + l * J;
        double *out = out_all + l * J, s = 0;
        for (uint32_t j = 0; j < J; j++)
            s += out[j] = rp[j] * tilt[j];
        for (uint32_t j = 0; j < J; j++)
            out[j] = s > 0 ? out[j] / s : rp[j];
    }
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
    size_t LJ = (size_t)L * J;
    for (uint32_t k = 0; g->req_pref_dec && k < g->p->decode_phases; k++)
        tilt_request_prefs(g, g->dec_tilt + k * LJ, g->req_pref_dec + k * LJ);
}

/* Topic drift (pref_drift): before each token row but a request's first,
 * with probability pref_drift the request's routing context moves on and its
 * preference is redrawn as a new request's (a cluster from the cluster table,
 * then the per-layer Dirichlet around it; the decode tilts follow).  The
 * request keeps its cluster, embedding and token ids.  0 draws nothing. */
static void drift_request_prefs(gen_state *g)
{
    if (!(g->p->pref_drift > 0) || !(gsl_rng_uniform(g->rng) < g->p->pref_drift))
        return;
    draw_request_prefs(g, (uint32_t)gsl_ran_discrete(g->rng, g->cluster_table));
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
    uint32_t prompt, output;
    if (p->n_lens) { /* the source's lengths in turn, no draws */
        prompt = p->prompt_lens[id % p->n_lens];
        output = p->output_lens[id % p->n_lens];
    } else {
        prompt = draw_length(g, p->prompt_median, p->prompt_sigma, p->prompt_min, p->prompt_max);
        output = draw_length(g, p->output_median, p->output_sigma, p->output_min, p->output_max);
    }

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
    gen_repeat_request_start(g, r);
    if (g->D)
        draw_request_embedding(g, cluster);
    if (p->token_ids)
        draw_token_ids(g, model, cluster, r);

    for (uint32_t row = 0; row < r->n_rows; row++) {
        int decode = row >= prompt;
        if (row > 0)
            drift_request_prefs(g);
        g->row_pref = g->req_pref;
        if (decode && g->req_pref_dec)
            g->row_pref = g->req_pref_dec + (size_t)ms_gen_decode_phase(row - prompt + 1, output, p->decode_phases) *
                                                g->L * g->J;
        g->row_lag = 0;
        if (!(decode && gen_repeat_row(g, r, row)))
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
            if (!gen_repeat_embedding(g, r, t))
                draw_embedding(g, p->embed_tok_noise, r->embedding + (size_t)t * g->D);
    }
    gen_repeat_request_end(g, r);
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
