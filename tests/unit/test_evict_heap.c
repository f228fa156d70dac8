/* Differential tests of the heap-ordered victim searches (issue 18 part 3):
 * policies/lib/xheap, the lfu and belady caches, and cache eam's victim
 * order (eam_victims), against a brute-force
 * scan that applies the rule the scans before the heaps applied, on many
 * seeded random access sequences.  The sequences make ties the common case
 * (a handful of distinct counts, experts of one layer next used at the same
 * step, experts never used again) and mark random members not evictable, so
 * a wrong tie-break or a wrongly skipped member changes some victim.
 *
 * The caches run against a fake view (the ms_view_ops table below): a step
 * counter, a cached set, an evictable flag per expert, a capacity, and a
 * schedule of future uses for ms_view_next_use. */
#include <stdint.h>

#include "check.h"
#include <math.h>

#include "policies/lib/eam_common.h"
#include "policies/lib/expert_list.h"
#include "policies/lib/xheap.h"
#include "policies/policy.h"

#include "splitmix.h"

/* ------------------------------------------------------------------ */
/* xheap alone: random keys with many ties, random predicates */

static int accept_mask(const void *ctx, uint32_t x) { return ((const uint8_t *)ctx)[x]; }

/* the heap's shape: no entry below its parent, pos the inverse of heap */
static int heap_valid(const ms_xheap *h)
{
    for (uint32_t i = 0; i < h->n; i++) {
        const ms_xheap_entry *e = &h->heap[i], *p = &h->heap[(i - 1) / 2];
        if (h->pos[e->x] != i)
            return 0;
        if (i > 0 && (e->a < p->a || (e->a == p->a && (e->b < p->b || (e->b == p->b && e->x < p->x)))))
            return 0;
    }
    return 1;
}

static void test_xheap(void)
{
    enum { NX = 64 };
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_state = seed;
        ms_xheap h;
        ms_xheap_init(&h, NX);
        uint8_t in[NX] = {0}, ok[NX];
        uint64_t ka[NX], kb[NX];
        uint32_t range = 1 + below(6); /* few distinct values: ties everywhere */
        for (int op = 0; op < 2000; op++) {
            uint32_t x = below(NX);
            if (below(4) == 0) {
                ms_xheap_remove(&h, x);
                in[x] = 0;
            } else {
                ka[x] = below(range);
                kb[x] = below(range);
                ms_xheap_set(&h, x, ka[x], kb[x]);
                in[x] = 1;
            }
            uint32_t pass = below(4); /* 0: none pass .. 3: most pass */
            for (uint32_t y = 0; y < NX; y++)
                ok[y] = below(4) < pass;
            uint32_t want = MS_NIL, n = 0;
            for (uint32_t y = 0; y < NX; y++) {
                n += in[y];
                if (in[y] && ok[y] &&
                    (want == MS_NIL || ka[y] < ka[want] || (ka[y] == ka[want] && kb[y] < kb[want])))
                    want = y; /* ascending y: the lowest x among equal keys */
            }
            CHECK_EQ_INT(h.n, n);
            CHECK(heap_valid(&h));
            CHECK_EQ_INT(ms_xheap_first(&h, accept_mask, ok), want);
            uint32_t top = MS_NIL;
            for (uint32_t y = 0; y < NX; y++)
                if (in[y] && (top == MS_NIL || ka[y] < ka[top] || (ka[y] == ka[top] && kb[y] < kb[top])))
                    top = y;
            CHECK_EQ_INT(ms_xheap_top(&h), top);
        }
        ms_xheap_free(&h);
    }
}

/* ------------------------------------------------------------------ */
/* the fake view */

enum { L = 4, J = 8, NX = L * J };

typedef struct {
    const ms_view_ops *ops;
    uint64_t step;
    uint32_t cap, n_cached, incoming;
    uint8_t cached[NX], evictable[NX];
    uint64_t *uses[NX]; /* [n_uses[x]] ascending steps at which x is activated */
    uint32_t n_uses[NX];
} fake_view;

static const fake_view *fv(const ms_view *v) { return (const fake_view *)(const void *)v; }
static uint64_t f_step(const ms_view *v) { return fv(v)->step; }
static uint32_t f_layer(const ms_view *v) { return (uint32_t)(fv(v)->step % L); }
static int f_evictable(const ms_view *v, uint32_t l, uint32_t e)
{
    return fv(v)->cached[l * J + e] && fv(v)->evictable[l * J + e];
}
static int f_fits(const ms_view *v, uint32_t l, uint32_t e)
{
    (void)l, (void)e;
    return fv(v)->n_cached < fv(v)->cap;
}
/* brute force: the first use after the running step */
static uint64_t f_next_use(const ms_view *v, uint32_t l, uint32_t e)
{
    const fake_view *f = fv(v);
    uint32_t x = l * J + e;
    for (uint32_t i = 0; i < f->n_uses[x]; i++)
        if (f->uses[x][i] > f->step)
            return f->uses[x][i];
    return UINT64_MAX;
}
static int f_incoming(const ms_view *v, uint32_t *l, uint32_t *e)
{
    if (fv(v)->incoming == MS_NIL)
        return 0;
    *l = fv(v)->incoming / J;
    *e = fv(v)->incoming % J;
    return 1;
}
static const ms_view_ops fake_ops = {
    .step = f_step, .layer = f_layer, .evictable = f_evictable, .fits = f_fits,
    .next_use = f_next_use, .incoming = f_incoming,
};

static ms_view *as_view(fake_view *f) { return (ms_view *)(void *)f; }

static void *create_cache(const char *name, const char *kv, const ms_policy_desc **desc)
{
    static ms_trace_meta meta;
    meta.L = L;
    meta.J = J;
    ms_policy_env env = {.meta = &meta};
    ms_params p;
    ms_err err;
    *desc = ms_policy_find(MS_KIND_CACHE, name);
    CHECK(*desc != NULL);
    CHECK(ms_params_parse((*desc)->params, kv, name, &p, &err) == 0);
    void *st = (*desc)->cache->create(&p, &env, &err);
    CHECK(st != NULL);
    return st;
}

/* each cached expert evictable with probability pass / 4 */
static void shuffle_evictable(fake_view *f)
{
    uint32_t pass = 1 + below(3);
    for (uint32_t x = 0; x < NX; x++)
        f->evictable[x] = below(4) < pass;
}

/* ------------------------------------------------------------------ */
/* lfu: (count, last_use) smallest, scanning the members in a random order */

typedef struct {
    uint64_t count[NX], last[NX], tick;
    int reset;
} lfu_ref;

static uint32_t lfu_ref_victim(const lfu_ref *r, const fake_view *f)
{
    uint32_t best = MS_NIL, start = below(NX);
    for (uint32_t i = 0; i < NX; i++) {
        uint32_t x = (start + i) % NX; /* the old scan's order was arbitrary too */
        if (!f->cached[x] || !f->evictable[x])
            continue;
        if (best == MS_NIL || r->count[x] < r->count[best] ||
            (r->count[x] == r->count[best] && r->last[x] < r->last[best]))
            best = x;
    }
    return best;
}

static void lfu_sequence(uint64_t seed, int reset, int *victims)
{
    rng_state = seed;
    const ms_policy_desc *d;
    void *st = create_cache("lfu", reset ? "reset=1" : "reset=0", &d);
    fake_view f = {.ops = &fake_ops, .cap = 3 + below(NX - 6), .incoming = MS_NIL};
    ms_view *v = as_view(&f);
    lfu_ref r = {.reset = reset};
    uint32_t hot = 2 + below(NX - 2); /* accesses skewed to experts [0, hot) */
    for (int op = 0; op < 1500; op++) {
        uint32_t x = below(3) ? below(hot) : below(NX);
        if (f.cached[x]) {
            d->cache->on_access(st, v, x / J, x % J);
        } else {
            int room = 1;
            f.incoming = x;
            while (f.n_cached >= f.cap) {
                shuffle_evictable(&f);
                uint32_t want = lfu_ref_victim(&r, &f), l = 0, e = 0;
                int got = d->cache->victim(st, v, &l, &e);
                CHECK_EQ_INT(got ? l * J + e : MS_NIL, want);
                if (!got || want == MS_NIL) {
                    room = 0;
                    break;
                }
                (*victims)++;
                f.cached[want] = 0;
                f.n_cached--;
                d->cache->on_evict(st, v, want / J, want % J);
                if (r.reset)
                    r.count[want] = 0;
            }
            f.incoming = MS_NIL;
            if (!room)
                continue;
            f.cached[x] = 1;
            f.n_cached++;
            d->cache->on_insert(st, v, x / J, x % J);
        }
        r.count[x]++;
        r.last[x] = ++r.tick;
    }
    d->cache->destroy(st);
}

/* ------------------------------------------------------------------ */
/* belady: largest next use, ties to the lowest x; bypass compares the
 * incoming expert's next use with the victim's */

static uint32_t belady_ref_victim(const fake_view *f, uint64_t *next_out)
{
    uint32_t best = MS_NIL;
    uint64_t best_next = 0;
    for (uint32_t x = 0; x < NX; x++) {
        if (!f->cached[x] || !f->evictable[x])
            continue;
        uint64_t next = f_next_use((const ms_view *)(const void *)f, x / J, x % J);
        if (best == MS_NIL || next > best_next || (next == best_next && x < best)) {
            best = x;
            best_next = next;
        }
    }
    *next_out = best_next;
    return best;
}

/* Every step activates 1..3 experts of its layer (skewed); the last
 * iterations activate only a few experts, so many are never used again. */
static void make_schedule(fake_view *f, uint64_t steps)
{
    for (uint32_t x = 0; x < NX; x++) {
        f->uses[x] = ms_xcalloc(steps, sizeof *f->uses[x]);
        f->n_uses[x] = 0;
    }
    for (uint64_t s = 0; s < steps; s++) {
        uint32_t l = (uint32_t)(s % L), k = 1 + below(3);
        uint32_t span = s > steps - 3 * L ? 2 : J;
        for (uint32_t i = 0; i < k; i++) {
            uint32_t x = l * J + (below(2) ? below(span < 3 ? span : 3) : below(span));
            if (f->n_uses[x] == 0 || f->uses[x][f->n_uses[x] - 1] != s)
                f->uses[x][f->n_uses[x]++] = s;
        }
    }
}

static void belady_sequence(uint64_t seed, int bypass, int *victims, int *bypassed)
{
    rng_state = seed;
    const ms_policy_desc *d;
    void *st = create_cache("belady", bypass ? "bypass=1" : "bypass=0", &d);
    fake_view f = {.ops = &fake_ops, .cap = 3 + below(NX - 6), .incoming = MS_NIL};
    ms_view *v = as_view(&f);
    uint64_t steps = 40 * L;
    make_schedule(&f, steps);
    for (f.step = 0; f.step < steps; f.step += below(5) ? 1 : 1 + below(7)) {
        /* the step's activated experts, then a random "prefetch" or two */
        uint32_t want_load[J + 2], n = 0, l = (uint32_t)(f.step % L);
        for (uint32_t e = 0; e < J; e++) {
            uint32_t x = l * J + e;
            for (uint32_t i = 0; i < f.n_uses[x]; i++)
                if (f.uses[x][i] == f.step)
                    want_load[n++] = x;
        }
        for (uint32_t i = below(3); i > 0; i--)
            want_load[n++] = below(NX);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t x = want_load[i];
            if (f.cached[x]) {
                if (d->cache->on_access)
                    d->cache->on_access(st, v, x / J, x % J);
                continue;
            }
            shuffle_evictable(&f);
            uint64_t vnext;
            uint32_t chosen = belady_ref_victim(&f, &vnext);
            int admit = !bypass || f.n_cached < f.cap || chosen == MS_NIL || vnext > f_next_use(v, x / J, x % J);
            CHECK_EQ_INT(d->cache->admit(st, v, x / J, x % J), admit);
            if (!admit) {
                (*bypassed)++;
                continue;
            }
            int room = 1, first = 1;
            f.incoming = x;
            while (f.n_cached >= f.cap) {
                if (!first) /* the engine changes nothing between admit and the first victim */
                    shuffle_evictable(&f);
                first = 0;
                uint32_t want = belady_ref_victim(&f, &vnext), vl = 0, ve = 0;
                int got = d->cache->victim(st, v, &vl, &ve);
                CHECK_EQ_INT(got ? vl * J + ve : MS_NIL, want);
                if (!got || want == MS_NIL) {
                    room = 0;
                    break;
                }
                (*victims)++;
                f.cached[want] = 0;
                f.n_cached--;
                d->cache->on_evict(st, v, want / J, want % J);
            }
            f.incoming = MS_NIL;
            if (!room)
                continue;
            f.cached[x] = 1;
            f.n_cached++;
            d->cache->on_insert(st, v, x / J, x % J);
        }
        /* now and then an eviction the cache did not choose (another GPU's room, a drop) */
        uint32_t y = below(NX);
        if (below(8) == 0 && f.cached[y]) {
            f.cached[y] = 0;
            f.n_cached--;
            d->cache->on_evict(st, v, y / J, y % J);
        }
    }
    for (uint32_t x = 0; x < NX; x++)
        free(f.uses[x]);
    d->cache->destroy(st);
}

/* ------------------------------------------------------------------ */
/* cache eam (paper): eam_victims against the scan it replaced */

/* The scan of policies/cache/eam.c before eam_victims (main d602774): row
 * sums recomputed, the smallest (key, x) over the evictable members. */
static uint32_t eam_ref_victim(const eam_tracker *t, const uint8_t *in, const uint8_t *ok)
{
    uint32_t best = MS_NIL;
    double min_p = INFINITY;
    for (uint32_t x = 0; x < t->L * t->J; x++) {
        if (!in[x] || !ok[x])
            continue;
        uint32_t l = x / t->J;
        double n_token = 0;
        for (uint32_t e = 0; e < t->J; e++)
            n_token += t->cur[(size_t)l * t->J + e];
        double p = eam_priority_paper(t->cur[x], n_token, l, t->L);
        if (p < min_p || (p == min_p && x < best)) {
            min_p = p;
            best = x;
        }
    }
    return best;
}

/* What the tracker does when it recomputes cur's row l (sum_row). */
static void eam_set_row(eam_tracker *t, uint32_t l, uint32_t range)
{
    double s = 0;
    for (uint32_t e = 0; e < t->J; e++) {
        t->cur[(size_t)l * t->J + e] = range ? (double)below(range) : 0.0;
        s += t->cur[(size_t)l * t->J + e];
    }
    t->cur_sum[l] = s;
    t->row_gen[l]++;
}

static void eam_sequence(uint64_t seed, int *victims, int *ties)
{
    enum { EL = 6, EJ = 8, ENX = EL * EJ };
    rng_state = seed;
    eam_tracker t;
    eam_tracker_init(&t, EL, EJ, 0);
    eam_victims q;
    eam_victims_init(&q, &t);
    uint8_t in[ENX] = {0}, ok[ENX];
    uint32_t range = 1 + below(4); /* counts 0..range-1: equal keys within a row are common */
    for (int op = 0; op < 1500; op++) {
        uint32_t what = below(10), x = below(ENX);
        if (what < 3) { /* a gate: one row grows (or empties) */
            eam_set_row(&t, below(EL), below(5) ? range : 0);
        } else if (what < 4) { /* a new iteration: every row recomputed */
            for (uint32_t l = 0; l < EL; l++)
                eam_set_row(&t, l, range);
        } else if (what < 7) {
            in[x] = 1;
            eam_victims_add(&q, x);
        } else {
            in[x] = 0;
            eam_victims_remove(&q, x);
        }
        uint32_t pass = below(4);
        for (uint32_t y = 0; y < ENX; y++)
            ok[y] = below(4) < pass;
        uint32_t want = eam_ref_victim(&t, in, ok), got = eam_victims_first(&q, accept_mask, ok);
        CHECK_EQ_INT(got, want);
        if (got != want)
            break;
        (*victims) += want != MS_NIL;
        for (uint32_t y = 0; want != MS_NIL && y < ENX; y++) /* another evictable member with the same key */
            *ties += y != want && in[y] && ok[y] &&
                     eam_victim_key(&t, q.decay, y) == eam_victim_key(&t, q.decay, want);
    }
    eam_victims_free(&q);
    eam_tracker_free(&t);
}

int main(void)
{
    test_xheap();
    int victims = 0, bypassed = 0;
    for (uint64_t seed = 1; seed <= 300; seed++)
        lfu_sequence(seed, (int)(seed & 1), &victims);
    CHECK(victims > 100000); /* the comparisons above really ran */
    printf("lfu: %d victims compared\n", victims);
    victims = 0;
    for (uint64_t seed = 1; seed <= 300; seed++)
        belady_sequence(seed, (int)(seed & 1), &victims, &bypassed);
    CHECK(victims > 10000);
    CHECK(bypassed > 1000);
    printf("belady: %d victims compared, %d bypass decisions\n", victims, bypassed);
    int ties = 0;
    victims = 0;
    for (uint64_t seed = 1; seed <= 300; seed++)
        eam_sequence(seed, &victims, &ties);
    CHECK(victims > 100000);
    CHECK(ties > 10000);
    printf("eam: %d victims compared, %d with a tied key\n", victims, ties);
    CHECK_DONE();
}
