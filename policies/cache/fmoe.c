/* fmoe: fMoE's expert cache (seed 000 "Expert Caching and Eviction";
 * POLICIES.md "fMoE").  Meant to run with `--prefetch fmoe`, which publishes
 * the latest searched probability p of every guided expert on the score
 * board; with another prefetcher every p is `eps` and this is LFU.
 *
 * paper: PRI^evict = 1 / (p_{l,j} freq_{l,j}); the victim is the evictable
 * expert with the largest PRI, i.e. the smallest p x freq, p read from the
 * board when the victim is chosen (eps when never set), freq = cache visits
 * (insertions and hits), kept across evictions (the paper counts visits and
 * says nothing of a reset).
 * code (FineMoE): key = integer truncation of p x visit count, smallest
 * first, with p the value published when the expert was queued (taken at its
 * insertion) and p and count reset on eviction.
 * Ties: the least recently used. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../expert_list.h"
#include "../fmoe_store.h"
#include "../policy.h"

typedef struct {
    ms_xset members;
    double *count, *p_code;
    uint64_t *last_use;
    uint64_t tick;
    uint32_t J;
    int code;
    double eps;
} fmoe_cache;

static void *fmoe_cache_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    uint32_t nx = env->meta->L * env->meta->J;
    fmoe_cache *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->code = !strcmp(ms_param_str(p, "mode"), "code");
    s->eps = ms_param_num(p, "eps");
    ms_xset_init(&s->members, nx);
    s->count = ms_xcalloc(nx, sizeof *s->count);
    s->p_code = ms_xcalloc(nx, sizeof *s->p_code);
    s->last_use = ms_xcalloc(nx, sizeof *s->last_use);
    return s;
}

static void fmoe_cache_destroy(void *st)
{
    fmoe_cache *s = st;
    ms_xset_free(&s->members);
    free(s->count);
    free(s->p_code);
    free(s->last_use);
    free(s);
}

static void visit(fmoe_cache *s, uint32_t x)
{
    s->count[x] += 1;
    s->last_use[x] = ++s->tick;
}

static void fmoe_cache_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    fmoe_cache *s = st;
    uint32_t x = l * s->J + e;
    ms_xset_add(&s->members, x);
    if (s->code) {
        double p = ms_view_score(v, l, e);
        s->p_code[x] = isnan(p) ? 0.0 : p;
    }
    visit(s, x);
}

static void fmoe_cache_access(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fmoe_cache *s = st;
    visit(s, l * s->J + e);
}

static void fmoe_cache_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fmoe_cache *s = st;
    uint32_t x = l * s->J + e;
    ms_xset_remove(&s->members, x);
    if (s->code) {
        s->count[x] = 0;
        s->p_code[x] = 0;
    }
}

static double evict_key(const fmoe_cache *s, const ms_view *v, uint32_t x)
{
    if (s->code)
        return fmoe_evict_key_code(s->p_code[x], s->count[x]);
    double p = ms_view_score(v, x / s->J, x % s->J);
    return fmoe_evict_key_paper(isnan(p) ? s->eps : p, s->count[x]);
}

static int fmoe_cache_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    fmoe_cache *s = st;
    uint32_t best = MS_NIL;
    double best_key = 0;
    for (uint32_t i = 0; i < s->members.n; i++) {
        uint32_t x = s->members.items[i];
        if (!ms_view_evictable(v, x / s->J, x % s->J))
            continue;
        double k = evict_key(s, v, x);
        if (best == MS_NIL || k < best_key || (k == best_key && s->last_use[x] < s->last_use[best])) {
            best = x;
            best_key = k;
        }
    }
    if (best == MS_NIL)
        return 0;
    *l = best / s->J;
    *e = best % s->J;
    return 1;
}

static const ms_param_spec fmoe_cache_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code", "paper: smallest p x freq; code: smallest trunc(p x count)"},
    {"eps", MS_PARAM_DOUBLE, "1e-6", 0, 1, NULL, "paper: p of an expert the prefetcher never searched"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops fmoe_cache_ops = {
    .create = fmoe_cache_create, .destroy = fmoe_cache_destroy, .on_insert = fmoe_cache_insert,
    .on_access = fmoe_cache_access, .on_evict = fmoe_cache_evict, .victim = fmoe_cache_victim,
};
const ms_policy_desc ms_policy_cache_fmoe = {
    .name = "fmoe", .kind = MS_KIND_CACHE, .params = fmoe_cache_params, .cache = &fmoe_cache_ops,
    .summary = "fMoE: evict the smallest searched probability x visit count",
};
