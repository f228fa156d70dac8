/* Time and billed-cost model of serverless MoE layers.  Equations of seed
 * paper 002 as read from the PDF extraction (quoted), with the places where
 * the extraction was garbled or a detail omitted and we had to interpret
 * marked INTERPRETATION. */
#include "sim/serverless/serverless_cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ms_sl_plan_alloc(ms_sl_plan *p, uint32_t L, uint32_t J)
{
    p->L = L;
    p->J = J;
    p->beta = 1;
    p->a = ms_xcalloc(L, 1);
    p->cfg = ms_xcalloc((size_t)L * J, sizeof *p->cfg);
}

void ms_sl_plan_free(ms_sl_plan *p)
{
    free(p->a);
    free(p->cfg);
    p->a = NULL;
    p->cfg = NULL;
}

void ms_sl_plan_copy(ms_sl_plan *dst, const ms_sl_plan *src)
{
    dst->beta = src->beta;
    memcpy(dst->a, src->a, src->L);
    memcpy(dst->cfg, src->cfg, (size_t)src->L * src->J * sizeof *src->cfg);
}

/* (3) "t^cal_{e,i} = s_{e,i} sum_j x_{e,i,j} U_j": U_j, the time of one
 * token at memory option j.  The paper measures U_j; we model it as the
 * expert's FLOPs over the function's CPU share (proportional to memory). */
double ms_sl_tcal(const ms_sl_platform *p, const ms_sl_model *m, double mem_mb)
{
    return m->expert_flops / ms_sl_flops(p, mem_mb);
}

/* "head time T^{h,E}_{e,i} = P_{e,i}/B^s + T^dl + T^str": warm start, storage
 * access delay, and the model download. */
double ms_sl_head(const ms_sl_platform *p, const ms_sl_model *m)
{
    return m->expert_bytes / p->storage_bw + p->storage_delay_s + p->warm_start_s;
}

/* "r_{e,i} = sum_g y_{e,i,g} d_{e,i}/g".  INTERPRETATION: tokens are whole,
 * so a replica gets ceil(d/g) (the busiest replica bounds time and memory). */
uint32_t ms_sl_per_replica(uint32_t d, uint32_t g)
{
    return (d + g - 1) / g;
}

/* (6) read as "t^rep_1 = T^{h,E} + t^nblk + beta t^blk" with
 * "t^nblk = T^dl + ceil(r/beta) (D^o/B^s)" and
 * "t^blk = T^dl + beta max{D^in/B^s + t^cal, D^o/B^s}" (one worst-case block).
 * INTERPRETATION: the literal reading counts beta^2 tokens of compute in
 * total whatever r is, which cannot be meant; the block count ceil(r/beta)
 * and the minibatch size beta were swapped in extraction.  We use
 * t^rep_1 = T^h + (T^dl + beta D^o/B^s) + ceil(r/beta) t^blk: ceil(r/beta)
 * blocks (download + compute of one minibatch overlapped with the upload of
 * the previous one), then the non-overlapped upload of the last minibatch. */
static double rep_pipelined(const ms_sl_platform *p, const ms_sl_model *m, double tcal, uint32_t r, uint32_t beta)
{
    double Bs = p->storage_bw, D = m->token_bytes;
    double blk = p->storage_delay_s + beta * fmax(D / Bs + tcal, D / Bs);
    double nblk = p->storage_delay_s + beta * (D / Bs);
    double blocks = (r + beta - 1) / beta;
    return ms_sl_head(p, m) + nblk + blocks * blk;
}

/* (8) "t^rep_2 = T^{h,E} + 2 T^dl + t^data_2", "t^data_2 = r (D^in + D^o)/B^s + r t^cal"
 * (read as r((D^in+D^o)/B^s + t^cal)): download all inputs, compute, upload all results. */
static double rep_indirect(const ms_sl_platform *p, const ms_sl_model *m, double tcal, uint32_t r)
{
    return ms_sl_head(p, m) + 2 * p->storage_delay_s + r * (2 * m->token_bytes / p->storage_bw + tcal);
}

/* (10) "t^rep_3 = T^{h,E} + r (D^o/B^f + t^cal)". */
static double rep_direct(const ms_sl_platform *p, const ms_sl_model *m, double tcal, uint32_t r)
{
    return ms_sl_head(p, m) + r * (m->token_bytes / p->function_bw + tcal);
}

double ms_sl_rep_time(const ms_sl_platform *p, const ms_sl_model *m, int a, double mem_mb, uint32_t r, uint32_t beta)
{
    double tcal = ms_sl_tcal(p, m, mem_mb);
    if (a == MS_SL_PIPE)
        return rep_pipelined(p, m, tcal, r, beta ? beta : 1);
    if (a == MS_SL_INDIRECT)
        return rep_indirect(p, m, tcal, r);
    return rep_direct(p, m, tcal, r);
}

/* (12c) "P_{e,i} + M^itrm_{e,i} + r_{e,i}(D^in + D^o) <= sum_j x_{e,i,j} M_j". */
int ms_sl_fits_memory(const ms_sl_platform *p, const ms_sl_model *m, double mem_mb, uint32_t r)
{
    return m->expert_bytes + p->runtime_bytes + r * 2.0 * m->token_bytes <= mem_mb * 1048576.0;
}

/* (12f) "(a_e - 3)(r_{e,i} D^in - D^p) <= 0" -- the sign as extracted would
 * forbid the indirect designs; the text says it "prohibits direct transfers
 * when the payload size is below transferred data size", which we implement. */
int ms_sl_fits_payload(const ms_sl_platform *p, const ms_sl_model *m, uint32_t r)
{
    return r * m->token_bytes <= p->payload_bytes;
}

/* (4)-(5): "c_{a_e,e} = sum_i s_{e,i} t_{a_e,e,i} sum_j x_{e,i,j} M_j",
 * "t_{a_e,e,i} = sum_g y_{e,i,g} g t^rep" -- GB-seconds times the price. */
double ms_sl_expert_cost(const ms_sl_platform *p, double mem_mb, uint32_t g, double t_rep)
{
    return g * t_rep * (mem_mb / 1024.0) * p->price_per_gb_s;
}

/* T^load_e "includes the time to start the serverless function of non-MoE
 * layer and download the model parameters". */
double ms_sl_load_time(const ms_sl_platform *p, const ms_sl_model *m)
{
    return p->warm_start_s + p->storage_delay_s + m->dense_bytes / p->storage_bw;
}

double ms_sl_nonmoe_time(const ms_sl_platform *p, const ms_sl_model *m, uint64_t n_tokens)
{
    return (double)n_tokens * m->dense_flops / ms_sl_flops(p, p->nonmoe_mb);
}

/* (12d) "T^head + T^tail + sum_e (t^lat_e + T^NE_e) <= T^limit".
 * INTERPRETATION: the paper does not give T^head / T^tail; we take the first
 * non-MoE function's start and download (T^load) as T^head and one storage
 * access as T^tail, and T^NE_e as one non-MoE layer's compute on the batch. */
double ms_sl_fixed_latency(const ms_sl_platform *p, const ms_sl_model *m, uint64_t n_tokens)
{
    return ms_sl_load_time(p, m) + p->storage_delay_s + m->L * ms_sl_nonmoe_time(p, m, n_tokens);
}

/* (7)/(9) "t^lat_{a,e} = max{t^S12_{a,e}, T^load_e} + t^S3_{a,e}" ("details
 * omitted due to space limit").  INTERPRETATION from Fig. 8: stages 1-2 end
 * when the slowest replica has uploaded its results (max_i t^rep), the next
 * non-MoE function loads meanwhile (T^load), and stage 3 is that function
 * downloading every expert's results: t^S3 = T^dl + (sum_i d_i) D^o / B^s.
 * (11) "t^lat_3 = r_{e,i} D^in / B^f + max_i t^rep_3 + T^load_e".
 * INTERPRETATION: i is free in the first term; we take the largest input
 * sent to one replica (max_i r_i D^in / B^f). */
double ms_sl_layer_latency(const ms_sl_platform *p, const ms_sl_model *m, int a, double max_rep, uint32_t max_r,
                           uint64_t layer_tokens)
{
    double load = ms_sl_load_time(p, m);
    if (a == MS_SL_DIRECT)
        return max_r * m->token_bytes / p->function_bw + max_rep + load;
    return fmax(max_rep, load) + p->storage_delay_s + (double)layer_tokens * m->token_bytes / p->storage_bw;
}

/* Smallest replica count >= g under which r fits memory (and payload when
 * direct); 0 when none up to 64 G does. */
static uint32_t serving_replicas(const ms_sl_platform *p, const ms_sl_model *m, int a, double mem_mb, uint32_t d,
                                 uint32_t g)
{
    uint32_t cap = 64u * (uint32_t)p->max_replicas;
    for (; g <= cap; g++) {
        uint32_t r = ms_sl_per_replica(d, g);
        if (ms_sl_fits_memory(p, m, mem_mb, r) && (a != MS_SL_DIRECT || ms_sl_fits_payload(p, m, r)))
            return g;
        if (r <= 1)
            break;
    }
    return 0;
}

int ms_sl_evaluate(const ms_sl_platform *p, const ms_sl_model *m, const ms_sl_plan *plan, const uint32_t *d,
                   uint64_t n_tokens, ms_sl_eval *out, ms_err *err)
{
    memset(out, 0, sizeof *out);
    out->tokens = n_tokens;
    for (uint32_t e = 0; e < plan->L; e++) {
        int a = plan->a[e];
        double max_rep = 0;
        uint32_t max_r = 0;
        uint64_t layer_tokens = 0;
        for (uint32_t i = 0; i < plan->J; i++) {
            uint32_t de = d[(size_t)e * plan->J + i];
            if (!de)
                continue; /* s_{e,i} = 0: not invoked, not billed */
            const ms_sl_cfg *c = &plan->cfg[(size_t)e * plan->J + i];
            double mem = p->mem_mb[c->mem];
            uint32_t g = serving_replicas(p, m, a, mem, de, c->g);
            if (!g)
                return ms_fail(err, "serverless: layer %u expert %u: %u tokens fit no replica count of a %.0f MB function",
                               e, i, de, mem);
            out->fixes += g != c->g;
            uint32_t r = ms_sl_per_replica(de, g);
            double t = ms_sl_rep_time(p, m, a, mem, r, plan->beta);
            out->cost += ms_sl_expert_cost(p, mem, g, t);
            max_rep = fmax(max_rep, t);
            if (r > max_r)
                max_r = r;
            layer_tokens += de;
        }
        out->moe_latency += ms_sl_layer_latency(p, m, a, max_rep, max_r, layer_tokens);
    }
    out->latency = out->moe_latency + ms_sl_fixed_latency(p, m, n_tokens);
    return 0;
}

void ms_sl_cluster(const ms_sl_platform *p, const ms_sl_model *m, const uint32_t *d, uint64_t n_tokens,
                   ms_sl_eval *out)
{
    memset(out, 0, sizeof *out);
    out->tokens = n_tokens;
    double flops = p->cluster_vcpus * p->cluster_vcpu_flops;
    for (uint32_t e = 0; e < m->L; e++) {
        uint64_t layer_tokens = 0;
        for (uint32_t i = 0; i < m->J; i++)
            layer_tokens += d[(size_t)e * m->J + i];
        out->moe_latency += (double)layer_tokens * m->expert_flops / flops;
    }
    double dense = (double)m->L * n_tokens * m->dense_flops / flops;
    out->latency = out->moe_latency + dense;
    double billed = ceil(out->latency / p->cluster_billing_s) * p->cluster_billing_s;
    out->cost = p->cluster_price_per_s * billed * (out->latency > 0 ? out->moe_latency / out->latency : 0);
}
