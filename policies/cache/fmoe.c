/* fmoe: fMoE's expert cache (seed 000 "Expert Caching and Eviction", seed
 * 001 section 4.5; docs/policies.md).  Meant to run with `--prefetch
 * fmoe`, which publishes the searched probability p of the experts it guides
 * on the score board; with another prefetcher every p is `eps` and this is
 * LFU.
 *
 * paper: PRI^evict = 1 / (p_{l,j} freq_{l,j}); the victim is the evictable
 * expert with the largest PRI, i.e. the smallest p x freq, p read from the
 * board when the victim is chosen (eps when never set), freq = cache visits
 * (insertions and hits), kept across evictions (the paper counts visits and
 * says nothing of a reset).
 * code (FineMoE 5c584686, core/prefetch/task_scheduler.cpp:246-332 on the
 * MoE-Infinity 2024 core; docs/policies.md has the table):
 *  - key = size_t(p x incache_visit_count), the product in float32
 *    (fmoe_evict_key_code_f32), smallest first; the resident experts in
 *    (layer, id) order sorted by key with libstdc++'s std::sort (ties in
 *    introsort order, ms_sorted_victim), one sort per make-room;
 *  - p = the probability the prefetcher published when it last listed the
 *    expert, resident or not (sampled from the board at every gate, every
 *    victim search and every insertion), 0 when never listed;
 *  - count: +1 per hit and +1 per copy the engine is about to make (the GPU
 *    thread's pickup: demand, or prefetch even when then dropped);
 *  - p and count reset on eviction;
 *  - a step visits its experts by ascending id and protects only the
 *    candidate list (MS_PROTECT_LIST, with protect=list: listed and not
 *    overflowed); a demand with no victim is loaded over the budget and
 *    flagged overflow for good; a prefetch with no victim is dropped.
 *  Not modelled: the code demands every expert of a layer in every step,
 *  routed or not (modeling_qwen2_moe.py:898-913); here only the activated
 *  ones are demanded (docs/policies.md).
 * paper ties: the least recently used.
 *
 * Protection (`protect`, issue 19).  Read literally, the key lets the cache
 * discard its own prefetcher's work: it weighs an expert prefetched for a
 * layer due within d layers against the experts of the layers that just ran
 * (not needed again for about L layers) by p x lifetime visits only, and the
 * prefetched one is often the smallest (docs/policies.md, "Prefetches the
 * cache throws away").  The seeds say the cache evicts experts "less
 * frequently hit and [with] lower probabilities of being activated", that
 * the matched maps guide both prefetching and eviction, and that cached
 * experts are offloaded to make room for the prefetched ones (seed 001
 * section 3, step 3); an expert the map just selected for the next layers
 * is the one most likely to be activated.  So:
 *  - target (paper's default): an expert a prefetch filled is not a victim
 *    until its target layer has run (ms_view_prefetched_unused);
 *  - list (code's default): an expert on the prefetcher's current candidate
 *    list is not a victim; prefetch `fmoe:mode=code` publishes the whole list
 *    (every expert of the layers it guides, cached or not) on the board and
 *    NAN for the others, as FineMoE's cache skips its candidate list (at
 *    gate l that list is layers [l+1+d, L), so the fresh prefetches of
 *    layers l+1..l+d, key trunc(p x 1) = 0, are still the first victims);
 *  - none: the key alone (the literal reading, before issue 19).
 * When every evictable expert is protected, an incoming prefetch finds no
 * room and is dropped (FineMoE: "evict failed"); a demand load evicts the
 * protected expert with the smallest key (paper) or, in code mode, is
 * loaded over the budget and flagged overflow (see `code` above). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/expert_list.h"
#include "policies/lib/fmoe_store.h"
#include "policies/lib/sorted_victim.h"
#include "policies/policy.h"

enum { PROTECT_NONE = 0, PROTECT_TARGET, PROTECT_LIST };

typedef struct {
    ms_xset members;
    double *count, *p_code;
    uint64_t *last_use;
    uint64_t tick;
    uint64_t gate_step; /* ms_view_step() + 1 of the last gate seen, 0 before */
    uint32_t J, NX;
    int code, protect;
    double eps;
    uint8_t *member, *overflow; /* code: cached; sticky is_overflow */
    int avx2;                   /* paper's victim search four members at a time (pick_avx2) */
    ms_sorted_victim sorted;
} fmoe_cache;

static int parse_protect(const char *s, int code)
{
    if (!strcmp(s, "target"))
        return PROTECT_TARGET;
    if (!strcmp(s, "list"))
        return PROTECT_LIST;
    if (!strcmp(s, "none"))
        return PROTECT_NONE;
    return code ? PROTECT_LIST : PROTECT_TARGET; /* auto */
}

static void *fmoe_cache_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)err;
    uint32_t nx = env->meta->L * env->meta->J;
    fmoe_cache *s = ms_xcalloc(1, sizeof *s);
    s->J = env->meta->J;
    s->NX = nx;
    s->code = !strcmp(ms_param_str(p, "mode"), "code");
    s->protect = parse_protect(ms_param_str(p, "protect"), s->code);
    s->eps = ms_param_num(p, "eps");
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    __builtin_cpu_init();
    s->avx2 = __builtin_cpu_supports("avx2");
#endif
    ms_xset_init(&s->members, nx);
    s->count = ms_xcalloc(nx, sizeof *s->count);
    s->p_code = ms_xcalloc(nx, sizeof *s->p_code);
    s->last_use = ms_xcalloc(nx, sizeof *s->last_use);
    s->member = ms_xcalloc(nx, 1);
    s->overflow = ms_xcalloc(nx, 1);
    ms_sorted_victim_init(&s->sorted, env->meta->L, env->meta->J);
    return s;
}

static void fmoe_cache_destroy(void *st)
{
    fmoe_cache *s = st;
    ms_xset_free(&s->members);
    free(s->count);
    free(s->p_code);
    free(s->last_use);
    free(s->member);
    free(s->overflow);
    ms_sorted_victim_free(&s->sorted);
    free(s);
}

static void visit(fmoe_cache *s, uint32_t x)
{
    s->count[x] += 1;
    s->last_use[x] = ++s->tick;
}

/* code: p of x follows the prefetcher's latest listing (a number on the
 * board, ms_view_scores). */
static void sample_p(fmoe_cache *s, const double *board, uint32_t x)
{
    double p = board[x];
    if (isnan(p) || p == s->p_code[x])
        return;
    s->p_code[x] = p;
    if (s->member[x])
        ms_sorted_victim_dirty(&s->sorted);
}

static void fmoe_cache_insert(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    fmoe_cache *s = st;
    uint32_t x = l * s->J + e;
    ms_xset_add(&s->members, x);
    s->member[x] = 1;
    ms_sorted_victim_dirty(&s->sorted);
    if (!s->code) {
        visit(s, x);
        return;
    }
    sample_p(s, ms_view_scores(v), x); /* code: the copy was counted in admit() */
    s->last_use[x] = ++s->tick;
}

static void fmoe_cache_access(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fmoe_cache *s = st;
    ms_sorted_victim_dirty(&s->sorted);
    visit(s, l * s->J + e);
}

/* code: the GPU thread picks up a copy (task_scheduler.cpp:503). */
static int fmoe_cache_admit(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fmoe_cache *s = st;
    if (s->code) {
        ms_sorted_victim_round(&s->sorted); /* the incoming expert is not resident: no key changes */
        s->count[l * s->J + e] += 1;
    }
    return 1;
}

static void fmoe_cache_evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fmoe_cache *s = st;
    uint32_t x = l * s->J + e;
    ms_xset_remove(&s->members, x);
    s->member[x] = 0;
    ms_sorted_victim_dirty(&s->sorted);
    if (s->code) {
        s->count[x] = 0;
        s->p_code[x] = 0;
    }
}

/* Every prefetcher call between two gates is seen by the later gate (the
 * prefetcher guides after a layer's gate, the cache hears the next one
 * first), so sampling here catches every listing. */
static void fmoe_cache_gate(void *st, const ms_view *v, uint32_t l)
{
    (void)l;
    fmoe_cache *s = st;
    s->gate_step = ms_view_step(v) + 1;
    if (s->code) {
        const double *board = ms_view_scores(v);
        for (uint32_t x = 0; x < s->NX; x++)
            sample_p(s, board, x);
    }
}

static int is_protected(const fmoe_cache *s, const ms_view *v, uint32_t x)
{
    uint32_t l = x / s->J, e = x % s->J;
    if (s->protect == PROTECT_TARGET)
        return ms_view_prefetched_unused(v, l, e);
    if (s->protect == PROTECT_LIST)
        return !isnan(ms_view_score(v, l, e));
    return 0;
}

/* The room is for a demand load: an activated expert of the running layer
 * once its gate has been revealed (a prefetch of one is possible only when
 * the scheduler ran it on the CPU; it is treated as a demand). */
static int incoming_is_demand(const fmoe_cache *s, const ms_view *v)
{
    uint32_t l, e, n;
    if (!ms_view_incoming(v, &l, &e) || l != ms_view_layer(v) || s->gate_step != ms_view_step(v) + 1)
        return 0;
    const ms_act *a = ms_view_activated(v, l, &n);
    for (uint32_t i = 0; i < n; i++)
        if (a[i].expert == e)
            return 1;
    return 0;
}

/* Paper: the evictable (and, unless allowed, unprotected) member with the
 * smallest key, ties to the least recently used.  A member is asked about
 * evictability and protection only when its key would make it the best so
 * far: the same running best as asking first (the two tests are pure, and
 * `a && b` = `b && a`), with two calls through the view per candidate
 * instead of per member.  p is read from the board directly (what
 * ms_view_score returns for a member: x = l J + e is in range). */
typedef struct {
    uint32_t best;
    double key;
    uint64_t use;
} pick_best;

/* Member x with key k against the running best. */
static void pick_step(const fmoe_cache *s, const ms_view *v, int allow_protected, uint32_t x, double k,
                      pick_best *b)
{
    if (!(b->best == MS_NIL || k < b->key || (k == b->key && s->last_use[x] < b->use)))
        return;
    if (!ms_view_evictable(v, x / s->J, x % s->J) || (!allow_protected && is_protected(s, v, x)))
        return;
    b->best = x;
    b->key = k;
    b->use = s->last_use[x];
}

/* Members i0 .. n - 1, one at a time. */
static void pick_from(const fmoe_cache *s, const ms_view *v, int allow_protected, uint32_t i0, pick_best *b)
{
    const double *board = ms_view_scores(v);
    for (uint32_t i = i0; i < s->members.n; i++) {
        uint32_t x = s->members.items[i];
        double p = board[x];
        pick_step(s, v, allow_protected, x, fmoe_evict_key_paper(isnan(p) ? s->eps : p, s->count[x]), b);
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>

/* The keys four members at a time (AVX2 gathers of p and freq, the same
 * product): a group none of whose keys is <= the best key held at its start
 * cannot change the best (each member's test needs k < or = that key, and
 * the best does not move inside the group), so it is skipped whole; the
 * others go through pick_step in order.  The same best as pick_from. */
__attribute__((target("avx2"))) static void pick_avx2(const fmoe_cache *s, const ms_view *v, int allow_protected,
                                                      pick_best *b)
{
    const double *board = ms_view_scores(v);
    const __m256d eps = _mm256_set1_pd(s->eps);
    const uint32_t *items = s->members.items;
    uint32_t i = 0;
    for (; i + 4 <= s->members.n; i += 4) {
        __m128i ix = _mm_loadu_si128((const __m128i *)(const void *)(items + i)); /* x < L J < 2^31 */
        __m256d p = _mm256_i32gather_pd(board, ix, 8), c = _mm256_i32gather_pd(s->count, ix, 8);
        __m256d k = _mm256_mul_pd(_mm256_blendv_pd(p, eps, _mm256_cmp_pd(p, p, _CMP_UNORD_Q)), c);
        if (b->best != MS_NIL && !_mm256_movemask_pd(_mm256_cmp_pd(k, _mm256_set1_pd(b->key), _CMP_LE_OQ)))
            continue;
        double kk[4];
        _mm256_storeu_pd(kk, k);
        for (int t = 0; t < 4; t++)
            pick_step(s, v, allow_protected, items[i + t], kk[t], b);
    }
    pick_from(s, v, allow_protected, i, b);
}
#endif

static uint32_t pick(const fmoe_cache *s, const ms_view *v, int allow_protected)
{
    pick_best b = {MS_NIL, 0, 0};
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    if (s->avx2) {
        pick_avx2(s, v, allow_protected, &b);
        return b.best;
    }
#endif
    pick_from(s, v, allow_protected, 0, &b);
    return b.best;
}

/* ---- code ---- */

static int code_member(const void *ctx, uint32_t x) { return ((const fmoe_cache *)ctx)->member[x]; }

static uint64_t code_key(const void *ctx, uint32_t x)
{
    const fmoe_cache *s = ctx;
    return fmoe_evict_key_code_f32((float)s->p_code[x], (uint64_t)s->count[x]);
}

/* MS_PROTECT_LIST (code): the protect rule, and never an overflowed expert. */
static int fmoe_cache_protects(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    const fmoe_cache *s = st;
    return !s->overflow[l * s->J + e] && is_protected(s, v, l * s->J + e);
}

/* AcquireTensor: no victim for a demand -> loaded anyway, is_overflow. */
static int fmoe_cache_overflow(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    fmoe_cache *s = st;
    if (!s->code)
        return 0;
    s->overflow[l * s->J + e] = 1;
    return 1;
}

static int victim_code(fmoe_cache *s, const ms_view *v, uint32_t *l, uint32_t *e)
{
    if (s->sorted.round) { /* a new make-room: the residents' p from the latest listing */
        const double *board = ms_view_scores(v);
        for (uint32_t i = 0; i < s->members.n; i++)
            sample_p(s, board, s->members.items[i]);
    }
    return ms_sorted_victim_next(&s->sorted, v, 0, code_member, code_key, NULL, s, l, e);
}

static void fmoe_cache_step_rules(const void *st, ms_step_rules *out)
{
    const fmoe_cache *s = st;
    if (s->code) {
        out->order = MS_ORDER_ASCENDING;
        out->protect = MS_PROTECT_LIST;
    }
}

static int fmoe_cache_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    fmoe_cache *s = st;
    if (s->code)
        return victim_code(s, v, l, e);
    uint32_t best = pick(s, v, s->protect == PROTECT_NONE);
    if (best == MS_NIL && s->protect != PROTECT_NONE && incoming_is_demand(s, v))
        best = pick(s, v, 1);
    if (best == MS_NIL)
        return 0;
    *l = best / s->J;
    *e = best % s->J;
    return 1;
}

static const ms_param_spec fmoe_cache_params[] = {
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code", "paper: smallest p x freq; code: smallest trunc(p x count)"},
    {"eps", MS_PARAM_DOUBLE, "1e-6", 0, 1, NULL, "paper: p of an expert the prefetcher never searched"},
    {"protect", MS_PARAM_ENUM, "auto", 0, 0, "auto|target|list|none",
     "never a victim: target = a prefetched expert until its target layer ran; list = the prefetcher's current "
     "candidate list (prefetch fmoe:mode=code); none = the key alone; auto = target (paper), list (code)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_cache_ops fmoe_cache_ops = {
    .create = fmoe_cache_create, .destroy = fmoe_cache_destroy, .admit = fmoe_cache_admit,
    .on_insert = fmoe_cache_insert, .on_access = fmoe_cache_access, .on_evict = fmoe_cache_evict,
    .on_gate = fmoe_cache_gate, .victim = fmoe_cache_victim, .step_rules = fmoe_cache_step_rules,
    .protects = fmoe_cache_protects, .overflow = fmoe_cache_overflow,
};
const ms_policy_desc ms_policy_cache_fmoe = {
    .name = "fmoe", .kind = MS_KIND_CACHE, .params = fmoe_cache_params, .cache = &fmoe_cache_ops,
    .summary = "fMoE: evict the smallest searched probability x visit count, prefetched experts kept until used",
};
