/* Differential test of the `fmoe` cache's paper-mode victim search (issue 18,
 * branch i18f): the cache asks about evictability and protection only for a
 * member whose key would make it the best so far.  Against the scan it
 * replaced (every member asked first, then its key compared) on many seeded
 * random sequences, with protect=none/target/list, a board of a few
 * distinct probabilities (ties of p x freq are common; NAN = never set, so
 * eps), random members not evictable or protected, and demand loads that
 * fall back to the protected members.
 *
 * The cache runs against a fake view (the ms_view_ops table below). */
#include <math.h>
#include <stdint.h>

#include "check.h"

#include "policies/lib/expert_list.h"
#include "policies/policy.h"

#include "splitmix.h"

enum { L = 4, J = 8, NX = L * J };

typedef struct {
    const ms_view_ops *ops;
    uint64_t step, gated; /* gated: step + 1 of the last gate the cache heard */
    uint32_t incoming;
    uint8_t cached[NX], evictable[NX], unused[NX];
    double board[NX];
    ms_act act[J]; /* the running layer's activated experts */
    uint32_t n_act;
} fake_view;

static const fake_view *fv(const ms_view *v) { return (const fake_view *)(const void *)v; }
static uint64_t f_step(const ms_view *v) { return fv(v)->step; }
static uint32_t f_layer(const ms_view *v) { return (uint32_t)(fv(v)->step % L); }
static int f_evictable(const ms_view *v, uint32_t l, uint32_t e)
{
    return fv(v)->cached[l * J + e] && fv(v)->evictable[l * J + e];
}
static int f_unused(const ms_view *v, uint32_t l, uint32_t e) { return fv(v)->unused[l * J + e]; }
static double f_score(const ms_view *v, uint32_t l, uint32_t e) { return fv(v)->board[l * J + e]; }
static const double *f_scores(const ms_view *v) { return fv(v)->board; }
static int f_incoming(const ms_view *v, uint32_t *l, uint32_t *e)
{
    if (fv(v)->incoming == MS_NIL)
        return 0;
    *l = fv(v)->incoming / J;
    *e = fv(v)->incoming % J;
    return 1;
}
static const ms_act *f_activated(const ms_view *v, uint32_t l, uint32_t *n)
{
    *n = l == f_layer(v) ? fv(v)->n_act : 0;
    return fv(v)->act;
}
static const ms_view_ops fake_ops = {
    .step = f_step, .layer = f_layer, .evictable = f_evictable, .prefetched_unused = f_unused,
    .score = f_score, .scores = f_scores, .incoming = f_incoming, .activated = f_activated,
};

/* The scan before (cache/fmoe.c's pick): every member asked, then its key
 * p x freq compared, ties to the least recently used. */
typedef struct {
    double count[NX];
    uint64_t last[NX], tick;
    int protect; /* 0 none, 1 target, 2 list */
    double eps;
} ref_cache;

static int ref_protected(const ref_cache *r, const fake_view *f, uint32_t x)
{
    return r->protect == 1 ? f->unused[x] : r->protect == 2 ? !isnan(f->board[x]) : 0;
}

static uint32_t ref_pick(const ref_cache *r, const fake_view *f, int allow_protected)
{
    uint32_t best = MS_NIL, start = below(NX);
    double best_key = 0;
    for (uint32_t i = 0; i < NX; i++) {
        uint32_t x = (start + i) % NX; /* the members' order does not matter */
        if (!f->cached[x] || !f->evictable[x] || (!allow_protected && ref_protected(r, f, x)))
            continue;
        double p = isnan(f->board[x]) ? r->eps : f->board[x], k = p * r->count[x];
        if (best == MS_NIL || k < best_key || (k == best_key && r->last[x] < r->last[best])) {
            best = x;
            best_key = k;
        }
    }
    return best;
}

static int ref_demand(const fake_view *f)
{
    if (f->incoming == MS_NIL || f->incoming / J != f->step % L || f->gated != f->step + 1)
        return 0;
    for (uint32_t i = 0; i < f->n_act; i++)
        if (f->act[i].expert == f->incoming % J)
            return 1;
    return 0;
}

static uint32_t ref_victim(const ref_cache *r, const fake_view *f)
{
    uint32_t best = ref_pick(r, f, r->protect == 0);
    if (best == MS_NIL && r->protect != 0 && ref_demand(f))
        best = ref_pick(r, f, 1);
    return best;
}

static const double probs[] = {0.0, 0.125, 0.25, 0.5, 1.0, 0.375};

static void reshuffle(fake_view *f)
{
    uint32_t pass = 1 + below(3), prot = below(4), nan = below(4);
    for (uint32_t x = 0; x < NX; x++) {
        f->evictable[x] = below(4) < pass;
        f->unused[x] = below(4) < prot;
        if (below(3) == 0)
            f->board[x] = below(4) < nan ? NAN : probs[below(sizeof probs / sizeof probs[0])];
    }
    f->n_act = below(4);
    for (uint32_t i = 0; i < f->n_act; i++)
        f->act[i] = (ms_act){.expert = below(J), .tokens = 1};
}

static void sequence(uint64_t seed, int *victims, int *ties, int *fallbacks)
{
    static const char *const modes[] = {"protect=none", "protect=target", "protect=list"};
    rng_state = seed;
    ref_cache r = {.protect = (int)(seed % 3), .eps = 1e-6};
    static ms_trace_meta meta;
    meta.L = L;
    meta.J = J;
    ms_policy_env env = {.meta = &meta};
    ms_params p;
    ms_err err;
    const ms_policy_desc *d = ms_policy_find(MS_KIND_CACHE, "fmoe");
    CHECK(d != NULL);
    CHECK(ms_params_parse(d->params, modes[r.protect], "fmoe", &p, &err) == 0);
    void *st = d->cache->create(&p, &env, &err);
    CHECK(st != NULL);
    fake_view f = {.ops = &fake_ops, .incoming = MS_NIL};
    for (uint32_t x = 0; x < NX; x++)
        f.board[x] = NAN;
    ms_view *v = (ms_view *)(void *)&f;
    uint32_t cap = 3 + below(NX - 6), n_cached = 0, hot = 2 + below(NX - 2);
    for (int op = 0; op < 1500; op++) {
        if (below(8) == 0) { /* a new step: its gate */
            f.step++;
            f.gated = f.step + 1;
            d->cache->on_gate(st, v, (uint32_t)(f.step % L));
        }
        uint32_t x = below(3) ? below(hot) : below(NX);
        if (f.cached[x]) {
            d->cache->on_access(st, v, x / J, x % J);
        } else {
            int room = 1;
            f.incoming = x;
            while (n_cached >= cap) {
                reshuffle(&f);
                uint32_t want = ref_victim(&r, &f), l = 0, e = 0;
                int got = d->cache->victim(st, v, &l, &e);
                CHECK_EQ_INT(got ? l * J + e : MS_NIL, want);
                if (want == MS_NIL || !got) {
                    room = 0;
                    break;
                }
                (*victims)++;
                *fallbacks += r.protect != 0 && ref_pick(&r, &f, 0) == MS_NIL;
                double pw = isnan(f.board[want]) ? r.eps : f.board[want];
                for (uint32_t y = 0; y < NX; y++) { /* another evictable member with the victim's key */
                    double py = isnan(f.board[y]) ? r.eps : f.board[y];
                    if (y != want && f.cached[y] && f.evictable[y] && py * r.count[y] == pw * r.count[want]) {
                        (*ties)++;
                        break;
                    }
                }
                f.cached[want] = 0;
                n_cached--;
                d->cache->on_evict(st, v, want / J, want % J);
            }
            f.incoming = MS_NIL;
            if (!room)
                continue;
            f.cached[x] = 1;
            n_cached++;
            d->cache->on_insert(st, v, x / J, x % J);
        }
        r.count[x] += 1; /* paper: a visit per insertion and hit, kept across evictions */
        r.last[x] = ++r.tick;
    }
    d->cache->destroy(st);
}

int main(void)
{
    int victims = 0, ties = 0, fallbacks = 0;
    for (uint64_t seed = 1; seed <= 600; seed++)
        sequence(seed, &victims, &ties, &fallbacks);
    CHECK(victims > 100000); /* the comparisons really ran */
    CHECK(ties > 10000);
    CHECK(fallbacks > 1000);
    printf("fmoe paper victims: %d compared, %d with a tied key, %d from the protected members\n", victims,
           ties, fallbacks);
    CHECK_DONE();
}
