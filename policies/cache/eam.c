/* eam: MoE-Infinity activation-aware cache replacement (seed 004,
 * Algorithm 2; docs/policies.md).
 *
 * mode=paper: victim = argmin over evictable cached experts (l, e) of
 *   (cur_eam[l][e] / sum cur_eam[l] + 1e-8) (1 - l / L), l 0-based, ties to
 *   the lowest l * J + e.  cur_eam is tracked here from the gate (on_gate,
 *   before the layer's loads): the sum of the EAMs of the running batch's
 *   sequences (same sequences as prefetch `eam`, incl. `window`).
 * mode=code: MoE-Infinity's 2024 release (350f0dd6; docs/policies.md has
 *   the table of what the code does and the lines it rests on):
 *   - a step acquires its experts one at a time by ascending id
 *     (MS_ORDER_ASCENDING, lookup_at_turn: hit or miss decided at each
 *     expert's turn) and protects only the candidate list (MS_PROTECT_LIST):
 *     the experts the prefetcher listed on the score board (prefetch
 *     `eam:mode=code` lists every expert of layers l..L-1 before layer l's
 *     loads), unless flagged overflow, and copies in flight; so a resident
 *     expert of the step whose turn has not come can be evicted by an
 *     earlier load of the step, and is then a miss at its turn;
 *   - incache_visit_count: +1 per hit and +1 per copy the engine is about
 *     to make (a demand miss, or a prefetch when its copy starts, even one
 *     then dropped: the GPU thread's pickup), reset on eviction;
 *   - victim: the cached experts in (layer, id) order, sorted by count
 *     DESCENDING with libstdc++'s std::sort (ties in introsort order), the
 *     first one not protected; one sort per make-room;
 *   - a demand load with no victim is loaded over the budget and its expert
 *     flagged overflow for good (no longer protected by the list); a
 *     prefetch with no victim is dropped.
 * mode=code-head: MoE-Infinity HEAD (d6178017, ExpertDispatcher):
 *   - ascending id; the step's experts protected (the code protects the
 *     ones enqueued and not finished: which depends on thread timing);
 *   - count +1 per activation (hit or miss), never reset;
 *   - victim: the lowest count, scanned expert-major with a strict `<`
 *     (lowest expert id, then lowest layer);
 *   - the free-space bug: the free space starts at the budget and drops by
 *     one expert on every activation (hits too), rising only on eviction; a
 *     miss evicts exactly one expert when it is below one expert, else none.
 *     So the cache stops growing once the first C activations are done.
 *   - no victim: the code crashes (assert / null dereference); here the run
 *     ends with the engine's one-line "found no victim" error. */
#include <math.h>
#include <stdlib.h>

#include "policies/lib/eam_common.h"
#include "policies/lib/expert_list.h"
#include "policies/lib/sorted_victim.h"

typedef struct {
    eam_mode mode;
    uint32_t L, J;
    uint64_t *count, *last_use, tick;
    eam_tracker tr;
    eam_victims order; /* paper: the members in Algorithm 2's key order */
    /* code */
    uint8_t *overflow, *member; /* [L*J] sticky is_overflow; cached */
    ms_sorted_victim sorted;
    /* code-head: the dispatcher's free bytes (cache_sizes_) */
    double free_bytes;
    int free_init, must_evict;
} eamc_state;

static void *eamc_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    eamc_state *s = ms_xcalloc(1, sizeof *s);
    s->mode = (eam_mode)eam_mode_parse(ms_param_str(p, "mode"));
    s->L = env->meta->L;
    s->J = env->meta->J;
    uint32_t nx = s->L * s->J;
    s->count = ms_xcalloc(nx, sizeof *s->count);
    s->last_use = ms_xcalloc(nx, sizeof *s->last_use);
    eam_tracker_init(&s->tr, s->L, s->J, eam_window_for(env, (uint32_t)ms_param_num(p, "window")));
    eam_victims_init(&s->order, &s->tr);
    s->overflow = ms_xcalloc(nx, 1);
    s->member = ms_xcalloc(nx, 1);
    ms_sorted_victim_init(&s->sorted, s->L, s->J);
    return s;
}

static void eamc_destroy(void *st)
{
    eamc_state *s = st;
    free(s->count);
    free(s->last_use);
    eam_tracker_free(&s->tr);
    eam_victims_free(&s->order);
    free(s->overflow);
    free(s->member);
    ms_sorted_victim_free(&s->sorted);
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

/* code-head: the dispatcher's free space, one expert less per activation
 * (expert_dispatcher.cpp:227-266); a miss must evict when it is below one
 * expert. */
static void head_pickup(eamc_state *s, const ms_view *v, uint32_t l, int miss)
{
    double size = ms_view_expert_bytes(v, l);
    if (!s->free_init) {
        s->free_bytes = ms_view_capacity_experts(v, l) * size;
        s->free_init = 1;
    }
    if (miss && s->free_bytes < size)
        s->must_evict = 1;
    s->free_bytes -= size;
}

static void eamc_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    eamc_state *s = st;
    uint32_t x = l * s->J + e;
    s->member[x] = 1;
    ms_sorted_victim_dirty(&s->sorted);
    if (s->mode == EAM_MODE_PAPER) {
        s->count[x]++; /* code modes count the copy in admit() */
        eam_victims_add(&s->order, x);
    }
    s->last_use[x] = ++s->tick;
}

static void eamc_access(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    eamc_state *s = st;
    uint32_t x = l * s->J + e;
    ms_sorted_victim_dirty(&s->sorted);
    s->count[x]++;
    s->last_use[x] = ++s->tick;
    if (s->mode == EAM_MODE_CODE_HEAD)
        head_pickup(s, v, l, 0);
}

/* Code modes: the GPU thread picks up a copy (2024: demand or prefetch,
 * task_scheduler.cpp:467; HEAD: a miss, expert_dispatcher.cpp:264). */
static int eamc_admit(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    eamc_state *s = st;
    if (s->mode == EAM_MODE_PAPER)
        return 1;
    ms_sorted_victim_round(&s->sorted); /* the incoming expert is not resident: no key changes */
    s->count[l * s->J + e]++;
    if (s->mode == EAM_MODE_CODE_HEAD)
        head_pickup(s, v, l, 1);
    return 1;
}

static void eamc_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    eamc_state *s = st;
    uint32_t x = l * s->J + e;
    s->member[x] = 0;
    eam_victims_remove(&s->order, x);
    ms_sorted_victim_dirty(&s->sorted);
    if (s->mode == EAM_MODE_CODE)
        s->count[x] = 0;
    if (s->mode == EAM_MODE_CODE_HEAD) {
        s->free_bytes += ms_view_expert_bytes(v, l);
        s->must_evict = 0;
    }
}

/* Algorithm 2 lines 5-10: the evictable expert of the lowest key (ties to
 * the lowest l J + e), from the members kept in key order. */
static uint32_t victim_paper(eamc_state *s, const ms_view *v)
{
    return eam_victims_first_evictable(&s->order, v);
}

/* ---- code: the 2024 release ---- */

static int code_member(const void *ctx, uint32_t x) { return ((const eamc_state *)ctx)->member[x]; }
static uint64_t code_count(const void *ctx, uint32_t x) { return ((const eamc_state *)ctx)->count[x]; }

/* MS_PROTECT_LIST: listed by the prefetcher and not overflowed. */
static int eamc_protects(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    const eamc_state *s = st;
    return s->mode == EAM_MODE_CODE && !isnan(ms_view_score(v, l, e)) && !s->overflow[l * s->J + e];
}

/* AcquireTensor: no victim for a demand -> loaded anyway, is_overflow = true. */
static int eamc_overflow(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    eamc_state *s = st;
    if (s->mode != EAM_MODE_CODE)
        return 0;
    s->overflow[l * s->J + e] = 1;
    return 1;
}

/* ---- code-head ---- */

/* expert-major scan, strict <: the lowest count, then the lowest expert id,
 * then the lowest layer */
static uint32_t victim_head(const eamc_state *s, const ms_view *v)
{
    uint32_t best = MS_NIL;
    for (uint32_t e = 0; e < s->J; e++)
        for (uint32_t l = 0; l < s->L; l++) {
            uint32_t x = l * s->J + e;
            if (s->member[x] && (best == MS_NIL || s->count[x] < s->count[best]) && ms_view_evictable(v, l, e))
                best = x;
        }
    return best;
}

static int eamc_full(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v, (void)l, (void)e;
    const eamc_state *s = st;
    return s->mode == EAM_MODE_CODE_HEAD && s->must_evict;
}

static int eamc_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    eamc_state *s = st;
    if (s->mode == EAM_MODE_CODE)
        return ms_sorted_victim_next(&s->sorted, v, 1, code_member, code_count, NULL, s, l, e);
    uint32_t best = s->mode == EAM_MODE_PAPER ? victim_paper(s, v) : victim_head(s, v);
    if (best == MS_NIL)
        return 0;
    *l = best / s->J;
    *e = best % s->J;
    return 1;
}

static void eamc_step_rules(const void *st, ms_step_rules *out)
{
    const eamc_state *s = st;
    if (s->mode == EAM_MODE_PAPER)
        return;
    out->order = MS_ORDER_ASCENDING;
    if (s->mode == EAM_MODE_CODE) {
        out->protect = MS_PROTECT_LIST;
        out->lookup_at_turn = 1; /* AcquireTensor, one expert at a time */
    }
}

static const ms_param_spec eamc_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code|code-head",
     "paper: Algorithm 2; code: 2024 release (most visited first by std::sort, counts reset on eviction, list "
     "protected, overflow); code-head: HEAD (lowest count expert-major, counts kept, free-space bug)"},
    {"window", MS_PARAM_INT, "32", 1, 1000000, NULL,
     "single-request traces: iterations per live EAM (as prefetch eam's window)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops eamc_ops = {
    .create = eamc_create, .destroy = eamc_destroy, .on_gate = eamc_gate, .admit = eamc_admit,
    .on_insert = eamc_insert, .on_access = eamc_access, .on_evict = eamc_evict, .victim = eamc_victim,
    .full = eamc_full, .step_rules = eamc_step_rules, .protects = eamc_protects, .overflow = eamc_overflow,
};
const ms_policy_desc ms_policy_cache_eam = {
    .name = "eam", .kind = MS_KIND_CACHE, .params = eamc_params, .cache = &eamc_ops,
    .summary = "MoE-Infinity: evict the lowest current-EAM activation ratio, decayed by layer (Algorithm 2)",
};
