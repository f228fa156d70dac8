/* fmoe: fMoE's expert-map prefetcher (seeds 000, 001; docs/policies.md).
 *
 * Expert Map Store (policies/lib/fmoe_store.h) of capacity C (`capacity`),
 * filled offline from the training split (`store=offline`, --train auto =
 * 0.7) or online from every finished iteration (`store=online`).
 *
 * Per iteration:
 *  - on_iteration: semantic search over the stored per-iteration embeddings;
 *    the best map guides the first d layers (d = --distance).
 *  - on_gate(l): layer l's distribution joins the trajectory (incremental
 *    cosine, O(C x J) per layer); the best map guides layer l + d (paper).
 *    Code mode does the same in before_loads(l), and guides every layer in
 *    [l + 1 + d, L): FineMoE's traj_prefetch runs after the gate and before
 *    the layer's experts load (modeling_qwen2_moe.py:862-887), so its list
 *    protects the layer's own loads.  Its trajectory is the LAST token row's
 *    distribution (the current token), not the batch mean.
 *  - on_iteration_end: online mode adds the iteration's map.
 * The searched probability of every guided expert is published on the score
 * board (ms_view_set_score) for the `fmoe` cache.  In code mode each call
 * first sets the whole board to NAN, so the board holds exactly the current
 * candidate list (FineMoE's cache never evicts a listed expert: cache
 * `fmoe:protect=list`).
 *
 * Batch > 1: the iteration's map is the batch mean of each layer's gate
 * distribution (ms_view_gate_mean) and its embedding the batch mean
 * (ms_view_embedding); one search serves the whole batch (the paper searches
 * per prompt x in [B]; with one map per batch the union would be prefetched).
 *
 * Embeddings: `semantic=auto` uses them when the trace has them.  Traces
 * imported from route-csv have none, so there fMoE is trajectory-only and the
 * first d layers of every iteration get no guidance.
 *
 * "On a miss, pause queued prefetches until the on-demand load is done"
 * (seed 000, "On-demand expert loading") holds by the engine's contract:
 * on-demand loads are queued ahead of every prefetch and a copy in flight
 * finishes, so no prefetch starts while a miss is being loaded.
 *
 * Matching cost: (entries compared x vector length) x policy_op_s of the
 * platform, charged asynchronously (`async=1`: delays only the prefetches
 * this hook issues after it, seed 000 "Asynchronous expert map matching") or
 * synchronously (`async=0`).
 *
 * Ablations of fMoE Fig. 12a (`track`): `hitcount` = the store holds
 * request-level expert activation counts (MoE-Infinity's EAM: routed tokens
 * per (layer, expert) over the request so far) matched by the same
 * incremental cosine, top K prefetched; `traj` = trajectory search only, top
 * K; `traj+sem` = plus semantic search, top K; `full` = plus the dynamic
 * threshold delta (the default).  No separate `select` switch: only `full`
 * uses delta, as in the figure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/fmoe_store.h"
#include "policies/lib/gate.h"

enum { TRACK_FULL = 0, TRACK_TRAJ_SEM, TRACK_TRAJ, TRACK_HITCOUNT };

typedef struct {
    fmoe_store store;
    uint32_t L, J, K, d, D;
    int code, online, async, use_sem, track;
    ms_topk_fill fill;
    double op_s;       /* platform policy_op_s */
    float *cur;        /* [L][J] this iteration's map; hitcount: the request's counts */
    float *emb;        /* [D] */
    float *row;        /* [J] scratch: a guided layer's row (hitcount: normalised) */
    uint32_t *order;   /* [J] scratch: a guided row's experts, best first */
    fmoe_ranked *rank; /* [J] scratch of the ordering heap */
    uint64_t cur_req;  /* hitcount: request whose counts are in cur */
    ms_policy_stats sim; /* best scores of the searches that found a map (stats hook) */
    /* offline fill */
    const ms_policy_env *env;
} fmoe_pf;

static int parse_track(const char *s)
{
    if (!strcmp(s, "hitcount"))
        return TRACK_HITCOUNT;
    if (!strcmp(s, "traj"))
        return TRACK_TRAJ;
    if (!strcmp(s, "traj+sem"))
        return TRACK_TRAJ_SEM;
    return TRACK_FULL;
}

static void pf_free(fmoe_pf *s)
{
    fmoe_store_free(&s->store);
    free(s->cur);
    free(s->emb);
    free(s->row);
    free(s->order);
    free(s->rank);
    free(s);
}

/* ---- offline fill from the training split ---- */

static void add_counts(fmoe_pf *s, const ms_trace_meta *m, const ms_request *r, uint32_t it)
{
    const ms_iteration *iter = &r->iters[it];
    for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++)
        for (uint32_t l = 0; l < m->L; l++)
            for (uint32_t k = 0; k < m->K; k++) {
                int32_t e = r->topk_ids[ms_topk_index(m, row, l) + k];
                if (e >= 0)
                    s->cur[(size_t)l * s->J + (uint32_t)e] += 1.0f;
            }
}

static int cur_nonzero(const fmoe_pf *s)
{
    for (size_t i = 0; i < (size_t)s->L * s->J; i++)
        if (s->cur[i] != 0)
            return 1;
    return 0;
}

/* hitcount: flushes the finished request's counts into the store. */
static void flush_request(fmoe_pf *s)
{
    if (cur_nonzero(s))
        fmoe_store_add(&s->store, NULL, s->cur);
    memset(s->cur, 0, (size_t)s->L * s->J * sizeof *s->cur);
}

static int train_iteration(void *ctx, uint64_t req_index, const ms_request *r, uint32_t it, ms_err *err)
{
    (void)err;
    fmoe_pf *s = ctx;
    const ms_trace_meta *m = s->env->meta;
    if (s->track == TRACK_HITCOUNT) {
        if (req_index != s->cur_req)
            flush_request(s);
        s->cur_req = req_index;
        add_counts(s, m, r, it);
        return 0;
    }
    /* map_i = {P_1 .. P_L} of one iteration (seed 000 "Expert Maps"), mean over its rows */
    for (uint32_t l = 0; l < s->L; l++) {
        float *P = s->cur + (size_t)l * s->J;
        memset(P, 0, s->J * sizeof *P);
        uint32_t rows = ms_gate_add_iteration(m, r, it, l, s->env->topk_fill, P);
        for (uint32_t j = 0; rows && j < s->J; j++)
            P[j] /= (float)rows;
    }
    if (s->D)
        memcpy(s->emb, r->embedding + (size_t)it * s->D, s->D * sizeof *s->emb);
    fmoe_store_add(&s->store, s->emb, s->cur);
    return 0;
}

/* The parts the training pass reads besides the top-k ids: the gate's
 * probabilities alone on a full-prob trace (ms_gate_add_iteration does not
 * read its top-k weights then), the embeddings only for the semantic search,
 * nothing for hitcount (it counts the ids). */
static unsigned train_parts(const fmoe_pf *s, const ms_trace_meta *m)
{
    if (s->track == TRACK_HITCOUNT)
        return 0;
    unsigned p = m->probs_kind == MS_PROBS_FULL ? MS_PART_PROBS : MS_PART_GATE;
    return s->D ? p | MS_PART_EMBED : p;
}

static int fill_offline(fmoe_pf *s, const ms_policy_env *env, ms_err *err)
{
    if (env->split.frac == 0)
        return ms_fail(err, "fmoe: store=offline needs a training split of trace %s (--train > 0), "
                            "or use store=online", env->trace_path);
    s->env = env;
    s->cur_req = UINT64_MAX;
    int rc = ms_train_foreach(env, train_parts(s, env->meta), train_iteration, s, err);
    if (rc == 0 && s->track == TRACK_HITCOUNT)
        flush_request(s);
    memset(s->cur, 0, (size_t)s->L * s->J * sizeof *s->cur);
    s->cur_req = UINT64_MAX;
    s->env = NULL;
    return rc ? -1 : 0;
}

/* ---- create ---- */

static int resolve_semantic(fmoe_pf *s, const char *sem, const ms_policy_env *env, ms_err *err)
{
    int wants = s->track == TRACK_FULL || s->track == TRACK_TRAJ_SEM;
    if (!strcmp(sem, "on") && !wants)
        return ms_fail(err, "fmoe: semantic=on conflicts with track=%s (no semantic search there)",
                       s->track == TRACK_TRAJ ? "traj" : "hitcount");
    if (!strcmp(sem, "on") && env->meta->embed_dim == 0)
        return ms_fail(err, "fmoe: semantic=on but trace %s has no semantic embeddings", env->trace_path);
    s->use_sem = wants && strcmp(sem, "off") != 0 && env->meta->embed_dim > 0;
    return 0;
}

static void *fmoe_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    if (env->distance == 0) {
        ms_fail(err, "fmoe: --distance must be >= 1 (the layers a prefetch is issued ahead)");
        return NULL;
    }
    fmoe_pf *s = ms_xcalloc(1, sizeof *s);
    s->L = env->meta->L;
    s->J = env->meta->J;
    s->K = env->meta->K < s->J ? env->meta->K : s->J;
    s->d = env->distance;
    s->code = !strcmp(ms_param_str(p, "mode"), "code");
    s->fill = env->topk_fill;
    s->online = !strcmp(ms_param_str(p, "store"), "online");
    s->async = (int)ms_param_num(p, "async");
    s->track = parse_track(ms_param_str(p, "track"));
    s->op_s = env->platform ? env->platform->policy_op_s : 0;
    s->cur_req = UINT64_MAX;
    if (resolve_semantic(s, ms_param_str(p, "semantic"), env, err)) {
        free(s);
        return NULL;
    }
    s->D = s->use_sem ? env->meta->embed_dim : 0;
    if (!fmoe_store_fits((uint32_t)ms_param_num(p, "capacity"), s->L, s->J)) {
        ms_fail(err, "fmoe: capacity=%u maps of %u layers x %u experts is beyond the map store's size (2^32 columns)",
                (uint32_t)ms_param_num(p, "capacity"), s->L, s->J);
        free(s);
        return NULL;
    }
    fmoe_store_init(&s->store, (uint32_t)ms_param_num(p, "capacity"), s->L, s->J, s->D,
                    s->d < s->L ? s->d : s->L);
    s->cur = ms_xcalloc((size_t)s->L * s->J, sizeof *s->cur);
    s->emb = ms_xcalloc(s->D ? s->D : 1, sizeof *s->emb);
    s->row = ms_xcalloc(s->J, sizeof *s->row);
    s->order = ms_xcalloc(s->J, sizeof *s->order);
    s->rank = ms_xcalloc(s->J, sizeof *s->rank);
    if (!s->online && fill_offline(s, env, err)) {
        pf_free(s);
        return NULL;
    }
    return s;
}

static void fmoe_destroy(void *st)
{
    pf_free(st);
}

/* ---- guidance ---- */

static void charge(fmoe_pf *s, ms_view *v, double ops)
{
    double t = ops * s->op_s;
    if (s->async)
        ms_view_charge_async(v, t);
    else
        ms_view_charge_sync(v, t);
}

/* Layer t's row of map y, as a distribution (hitcount counts are normalised). */
static const float *guided_row(fmoe_pf *s, int y, uint32_t t)
{
    float *m = s->row;
    fmoe_store_get_row(&s->store, (uint32_t)y, t, m);
    if (s->track != TRACK_HITCOUNT)
        return m;
    double sum = 0;
    for (uint32_t j = 0; j < s->J; j++)
        sum += m[j];
    for (uint32_t j = 0; j < s->J; j++) /* in place: each m[j] is read before it is overwritten */
        m[j] = sum > 0 ? (float)(m[j] / sum) : 0.0f;
    return m;
}

/* Orders row P's experts, best first, into s->order (code: all J, as its
 * guidance lists them all; paper: only the ones selected) and returns how
 * many are selected. */
static uint32_t order_selected(fmoe_pf *s, const float *P, double score)
{
    if (s->code) {
        fmoe_top_desc(P, s->J, s->J, s->order, s->rank);
        return s->track != TRACK_FULL ? s->K : fmoe_select_code(P, s->order, s->J, fmoe_delta(score), s->K);
    }
    if (s->track != TRACK_FULL) { /* ablations without delta: the top K */
        fmoe_top_desc(P, s->J, s->K, s->order, s->rank);
        return s->K;
    }
    return fmoe_select_paper_top(P, s->J, fmoe_delta(score), s->K, s->order, s->rank);
}

/* Paper: E_prefetch of layer t with PRI = p / (t - l_now); every expert's
 * searched probability goes to the score board (the cache's p). */
static void guide_paper(fmoe_pf *s, ms_view *v, const float *P, uint32_t n, uint32_t t, int64_t l_now)
{
    for (uint32_t j = 0; j < s->J; j++)
        ms_view_set_score(v, t, j, P[j]);
    for (uint32_t i = 0; i < n; i++)
        ms_view_prefetch(v, t, s->order[i], fmoe_priority_paper(P[s->order[i]], t, l_now));
}

/* Code (FineMoE): the selected experts keep p, the others 0, times the
 * layer decay 1 - (t - start) / (end + 1) over the band [start, end), plus
 * 1e-6 for every expert of the band, so all J are queued (delta only orders
 * them).  Every expert of the band is a candidate: its searched probability
 * P[e] (selected or not, cached or not) goes to the board, where the `fmoe`
 * cache reads p and, with protect=list, the candidate list. */
static void guide_code(fmoe_pf *s, ms_view *v, const float *P, uint32_t n, uint32_t t, uint32_t start,
                       uint32_t end)
{
    for (uint32_t i = 0; i < s->J; i++) {
        uint32_t e = s->order[i];
        ms_view_set_score(v, t, e, P[e]);
        ms_view_prefetch(v, t, e, fmoe_priority_code(i < n ? P[e] : 0.0, t, start, end) + 1e-6);
    }
}

/* Guides layers [t0, t1] with map y searched at similarity `score`. */
static void guide(fmoe_pf *s, ms_view *v, int y, double score, uint32_t t0, uint32_t t1, int64_t l_now)
{
    if (s->code) {
        ms_view_clear_prefetches(v); /* each call replaces the queue ... */
        for (uint32_t l = 0; l < s->L; l++) /* ... and the candidate list */
            for (uint32_t e = 0; e < s->J; e++)
                ms_view_set_score(v, l, e, NAN);
    }
    for (uint32_t t = t0; t <= t1; t++) {
        const float *P = guided_row(s, y, t);
        uint32_t n = order_selected(s, P, score);
        if (s->code)
            guide_code(s, v, P, n, t, t0, t1 + 1);
        else
            guide_paper(s, v, P, n, t, l_now);
    }
}

/* ---- hooks ---- */

/* hitcount: the running counts belong to the batch's first request; a new
 * request starts a new matrix (online: the finished one joins the store). */
static void start_request_counts(fmoe_pf *s, ms_view *v)
{
    uint64_t req = ms_view_item_index(v, 0);
    if (req == s->cur_req)
        return;
    if (s->online && s->cur_req != UINT64_MAX) {
        charge(s, v, (double)s->store.n * s->L * s->J);
        flush_request(s);
    }
    memset(s->cur, 0, (size_t)s->L * s->J * sizeof *s->cur);
    s->cur_req = req;
}

static void fmoe_iteration(void *st, ms_view *v)
{
    fmoe_pf *s = st;
    fmoe_traj_reset(&s->store);
    if (s->track == TRACK_HITCOUNT) {
        start_request_counts(s, v);
        return;
    }
    if (!s->use_sem || !ms_view_embedding(v, s->emb))
        return;
    /* semantic search: score_sem(y) = cos(e_new, e_y), y* = argmax (Eq. score-sem) */
    double score;
    charge(s, v, (double)s->store.n * s->D);
    int y = fmoe_semantic_search(&s->store, s->emb, &score);
    uint32_t last = (s->d < s->L ? s->d : s->L) - 1; /* layers [0, d) */
    if (y < 0)
        return;
    s->sim.sem_n++;
    s->sim.sem_sum += score;
    guide(s, v, y, score, 0, last, -1);
}

/* Code: the last token row of the batch (in prefill: the last prompt token). */
static void last_row_gate(const fmoe_pf *s, const ms_view *v, uint32_t l, float *P)
{
    uint32_t n = ms_view_items(v);
    memset(P, 0, s->J * sizeof *P);
    if (n == 0)
        return;
    const ms_request *r = ms_view_item_request(v, n - 1);
    const ms_iteration *it = &r->iters[ms_view_item_iter(v, n - 1)];
    if (it->n_rows)
        ms_gate_row(ms_view_meta(v), r, it->row0 + it->n_rows - 1, l, s->fill, P);
}

static void observe_layer(fmoe_pf *s, ms_view *v, uint32_t l)
{
    float *P = s->cur + (size_t)l * s->J;
    if (s->track == TRACK_HITCOUNT) {
        uint32_t n;
        const ms_act *acts = ms_view_activated(v, l, &n);
        for (uint32_t i = 0; i < n; i++)
            P[acts[i].expert] += (float)acts[i].tokens;
    } else if (s->code) {
        last_row_gate(s, v, l, P);
    } else {
        ms_view_gate_mean(v, l, P);
    }
    fmoe_traj_observe(&s->store, l, P);
}

static void trajectory_step(fmoe_pf *s, ms_view *v, uint32_t l)
{
    observe_layer(s, v, l);
    /* trajectory search: score(y) = cos(concat P_1..P_l, concat m_y[1..l]) (Eq. score-map) */
    charge(s, v, (double)s->store.n * s->J);
    double score;
    int y = fmoe_traj_best(&s->store, &score);
    if (y < 0)
        return;
    s->sim.traj_n++;
    s->sim.traj_sum += score;
    if (s->code) {
        if (l + 1 + s->d < s->L)
            guide(s, v, y, score, l + 1 + s->d, s->L - 1, l);
    } else if (l + s->d < s->L) {
        guide(s, v, y, score, l + s->d, l + s->d, l); /* target layer l + d */
    }
}

static void fmoe_gate(void *st, ms_view *v, uint32_t l)
{
    fmoe_pf *s = st;
    if (!s->code)
        trajectory_step(s, v, l);
}

static void fmoe_before_loads(void *st, ms_view *v, uint32_t l)
{
    fmoe_pf *s = st;
    if (s->code)
        trajectory_step(s, v, l);
}

static void fmoe_iteration_end(void *st, ms_view *v)
{
    fmoe_pf *s = st;
    if (!s->online || s->track == TRACK_HITCOUNT)
        return;
    if (s->use_sem && !ms_view_embedding(v, s->emb))
        memset(s->emb, 0, s->D * sizeof *s->emb);
    /* the store's RDY deduplication compares whole maps and embeddings */
    if (s->store.n == s->store.cap)
        charge(s, v, (double)s->store.n * ((double)s->D + (double)s->L * s->J));
    fmoe_store_add(&s->store, s->emb, s->cur);
}

static const ms_param_spec fmoe_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code", "paper: seeds 000/001; code: FineMoE's public code"},
    {"store", MS_PARAM_ENUM, "offline", 0, 0, "offline|online",
     "offline: filled from the training split (--train); online: starts empty, adds every finished iteration"},
    {"capacity", MS_PARAM_INT, "1000", 1, 1000000, NULL, "Expert Map Store capacity C (maps)"},
    {"track", MS_PARAM_ENUM, "full", 0, 0, "full|traj+sem|traj|hitcount",
     "fMoE Fig. 12a ablation: full = T+S+delta; traj+sem and traj prefetch the top K; hitcount = request counts"},
    {"semantic", MS_PARAM_ENUM, "auto", 0, 0, "auto|on|off",
     "semantic search: auto = when the trace has embeddings; on = required; off = never"},
    {"async", MS_PARAM_INT, "1", 0, 1, NULL,
     "1: the matching cost delays only the prefetches it issues; 0: it delays compute"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static double fmoe_state_bytes(const void *st)
{
    return (double)fmoe_store_bytes(&((const fmoe_pf *)st)->store);
}

/* Similarity totals (fMoE Fig. 8, 14a): one semantic score per iteration
 * with embeddings, one trajectory score per layer (hitcount: the count-matrix
 * cosine), each the best match's cosine. */
static void fmoe_stats(const void *st, ms_policy_stats *out)
{
    *out = ((const fmoe_pf *)st)->sim;
}

/* Only the offline store learns from the training split; an online store
 * starts empty, so --train auto replays the whole trace. */
static int fmoe_learns(const ms_params *p)
{
    return !strcmp(ms_param_str(p, "store"), "offline");
}

static const ms_prefetch_ops fmoe_ops = {
    .create = fmoe_create, .destroy = fmoe_destroy, .on_iteration = fmoe_iteration,
    .on_gate = fmoe_gate, .before_loads = fmoe_before_loads, .on_iteration_end = fmoe_iteration_end,
    .state_bytes = fmoe_state_bytes,
    .stats = fmoe_stats,
};
const ms_policy_desc ms_policy_prefetch_fmoe = {
    .name = "fmoe", .kind = MS_KIND_PREFETCH, .uses_distance = 1, .params = fmoe_params, .prefetch = &fmoe_ops,
    .uses_training = 1, .learns = fmoe_learns,
    .needs_weights = 1,
    .reads = MS_PART_GATE | MS_PART_EMBED,
    .summary = "fMoE: expert maps searched by semantics and trajectory, similarity-aware threshold",
};
