/* mrs: HybriMoE's Minus Recent Score cache (seed 003, Sec. IV-D).
 *
 * Every time layer l's gate is revealed, every expert e of the layer gets
 *   S <- alpha x TopP(s) + (1 - alpha) x S            (the paper's equation)
 * with s the routing scores and TopP keeping the p largest (p = 2K).  The
 * victim is the evictable expert with the lowest S (ties: least recently used).
 *
 * mode=paper: one cache shared by all layers, s = this iteration's routing
 *   scores averaged over the batch's token rows, the cache starts empty.
 * mode=code (HybriMoE 508a85b9 on kTransformers: ktransformers/operators/
 *   experts.py KExpertsCache / KScoreAwareCache; docs/policies.md has the
 *   table with the lines):
 *   - each layer owns fixed slots that initially hold experts 0..n-1 (dict
 *     order: expert 0 least recent);
 *   - s = the first token's scores only (routing_scores[0]); mrs_bug=1 (the
 *     code's default here) writes the top-p values in ascending-id order;
 *     S is float32 (ms_mrs_update_f32), so long-unused experts reach 0 and tie;
 *   - a step's path is chosen by its token count, not its phase (a one-row
 *     step takes the decode path): decode = hits, then misses, each in the
 *     order of CUDA topk(sorted=False) (MS_ORDER_HITS_FIRST_GATHER); prefill
 *     = unique() ids ascending, hits then misses;
 *   - no protection (MS_PROTECT_NONE): the victim is the lowest S among ALL
 *     loaded experts of the incoming expert's layer, the step's hits and its
 *     earlier loads included; ties to the first in dict order (least
 *     recently inserted or touched); experts run on the CPU are not touched;
 *   - prefill buffer: in a multi-row step, a miss of the first or the last
 *     layer whose slots are full streams through the buffer and is not
 *     cached (the only layers where reset_buffer leaves the buffer free);
 *     every other layer evicts by S.  reset_buffer's wasted copies of layer
 *     l+2 are not modelled (they change no hit or miss);
 *   - the code scores experts only in DeepSeek's gate; on other models its
 *     first eviction would crash (KScoreAwareCache._instance is None): code
 *     mode applies the DeepSeek update to every model. */
#include <stdlib.h>
#include <string.h>

#include "policies/lib/expert_list.h"
#include "policies/lib/gate.h"
#include "policies/lib/hybrimoe_hss.h"
#include "policies/lib/layer_order.h"
#include "policies/policy.h"

typedef struct {
    int code;
    double alpha;
    uint32_t p, J, L, slots_param;
    int bug;
    ms_topk_fill fill;
    double *S;          /* [L][J] */
    float *Sf;          /* [L][J] code: the float32 scores (S holds copies) */
    uint64_t *last_use; /* [L][J] recency ticks */
    uint64_t tick;
    ms_layer_order members; /* per layer, ascending (S, last_use): the victim order */
    uint32_t *slots;    /* [L] code mode: fixed slots per layer */
    int slots_fixed;
    float *s;           /* [J] scratch */
} mrs_state;

static void *mrs_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    const ms_trace_meta *m = env->meta;
    uint32_t pp = (uint32_t)ms_param_num(p, "p");
    if (pp == 0)
        pp = 2 * m->K;
    if (pp > m->J) {
        ms_fail(err, "mrs: p=%u exceeds the %u experts per layer of %s", pp, m->J, env->trace_path);
        return NULL;
    }
    mrs_state *s = ms_xcalloc(1, sizeof *s);
    s->code = !strcmp(ms_param_str(p, "mode"), "code");
    s->alpha = ms_param_num(p, "alpha");
    s->p = pp;
    s->J = m->J;
    s->L = m->L;
    s->slots_param = (uint32_t)ms_param_num(p, "slots");
    int bug = (int)ms_param_num(p, "mrs_bug");
    s->bug = bug < 0 ? s->code : bug;
    s->fill = env->topk_fill;
    size_t nx = (size_t)m->L * m->J;
    s->S = ms_xcalloc(nx, sizeof *s->S);
    s->Sf = ms_xcalloc(nx, sizeof *s->Sf);
    s->last_use = ms_xcalloc(nx, sizeof *s->last_use);
    ms_layer_order_init(&s->members, m->L, m->J, s->S, s->last_use);
    s->slots = ms_xcalloc(m->L, sizeof *s->slots);
    s->s = ms_xcalloc(m->J, sizeof *s->s);
    return s;
}

static void mrs_destroy(void *st)
{
    mrs_state *s = st;
    free(s->S);
    free(s->Sf);
    free(s->last_use);
    ms_layer_order_free(&s->members);
    free(s->slots);
    free(s->s);
    free(s);
}

/* Code mode: experts 0..n-1 of every layer, round-robin over layers so that
 * a budget smaller than L x n is shared evenly; n = slots, or every expert
 * (slots=0: the budget decides). */
static uint32_t mrs_preload(void *st, const ms_view *v, uint32_t cap, uint32_t *ls, uint32_t *es)
{
    (void)v;
    mrs_state *s = st;
    if (!s->code)
        return 0;
    uint32_t n_per = s->slots_param ? (s->slots_param < s->J ? s->slots_param : s->J) : s->J, w = 0;
    for (uint32_t e = 0; e < n_per; e++)
        for (uint32_t l = 0; l < s->L && w < cap; l++) {
            ls[w] = l;
            es[w++] = e;
        }
    return w;
}

/* Code mode: the slots are what preload placed (slots=0) or `slots`. */
static void fix_slots(mrs_state *s)
{
    if (s->slots_fixed)
        return;
    for (uint32_t l = 0; l < s->L; l++)
        s->slots[l] = s->slots_param ? s->slots_param : s->members.n[l];
    s->slots_fixed = 1;
}

/* Code mode: routing_scores[0], the first token of the batch. */
static void first_token_scores(const mrs_state *s, const ms_view *v, uint32_t l, float *out)
{
    const ms_request *r = ms_view_item_request(v, 0);
    if (!r) {
        memset(out, 0, s->J * sizeof *out);
        return;
    }
    uint32_t row = r->iters[ms_view_item_iter(v, 0)].row0;
    ms_gate_row(ms_view_meta(v), r, row, l, s->fill, out);
}

static void mrs_gate(void *st, const ms_view *v, uint32_t l)
{
    mrs_state *s = st;
    fix_slots(s);
    if (!s->code) {
        ms_view_gate_mean(v, l, s->s);
        ms_mrs_update(s->S + (size_t)l * s->J, s->s, s->J, s->p, s->alpha, s->bug);
        ms_layer_order_resort(&s->members, l);
        return;
    }
    first_token_scores(s, v, l, s->s);
    float *Sf = s->Sf + (size_t)l * s->J;
    ms_mrs_update_f32(Sf, s->s, s->J, s->p, (float)s->alpha, s->bug);
    for (uint32_t e = 0; e < s->J; e++)
        s->S[(size_t)l * s->J + e] = Sf[e];
    ms_layer_order_resort(&s->members, l);
}

static void mrs_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    mrs_state *s = st;
    s->last_use[l * s->J + e] = ++s->tick;
    ms_layer_order_add(&s->members, l, e);
}

static void mrs_access(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    mrs_state *s = st;
    s->last_use[l * s->J + e] = ++s->tick;
    ms_layer_order_moved(&s->members, l, e); /* the latest among its equal scores now */
}

static void mrs_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    mrs_state *s = st;
    ms_layer_order_remove(&s->members, l, e);
}

static int evictable(const void *v, uint32_t l, uint32_t e)
{
    return ms_view_evictable(v, l, e);
}

/* Lowest S among evictable members (of layer `only`, or any when only ==
 * MS_NIL); ties to the least recently used.  MS_NIL when none. */
static uint32_t lowest_score(const mrs_state *s, const ms_view *v, uint32_t only)
{
    return ms_layer_order_lowest(&s->members, only, evictable, v);
}

static int mrs_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    mrs_state *s = st;
    uint32_t best = MS_NIL, il, ie;
    if (s->code && ms_view_incoming(v, &il, &ie))
        best = lowest_score(s, v, il);
    if (best == MS_NIL) /* paper; or code with nothing evictable in the layer (explicit slots over budget) */
        best = lowest_score(s, v, MS_NIL);
    if (best == MS_NIL)
        return 0;
    *l = best / s->J;
    *e = best % s->J;
    return 1;
}

static int layer_full(mrs_state *s, uint32_t l)
{
    fix_slots(s);
    return s->code && s->members.n[l] >= s->slots[l];
}

static int mrs_full(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    (void)e;
    return layer_full(st, l);
}

/* Code mode: a multi-row step's misses stream through the prefill buffer
 * when their layer is full and it is the first or the last layer; a full
 * layer with nothing evictable (only in-flight prefetches) streams too. */
static int mrs_admit(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)e;
    mrs_state *s = st;
    if (!layer_full(s, l))
        return 1;
    if (s->code && ms_view_batch_rows(v) > 1 && l == ms_view_layer(v) && (l == 0 || l + 1 == s->L))
        return 0;
    return lowest_score(s, v, l) != MS_NIL;
}

static void mrs_step_rules(const void *st, ms_step_rules *out)
{
    const mrs_state *s = st;
    if (!s->code)
        return;
    out->order = MS_ORDER_HITS_FIRST_GATHER;
    out->protect = MS_PROTECT_NONE;
    out->cpu_hits_untouched = 1;
}

static const ms_param_spec mrs_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code", "paper: shared cache, batch-mean scores; code: kTransformers per-layer slots"},
    {"alpha", MS_PARAM_DOUBLE, "0.5", 0, 1, NULL, "MRS averaging coefficient alpha"},
    {"p", MS_PARAM_INT, "0", 0, 4096, NULL, "TopP keeps the p largest routing scores (0 = 2K)"},
    {"slots", MS_PARAM_INT, "0", 0, 4096, NULL, "code mode: slots per layer (0 = what the budget gives each layer)"},
    {"mrs_bug", MS_PARAM_INT, "-1", -1, 1, NULL, "1: top-p values written in ascending-id order (code's bug); -1 = 1 in code mode, 0 in paper"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops mrs_ops = {
    .create = mrs_create, .destroy = mrs_destroy, .preload = mrs_preload, .admit = mrs_admit,
    .on_insert = mrs_insert, .on_access = mrs_access, .on_evict = mrs_evict, .on_gate = mrs_gate,
    .victim = mrs_victim, .full = mrs_full, .step_rules = mrs_step_rules,
};
const ms_policy_desc ms_policy_cache_mrs = {
    .name = "mrs", .kind = MS_KIND_CACHE, .params = mrs_params, .cache = &mrs_ops, .needs_weights = 1, .reads = MS_PART_GATE,
    .summary = "HybriMoE Minus Recent Score: evict the lowest S <- alpha TopP(s) + (1-alpha) S",
};
