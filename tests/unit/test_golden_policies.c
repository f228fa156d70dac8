/* Every policy in the registry, in every `mode` it has, replays both real
 * traces (imported from ../shared/traces/bigmoeonedge) and a synthetic one at
 * three cache sizes; the hit / late / miss / on-CPU counts (or the one-line
 * error, for a policy that needs what a trace lacks) are golden
 * (tests/data/golden_policies.csv; MOESIM_GOLDEN_UPDATE=1 rewrites it).
 *
 * Each prefetcher runs over lru, each cache under no prefetching, each
 * scheduler with none + lru; the papers' systems also run as the pairs they
 * were designed as, and the public code's systems (mode=code) as theirs.
 * The table is built by iterating the registry, so a new policy without
 * golden rows fails this test.  Also checked:
 *  - where a policy has mode=paper|code, the modes differ on some trace and
 *    size (docs/policies.md documents how they differ);
 *  - Belady misses no more than any cold-start cache (no preload) on every
 *    trace and size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "policies/policy.h"
#include "sim/engine/engine.h"
#include "sim/engine/report.h"
#include "fixtures.h"

static ms_platform platform;

typedef struct {
    const char *name, *path;
    double sizes[3];
} test_trace;

/* Per-policy parameters that keep the suite fast (documented in docs/policies.md's
 * test section): the map store and EAM collection are capped. */
static const struct {
    ms_policy_kind kind;
    const char *name, *params;
} speed_params[] = {
    {MS_KIND_PREFETCH, "fmoe", "capacity=200"},
    {MS_KIND_PREFETCH, "eam", "capacity=50"},
};

typedef struct {
    char prefetch[128], cache[128], sched[128];
} combo;

typedef struct {
    combo *v;
    size_t n, cap;
} combo_list;

static void add_combo(combo_list *l, const char *pf, const char *cache, const char *sched)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    combo *c = &l->v[l->n++];
    snprintf(c->prefetch, sizeof c->prefetch, "%s", pf);
    snprintf(c->cache, sizeof c->cache, "%s", cache);
    snprintf(c->sched, sizeof c->sched, "%s", sched);
}

/* "name" plus its speed parameters and ",mode=M" when given. */
static void spec_of(ms_policy_kind kind, const char *name, const char *mode, char *out, size_t cap)
{
    const char *extra = NULL;
    for (size_t i = 0; i < sizeof speed_params / sizeof speed_params[0]; i++)
        if (speed_params[i].kind == kind && !strcmp(speed_params[i].name, name))
            extra = speed_params[i].params;
    snprintf(out, cap, "%s", name);
    size_t n = strlen(out);
    if (extra || mode)
        snprintf(out + n, cap - n, ":%s%s%s%s", extra ? extra : "", extra && mode ? "," : "", mode ? "mode=" : "",
                 mode ? mode : "");
}

static const ms_param_spec *mode_param(const ms_policy_desc *d)
{
    for (const ms_param_spec *p = d->params; p && p->name; p++)
        if (!strcmp(p->name, "mode") && p->type == MS_PARAM_ENUM)
            return p;
    return NULL;
}

/* Each mode value of an ENUM "a|b|c" (NULL mode list: one run with defaults). */
static void add_policy(combo_list *l, const ms_policy_desc *d)
{
    const ms_param_spec *mp = mode_param(d);
    char modes[256] = "";
    if (mp && mp->choices)
        snprintf(modes, sizeof modes, "%s", mp->choices);
    char *save = NULL, *m = mp ? strtok_r(modes, "|", &save) : NULL;
    do {
        char spec[128];
        spec_of(d->kind, d->name, m, spec, sizeof spec);
        if (d->kind == MS_KIND_PREFETCH)
            add_combo(l, spec, "lru", "gpu");
        else if (d->kind == MS_KIND_CACHE)
            add_combo(l, "none", spec, "gpu");
        else
            add_combo(l, "none", "lru", spec);
    } while (m && (m = strtok_r(NULL, "|", &save)));
}

static combo_list all_combos(void)
{
    combo_list l = {0};
    for (int i = 0; ms_policy_registry[i]; i++)
        add_policy(&l, ms_policy_registry[i]);
    /* the papers' systems as designed */
    static const char *const pairs[][3] = {
        {"fmoe", "fmoe", "gpu"}, {"eam", "eam", "gpu"}, {"hybrimoe", "mrs", "hybrid"},
        {"speculative", "lru-slots", "gpu"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char cache_name[64];
        snprintf(cache_name, sizeof cache_name, "%.*s", (int)strcspn(pairs[i][1], ":"), pairs[i][1]);
        if (!ms_policy_find(MS_KIND_PREFETCH, pairs[i][0]) || !ms_policy_find(MS_KIND_CACHE, cache_name) ||
            !ms_policy_find(MS_KIND_SCHED, pairs[i][2]))
            continue;
        char pf[128], cache[128];
        spec_of(MS_KIND_PREFETCH, pairs[i][0], NULL, pf, sizeof pf);
        if (strchr(pairs[i][1], ':'))
            snprintf(cache, sizeof cache, "%s", pairs[i][1]);
        else
            spec_of(MS_KIND_CACHE, pairs[i][1], NULL, cache, sizeof cache);
        add_combo(&l, pf, cache, pairs[i][2]);
    }
    /* the public code's systems (issue 16), with the speed parameters above */
    static const char *const code_systems[][3] = {
        {"eam:capacity=50,mode=code", "eam:mode=code", "gpu"},
        {"fmoe:capacity=200,mode=code", "fmoe:mode=code", "gpu"},
        {"hybrimoe:mode=code", "mrs:mode=code", "hybrid:mode=code"},
    };
    for (size_t i = 0; i < sizeof code_systems / sizeof code_systems[0]; i++)
        add_combo(&l, code_systems[i][0], code_systems[i][1], code_systems[i][2]);
    return l;
}

typedef struct {
    int trace;
    double size;
    combo c;
    char counts[1100]; /* "hits;late;misses;on_cpu" or "error..." */
} run_row;

static void run_one(const test_trace *t, const combo *c, double size, run_row *r)
{
    ms_run_config cfg = {.trace_path = t->path, .platform = &platform, .prefetch_spec = c->prefetch,
                         .cache_spec = c->cache, .sched_spec = c->sched, .cap_kind = MS_CAP_EXPERTS,
                         .cap_value = size, .distance = 1, .max_batch = 1, .seed = 1};
    ms_metrics m;
    ms_err err;
    r->size = size;
    r->c = *c;
    if (ms_run(&cfg, &m, &err)) {
        /* the message without the file path (it differs between builds) */
        const char *msg = strstr(err.msg, ".h5") ? strstr(err.msg, ".h5") + 3 : err.msg;
        snprintf(r->counts, sizeof r->counts, "error%s", msg);
        return;
    }
    snprintf(r->counts, sizeof r->counts, "%llu;%llu;%llu;%llu", (unsigned long long)m.total.hits,
             (unsigned long long)m.total.late, (unsigned long long)m.total.misses,
             (unsigned long long)m.total.on_cpu);
    ms_metrics_free(&m);
}

/* Golden rows of the traces named `only` (NULL: all, and the file is
 * complete); returns every run. */
static run_row *check_golden(const test_trace *traces, int n_traces, const combo_list *l, const char *only,
                             size_t *n_rows)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/golden_policies.csv", MS_TEST_DATA);
    int update = getenv("MOESIM_GOLDEN_UPDATE") != NULL;
    FILE *f = fopen(path, update ? "w" : "r");
    CHECK(f != NULL);
    char line[1024];
    if (f && update)
        fputs("trace;prefetch;cache;sched;cache_experts;hits;late;misses;on_cpu\n", f);
    else if (f)
        CHECK(fgets(line, sizeof line, f) != NULL);
    size_t k = 0;
    run_row *rows = calloc((size_t)n_traces * l->n * 3, sizeof *rows);
    for (int t = 0; t < n_traces; t++)
        for (size_t c = 0; c < l->n; c++)
            for (int s = 0; s < 3; s++) {
                if (only && strcmp(traces[t].name, only))
                    continue;
                run_row *r = &rows[k++];
                r->trace = t;
                run_one(&traces[t], &l->v[c], traces[t].sizes[s], r);
                char got[1536];
                snprintf(got, sizeof got, "%s;%s;%s;%s;%g;%s\n", traces[t].name, r->c.prefetch, r->c.cache,
                         r->c.sched, r->size, r->counts);
                if (!f)
                    continue;
                if (update) {
                    fputs(got, f);
                    continue;
                }
                int more;
                while ((more = fgets(line, sizeof line, f) != NULL) && only &&
                       (strncmp(line, only, strlen(only)) != 0 || line[strlen(only)] != ';'))
                    ; /* another trace's row: its own test checks it */
                if (!more)
                    snprintf(line, sizeof line, "(no golden row)\n");
                if (strcmp(line, got))
                    fprintf(stderr, "golden mismatch:\n  expected %s  got      %s", line, got);
                CHECK(!strcmp(line, got));
            }
    if (f && !update && !only)
        CHECK(fgets(line, sizeof line, f) == NULL); /* no stale rows left */
    if (f)
        fclose(f);
    *n_rows = k;
    return rows;
}

/* Every golden row, as runs (the modes check covers all traces; each part of
 * this test proved its own trace's rows equal to these). */
static run_row *golden_rows(const test_trace *traces, int n_traces, size_t *n_rows)
{
    char path[1024], line[1600];
    snprintf(path, sizeof path, "%s/golden_policies.csv", MS_TEST_DATA);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = 0, cap = 0;
    run_row *rows = NULL;
    while (f && fgets(line, sizeof line, f)) {
        char *fld[6], *save = NULL, *p = line;
        line[strcspn(line, "\n")] = '\0';
        int nf = 0;
        for (char *tok; nf < 5 && (tok = strtok_r(p, ";", &save)); p = NULL)
            fld[nf++] = tok;
        if (nf < 5 || !strcmp(fld[0], "trace"))
            continue;
        fld[5] = save ? save : (char *)"";
        if (n == cap)
            rows = realloc(rows, (cap = cap ? 2 * cap : 1024) * sizeof *rows);
        run_row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        r->trace = -1;
        for (int t = 0; t < n_traces; t++)
            if (!strcmp(traces[t].name, fld[0]))
                r->trace = t;
        snprintf(r->c.prefetch, sizeof r->c.prefetch, "%s", fld[1]);
        snprintf(r->c.cache, sizeof r->c.cache, "%s", fld[2]);
        snprintf(r->c.sched, sizeof r->c.sched, "%s", fld[3]);
        r->size = atof(fld[4]);
        snprintf(r->counts, sizeof r->counts, "%s", fld[5]);
    }
    if (f)
        fclose(f);
    *n_rows = n;
    return rows;
}

static const char *field_of(const combo *c, ms_policy_kind kind)
{
    return kind == MS_KIND_PREFETCH ? c->prefetch : kind == MS_KIND_CACHE ? c->cache : c->sched;
}

/* Where a policy has mode=paper|code, some (trace, size) must give
 * different counts in the two modes. */
static void check_modes_differ(const run_row *rows, size_t n_rows)
{
    for (int i = 0; ms_policy_registry[i]; i++) {
        const ms_policy_desc *d = ms_policy_registry[i];
        const ms_param_spec *mp = mode_param(d);
        if (!mp || !mp->choices || !strstr(mp->choices, "paper") || !strstr(mp->choices, "code"))
            continue;
        char paper[128], code[128];
        spec_of(d->kind, d->name, "paper", paper, sizeof paper);
        spec_of(d->kind, d->name, "code", code, sizeof code);
        int differ = 0, compared = 0;
        for (size_t a = 0; a < n_rows; a++) {
            if (strcmp(field_of(&rows[a].c, d->kind), paper))
                continue;
            for (size_t b = 0; b < n_rows; b++)
                if (rows[b].trace == rows[a].trace && rows[b].size == rows[a].size &&
                    !strcmp(field_of(&rows[b].c, d->kind), code)) {
                    compared++;
                    differ |= strcmp(rows[a].counts, rows[b].counts) != 0;
                }
        }
        if (!differ)
            fprintf(stderr, "%s %s: mode=paper and mode=code gave identical counts on all %d runs\n",
                    ms_policy_kind_name(d->kind), d->name, compared);
        CHECK(compared > 0);
        CHECK(differ);
    }
}

static void check_belady_bound(const test_trace *t)
{
    for (int s = 0; s < 3; s++) {
        ms_run_config cfg = {.trace_path = t->path, .platform = &platform, .prefetch_spec = "none",
                             .cache_spec = "belady", .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS,
                             .cap_value = t->sizes[s], .distance = 1, .max_batch = 1, .seed = 1,
                             .train_set = 1, .train_frac = 0.7};
        ms_metrics b, m;
        ms_err err;
        if (ms_run(&cfg, &b, &err)) {
            fprintf(stderr, "belady: %s\n", err.msg);
            CHECK(0);
            return;
        }
        for (int i = 0; ms_policy_registry[i]; i++) {
            const ms_policy_desc *d = ms_policy_registry[i];
            if (d->kind != MS_KIND_CACHE || d->cache->preload)
                continue;
            char spec[128];
            spec_of(d->kind, d->name, NULL, spec, sizeof spec);
            cfg.cache_spec = spec;
            if (ms_run(&cfg, &m, &err))
                continue; /* covered by the golden rows */
            if (b.total.misses > m.total.misses)
                fprintf(stderr, "%s at %g: belady %llu misses > %s %llu\n", t->name, t->sizes[s],
                        (unsigned long long)b.total.misses, spec, (unsigned long long)m.total.misses);
            CHECK(b.total.misses <= m.total.misses);
            ms_metrics_free(&m);
        }
        ms_metrics_free(&b);
    }
}

/* test_golden_policies [TRACE]: TRACE (qwen, gptoss or mixtral-syn) checks
 * that trace's golden rows and its Belady bound (ctest runs the three
 * apart, in parallel); without one, everything, and the modes check. */
int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && getenv("MOESIM_GOLDEN_UPDATE")) {
        fprintf(stderr, "MOESIM_GOLDEN_UPDATE rewrites the whole file: run without a trace name\n");
        return 1;
    }
    ms_err err;
    if (ms_platform_load("rtx3090-pcie4", &platform, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    platform.gpu_mem_bytes = 1e15; /* capacity sweeps beyond one card's memory */
    if (!only || !strcmp(only, "qwen"))
        ms_fixture_import_real("qwen", "golden_qwen.h5");
    if (!only || !strcmp(only, "gptoss"))
        ms_fixture_import_real("gptoss", "golden_gptoss.h5");
    if (!only || !strcmp(only, "mixtral-syn"))
        ms_fixture_gen("mixtral-8x7b", "golden_mixtral.h5", 5, 12);
    const test_trace traces[] = {
        {"qwen", "golden_qwen.h5", {256, 1024, 2048}},
        {"gptoss", "golden_gptoss.h5", {256, 1024, 2048}},
        {"mixtral-syn", "golden_mixtral.h5", {16, 32, 64}},
    };
    combo_list l = all_combos();
    size_t n_rows;
    if (only && strcmp(only, "qwen") && strcmp(only, "gptoss") && strcmp(only, "mixtral-syn")) {
        fprintf(stderr, "unknown trace '%s' (qwen, gptoss, mixtral-syn)\n", only);
        return 1;
    }
    run_row *rows = check_golden(traces, 3, &l, only, &n_rows);
    CHECK(n_rows > 0);
    free(rows);
    if (!only || !strcmp(only, "mixtral-syn")) { /* once, over the golden file's rows of all traces */
        rows = golden_rows(traces, 3, &n_rows);
        check_modes_differ(rows, n_rows);
        free(rows);
    }
    for (int t = 0; t < 3; t++)
        if (!only || !strcmp(only, traces[t].name))
            check_belady_bound(&traces[t]);
    free(l.v);
    CHECK_DONE();
}
