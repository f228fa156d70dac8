/* eam: MoE-Infinity activation-aware cache replacement (seed 004,
 * Algorithm 2; POLICIES.md "MoE-Infinity").
 *
 * mode=paper: victim = argmin over evictable cached experts (l, e) of
 *   (cur_eam[l][e] / sum cur_eam[l] + 1e-8) (1 - l / L), l 0-based, ties to
 *   the lowest l * J + e.  cur_eam is tracked here from the gate (on_gate,
 *   before the layer's loads): the sum of the EAMs of the running batch's
 *   sequences (same sequences as prefetch `eam`, incl. `window`).
 * mode=code (2024 code): victim = the MOST visited evictable expert (count
 *   + 1 per hit and per transfer, reset on eviction; ties to the lowest
 *   l * J + e), skipping experts the prefetcher listed on the score board
 *   (prefetch `eam:mode=code` protects its list) unless only listed ones are
 *   evictable.
 * mode=code-head (current code): plain LFU, counts never reset (ties to the
 *   least recently used: the same as `lfu:reset=0`).
 *
 * Transfers are counted when the slot is taken: an expert in flight is never
 * evictable, so counting at completion would pick the same victims. */
#include <math.h>
#include <stdlib.h>

#include "policies/lib/eam_common.h"
#include "policies/lib/expert_list.h"

typedef struct {
    eam_mode mode;
    uint32_t L, J;
    ms_xset members;
    uint64_t *count, *last_use, tick;
    eam_tracker tr;
    double *n_token; /* [L] scratch: sum cur_eam[l] */
} eamc_state;

static void *eamc_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    eamc_state *s = ms_xcalloc(1, sizeof *s);
    s->mode = (eam_mode)eam_mode_parse(ms_param_str(p, "mode"));
    s->L = env->meta->L;
    s->J = env->meta->J;
    uint32_t nx = s->L * s->J;
    ms_xset_init(&s->members, nx);
    s->count = ms_xcalloc(nx, sizeof *s->count);
    s->last_use = ms_xcalloc(nx, sizeof *s->last_use);
    eam_tracker_init(&s->tr, s->L, s->J, eam_window_for(env, (uint32_t)ms_param_num(p, "window")));
    s->n_token = ms_xcalloc(s->L, sizeof *s->n_token);
    return s;
}

static void eamc_destroy(void *st)
{
    eamc_state *s = st;
    ms_xset_free(&s->members);
    free(s->count);
    free(s->last_use);
    eam_tracker_free(&s->tr);
    free(s->n_token);
    free(s);
}

static void eamc_gate(void *st, const ms_view *v, uint32_t l)
{
    eamc_state *s = st;
    if (s->mode != EAM_MODE_PAPER)
        return;
    eam_tracker_sync(&s->tr, v, NULL, NULL);
    eam_tracker_add_layer(&s->tr, v, l);
}

static void eamc_touch(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    eamc_state *s = st;
    uint32_t x = l * s->J + e;
    ms_xset_add(&s->members, x);
    s->count[x]++;
    s->last_use[x] = ++s->tick;
}

static void eamc_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    eamc_state *s = st;
    uint32_t x = l * s->J + e;
    ms_xset_remove(&s->members, x);
    if (s->mode == EAM_MODE_CODE)
        s->count[x] = 0;
}

/* Algorithm 2 lines 5-10 over the evictable experts. */
static uint32_t victim_paper(const eamc_state *s, const ms_view *v)
{
    for (uint32_t l = 0; l < s->L; l++) { /* line 6: n_token = SUM(cur_eam[e.layer_idx]) */
        s->n_token[l] = 0;
        for (uint32_t e = 0; e < s->J; e++)
            s->n_token[l] += s->tr.cur[(size_t)l * s->J + e];
    }
    uint32_t best = MS_NIL;
    double min_p = INFINITY;
    for (uint32_t i = 0; i < s->members.n; i++) {
        uint32_t x = s->members.items[i], l = x / s->J;
        if (!ms_view_evictable(v, l, x % s->J))
            continue;
        double p = eam_priority_paper(s->tr.cur[x], s->n_token[l], l, s->L); /* lines 7-8 */
        if (p < min_p || (p == min_p && x < best)) {
            min_p = p;
            best = x;
        }
    }
    return best;
}

static int protected_by_prefetch(const ms_view *v, uint32_t x, uint32_t J)
{
    return !isnan(ms_view_score(v, x / J, x % J));
}

static uint32_t victim_most_visited(const eamc_state *s, const ms_view *v, int allow_protected)
{
    uint32_t best = MS_NIL;
    for (uint32_t i = 0; i < s->members.n; i++) {
        uint32_t x = s->members.items[i];
        if (!ms_view_evictable(v, x / s->J, x % s->J) || (!allow_protected && protected_by_prefetch(v, x, s->J)))
            continue;
        if (best == MS_NIL || s->count[x] > s->count[best] || (s->count[x] == s->count[best] && x < best))
            best = x;
    }
    return best;
}

static uint32_t victim_lfu(const eamc_state *s, const ms_view *v)
{
    uint32_t best = MS_NIL;
    for (uint32_t i = 0; i < s->members.n; i++) {
        uint32_t x = s->members.items[i];
        if (!ms_view_evictable(v, x / s->J, x % s->J))
            continue;
        if (best == MS_NIL || s->count[x] < s->count[best] ||
            (s->count[x] == s->count[best] && s->last_use[x] < s->last_use[best]))
            best = x;
    }
    return best;
}

static int eamc_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    eamc_state *s = st;
    uint32_t best;
    if (s->mode == EAM_MODE_PAPER)
        best = victim_paper(s, v);
    else if (s->mode == EAM_MODE_CODE) {
        best = victim_most_visited(s, v, 0);
        if (best == MS_NIL)
            best = victim_most_visited(s, v, 1);
    } else
        best = victim_lfu(s, v);
    if (best == MS_NIL)
        return 0;
    *l = best / s->J;
    *e = best % s->J;
    return 1;
}

static const ms_param_spec eamc_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code|code-head",
     "paper: Algorithm 2; code: most visited first, counts reset on eviction; code-head: LFU, counts kept"},
    {"window", MS_PARAM_INT, "32", 1, 1000000, NULL,
     "single-request traces: iterations per live EAM (as prefetch eam's window)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops eamc_ops = {
    .create = eamc_create, .destroy = eamc_destroy, .on_gate = eamc_gate, .on_insert = eamc_touch,
    .on_access = eamc_touch, .on_evict = eamc_evict, .victim = eamc_victim,
};
const ms_policy_desc ms_policy_cache_eam = {
    .name = "eam", .kind = MS_KIND_CACHE, .params = eamc_params, .cache = &eamc_ops,
    .summary = "MoE-Infinity: evict the lowest current-EAM activation ratio, decayed by layer (Algorithm 2)",
};
