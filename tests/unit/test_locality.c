/* Cache locality (traces/stats/locality.h) and locality targets
 * (traces/stats/targets.h): LRU hit rates and reuse distances on hand-built
 * requests worked out in the comments; the one-pass stack distances against
 * a direct LRU simulation on long random requests (past the Fenwick tree's
 * renumbering); the targets file's errors. */
#include <unistd.h>

#include "check.h"
#include "splitmix.h"
#include "traces/stats/locality.h"
#include "traces/stats/targets.h"

#define MAXROWS 4096

typedef struct {
    ms_request r;
    ms_iteration it[MAXROWS];
    int32_t ids[MAXROWS * 8];
} req_buf;

/* One request: iteration 0 a prefill of prefill_rows rows (0 = none), then
 * one decode step per further row; ids hold [row][layer][slot]. */
static ms_request *build(req_buf *b, uint32_t L, uint32_t K, uint32_t prefill_rows, uint32_t rows, const int32_t *ids)
{
    memset(&b->r, 0, sizeof b->r);
    uint32_t n = 0, row = 0;
    if (prefill_rows) {
        b->it[n++] = (ms_iteration){MS_PHASE_PREFILL, 0, prefill_rows};
        row = prefill_rows;
    }
    for (; row < rows; row++)
        b->it[n++] = (ms_iteration){MS_PHASE_DECODE, row, 1};
    memcpy(b->ids, ids, (size_t)rows * L * K * sizeof *ids);
    b->r.n_iters = n;
    b->r.iters = b->it;
    b->r.n_rows = rows;
    b->r.topk_ids = b->ids;
    return &b->r;
}

static req_buf buf;

/* L = 1, J = 4, K = 2, decode steps {0,1} {1,2} {0,1} {3,0}.  Recency lists
 * (most recent first; a later cell of a step is more recent):
 *   step 1: 0, 1 cold            -> [1 0]
 *   step 2: 1 depth 0, 2 cold    -> [2 1 0]
 *   step 3: 0 depth 2, 1 depth 1 -> [1 0 2]
 *   step 4: 3 cold, 0 depth 1    -> [0 3 1 2]
 * depths 0:1, 1:2, 2:1, cold:4 of 8: hit at 1 slot 1/8, 2: 3/8, 3 and 4: 4/8.
 * Reuse distances (steps >= 2): 1 d=1, 2 none, 0 d=2, 1 d=1, 3 none, 0 d=1:
 * bucket 1: 3/6, bucket 2: 1/6, none: 2/6. */
static void hand_per_layer(void)
{
    const int32_t ids[] = {0, 1, 1, 2, 0, 1, 3, 0};
    ms_err err;
    ms_locality *loc = ms_locality_new(1, 4, 2, &err);
    ms_locality_add(loc, build(&buf, 1, 2, 0, 4, ids));
    double want[] = {1.0 / 8, 3.0 / 8, 4.0 / 8, 4.0 / 8};
    for (int c = 1; c <= 4; c++)
        CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_REQUEST, (uint64_t)c),
                   want[c - 1], 1e-12);
    CHECK_EQ_INT(ms_locality_accesses(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_REQUEST), 8);
    /* one layer: the global cache is the same */
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_GLOBAL, MS_LOC_DECODE, MS_LOC_RESET_NONE, 2), 3.0 / 8, 1e-12);
    CHECK_NEAR(ms_locality_reuse_bucket(loc, 0), 3.0 / 6, 1e-12);
    CHECK_NEAR(ms_locality_reuse_bucket(loc, 1), 1.0 / 6, 1e-12);
    CHECK_NEAR(ms_locality_reuse_bucket(loc, 2), 0.0, 1e-12);
    CHECK_NEAR(ms_locality_reuse_bucket(loc, MS_LOC_REUSE_BUCKETS - 1), 2.0 / 6, 1e-12);
    /* decode counts 0:3, 1:3, 2:1, 3:1 of 8: H = 3 - (2 * 3 log2 3) / 8 */
    CHECK_NEAR(ms_locality_h_req_decode(loc), 3.0 - 6.0 * log2(3.0) / 8.0, 1e-12);

    /* The same request again: reset per request repeats the first pass
     * (3 of 8 at 2 slots, twice); without a reset the list is [0 3 1 2] at
     * its start: step 1: 0 depth 0, 1 depth 2 -> [1 0 3 2]; step 2: 1 depth 0,
     * 2 depth 3 -> [2 1 0 3]; step 3: 0 depth 2, 1 depth 1 -> [1 0 2 3];
     * step 4: 3 depth 3, 0 depth 1 -> hits at 2 slots: 0 (step 1), 1 (step 2),
     * 1 (step 3), 0 (step 4) = 4 of 8; in all 3 + 4 = 7 of 16. */
    ms_locality_add(loc, build(&buf, 1, 2, 0, 4, ids));
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_REQUEST, 2), 6.0 / 16, 1e-12);
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_NONE, 2), 7.0 / 16, 1e-12);
    /* at 4 slots without a reset every access of the second pass hits */
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_NONE, 4), 12.0 / 16, 1e-12);
    ms_locality_free(loc);
}

/* A prefill of two rows {0,1} {2,1} (one access of {0,1,2}, cells in order
 * 0 1 2 so the list is [2 1 0]), then decode {0,3}: scope all counts the
 * prefill (3 cold) and the step (0 depth 2, 3 cold); scope decode sees the
 * step alone (both cold).  L = 2 with layer 1 always {3}: the global cache of
 * (layer, expert) pairs sees layers in order: after the prefill its list is
 * [(1,3) (0,2) (0,1) (0,0)]; at the decode step (0,0) has depth 3, (0,3) is
 * cold, and then (1,3) has depth 2 (layer 0's two keys came first). */
static void hand_scopes(void)
{
    /* rows x layers x slots: row 0: L0 {0,1}, L1 {3,-1}; row 1: L0 {2,1}, L1 {3,-1}; row 2: L0 {0,3}, L1 {3,-1} */
    const int32_t ids[] = {0, 1, 3, -1, 2, 1, 3, -1, 0, 3, 3, -1};
    ms_err err;
    ms_locality *loc = ms_locality_new(2, 4, 2, &err);
    ms_locality_add(loc, build(&buf, 2, 2, 2, 3, ids));
    /* layer caches, scope all: layer 0: 3 cold + (0 depth 2, 3 cold); layer 1: cold, then depth 0 */
    CHECK_EQ_INT(ms_locality_accesses(loc, MS_LOC_LAYER, MS_LOC_ALL, MS_LOC_RESET_REQUEST), 7);
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_ALL, MS_LOC_RESET_REQUEST, 2), 1.0 / 7, 1e-12);
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_ALL, MS_LOC_RESET_REQUEST, 3), 2.0 / 7, 1e-12);
    /* scope decode: layer 0 {0,3} both cold, layer 1 {3} cold */
    CHECK_EQ_INT(ms_locality_accesses(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_REQUEST), 3);
    /* decode entropy: layer 0 {0,3} 1 bit, layer 1 {3} 0 bits: mean 0.5 */
    CHECK_NEAR(ms_locality_h_req_decode(loc), 0.5, 1e-12);
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_REQUEST, 4), 0.0, 1e-12);
    /* global, scope all: (1,3) depth 2 and (0,0) depth 3 at the step */
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_GLOBAL, MS_LOC_ALL, MS_LOC_RESET_NONE, 2), 0.0, 1e-12);
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_GLOBAL, MS_LOC_ALL, MS_LOC_RESET_NONE, 3), 1.0 / 7, 1e-12);
    CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_GLOBAL, MS_LOC_ALL, MS_LOC_RESET_NONE, 4), 2.0 / 7, 1e-12);
    ms_locality_free(loc);
}

/* ---- a direct LRU simulation (set semantics) ---- */

typedef struct {
    int32_t list[512]; /* most recent first */
    uint32_t n;
} mtf;

static int mtf_pos(const mtf *m, int32_t k)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (m->list[i] == k)
            return (int)i;
    return -1;
}

static void mtf_touch(mtf *m, int32_t k)
{
    int p = mtf_pos(m, k);
    uint32_t from = p < 0 ? m->n++ : (uint32_t)p;
    memmove(m->list + 1, m->list, from * sizeof *m->list);
    m->list[0] = k;
}

/* Long random requests through both: per-layer and global, every cache
 * size, with and without a reset.  The global stack of L * J = 48 keys
 * renumbers its stamps every 4,096 touches, so thousands of steps cross it
 * many times. */
static void random_against_direct(void)
{
    enum { L = 3, J = 16, K = 3, ROWS = 3000 };
    static int32_t ids[ROWS * L * K];
    ms_err err;
    ms_locality *loc = ms_locality_new(L, J, K, &err);
    static uint64_t hits_layer[2][J + 1], hits_global[2][L * J + 1];
    uint64_t acc_layer = 0;
    static mtf lay[2][L], glo[2];
    memset(lay, 0, sizeof lay);
    memset(glo, 0, sizeof glo);
    memset(hits_layer, 0, sizeof hits_layer);
    memset(hits_global, 0, sizeof hits_global);
    rng_state = 7;
    for (int req = 0; req < 3; req++) {
        for (uint32_t c = 0; c < ROWS * L * K; c++)
            ids[c] = -1;
        for (uint32_t r = 0; r < ROWS; r++)
            for (uint32_t l = 0; l < L; l++) {
                uint32_t base = (uint32_t)below(J - 5); /* a drifting working set */
                for (uint32_t k = 0; k < K; k++) {
                    int32_t e = (int32_t)((base + below(6)) % J);
                    int dup = 0;
                    for (uint32_t j = 0; j < k; j++)
                        dup |= ids[(r * L + l) * K + j] == e;
                    ids[(r * L + l) * K + k] = dup || below(10) == 0 ? -1 : e;
                }
            }
        ms_locality_add(loc, build(&buf, L, K, 0, ROWS, ids));
        memset(lay[0], 0, sizeof lay[0]);
        memset(&glo[0], 0, sizeof glo[0]);
        for (uint32_t r = 0; r < ROWS; r++)
            for (uint32_t l = 0; l < L; l++) {
                const int32_t *cell = ids + (r * L + l) * K;
                for (int reset = 0; reset < 2; reset++) {
                    int pl[K], pg[K];
                    for (uint32_t k = 0; k < K; k++)
                        if (cell[k] >= 0) {
                            pl[k] = mtf_pos(&lay[reset][l], cell[k]);
                            pg[k] = mtf_pos(&glo[reset], (int32_t)l * J + cell[k]);
                        }
                    for (uint32_t k = 0; k < K; k++)
                        if (cell[k] >= 0) {
                            for (int c = 1; c <= J; c++)
                                hits_layer[reset][c] += pl[k] >= 0 && pl[k] < c;
                            for (int c = 1; c <= L * J; c++)
                                hits_global[reset][c] += pg[k] >= 0 && pg[k] < c;
                            acc_layer += reset == 0;
                            mtf_touch(&lay[reset][l], cell[k]);
                            mtf_touch(&glo[reset], (int32_t)l * J + cell[k]);
                        }
                }
            }
    }
    CHECK_EQ_INT(ms_locality_accesses(loc, MS_LOC_LAYER, MS_LOC_DECODE, MS_LOC_RESET_NONE), acc_layer);
    for (int reset = 0; reset < 2; reset++) {
        ms_loc_reset rr = reset == 0 ? MS_LOC_RESET_REQUEST : MS_LOC_RESET_NONE;
        for (int c = 1; c <= J; c++)
            CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_LAYER, MS_LOC_DECODE, rr, (uint64_t)c),
                       (double)hits_layer[reset][c] / (double)acc_layer, 1e-12);
        for (int c = 1; c <= L * J; c++)
            CHECK_NEAR(ms_locality_lru_hit(loc, MS_LOC_GLOBAL, MS_LOC_DECODE, rr, (uint64_t)c),
                       (double)hits_global[reset][c] / (double)acc_layer, 1e-12);
    }
    ms_locality_free(loc);
}

/* ---- targets files ---- */

static const char good_target[] = "[model]\nname = m\n\n[target a]\nstatistic = lru_hit\ngranularity = layer\n"
                                   "scope = decode\nreset = request\nslots = 2\nvalue = 0.3\nsource = paper, Table 1\n"
                                   "read = table\nworkload = 25 prompts\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* good_target with `from` replaced by `to` must fail with a message holding `want`. */
static void bad_target(const char *from, const char *to, const char *want)
{
    char text[2048], path[] = "locality_targets_bad.ini";
    const char *at = strstr(good_target, from);
    CHECK(at != NULL);
    if (!at)
        return;
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good_target), good_target, to, at + strlen(from));
    write_file(path, text);
    ms_targets ts;
    ms_err err;
    int rc = ms_targets_load(path, &ts, &err);
    CHECK_EQ_INT(rc, -1);
    if (rc)
        CHECK_STR_CONTAINS(err.msg, want);
    unlink(path);
}

static void targets_files(void)
{
    write_file("locality_targets_good.ini", good_target);
    ms_targets ts;
    ms_err err;
    CHECK_EQ_INT(ms_targets_load("locality_targets_good.ini", &ts, &err), 0);
    CHECK_EQ_INT(ts.n, 1);
    CHECK_NEAR(ts.t[0].tolerance, 0.05, 0);
    CHECK_EQ_INT(ts.t[0].tol_relative, 0);
    CHECK_EQ_INT(ms_target_entries(&ts.t[0], 32, 8), 2);
    CHECK(ms_target_met(&ts.t[0], 0.349) && !ms_target_met(&ts.t[0], 0.351) && !ms_target_met(&ts.t[0], NAN));
    unlink("locality_targets_good.ini");

    bad_target("slots = 2\n", "slots = 2\nbogus = 1\n", "locality_targets_bad.ini:10: [target a] bogus: unknown key");
    bad_target("lru_hit", "lru_rate", "statistic = lru_rate: unknown");
    bad_target("source = paper, Table 1\n", "", "locality_targets_bad.ini:4: [target a]: key source missing");
    bad_target("slots = 2\n", "slots = 2\nfraction = 0.25\n", "give exactly one of slots and fraction");
    bad_target("value = 0.3", "value = 1.3", "value = 1.3: a rate must lie in 0 .. 1");
    bad_target("value = 0.3", "value = x", "value = x: not a number");
    bad_target("slots = 2", "slots = 2.5", "slots = 2.5: not a whole number");
    bad_target("scope = decode", "scope = prefill", "scope = prefill: expected decode or all");
    bad_target("[target a]", "[targets a]", "[targets a]: unknown section");
    bad_target("workload = 25 prompts\n", "workload = 25 prompts\n[target a]\n", "target given twice (first on line 4)");
    bad_target("name = m\n", "", "[model] name missing");
    bad_target("statistic = lru_hit\ngranularity = layer\nscope = decode\nreset = request\nslots = 2\n",
               "statistic = reuse_prev\nslots = 2\n", "key slots applies to lru_hit and lru_miss only");

    /* srp / sch: window (and rho for sch) where they apply, the published grid only */
    const char *lru = "statistic = lru_hit\ngranularity = layer\nscope = decode\nreset = request\nslots = 2\n";
    bad_target(lru, "statistic = srp\n", "locality_targets_bad.ini:4: [target a]: key window missing (statistic srp needs it)");
    bad_target(lru, "statistic = sch\nwindow = 16\n", "[target a]: key rho missing (statistic sch needs it)");
    bad_target(lru, "statistic = srp\nwindow = 16\nrho = 2\n", "[target a]: key rho applies to sch only");
    bad_target(lru, "statistic = srp\nwindow = 5\n",
               "locality_targets_bad.ini:6: [target a] window = 5: expected 4, 16, 64 or 256");
    bad_target(lru, "statistic = sch\nwindow = 16\nrho = 3\n", "locality_targets_bad.ini:7: [target a] rho = 3: expected 2");
    bad_target(lru, "statistic = sch\nwindow = 16\nrho = x\n", "[target a] rho = x: not a number");
    bad_target(lru, "statistic = sch\nwindow = 16\nrho = 2\nwinddow = 4\n", ":8: [target a] winddow: unknown key");
    bad_target("slots = 2\n", "slots = 2\nwindow = 16\n", "key window applies to srp and sch only");
    char lru_value[160];
    snprintf(lru_value, sizeof lru_value, "%svalue = 0.3", lru);
    bad_target(lru_value, "statistic = srp\nwindow = 16\nvalue = 54.14", "value = 54.14: srp is a fraction in 0 .. 1");
    write_file("locality_targets_seg.ini", "[model]\nname = m\n[target s]\nstatistic = sch\nwindow = 64\nrho = 2\n"
                                           "value = 0.5\nsource = s\nread = table\nworkload = w\n[target r]\n"
                                           "statistic = srp\nwindow = 16\nvalue = 0.5\nsource = s\nread = table\n"
                                           "workload = w\n");
    CHECK_EQ_INT(ms_targets_load("locality_targets_seg.ini", &ts, &err), 0);
    CHECK(ts.n == 2 && ts.t[0].stat == MS_TGT_SCH && ts.t[0].window == 64 && ts.t[0].rho == 2);
    CHECK(!ts.t[0].tol_relative && ts.t[0].tolerance == 0.05); /* a hit rate: absolute */
    CHECK(ts.t[1].stat == MS_TGT_SRP && ts.t[1].tol_relative && ts.t[1].tolerance == 0.10);
    unlink("locality_targets_seg.ini");

    /* relative tolerance and a continued source */
    write_file("locality_targets_rel.ini", "[model]\nname = m\n[target r]\nstatistic = reuse_prev\nvalue = 0.4\n"
                                           "tolerance = 10%\nsource = a long\n  citation\nread = text\nworkload = w\n");
    CHECK_EQ_INT(ms_targets_load("locality_targets_rel.ini", &ts, &err), 0);
    CHECK(ts.n == 1 && ts.t[0].tol_relative && !strcmp(ts.t[0].source, "a long citation"));
    CHECK(ms_target_met(&ts.t[0], 0.439) && !ms_target_met(&ts.t[0], 0.441));
    unlink("locality_targets_rel.ini");
}

int main(void)
{
    hand_per_layer();
    hand_scopes();
    random_against_direct();
    targets_files();
    CHECK_DONE();
}
