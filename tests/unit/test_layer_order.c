/* Differential test of policies/lib/layer_order (the `mrs` cache's victim
 * order, issue 18) against the scan it replaced: the lowest (key, tick) among
 * the accepted members, of one layer or of all, on many seeded sequences of
 * inserts, removals, touches (a new tick), single key changes and whole-layer
 * decays (every key of the layer times c, some boosted: the MRS update).
 * Keys come from a handful of values, zero and subnormals among them, so
 * ties are the common case; a decay by 0.5 or 0.7 rounds neighbouring
 * subnormals to the same value, so the tick decides between members whose
 * keys were distinct before, and the layer's order must change.  Random
 * members are not accepted, so a wrong skip changes some answer. */
#include <stdint.h>

#include "check.h"

#include "policies/lib/layer_order.h"

#include "splitmix.h"

enum { MAXL = 6, MAXJ = 12 };

typedef struct {
    uint32_t L, J;
    double key[MAXL * MAXJ];
    uint64_t tick[MAXL * MAXJ], now;
    uint8_t in[MAXL * MAXJ], ok[MAXL * MAXJ];
    uint32_t asked_outside; /* accept asked of a non-member */
} world;

static int accept_ok(const void *ctx, uint32_t l, uint32_t e)
{
    world *w = (world *)ctx;
    uint32_t x = l * w->J + e;
    w->asked_outside += !w->in[x];
    return w->ok[x];
}

static double some_key(void)
{
    static const double pool[] = {0.0, 0.0, 1.0, 0.5, 0.25, 0.125, 4.9406564584124654e-324, 1.5e-323, 2e-323,
                                  1e-310, 0.3, 0.7};
    return pool[below(sizeof pool / sizeof pool[0])];
}

/* The scan: lowest (key, tick) among accepted members of `only` (or all). */
static uint32_t scan_lowest(const world *w, uint32_t only)
{
    uint32_t best = UINT32_MAX;
    for (uint32_t x = 0; x < w->L * w->J; x++) {
        if (!w->in[x] || !w->ok[x] || (only != UINT32_MAX && x / w->J != only))
            continue;
        if (best == UINT32_MAX || w->key[x] < w->key[best] ||
            (w->key[x] == w->key[best] && w->tick[x] < w->tick[best]))
            best = x;
    }
    return best;
}

/* Each layer's list holds exactly its members, in ascending (key, tick). */
static int lists_ordered(const ms_layer_order *o, const world *w)
{
    for (uint32_t l = 0; l < w->L; l++) {
        uint32_t members = 0;
        for (uint32_t e = 0; e < w->J; e++)
            members += w->in[l * w->J + e];
        if (o->n[l] != members)
            return 0;
        for (uint32_t i = 0; i < o->n[l]; i++) {
            uint32_t x = l * w->J + o->list[l * w->J + i];
            if (!w->in[x])
                return 0;
            if (i == 0)
                continue;
            uint32_t y = l * w->J + o->list[l * w->J + i - 1];
            if (!(w->key[y] < w->key[x] || (w->key[y] == w->key[x] && w->tick[y] < w->tick[x])))
                return 0;
        }
    }
    return 1;
}

static void random_member(const world *w, uint32_t *l, uint32_t *e)
{
    uint32_t x;
    do
        x = below(w->L * w->J);
    while (!w->in[x]);
    *l = x / w->J;
    *e = x % w->J;
}

/* The MRS-like update of layer l: every key times c, a few boosted. */
static void decay_layer(world *w, uint32_t l)
{
    static const double cs[] = {0.5, 0.7, 0.3, 1.0};
    double c = cs[below(4)];
    for (uint32_t e = 0; e < w->J; e++) {
        double *k = &w->key[l * w->J + e];
        *k *= c;
        if (below(5) == 0)
            *k += 0.5 * some_key();
    }
}

/* One random operation on w and o. */
static void step(world *w, ms_layer_order *o, uint32_t members)
{
    uint32_t op = below(10), l, e;
    if (members == 0 || op < 3) { /* insert a non-member, if any */
        if (members == w->L * w->J)
            return;
        uint32_t x;
        do
            x = below(w->L * w->J);
        while (w->in[x]);
        w->key[x] = below(3) ? w->key[x] : some_key(); /* keep the decayed key, usually */
        w->tick[x] = ++w->now;
        w->in[x] = 1;
        ms_layer_order_add(o, x / w->J, x % w->J);
        return;
    }
    if (op < 5) {
        random_member(w, &l, &e);
        w->in[l * w->J + e] = 0;
        ms_layer_order_remove(o, l, e);
    } else if (op < 7) {
        random_member(w, &l, &e);
        w->tick[l * w->J + e] = ++w->now;
        ms_layer_order_moved(o, l, e);
    } else if (op < 8) {
        random_member(w, &l, &e);
        w->key[l * w->J + e] = some_key();
        ms_layer_order_moved(o, l, e);
    } else {
        l = below(w->L);
        decay_layer(w, l);
        ms_layer_order_resort(o, l);
    }
}

static void test_against_scan(void)
{
    uint64_t queries = 0, tied = 0, mismatches = 0, disordered = 0, found = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        rng_state = seed;
        world w = {.L = 1 + below(MAXL), .J = 1 + below(MAXJ)};
        ms_layer_order o;
        ms_layer_order_init(&o, w.L, w.J, w.key, w.tick);
        for (int n = 0; n < 1500; n++) {
            uint32_t members = 0;
            for (uint32_t x = 0; x < w.L * w.J; x++)
                members += w.in[x];
            step(&w, &o, members);
            disordered += !lists_ordered(&o, &w);
            uint32_t pass = below(4); /* 0: nothing accepted .. 3: most */
            for (uint32_t x = 0; x < w.L * w.J; x++)
                w.ok[x] = below(4) < pass;
            for (uint32_t q = 0; q < 3; q++) {
                uint32_t only = q == 0 ? UINT32_MAX : q == 1 ? below(w.L) : w.L + below(2); /* the last: no such layer */
                uint32_t want = only == UINT32_MAX || only < w.L ? scan_lowest(&w, only) : UINT32_MAX;
                uint32_t got = ms_layer_order_lowest(&o, only, accept_ok, &w);
                mismatches += got != want;
                found += want != UINT32_MAX;
                queries++;
                /* another accepted member with the same key: the tick decided */
                for (uint32_t x = 0; want != UINT32_MAX && x < w.L * w.J; x++)
                    if (x != want && w.in[x] && w.ok[x] && w.key[x] == w.key[want] &&
                        (only == UINT32_MAX || x / w.J == only)) {
                        tied++;
                        break;
                    }
            }
        }
        ms_layer_order_free(&o);
        CHECK_EQ_INT(w.asked_outside, 0);
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(disordered, 0);
    CHECK(queries > 1000000);
    CHECK(found > queries / 3);
    CHECK(tied > 100000); /* the tie rule decided many answers */
    printf("%llu queries, %llu found, %llu with a tie on the key\n", (unsigned long long)queries,
           (unsigned long long)found, (unsigned long long)tied);
}

/* By hand: one layer, J = 4.  Keys {0.5, 0.25, 0.25, 1} inserted in id
 * order (ticks 1..4): order 1, 2, 0, 3 (experts 1 and 2 tie at 0.25, the
 * lower tick first).  Touching 1 (tick 5) puts it after 2: 2, 1, 0, 3.  A
 * decay to keys {0.25, 0.25, 0.125, 0.5} makes 0 tie with 1 (tick 1 < 5):
 * 2, 0, 1, 3.  With 2 not accepted the lowest is 0; removing 0 makes it 1. */
static void test_by_hand(void)
{
    world w = {.L = 1, .J = 4, .key = {0.5, 0.25, 0.25, 1}};
    ms_layer_order o;
    ms_layer_order_init(&o, 1, 4, w.key, w.tick);
    for (uint32_t e = 0; e < 4; e++) {
        w.tick[e] = ++w.now;
        w.in[e] = 1;
        ms_layer_order_add(&o, 0, e);
    }
    CHECK(o.list[0] == 1 && o.list[1] == 2 && o.list[2] == 0 && o.list[3] == 3);
    w.tick[1] = ++w.now;
    ms_layer_order_moved(&o, 0, 1);
    CHECK(o.list[0] == 2 && o.list[1] == 1 && o.list[2] == 0 && o.list[3] == 3);
    w.key[0] = 0.25;
    w.key[1] = 0.25;
    w.key[2] = 0.125;
    w.key[3] = 0.5;
    ms_layer_order_resort(&o, 0);
    CHECK(o.list[0] == 2 && o.list[1] == 0 && o.list[2] == 1 && o.list[3] == 3);
    memset(w.ok, 1, sizeof w.ok);
    w.ok[2] = 0;
    CHECK_EQ_INT(ms_layer_order_lowest(&o, UINT32_MAX, accept_ok, &w), 0);
    w.in[0] = 0;
    ms_layer_order_remove(&o, 0, 0);
    CHECK_EQ_INT(o.n[0], 3);
    CHECK_EQ_INT(ms_layer_order_lowest(&o, 0, accept_ok, &w), 1);
    memset(w.ok, 0, sizeof w.ok);
    CHECK_EQ_INT(ms_layer_order_lowest(&o, 0, accept_ok, &w), UINT32_MAX);
    ms_layer_order_free(&o);
}

int main(void)
{
    test_by_hand();
    test_against_scan();
    CHECK_DONE();
}
