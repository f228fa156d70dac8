/* hybrimoe: HybriMoE impact-driven prefetching (seed 003, Sec. IV-C).
 *
 * mode=paper: when layer l's gate is revealed, predict the experts of layers
 * l+1 .. l+depth (depth = 3: "predict the next three layers' expert
 * activations by reusing their gate information") and queue prefetches in
 * order of impact, the latency each is expected to save
 * (ms_hybrimoe_impact):
 *   q_e   = predicted score of expert e in layer t (mean over the rows)
 *   prob  = min(1, K x q_e)       (top-k weights sum to 1 over K slots)
 *   n_e   = max(1, prob x rows)   expected tokens
 *   impact = prob x max(0, min(t_cpu(n_e), t_copy + t_gpu(n_e)) - t_gpu(n_e))
 * i.e. without the prefetch the expert runs on the CPU or is copied on
 * demand, whichever is cheaper (the HSS chooses), with it it runs on the GPU.
 * The k best-scored experts of each predicted layer are candidates.
 * Predictor: `spec` = the speculative gates gate_{l+i}(h_l) recorded in the
 * trace (the paper's hidden-state reuse); `history` (fallback for traces
 * without them, e.g. imported route-csv) = per-layer MRS running scores of
 * past routing (S <- alpha TopP(s) + (1-alpha) S at every gate of that layer),
 * i.e. layer t is predicted from its own recent scores; `auto` = spec for the
 * depths the trace records, history beyond and when it has none.  The
 * history scores are updated only when some depth reads them (the MRS
 * update of every gate is the largest part of the prefetcher otherwise).
 *
 * mode=code (kTransformers HybriMoE prefetch_expert): in a one-token step
 * (the code's decode path, chosen by token count), after layer l's gate, the
 * top `prefetch_size` experts of layer l+1 by the MRS score S (default 0 =
 * no prefetch).  The prefetcher keeps its own copy of S, updated as
 * `mrs:mode=code` does (first token, mrs_bug; in double precision).  Not
 * modelled: the code prefetches only when the layer ran some expert on the
 * GPU, and evicts for a prefetch when it is issued (here: when its copy
 * starts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/fminmax.h"
#include "sim/core/timing.h"
#include "policies/lib/gate.h"
#include "policies/lib/hybrimoe_hss.h"
#include "policies/policy.h"
#include "policies/lib/rank.h"

enum { PRED_AUTO, PRED_SPEC, PRED_HISTORY };

typedef struct {
    int code, predictor, bug;
    int keep_history; /* H is read: code mode, or a depth the speculative gates do not reach */
    uint32_t depth, k, p, prefetch_size, J, L, K, spec_depth;
    double alpha;
    ms_topk_fill fill;
    double *H;  /* [L][J] MRS running scores (history predictor / code S) */
    float *s;   /* [J] scratch */
    ms_scored *ranked; /* [J] scratch: the positive predictions with ids, the best first */
} hyb_state;

static int parse_predictor(const char *name)
{
    if (!strcmp(name, "spec"))
        return PRED_SPEC;
    if (!strcmp(name, "history"))
        return PRED_HISTORY;
    return PRED_AUTO;
}

static void *hyb_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    const ms_trace_meta *m = env->meta;
    int code = !strcmp(ms_param_str(p, "mode"), "code");
    int predictor = parse_predictor(ms_param_str(p, "predictor"));
    uint32_t depth = (uint32_t)ms_param_num(p, "depth");
    if (!code && predictor == PRED_SPEC && m->spec_depth == 0) {
        ms_fail(err, "hybrimoe: predictor=spec needs speculative gate outputs, but %s has none (use predictor=history or auto)",
                env->trace_path);
        return NULL;
    }
    if (!code && predictor == PRED_SPEC && depth > m->spec_depth) {
        ms_fail(err, "hybrimoe: predictor=spec with depth=%u, but %s records speculative gates only %u layer(s) ahead",
                depth, env->trace_path, m->spec_depth);
        return NULL;
    }
    uint32_t pp = (uint32_t)ms_param_num(p, "p");
    if (pp == 0)
        pp = 2 * m->K;
    if (pp > m->J) {
        ms_fail(err, "hybrimoe: p=%u exceeds the %u experts per layer of %s", pp, m->J, env->trace_path);
        return NULL;
    }
    hyb_state *s = ms_xcalloc(1, sizeof *s);
    s->code = code;
    s->predictor = predictor;
    s->depth = depth;
    s->k = (uint32_t)ms_param_num(p, "k");
    if (s->k == 0 || s->k > m->J)
        s->k = s->k ? m->J : m->K;
    s->p = pp;
    s->alpha = ms_param_num(p, "alpha");
    int bug = (int)ms_param_num(p, "mrs_bug");
    s->bug = bug < 0 ? code : bug;
    s->prefetch_size = (uint32_t)ms_param_num(p, "prefetch_size");
    if (s->prefetch_size > m->J)
        s->prefetch_size = m->J;
    s->J = m->J;
    s->L = m->L;
    s->K = m->K;
    s->spec_depth = m->spec_depth;
    s->keep_history = code || predictor == PRED_HISTORY || (predictor == PRED_AUTO && depth > m->spec_depth);
    s->fill = env->topk_fill;
    s->H = ms_xcalloc((size_t)m->L * m->J, sizeof *s->H);
    s->s = ms_xcalloc(m->J, sizeof *s->s);
    s->ranked = ms_xcalloc(m->J, sizeof *s->ranked);
    return s;
}

static void hyb_destroy(void *st)
{
    hyb_state *s = st;
    free(s->H);
    free(s->s);
    free(s->ranked);
    free(s);
}

/* The routing scores the MRS update sees: batch mean (paper) or the first
 * token (code). */
static void routing_scores(const hyb_state *s, const ms_view *v, uint32_t l, float *out)
{
    if (!s->code) {
        ms_view_gate_mean(v, l, out);
        return;
    }
    const ms_request *r = ms_view_item_request(v, 0);
    if (!r) {
        memset(out, 0, s->J * sizeof *out);
        return;
    }
    ms_gate_row(ms_view_meta(v), r, r->iters[ms_view_item_iter(v, 0)].row0, l, s->fill, out);
}

/* The experts of layer l + i with a positive predicted score, with those
 * scores, into c; returns how many.  Only they can be queued (a prefetch
 * needs score > 0), and ranking the positive ones alone gives the same
 * first ones in the same order as ranking all J (the order is total), so
 * the zeros (most experts of a speculative gate: a row has K nonzero) are
 * never ranked. */
/* Appends (x[e], e) for each x[e] > 0 to c[n..); returns the new n.  Four
 * at a time: a group of +0.0 (all bits zero, most of a one-row speculative
 * gate) is skipped with one test; any other group is tested value by value. */
static uint32_t append_positive(const float *x, uint32_t J, ms_scored *c, uint32_t n)
{
    uint32_t e = 0;
    for (; e + 4 <= J; e += 4) {
        uint64_t lo, hi;
        memcpy(&lo, x + e, sizeof lo);
        memcpy(&hi, x + e + 2, sizeof hi);
        if ((lo | hi) == 0)
            continue;
        for (uint32_t j = e; j < e + 4; j++)
            if (x[j] > 0)
                c[n++] = (ms_scored){x[j], j};
    }
    for (; e < J; e++)
        if (x[e] > 0)
            c[n++] = (ms_scored){x[e], e};
    return n;
}

static uint32_t positive_predictions(hyb_state *s, const ms_view *v, uint32_t l, uint32_t i, ms_scored *c)
{
    uint32_t n = 0;
    int spec = s->predictor == PRED_SPEC || (s->predictor == PRED_AUTO && i <= s->spec_depth);
    const int32_t *ids;
    const float *w;
    uint32_t K = spec ? ms_view_spec_row(v, l, i, &ids, &w) : 0;
    if (K && (n = ms_spec_row_positive(ids, w, K, c)) != UINT32_MAX)
        return n; /* one row: K cells instead of J entries (ranking ignores the order they come in) */
    n = 0;
    if (spec && ms_view_spec_gate(v, l, i, s->s))
        return append_positive(s->s, s->J, c, 0);
    if (!s->keep_history) { /* the view answers every depth <= spec_depth inside an iteration */
        fprintf(stderr, "moesim: internal error: hybrimoe found no speculative gate of layer %u + %u\n", l, i);
        abort();
    }
    const double *h = s->H + (size_t)(l + i) * s->J;
    for (uint32_t e = 0; e < s->J; e++)
        if (h[e] > 0)
            c[n++] = (ms_scored){h[e], e};
    return n;
}

/* Queues the k best-predicted experts of layer t = l + i, priority = impact. */
static void prefetch_by_impact(hyb_state *s, ms_view *v, uint32_t l, uint32_t i)
{
    uint32_t t = l + i;
    ms_scored *c = s->ranked;
    uint32_t n = positive_predictions(s, v, l, i, c);
    if (n == 0)
        return;
    const ms_platform *pf = ms_view_platform(v);
    double bytes = ms_view_expert_bytes(v, t), params = ms_view_expert_params(v, t);
    double rows = ms_view_batch_rows(v), t_copy = ms_t_copy_h2d(pf, bytes);
    uint32_t k = s->k < n ? s->k : n;
    ms_rank_first(c, n, k);
    double tokens_was = -1, t_cpu = 0, t_gpu = 0;
    for (uint32_t j = 0; j < k; j++) {
        double prob = ms_fmin(1.0, s->K * c[j].score);
        double tokens = ms_fmax(1.0, prob * rows);
        if (tokens != tokens_was) { /* a one-row step: 1 for every candidate */
            t_cpu = ms_t_expert_cpu(pf, bytes, params, tokens);
            t_gpu = ms_t_expert_gpu(pf, bytes, params, tokens);
            tokens_was = tokens;
        }
        double impact = ms_hybrimoe_impact(prob, t_cpu, t_copy, t_gpu);
        if (impact > 0)
            ms_view_prefetch(v, t, c[j].e, impact);
    }
}

static void hyb_gate(void *st, ms_view *v, uint32_t l)
{
    hyb_state *s = st;
    if (s->keep_history) { /* else nothing reads H: the speculative gates predict every depth */
        routing_scores(s, v, l, s->s);
        ms_mrs_update(s->H + (size_t)l * s->J, s->s, s->J, s->p, s->alpha, s->bug);
    }
    if (s->code) {
        if (ms_view_batch_rows(v) == 1 && s->prefetch_size > 0 && l + 1 < s->L)
            ms_prefetch_top_scored(v, l + 1, s->H + (size_t)(l + 1) * s->J, s->J, s->prefetch_size);
        return;
    }
    for (uint32_t i = 1; i <= s->depth && l + i < s->L; i++)
        prefetch_by_impact(s, v, l, i);
}

static const ms_param_spec hyb_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code", "paper: impact-driven, next `depth` layers; code: top prefetch_size of l+1 by S"},
    {"depth", MS_PARAM_INT, "3", 1, 64, NULL, "paper: layers predicted ahead"},
    {"predictor", MS_PARAM_ENUM, "auto", 0, 0, "auto|spec|history", "paper: speculative gates, MRS history, or spec where recorded"},
    {"k", MS_PARAM_INT, "0", 0, 4096, NULL, "paper: candidates per predicted layer (0 = K)"},
    {"alpha", MS_PARAM_DOUBLE, "0.5", 0, 1, NULL, "MRS coefficient of the history scores / code-mode S"},
    {"p", MS_PARAM_INT, "0", 0, 4096, NULL, "MRS TopP size (0 = 2K)"},
    {"mrs_bug", MS_PARAM_INT, "-1", -1, 1, NULL, "MRS ordering bug (-1 = 1 in code mode, 0 in paper)"},
    {"prefetch_size", MS_PARAM_INT, "0", 0, 4096, NULL, "code: experts of layer l+1 prefetched by S"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_prefetch_ops hyb_ops = {
    .create = hyb_create, .destroy = hyb_destroy, .on_gate = hyb_gate,
};
const ms_policy_desc ms_policy_prefetch_hybrimoe = {
    .name = "hybrimoe", .kind = MS_KIND_PREFETCH, .params = hyb_params, .prefetch = &hyb_ops, .needs_weights = 1,
    .reads = MS_PART_GATE | MS_PART_SPEC,
    .summary = "HybriMoE impact-driven prefetch of the next 3 layers (code: top-S of l+1)",
};
