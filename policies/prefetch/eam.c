/* eam: MoE-Infinity activation-aware prefetching (seed 004, Algorithm 1;
 * docs/policies.md).
 *
 * State: the EAM of every sequence in flight (policies/lib/eam_common.h) and an
 * EAM collection (EAMC) of at most `capacity` entries, built offline from the
 * training split by seeded k-means (one EAM per training request; on a
 * single-request trace, one per window of `window` iterations, and the live
 * EAM restarts every `window` iterations the same way).  With a batch, the
 * current EAM cur_eam is the sum of the batch's sequences' EAMs.
 *
 * mode=paper, after every layer l's routing (refine=1; refine=0: after layer
 * 0 only): p_eam = argmin Eq. (1) distance to cur_eam over the EAMC; for every
 * later layer f in (l, L) (0-based) and expert e not already cached or in
 * flight: priority (p_eam[f][e] / sum p_eam[f] + 1e-8) (1 - f / L); a
 * resubmission replaces the queued priority (one with an unchanged priority
 * is skipped: the queue would not change).
 * mode=code: MoE-Infinity's 2024 release (350f0dd6).  Its EAM collection is
 * always empty: load_trace ignores the configured path (it accepts only an
 * os.PathLike or an ndarray, and the config turns the path into a str),
 * finish_entry is never called and there is no k-means
 * (memory/expert_tracer.py:33-48, utils/config.py:63-64).  Matching returns
 * all zeros, so the prediction of every layer f >= l is (0 + 1e-8)(1 - (f -
 * l) / (L + 1)) > 0 (memory/expert_predictor.py:16-30), and at every layer
 * l, BEFORE its experts load (models/mixtral.py:65-71), the code:
 *   - replaces the candidate list with every expert of layers l..L-1 (here:
 *     the score board, which cache `eam:mode=code` protects), NAN elsewhere;
 *   - replaces the prefetch queue with the non-resident ones, layer by
 *     layer, ids ascending (Python's stable sorted() over equal rows); the
 *     layer-l entries are dropped again by the first FetchExec of the layer
 *     (task_scheduler.cpp:55-67), so layers l+1..L-1 are queued.
 * Nothing is learnt (no training split), and the match over the configured
 * `capacity` zero entries is still charged.
 * mode=code-head: no prefetching (commented out for Mixtral and DeepSeek in
 * MoE-Infinity HEAD d6178017).
 *
 * Online reconstruction (online=1; paper section 4.3): a finished sequence
 * whose hit rate (its distinct experts per layer found resident at the gate,
 * over all of them) is below `threshold` is collected; after `rebuild_after`
 * of them the EAMC is rebuilt by the same k-means over the current EAMC
 * entries plus the collected EAMs (memory stays bounded by capacity +
 * rebuild_after EAMs), in the background (no modelled cost).
 *
 * Matching cost: (EAMC entries x L x J) x policy_op_s per match, charged
 * asynchronously (it delays only the prefetches the match issues).  The
 * simulator itself matches incrementally in paper mode (eam_matcher:
 * only the rows of cur_eam that changed since the last match are
 * recomputed), with the same result bit for bit. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <math.h>
#include <stdlib.h>

#include "policies/lib/eam_common.h"

typedef struct {
    eam_mode mode;
    int refine, online;
    uint32_t L, J, capacity, rebuild_after, kmeans_iters;
    double threshold;
    eam_tracker tr;
    eam_set eamc, collected;
    eam_matcher matcher; /* paper mode: incremental eam_match */
    gsl_rng *rng;
    double *last_prio; /* [L][J] priority last submitted (paper mode) */
    uint8_t *renew;    /* [L][J] 1 when last_prio != prio: a queued request would get a new priority */
    double *prio;      /* [L][J] the priorities of entry prio_of of the collection at prio_version */
    uint32_t *submit;  /* [L J] scratch: the experts one gate submits, in order */
    uint32_t prio_of;  /* UINT32_MAX: none yet */
    uint64_t prio_version;
    uint64_t rebuilds;
} eam_state;

static void eam_destroy(void *st)
{
    eam_state *s = st;
    if (!s)
        return;
    eam_tracker_free(&s->tr);
    eam_set_free(&s->eamc);
    eam_set_free(&s->collected);
    eam_matcher_free(&s->matcher);
    if (s->rng)
        gsl_rng_free(s->rng);
    free(s->last_prio);
    free(s->renew);
    free(s->prio);
    free(s->submit);
    free(s);
}

static int build_offline_collection(eam_state *s, const ms_policy_env *env, uint32_t window, ms_err *err)
{
    eam_set samples;
    eam_set_init(&samples, s->L, s->J);
    if (eam_collect_training(env, window, &samples, err)) {
        eam_set_free(&samples);
        return -1;
    }
    eam_build_collection(&samples, s->capacity, s->rng, s->kmeans_iters, &s->eamc);
    eam_set_free(&samples);
    return 0;
}

static void *eam_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    eam_state *s = ms_xcalloc(1, sizeof *s);
    s->mode = (eam_mode)eam_mode_parse(ms_param_str(p, "mode"));
    s->refine = (int)ms_param_num(p, "refine");
    s->online = (int)ms_param_num(p, "online");
    s->capacity = (uint32_t)ms_param_num(p, "capacity");
    s->rebuild_after = (uint32_t)ms_param_num(p, "rebuild_after");
    s->kmeans_iters = (uint32_t)ms_param_num(p, "kmeans_iters");
    s->threshold = ms_param_num(p, "threshold");
    s->L = env->meta->L;
    s->J = env->meta->J;
    uint32_t window = eam_window_for(env, (uint32_t)ms_param_num(p, "window"));
    eam_tracker_init(&s->tr, s->L, s->J, window);
    eam_set_init(&s->eamc, s->L, s->J);
    eam_set_init(&s->collected, s->L, s->J);
    eam_matcher_init(&s->matcher, s->L, s->J);
    s->rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(s->rng, (unsigned long)env->seed);
    s->last_prio = ms_xcalloc((size_t)s->L * s->J, sizeof *s->last_prio);
    s->renew = ms_xcalloc((size_t)s->L * s->J, sizeof *s->renew);
    s->prio = ms_xcalloc((size_t)s->L * s->J, sizeof *s->prio);
    s->submit = ms_xcalloc((size_t)s->L * s->J + 1, sizeof *s->submit);
    s->prio_of = UINT32_MAX;
    if (s->mode != EAM_MODE_PAPER)
        return s;
    if (env->split.frac == 0 && !s->online) {
        ms_fail(err, "%s: eam needs EAMs to match: no training split (--train 0) and online=0", env->trace_path);
        eam_destroy(s);
        return NULL;
    }
    if (build_offline_collection(s, env, window, err)) {
        eam_destroy(s);
        return NULL;
    }
    return s;
}

/* ---- online reconstruction ---- */

static void rebuild_collection(eam_state *s)
{
    eam_set pool;
    eam_set_init(&pool, s->L, s->J);
    for (uint32_t i = 0; i < s->eamc.n; i++)
        eam_set_push(&pool, eam_set_at(&s->eamc, i));
    for (uint32_t i = 0; i < s->collected.n; i++)
        eam_set_push(&pool, eam_set_at(&s->collected, i));
    eam_build_collection(&pool, s->capacity, s->rng, s->kmeans_iters, &s->eamc);
    eam_set_free(&pool);
    eam_set_clear(&s->collected);
    s->rebuilds++;
}

static void sequence_done(void *ctx, const eam_seq *q)
{
    eam_state *s = ctx;
    if (!s->online || q->accesses == 0)
        return;
    if ((double)q->hits / (double)q->accesses >= s->threshold)
        return;
    eam_set_push(&s->collected, q->m);
    if (s->collected.n >= s->rebuild_after)
        rebuild_collection(s);
}

/* ---- prefetching ---- */

static void charge_match(const eam_state *s, ms_view *v)
{
    ms_view_charge_async(v, (double)s->eamc.n * s->L * s->J * ms_view_platform(v)->policy_op_s);
}

/* Lines 22-26 for every layer of collection entry i: the priority of each
 * (f, e), kept in s->prio while the match stays on that entry (the matched
 * entry changes far less often than once per layer), with s->renew.  n_token
 * (line 23) is the matcher's row sum of the entry: the same sum, in the same
 * order. */
static const double *entry_priorities(eam_state *s, uint32_t i)
{
    if (s->prio_of == i && s->prio_version == s->eamc.version)
        return s->prio;
    const double *p_eam = eam_set_at(&s->eamc, i);
    for (uint32_t f = 0; f < s->L; f++) {
        double n_token = eam_matcher_row_sum(&s->matcher, i, f), decay = eam_layer_decay(f, s->L);
        for (uint32_t e = 0; e < s->J; e++) {
            size_t x = (size_t)f * s->J + e;
            s->prio[x] = eam_priority_decayed(p_eam[x], n_token, decay); /* lines 25-26 */
            s->renew[x] = s->last_prio[x] != s->prio[x];
        }
    }
    s->prio_of = i;
    s->prio_version = s->eamc.version;
    return s->prio;
}

/* The first x in [x, end) that prefetch_paper submits: not in flight or
 * resident, and not queued with an unchanged priority (renew[x] == 0: the
 * C == of last and prio, NaN unequal, -0 == +0, kept by entry_priorities and
 * the submissions); end when none.  With SSE2
 * sixteen entries a round (nearly every entry is skipped): byte masks of
 * cached, queued and renew (0 or 1 each). */
static size_t next_submitted(const uint8_t *cached, const uint8_t *queued, const uint8_t *renew, size_t x, size_t end)
{
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    for (; x + 16 <= end; x += 16) {
        __m128i free_ = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(cached + x)), zero);
        __m128i unqueued = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(queued + x)), zero);
        __m128i same = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(renew + x)), zero);
        __m128i skip_queued = _mm_andnot_si128(unqueued, same); /* queued, priority unchanged */
        unsigned keep = (unsigned)_mm_movemask_epi8(_mm_andnot_si128(skip_queued, free_));
        if (keep)
            return x + (size_t)__builtin_ctz(keep);
    }
#endif
    for (; x < end; x++)
        if (!(cached[x] | (queued[x] & !renew[x])))
            return x;
    return end;
}

/* Algorithm 1 PREFETCH(m, cur_eam, eamc, cur_l, q), lines 15-27. */
static void prefetch_paper(eam_state *s, ms_view *v, uint32_t l)
{
    /* lines 16-21: eam_match(&s->eamc, cur, EAM_MODE_PAPER, l), computed incrementally */
    const double *prio = entry_priorities(s, eam_matcher_match_gen(&s->matcher, &s->eamc, s->tr.cur, s->tr.row_gen, NULL));
    const uint8_t *cached = ms_view_cached_all(v), *queued = ms_view_queued_all(v); /* live */
    double *last = s->last_prio;
    uint8_t *renew = s->renew;
    uint32_t J = s->J;
    size_t end = (size_t)s->L * J;
    /* line 22: fl in layers[cur_l + 1 : n_layers], each expert e; skipped:
     * experts in flight (or resident), and queued ones whose priority would
     * not change.  The list is made first and then submitted in its order:
     * submitting x changes only queued[x] (set) and cached[] not at all, so
     * the scan past x finds what it would have after each submission. */
    uint32_t n = 0;
    for (size_t x = next_submitted(cached, queued, renew, (size_t)(l + 1) * J, end); x < end;
         x = next_submitted(cached, queued, renew, x + 1, end)) {
        last[x] = prio[x];
        renew[x] = last[x] != prio[x]; /* 0 (a priority is never NaN), as the == test gave */
        s->submit[n++] = (uint32_t)x;
    }
    ms_view_prefetch_list(v, s->submit, n, prio); /* line 27: q.submit(e, p) for each, in order */
}

/* The 2024 code at layer l_now, before its loads: candidates = layers
 * l_now..L-1 with the all-zero match's priorities, queue = the non-resident
 * ones of layers l_now+1..L-1 in (layer, id) order (equal priorities within
 * a layer: the engine's queue serves them in submission order). */
static void prefetch_code(eam_state *s, ms_view *v, uint32_t l_now)
{
    ms_view_charge_async(v, (double)s->capacity * s->L * s->J * ms_view_platform(v)->policy_op_s);
    ms_view_clear_prefetches(v);
    for (uint32_t l = 0; l < s->L; l++)
        for (uint32_t e = 0; e < s->J; e++)
            ms_view_set_score(v, l, e, l < l_now ? NAN : eam_priority_code(0, l, l_now, s->L));
    for (uint32_t l = l_now + 1; l < s->L; l++)
        for (uint32_t e = 0; e < s->J; e++)
            ms_view_prefetch(v, l, e, eam_priority_code(0, l, l_now, s->L));
}

static void eam_layer_start(void *st, ms_view *v, uint32_t l)
{
    eam_state *s = st;
    if (s->mode == EAM_MODE_CODE)
        prefetch_code(s, v, l);
}

static void eam_iteration(void *st, ms_view *v)
{
    eam_state *s = st;
    if (s->mode == EAM_MODE_PAPER)
        eam_tracker_sync(&s->tr, v, sequence_done, s);
}

static void eam_gate(void *st, ms_view *v, uint32_t l)
{
    eam_state *s = st;
    if (s->mode != EAM_MODE_PAPER)
        return;
    eam_tracker_sync(&s->tr, v, sequence_done, s);
    eam_tracker_add_layer(&s->tr, v, l); /* Algorithm 1 lines 5-7 */
    eam_tracker_note_hits(&s->tr, v, l);
    if ((!s->refine && l != 0) || s->eamc.n == 0)
        return;
    charge_match(s, v);
    prefetch_paper(s, v, l); /* line 8 */
}

static const ms_param_spec eam_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code|code-head",
     "paper: Algorithm 1; code: 2024 release (empty collection: every expert of layers l..L-1 listed and "
     "queued by layer, then id, before layer l loads); code-head: no prefetch"},
    {"refine", MS_PARAM_INT, "1", 0, 1, NULL, "1: re-match and resubmit after every layer; 0: one-shot after layer 0"},
    {"capacity", MS_PARAM_INT, "300", 1, 100000, NULL, "EAMC capacity P (k-means clusters)"},
    {"window", MS_PARAM_INT, "32", 1, 1000000, NULL,
     "single-request traces: iterations per EAM sample (training windows and the live EAM)"},
    {"online", MS_PARAM_INT, "1", 0, 1, NULL, "1: rebuild the EAMC from sequences with a low hit rate"},
    {"threshold", MS_PARAM_DOUBLE, "0.5", 0, 1, NULL, "hit rate below which a finished sequence is collected"},
    {"rebuild_after", MS_PARAM_INT, "100", 1, 1000000, NULL, "collected sequences that trigger a rebuild"},
    {"kmeans_iters", MS_PARAM_INT, "100", 0, 100000, NULL, "most Lloyd iterations of the EAMC k-means"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
/* The EAM collection as stored: n entries of L x J counts. */
static double eam_state_bytes(const void *st)
{
    const eam_set *c = &((const eam_state *)st)->eamc;
    return (double)c->n * c->L * c->J * sizeof *c->m;
}

/* Only paper mode learns from the training split: the code's collection is empty. */
static int eam_learns(const ms_params *p)
{
    return eam_mode_parse(ms_param_str(p, "mode")) == EAM_MODE_PAPER;
}

static const ms_prefetch_ops eam_ops = {
    .create = eam_create, .destroy = eam_destroy, .on_iteration = eam_iteration,
    .on_layer_start = eam_layer_start, .on_gate = eam_gate, .state_bytes = eam_state_bytes,
};
const ms_policy_desc ms_policy_prefetch_eam = {
    .name = "eam", .kind = MS_KIND_PREFETCH, .params = eam_params, .prefetch = &eam_ops, .uses_training = 1,
    .learns = eam_learns,
    .summary = "MoE-Infinity: EAM matched against a k-means EAM collection, activation-aware priorities",
};
