/* Repeated tokens in generated decode routing (docs/generator.md,
 * "Repeated tokens"; gen_state.h has the hooks).
 *
 * A token's routing is mostly a function of the token: when generation
 * repeats a token, its routing and its embedding repeat with it.  Two ways:
 *   - a greedy loop (decode_period P, period_repeat q, or the per-request
 *     [periods] list): decode step s > P copies, with probability q, every
 *     layer's gate and the embedding of step s - P of its request.  Copies
 *     chain (s - P may itself be a copy of s - 2P), so the routing repeats
 *     at every multiple of P, as an untrained model's looping output does;
 *   - a token of an earlier request (token_repeat v): a decode row that is
 *     not a loop copy repeats, with probability v, a decode row drawn
 *     uniformly from the first MS_GEN_TOKEN_POOL decode rows of the earlier
 *     requests (its gates and embedding).  Uniform over rows makes a token
 *     as likely to come back as it was frequent (a Chinese-restaurant
 *     process over tokens).  With token_noise s > 0 the copy is the same
 *     token in another context: every expert's stored weight is multiplied
 *     by exp(s z), z standard normal, before its top-k is taken, so experts
 *     of close weight swap (a recorded trace's cross-request repeats are
 *     mostly near, not exact: one or two of the L x K cells differ).
 * A copied gate is rebuilt from the stored view (gen_gate_from_view) and
 * stored again, so the copy has the source row's top-k ids.  With every
 * knob at 0 nothing here draws or allocates: the seed's draw order, and so
 * every existing trace, is unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/synth/gen_state.h"

void gen_repeat_init(gen_state *g)
{
    const ms_gen_params *p = g->p;
    memset(&g->rep, 0, sizeof g->rep);
    g->rep.on = p->period_repeat > 0 || p->n_periods > 0 || p->token_repeat > 0;
}

void gen_repeat_request_start(gen_state *g, const ms_request *r)
{
    gen_repeats *rp = &g->rep;
    if (!rp->on)
        return;
    const ms_gen_params *p = g->p;
    if (p->n_periods) {
        rp->period = p->periods[r->id % p->n_periods];
        rp->repeat = p->period_repeats[r->id % p->n_periods];
    } else {
        rp->period = p->decode_period;
        rp->repeat = p->period_repeat;
    }
    free(rp->emb_src);
    rp->emb_src = ms_xcalloc((size_t)r->output_len + 1, sizeof *rp->emb_src);
    for (uint32_t t = 0; t <= r->output_len; t++)
        rp->emb_src[t] = -1;
}

/* token_noise: the stored weights w_j of a copied gate become w_j exp(s z_j)
 * (renormalised).  The gate is the stored view to the power 1 / weight_power,
 * so its entries take exp(s z_j / weight_power); in logs, shifted by the
 * largest, so that no factor overflows.  An expert of weight 0 stays 0.  J
 * draws. */
static void perturb_gate(gen_state *g, double *gate)
{
    double f = g->p->token_noise / g->p->weight_power, top = -INFINITY, s = 0;
    for (uint32_t j = 0; j < g->J; j++) {
        double z = gsl_ran_gaussian_ziggurat(g->rng, 1.0);
        gate[j] = gate[j] > 0 ? log(gate[j]) + f * z : -INFINITY;
        top = gate[j] > top ? gate[j] : top;
    }
    for (uint32_t j = 0; j < g->J; j++)
        s += gate[j] = gate[j] > -INFINITY ? exp(gate[j] - top) : 0;
    for (uint32_t j = 0; j < g->J; j++)
        gate[j] = s > 0 ? gate[j] / s : 1.0 / g->J;
}

/* Every layer of `row` from a stored view: src_row of r, or pool entry i
 * (perturbed by token_noise). */
static void copy_row(gen_state *g, ms_request *r, uint32_t row, const ms_request *src, uint32_t src_row, int64_t pool_i)
{
    const ms_trace_meta *m = g->meta;
    const gen_pool *pl = &g->rep.pool;
    size_t LK = (size_t)g->L * g->K, LJ = (size_t)g->L * g->J;
    for (uint32_t l = 0; l < g->L; l++) {
        const float *probs;
        const int32_t *ids;
        const float *w;
        if (src) {
            probs = m->probs_kind == MS_PROBS_FULL ? src->probs + ms_probs_index(m, src_row, l) : NULL;
            ids = src->topk_ids + ms_topk_index(m, src_row, l);
            w = src->topk_w + ms_topk_index(m, src_row, l);
        } else {
            probs = pl->probs ? pl->probs + (size_t)pool_i * LJ + (size_t)l * g->J : NULL;
            ids = pl->ids + (size_t)pool_i * LK + (size_t)l * g->K;
            w = pl->w + (size_t)pool_i * LK + (size_t)l * g->K;
        }
        double *gate = g->cur + (size_t)l * g->J;
        gen_gate_from_view(g, probs, ids, w, gate);
        if (!src && g->p->token_noise > 0)
            perturb_gate(g, gate);
        gen_store_layer(g, r, row, l, gate);
    }
}

int gen_repeat_row(gen_state *g, ms_request *r, uint32_t row)
{
    gen_repeats *rp = &g->rep;
    if (!rp->on)
        return 0;
    uint32_t s = row - r->prompt_len + 1; /* decode step = iteration index */
    if (rp->period && rp->repeat > 0 && s > rp->period && gsl_rng_uniform(g->rng) < rp->repeat) {
        copy_row(g, r, row, r, row - rp->period, 0);
        rp->emb_src[s] = s - rp->period;
        return 1;
    }
    if (g->p->token_repeat > 0 && rp->pool.n > 0 && gsl_rng_uniform(g->rng) < g->p->token_repeat) {
        int64_t i = (int64_t)gsl_rng_uniform_int(g->rng, rp->pool.n);
        copy_row(g, r, row, NULL, 0, i);
        rp->emb_src[s] = -2 - i;
        return 1;
    }
    return 0;
}

int gen_repeat_embedding(gen_state *g, ms_request *r, uint32_t t)
{
    gen_repeats *rp = &g->rep;
    if (!rp->on || rp->emb_src[t] == -1)
        return 0;
    uint32_t D = g->D;
    const float *src = rp->emb_src[t] >= 0 ? r->embedding + (size_t)rp->emb_src[t] * D
                                            : rp->pool.emb + (size_t)(-2 - rp->emb_src[t]) * D;
    memcpy(r->embedding + (size_t)t * D, src, D * sizeof *src);
    return 1;
}

/* The request's decode rows join the pool (token_repeat) while it has room. */
void gen_repeat_request_end(gen_state *g, const ms_request *r)
{
    gen_repeats *rp = &g->rep;
    if (!rp->on || !(g->p->token_repeat > 0))
        return;
    const ms_trace_meta *m = g->meta;
    gen_pool *pl = &rp->pool;
    size_t LK = (size_t)g->L * g->K, LJ = (size_t)g->L * g->J;
    int full = m->probs_kind == MS_PROBS_FULL;
    for (uint32_t t = 1; t <= r->output_len && pl->n < MS_GEN_TOKEN_POOL; t++) {
        if (pl->n == pl->cap) {
            pl->cap = pl->cap ? 2 * pl->cap : 64;
            pl->ids = ms_xrealloc(pl->ids, (size_t)pl->cap * LK, sizeof *pl->ids);
            pl->w = ms_xrealloc(pl->w, (size_t)pl->cap * LK, sizeof *pl->w);
            if (full)
                pl->probs = ms_xrealloc(pl->probs, (size_t)pl->cap * LJ, sizeof *pl->probs);
            if (g->D)
                pl->emb = ms_xrealloc(pl->emb, (size_t)pl->cap * g->D, sizeof *pl->emb);
        }
        uint32_t row = r->prompt_len + t - 1;
        memcpy(pl->ids + (size_t)pl->n * LK, r->topk_ids + ms_topk_index(m, row, 0), LK * sizeof *pl->ids);
        memcpy(pl->w + (size_t)pl->n * LK, r->topk_w + ms_topk_index(m, row, 0), LK * sizeof *pl->w);
        if (full)
            memcpy(pl->probs + (size_t)pl->n * LJ, r->probs + ms_probs_index(m, row, 0), LJ * sizeof *pl->probs);
        if (g->D)
            memcpy(pl->emb + (size_t)pl->n * g->D, r->embedding + (size_t)t * g->D, g->D * sizeof *pl->emb);
        pl->n++;
    }
}

void gen_repeat_free(gen_state *g)
{
    gen_repeats *rp = &g->rep;
    free(rp->emb_src);
    free(rp->pool.ids);
    free(rp->pool.w);
    free(rp->pool.probs);
    free(rp->pool.emb);
    memset(rp, 0, sizeof *rp);
}
