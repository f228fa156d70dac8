/* Cache locality (definitions in locality.h).  Each variant keeps LRU stacks
 * as last-use stamps under a Fenwick tree: the depth of a key is the number
 * of keys with a later stamp, O(log) per access.  Stamps are renumbered
 * 1..n when they reach the tree's capacity, so memory stays a few words per
 * key however long the trace. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/stats/locality.h"

/* ---- an LRU stack over nkeys keys ---- */

typedef struct {
    uint32_t nkeys;
    uint32_t cap;    /* stamps 1..cap */
    uint32_t now;    /* last stamp given */
    uint32_t live;   /* keys with a stamp */
    uint32_t *stamp; /* [nkeys], 0 = never used */
    uint32_t *bit;   /* [cap + 1] Fenwick tree: 1 at each live stamp */
} lru_stack;

static void stack_init(lru_stack *st, uint32_t nkeys)
{
    st->nkeys = nkeys;
    st->cap = nkeys < 1024 ? 4096 : 4 * nkeys;
    st->now = st->live = 0;
    st->stamp = ms_xcalloc(nkeys, sizeof *st->stamp);
    st->bit = ms_xcalloc((size_t)st->cap + 1, sizeof *st->bit);
}

static void stack_free(lru_stack *st)
{
    free(st->stamp);
    free(st->bit);
}

static void bit_add(lru_stack *st, uint32_t i, int32_t v)
{
    for (; i <= st->cap; i += i & (~i + 1))
        st->bit[i] += (uint32_t)v;
}

static uint32_t bit_prefix(const lru_stack *st, uint32_t i)
{
    uint32_t s = 0;
    for (; i; i -= i & (~i + 1))
        s += st->bit[i];
    return s;
}

static void stack_reset(lru_stack *st)
{
    if (!st->live)
        return;
    memset(st->stamp, 0, (size_t)st->nkeys * sizeof *st->stamp);
    memset(st->bit, 0, ((size_t)st->cap + 1) * sizeof *st->bit);
    st->now = st->live = 0;
}

/* Keys more recent than key; nkeys when key was never used (a cold miss). */
static uint32_t stack_depth(const lru_stack *st, uint32_t key)
{
    uint32_t s = st->stamp[key];
    return s ? st->live - bit_prefix(st, s) : st->nkeys;
}

typedef struct {
    uint32_t stamp, key;
} stamp_key;

static int by_stamp(const void *a, const void *b)
{
    uint32_t x = ((const stamp_key *)a)->stamp, y = ((const stamp_key *)b)->stamp;
    return (x > y) - (x < y);
}

/* Renumbers the live stamps 1..live in their order (the tree is full). */
static void stack_compact(lru_stack *st)
{
    stamp_key *v = ms_xcalloc(st->live ? st->live : 1, sizeof *v);
    uint32_t n = 0;
    for (uint32_t k = 0; k < st->nkeys; k++)
        if (st->stamp[k])
            v[n++] = (stamp_key){st->stamp[k], k};
    qsort(v, n, sizeof *v, by_stamp);
    memset(st->bit, 0, ((size_t)st->cap + 1) * sizeof *st->bit);
    for (uint32_t i = 0; i < n; i++) {
        st->stamp[v[i].key] = i + 1;
        bit_add(st, i + 1, 1);
    }
    st->now = n;
    free(v);
}

/* Makes key the most recent. */
static void stack_touch(lru_stack *st, uint32_t key)
{
    if (st->now == st->cap)
        stack_compact(st);
    if (st->stamp[key])
        bit_add(st, st->stamp[key], -1);
    else
        st->live++;
    st->stamp[key] = ++st->now;
    bit_add(st, st->now, 1);
}

/* ---- variants ---- */

#define N_SCOPES 2
#define N_RESETS 2

typedef struct {
    lru_stack *stacks; /* layer: [L] of J keys; global: [1] of L*J keys */
    uint32_t nstacks;
    uint64_t *hist;    /* [nkeys + 1] depth histogram, nkeys = cold */
    uint64_t accesses;
} variant;

struct ms_locality {
    uint32_t L, J, K;
    variant v[2][N_SCOPES][N_RESETS]; /* [granularity][scope][reset] */
    uint32_t *step_ids;  /* [J] the access's distinct experts, in cell order */
    uint32_t *depth;     /* [J] their depths before the access */
    uint8_t *in_step;    /* [J] */
    uint32_t *last_dec;  /* [L][J] decode step (1-based) of the last use in this request, 0 none */
    uint64_t reuse[MS_LOC_REUSE_BUCKETS];
    uint64_t reuse_den;
    uint32_t *dec_cnt;   /* [L][J] decode activations of the current request */
    double h_dec_sum;    /* sum over requests of their decode entropy */
    uint64_t h_dec_n;    /* requests with decode activations */
};

static uint32_t variant_keys(const ms_locality *loc, int g)
{
    return g == MS_LOC_LAYER ? loc->J : loc->L * loc->J;
}

ms_locality *ms_locality_new(uint32_t L, uint32_t J, uint32_t K, ms_err *err)
{
    if (!L || !J || (uint64_t)L * J > (1u << 26)) {
        ms_fail(err, "locality: %u layers x %u experts: need 1 .. 2^26 (layer, expert) pairs", L, J);
        return NULL;
    }
    ms_locality *loc = ms_xcalloc(1, sizeof *loc);
    loc->L = L;
    loc->J = J;
    loc->K = K;
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < N_SCOPES; s++)
            for (int r = 0; r < N_RESETS; r++) {
                variant *v = &loc->v[g][s][r];
                v->nstacks = g == MS_LOC_LAYER ? L : 1;
                v->stacks = ms_xcalloc(v->nstacks, sizeof *v->stacks);
                for (uint32_t i = 0; i < v->nstacks; i++)
                    stack_init(&v->stacks[i], variant_keys(loc, g));
                v->hist = ms_xcalloc((size_t)variant_keys(loc, g) + 1, sizeof *v->hist);
            }
    loc->step_ids = ms_xcalloc(J, sizeof *loc->step_ids);
    loc->depth = ms_xcalloc(J, sizeof *loc->depth);
    loc->in_step = ms_xcalloc(J, 1);
    loc->last_dec = ms_xcalloc((size_t)L * J, sizeof *loc->last_dec);
    loc->dec_cnt = ms_xcalloc((size_t)L * J, sizeof *loc->dec_cnt);
    return loc;
}

void ms_locality_free(ms_locality *loc)
{
    if (!loc)
        return;
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < N_SCOPES; s++)
            for (int r = 0; r < N_RESETS; r++) {
                variant *v = &loc->v[g][s][r];
                for (uint32_t i = 0; i < v->nstacks; i++)
                    stack_free(&v->stacks[i]);
                free(v->stacks);
                free(v->hist);
            }
    free(loc->step_ids);
    free(loc->depth);
    free(loc->in_step);
    free(loc->last_dec);
    free(loc->dec_cnt);
    free(loc);
}

/* The distinct experts of iteration it at layer l, in cell order; returns
 * their count. */
static uint32_t collect_step(ms_locality *loc, const ms_request *req, const ms_iteration *it, uint32_t l)
{
    uint32_t n = 0, L = loc->L, K = loc->K;
    for (uint32_t row = it->row0; row < it->row0 + it->n_rows; row++) {
        const int32_t *ids = req->topk_ids + ((size_t)row * L + l) * K;
        for (uint32_t k = 0; k < K; k++) {
            int32_t e = ids[k];
            if (e >= 0 && !loc->in_step[e]) {
                loc->in_step[e] = 1;
                loc->step_ids[n++] = (uint32_t)e;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++)
        loc->in_step[loc->step_ids[i]] = 0;
    return n;
}

/* One access of n experts at layer l to variant v: depths first (the gate
 * decides every hit before anything moves), then the set made most recent. */
static void variant_access(ms_locality *loc, variant *v, int g, uint32_t l, uint32_t n)
{
    lru_stack *st = g == MS_LOC_LAYER ? &v->stacks[l] : &v->stacks[0];
    uint32_t base = g == MS_LOC_LAYER ? 0 : l * loc->J;
    for (uint32_t i = 0; i < n; i++)
        loc->depth[i] = stack_depth(st, base + loc->step_ids[i]);
    for (uint32_t i = 0; i < n; i++) {
        v->hist[loc->depth[i]]++;
        stack_touch(st, base + loc->step_ids[i]);
    }
    v->accesses += n;
}

static int reuse_bucket(uint32_t d)
{
    int b = 0;
    while (b < 7 && d > (1u << b))
        b++;
    return b; /* 1 -> 0, 2 -> 1, 3-4 -> 2, ..., 33-64 -> 6, >= 65 -> 7 */
}

static void count_reuse(ms_locality *loc, uint32_t l, uint32_t dstep, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t *last = &loc->last_dec[(size_t)l * loc->J + loc->step_ids[i]];
        if (dstep >= 2) {
            loc->reuse[*last ? reuse_bucket(dstep - *last) : MS_LOC_REUSE_BUCKETS - 1]++;
            loc->reuse_den++;
        }
        *last = dstep;
        loc->dec_cnt[(size_t)l * loc->J + loc->step_ids[i]]++;
    }
}

/* The request's decode entropy (mean over layers with decode activations)
 * into the running mean; clears the counts. */
static void end_request_entropy(ms_locality *loc)
{
    double sum = 0;
    uint32_t layers = 0;
    for (uint32_t l = 0; l < loc->L; l++) {
        uint32_t *c = loc->dec_cnt + (size_t)l * loc->J;
        double n = 0, s = 0;
        for (uint32_t e = 0; e < loc->J; e++)
            if (c[e]) {
                n += c[e];
                s += c[e] * log2((double)c[e]);
                c[e] = 0;
            }
        if (n > 0) {
            double h = log2(n) - s / n;
            sum += h > 0 ? h : 0;
            layers++;
        }
    }
    if (layers) {
        loc->h_dec_sum += sum / layers;
        loc->h_dec_n++;
    }
}

void ms_locality_add(ms_locality *loc, const ms_request *req)
{
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < N_SCOPES; s++) {
            variant *v = &loc->v[g][s][MS_LOC_RESET_REQUEST];
            for (uint32_t i = 0; i < v->nstacks; i++)
                stack_reset(&v->stacks[i]);
        }
    memset(loc->last_dec, 0, (size_t)loc->L * loc->J * sizeof *loc->last_dec);
    uint32_t dstep = 0;
    for (uint32_t i = 0; i < req->n_iters; i++) {
        const ms_iteration *it = &req->iters[i];
        int decode = it->phase == MS_PHASE_DECODE;
        dstep += decode;
        for (uint32_t l = 0; l < loc->L; l++) {
            uint32_t n = collect_step(loc, req, it, l);
            for (int g = 0; g < 2; g++)
                for (int s = 0; s < N_SCOPES; s++) {
                    if (s == MS_LOC_DECODE && !decode)
                        continue;
                    for (int r = 0; r < N_RESETS; r++)
                        variant_access(loc, &loc->v[g][s][r], g, l, n);
                }
            if (decode)
                count_reuse(loc, l, dstep, n);
        }
    }
    end_request_entropy(loc);
}

/* ---- results ---- */

double ms_locality_lru_hit(const ms_locality *loc, ms_loc_granularity g, ms_loc_scope s, ms_loc_reset r,
                           uint64_t entries)
{
    const variant *v = &loc->v[g][s][r];
    if (!v->accesses)
        return NAN;
    uint32_t nkeys = variant_keys(loc, g);
    uint64_t hits = 0;
    for (uint64_t d = 0; d < entries && d < nkeys; d++)
        hits += v->hist[d];
    return (double)hits / (double)v->accesses;
}

uint64_t ms_locality_accesses(const ms_locality *loc, ms_loc_granularity g, ms_loc_scope s, ms_loc_reset r)
{
    return loc->v[g][s][r].accesses;
}

double ms_locality_reuse_bucket(const ms_locality *loc, int b)
{
    if (b < 0 || b >= MS_LOC_REUSE_BUCKETS || !loc->reuse_den)
        return NAN;
    return (double)loc->reuse[b] / (double)loc->reuse_den;
}

double ms_locality_h_req_decode(const ms_locality *loc)
{
    return loc->h_dec_n ? loc->h_dec_sum / (double)loc->h_dec_n : NAN;
}

const char *ms_locality_bucket_name(int b)
{
    static const char *const names[MS_LOC_REUSE_BUCKETS] = {"1",     "2",     "3-4",  "5-8", "9-16",
                                                            "17-32", "33-64", ">=65", "none"};
    return b >= 0 && b < MS_LOC_REUSE_BUCKETS ? names[b] : "?";
}

const char *ms_loc_granularity_name(ms_loc_granularity g)
{
    return g == MS_LOC_LAYER ? "layer" : "global";
}

const char *ms_loc_scope_name(ms_loc_scope s)
{
    return s == MS_LOC_DECODE ? "decode" : "all";
}

const char *ms_loc_reset_name(ms_loc_reset r)
{
    return r == MS_LOC_RESET_REQUEST ? "request" : "none";
}

static const double global_fractions[] = {1.0 / 32, 1.0 / 16, 1.0 / 8, 1.0 / 4, 3.0 / 8, 1.0 / 2, 3.0 / 4};
#define N_GLOBAL_FRACTIONS (sizeof global_fractions / sizeof global_fractions[0])

/* Entries of a cache holding fraction f of n keys (at least 1). */
static uint64_t entries_of(double f, uint64_t n)
{
    uint64_t c = (uint64_t)ceil(f * (double)n - 1e-9);
    return c ? c : 1;
}

static void add_number(cJSON *a, double x)
{
    cJSON_AddItemToArray(a, isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull());
}

cJSON *ms_locality_to_json(const ms_locality *loc)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *lay = cJSON_AddObjectToObject(o, "lru_layer");
    cJSON *glo = cJSON_AddObjectToObject(o, "lru_global");
    for (int s = 0; s < N_SCOPES; s++)
        for (int r = 0; r < N_RESETS; r++) {
            char name[48];
            snprintf(name, sizeof name, "%s_reset_%s", ms_loc_scope_name(s), ms_loc_reset_name(r));
            cJSON *curve = cJSON_AddArrayToObject(lay, name);
            for (uint32_t c = 1; c <= loc->J; c++)
                add_number(curve, ms_locality_lru_hit(loc, MS_LOC_LAYER, s, r, c));
            cJSON *g = cJSON_AddObjectToObject(glo, name);
            cJSON *fr = cJSON_AddArrayToObject(g, "fraction");
            cJSON *hit = cJSON_AddArrayToObject(g, "hit");
            for (size_t i = 0; i < N_GLOBAL_FRACTIONS; i++) {
                add_number(fr, global_fractions[i]);
                add_number(hit, ms_locality_lru_hit(loc, MS_LOC_GLOBAL, s, r,
                                                    entries_of(global_fractions[i], (uint64_t)loc->L * loc->J)));
            }
        }
    double hd = ms_locality_h_req_decode(loc);
    cJSON_AddItemToObject(o, "h_req_decode", isfinite(hd) ? cJSON_CreateNumber(hd) : cJSON_CreateNull());
    cJSON *rd = cJSON_AddObjectToObject(o, "reuse_distance");
    for (int b = 0; b < MS_LOC_REUSE_BUCKETS; b++) {
        double f = ms_locality_reuse_bucket(loc, b);
        cJSON_AddItemToObject(rd, ms_locality_bucket_name(b), isfinite(f) ? cJSON_CreateNumber(f) : cJSON_CreateNull());
    }
    return o;
}

static void print_hit(FILE *out, double h)
{
    if (isfinite(h))
        fprintf(out, " %.3f", h);
    else
        fputs(" -", out);
}

void ms_locality_print(const ms_locality *loc, FILE *out)
{
    fputs("LRU hit rate, one cache per layer (decode steps; cache reset per request), slots:", out);
    for (uint32_t c = 1; c <= loc->J; c *= 2)
        fprintf(out, " %u", c);
    fputs("\n  ", out);
    for (uint32_t c = 1; c <= loc->J; c *= 2)
        print_hit(out, ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_REQUEST, c));
    fputs("\nLRU hit rate, one cache of (layer, expert) pairs (all iterations; no reset), fraction:", out);
    for (size_t i = 0; i < N_GLOBAL_FRACTIONS; i++)
        fprintf(out, " %.3g", global_fractions[i]);
    fputs("\n  ", out);
    for (size_t i = 0; i < N_GLOBAL_FRACTIONS; i++)
        print_hit(out, ms_locality_lru_hit(loc, MS_LOC_GLOBAL, MS_LOC_ALL, MS_LOC_RESET_NONE,
                                           entries_of(global_fractions[i], (uint64_t)loc->L * loc->J)));
    fputs("\ndecode request entropy (bits, a request's decode steps, mean over layers then requests):", out);
    print_hit(out, ms_locality_h_req_decode(loc));
    fputs("\nreuse distance of decode experts (steps back to the last use at that layer):", out);
    for (int b = 0; b < MS_LOC_REUSE_BUCKETS; b++) {
        fprintf(out, " %s", ms_locality_bucket_name(b));
        print_hit(out, ms_locality_reuse_bucket(loc, b));
    }
    fputc('\n', out);
}
