/* Golden files of `moesim regress` (format and checks: golden.h). */
#include "sim/apps/golden.h"
#include "sim/core/out.h"

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policies/policy.h"
#include "sim/core/params.h"
#include "sim/engine/report.h"
#include "sim/engine/runkeys.h"

const char *const ms_golden_col_names[MS_GCOL_N] = {
    "trace", "model", "platform", "prefetch", "cache", "sched", "cache_experts", "cache_bytes", "cache_gb",
    "cache_size", "distance", "train",
    "hits", "late", "misses", "on_cpu", "hit_rate",
};

#define DEFAULT_PLATFORM "rtx3090-pcie4"
#define RESULT_FIRST MS_GCOL_HITS /* result columns: hits .. hit_rate */

static int col_is_capacity(int c)
{
    return c == MS_GCOL_CACHE_EXPERTS || c == MS_GCOL_CACHE_BYTES || c == MS_GCOL_CACHE_GB || c == MS_GCOL_CACHE_SIZE;
}

/* Optional one by one; at least one capacity column is checked apart. */
static int col_optional(int c)
{
    return c == MS_GCOL_MODEL || c == MS_GCOL_PLATFORM || col_is_capacity(c);
}

static int col_is_result(int c)
{
    return c >= RESULT_FIRST;
}

/* "FILE:LINE: field F: <message>" */
static int field_fail(ms_err *err, const ms_golden *g, uint32_t line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int field_fail(ms_err *err, const ms_golden *g, uint32_t line, int col, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ms_fail(err, "%s:%u: field %s: %s", g->path, line, ms_golden_col_names[col], msg);
}

/* ---- lines and fields ---- */

static int read_lines(ms_golden *g, ms_err *err)
{
    FILE *f = fopen(g->path, "r");
    if (!f)
        return ms_fail(err, "%s: cannot open: %s", g->path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, alloc = 0;
    ssize_t n;
    while ((n = getline(&buf, &cap, f)) >= 0) {
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            buf[--n] = 0;
        if (g->n_lines == alloc) {
            alloc = alloc ? 2 * alloc : 64;
            g->lines = ms_xrealloc(g->lines, alloc, sizeof *g->lines);
        }
        g->lines[g->n_lines++] = ms_xstrdup(buf);
    }
    free(buf);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return ms_fail(err, "%s: read error", g->path);
    return 0;
}

static char *trim_copy(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *out = ms_xcalloc(n + 1, 1);
    memcpy(out, s, n);
    return out;
}

/* Splits a line at ';' into trimmed copies; returns the count. */
static size_t split_fields(const char *line, char ***out)
{
    size_t n = 1;
    for (const char *p = line; *p; p++)
        n += *p == ';';
    char **f = ms_xcalloc(n, sizeof *f);
    const char *start = line;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(start, ";");
        f[i] = trim_copy(start, len);
        start += len + (start[len] == ';');
    }
    *out = f;
    return n;
}

static void free_fields(char **f, size_t n)
{
    for (size_t i = 0; f && i < n; i++)
        free(f[i]);
    free(f);
}

static int is_comment(const char *line)
{
    while (isspace((unsigned char)*line))
        line++;
    return !*line || *line == '#';
}

/* ---- header ---- */

static int column_index(const char *name)
{
    for (int c = 0; c < MS_GCOL_N; c++)
        if (!strcmp(name, ms_golden_col_names[c]))
            return c;
    return -1;
}

static int parse_header(ms_golden *g, uint32_t line, const char *text, ms_err *err)
{
    char **f;
    size_t n = split_fields(text, &f);
    int rc = 0;
    for (int c = 0; c < MS_GCOL_N; c++)
        g->col[c] = -1;
    for (size_t i = 0; i < n && !rc; i++) {
        int c = column_index(f[i]);
        if (c < 0)
            rc = ms_fail(err, "%s:%u: header: unknown column '%s' (columns: trace;prefetch;cache;sched;"
                         "cache_experts|cache_bytes|cache_gb;distance;train;hits;late;misses;on_cpu;hit_rate, "
                         "optional model;platform)", g->path, line, f[i]);
        else if (g->col[c] >= 0)
            rc = ms_fail(err, "%s:%u: header: column '%s' appears twice", g->path, line, f[i]);
        else
            g->col[c] = (int)i;
    }
    for (int c = 0; c < MS_GCOL_N && !rc; c++)
        if (g->col[c] < 0 && !col_optional(c))
            rc = ms_fail(err, "%s:%u: header: missing column '%s'", g->path, line, ms_golden_col_names[c]);
    if (!rc && g->col[MS_GCOL_CACHE_EXPERTS] < 0 && g->col[MS_GCOL_CACHE_BYTES] < 0 && g->col[MS_GCOL_CACHE_GB] < 0 &&
        g->col[MS_GCOL_CACHE_SIZE] < 0)
        rc = ms_fail(err, "%s:%u: header: missing column 'cache_experts' (or cache_bytes, cache_gb)", g->path, line);
    g->ncols = n;
    free_fields(f, n);
    return rc;
}

/* ---- trace sources ---- */

/* Expands ${VAR} from the environment into out. */
static int expand_vars(const ms_golden *g, uint32_t line, const char *in, char *out, size_t cap, ms_err *err)
{
    size_t o = 0;
    for (const char *p = in; *p;) {
        if (p[0] == '$' && p[1] == '{') {
            const char *end = strchr(p, '}');
            if (!end)
                return field_fail(err, g, line, MS_GCOL_TRACE, "unterminated ${ in '%s'", in);
            char name[128];
            size_t n = (size_t)(end - p - 2);
            if (n == 0 || n >= sizeof name)
                return field_fail(err, g, line, MS_GCOL_TRACE, "bad variable name in '%s'", in);
            memcpy(name, p + 2, n);
            name[n] = 0;
            const char *val = getenv(name);
            if (!val || !*val)
                return field_fail(err, g, line, MS_GCOL_TRACE,
                                  "'%s' names ${%s}, which is not set in the environment", in, name);
            size_t vl = strlen(val);
            if (o + vl >= cap)
                return field_fail(err, g, line, MS_GCOL_TRACE, "path too long: '%s'", in);
            memcpy(out + o, val, vl);
            o += vl;
            p = end + 1;
        } else {
            if (o + 1 >= cap)
                return field_fail(err, g, line, MS_GCOL_TRACE, "path too long: '%s'", in);
            out[o++] = *p++;
        }
    }
    out[o] = 0;
    return 0;
}

/* ${VAR}-expanded, relative to the golden file's folder; checked readable. */
static int resolve_path(const ms_golden *g, uint32_t line, const char *raw, char **out, ms_err *err)
{
    char exp[4096], full[8192];
    if (!*raw)
        return field_fail(err, g, line, MS_GCOL_TRACE, "empty trace path");
    if (expand_vars(g, line, raw, exp, sizeof exp, err))
        return -1;
    if (exp[0] == '/') {
        snprintf(full, sizeof full, "%s", exp);
    } else {
        char *copy = ms_xstrdup(g->path);
        snprintf(full, sizeof full, "%s/%s", dirname(copy), exp);
        free(copy);
    }
    if (access(full, R_OK))
        return field_fail(err, g, line, MS_GCOL_TRACE, "cannot read trace '%s' (%s): %s", raw, full, strerror(errno));
    *out = ms_xstrdup(full);
    return 0;
}

/* "model=NAME,knob=value,..." */
static int parse_gen(const ms_golden *g, uint32_t line, const char *kv, ms_golden_source *s, ms_err *err)
{
    /* two passes: the model (its [routing] knobs are the defaults), then the
     * knobs, wherever model= stands in the list */
    int have_model = 0, rc = 0;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        char *copy = ms_xstrdup(kv), *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(item, '=');
            if (!eq) {
                rc = field_fail(err, g, line, MS_GCOL_TRACE, "gen: '%s' is not knob=value", item);
                break;
            }
            *eq = 0;
            int is_model = !strcmp(item, "model");
            if (pass == 0 && is_model) {
                if (have_model)
                    rc = field_fail(err, g, line, MS_GCOL_TRACE, "gen: model given twice");
                else if (ms_model_load(eq + 1, &s->gen_model, err) || ms_gen_model_defaults(&s->gen, &s->gen_model, err))
                    rc = field_fail(err, g, line, MS_GCOL_TRACE, "gen: %s", err->msg);
                have_model = 1;
            } else if (pass == 1 && !is_model && ms_gen_set(&s->gen, item, eq + 1, err)) {
                rc = field_fail(err, g, line, MS_GCOL_TRACE, "%s", err->msg);
            }
        }
        free(copy);
        if (!rc && pass == 0 && !have_model)
            return field_fail(err, g, line, MS_GCOL_TRACE, "gen:%s names no model (gen:model=NAME,...)", kv);
    }
    if (rc)
        return -1;
    if (ms_gen_validate(&s->gen, &s->gen_model, err))
        return field_fail(err, g, line, MS_GCOL_TRACE, "gen:%s: %s", kv, err->msg);
    return 0;
}

static int find_or_add_source(ms_golden *g, uint32_t line, const char *spec, size_t *idx, ms_err *err)
{
    for (size_t i = 0; i < g->n_srcs; i++)
        if (!strcmp(g->srcs[i].spec, spec)) {
            *idx = i;
            return 0;
        }
    ms_golden_source s;
    memset(&s, 0, sizeof s);
    int rc;
    if (!strncmp(spec, "gen:", 4)) {
        s.kind = MS_SRC_GEN;
        rc = parse_gen(g, line, spec + 4, &s, err);
    } else if (!strncmp(spec, "route-csv:", 10)) {
        s.kind = MS_SRC_ROUTECSV;
        rc = resolve_path(g, line, spec + 10, &s.input, err);
    } else {
        s.kind = MS_SRC_H5;
        rc = resolve_path(g, line, spec, &s.input, err);
        s.h5 = s.input ? ms_xstrdup(s.input) : NULL;
    }
    if (rc) {
        free(s.input);
        free(s.h5);
        return -1;
    }
    s.spec = ms_xstrdup(spec);
    g->srcs = ms_xrealloc(g->srcs, g->n_srcs + 1, sizeof *g->srcs);
    g->srcs[g->n_srcs] = s;
    *idx = g->n_srcs++;
    return 0;
}

/* ---- one data line ---- */

static int check_policy(const ms_golden *g, uint32_t line, int col, ms_policy_kind kind, const char *spec, ms_err *err)
{
    char name[64];
    const char *kv;
    if (ms_spec_split(spec, name, sizeof name, &kv, err))
        return field_fail(err, g, line, col, "'%s': %s", spec, err->msg);
    const ms_policy_desc *d = ms_policy_find(kind, name);
    if (!d)
        return field_fail(err, g, line, col, "unknown %s policy '%s' (moesim list names them)",
                          ms_policy_kind_name(kind), name);
    ms_params p;
    char who[96];
    snprintf(who, sizeof who, "%s policy '%s'", ms_policy_kind_name(kind), name);
    if (ms_params_parse(d->params, kv, who, &p, err))
        return field_fail(err, g, line, col, "%s", err->msg);
    return 0;
}

static int parse_u64_field(const ms_golden *g, uint32_t line, int col, const char *s, uint64_t max, uint64_t *out,
                           ms_err *err)
{
    unsigned long long u;
    if (ms_parse_u64(s, &u) || u > max)
        return field_fail(err, g, line, col, "'%s' is not a whole number in [0, %llu]", s, (unsigned long long)max);
    *out = u;
    return 0;
}

/* The one filled capacity cell, checked by the run keys' rules (runkeys.h). */
static int parse_cache_size(const ms_golden *g, uint32_t line, ms_golden_point *p, ms_err *err)
{
    static const int cols[4] = {MS_GCOL_CACHE_EXPERTS, MS_GCOL_CACHE_BYTES, MS_GCOL_CACHE_GB, MS_GCOL_CACHE_SIZE};
    static const int keys[4] = {MS_RK_CACHE_EXPERTS, MS_RK_CACHE_BYTES, MS_RK_CACHE_GB, -1};
    int which = -1;
    for (int i = 0; i < 4; i++) {
        int c = g->col[cols[i]];
        if (c < 0 || !*p->field[c])
            continue;
        if (which >= 0)
            return field_fail(err, g, line, cols[i], "'%s' besides %s '%s': fill one of cache_experts, "
                              "cache_bytes, cache_gb", p->field[c], ms_golden_col_names[cols[which]], p->cache_size);
        which = i;
        p->cache_size = p->field[c];
    }
    if (which < 0)
        return field_fail(err, g, line, cols[0], "empty: fill one of cache_experts, cache_bytes, cache_gb");
    double x;
    char why[128];
    if (which == 3) { /* cache_size: experts when a whole number, else bytes */
        unsigned long long u;
        which = ms_parse_u64(p->cache_size, &u) ? 1 : 0;
        if (which == 1 && ms_parse_bytes(p->cache_size, &x))
            return field_fail(err, g, line, MS_GCOL_CACHE_SIZE,
                              "'%s' is neither a whole number of experts nor a size such as 4000MiB", p->cache_size);
    }
    if (ms_runkey_parse(keys[which], p->cache_size, &x))
        return field_fail(err, g, line, cols[which], "'%s': expected %s", p->cache_size,
                          ms_runkey_expected(keys[which]));
    if (ms_runkey_check(keys[which], x, why, sizeof why))
        return field_fail(err, g, line, cols[which], "'%s': %s", p->cache_size, why);
    p->cap_kind = which == 0 ? MS_CAP_EXPERTS : MS_CAP_BYTES;
    p->cap_value = which == 2 ? x * 1e9 : x;
    return 0;
}

static int parse_train(const ms_golden *g, uint32_t line, ms_golden_point *p, ms_err *err)
{
    if (!strcmp(p->train, "auto")) {
        p->train_set = 0;
        return 0;
    }
    double x;
    if (ms_parse_double(p->train, &x) || !(x >= 0 && x < 1))
        return field_fail(err, g, line, MS_GCOL_TRAIN, "'%s': expected auto or a fraction in [0, 1)", p->train);
    p->train_set = 1;
    p->train_frac = x;
    return 0;
}

static int parse_results(const ms_golden *g, uint32_t line, ms_golden_point *p, int allow_empty, ms_err *err)
{
    int empty = 0;
    for (int c = RESULT_FIRST; c < MS_GCOL_N; c++)
        empty += !*p->field[g->col[c]];
    if (empty == MS_GCOL_N - RESULT_FIRST && allow_empty)
        return 0;
    for (int c = RESULT_FIRST; c < MS_GCOL_N; c++)
        if (!*p->field[g->col[c]])
            return field_fail(err, g, line, c, "empty value (moesim regress --update fills the results)");
    ms_golden_result *r = &p->expected;
    uint64_t *counts[4] = {&r->hits, &r->late, &r->misses, &r->on_cpu};
    for (int i = 0; i < 4; i++)
        if (parse_u64_field(g, line, MS_GCOL_HITS + i, p->field[g->col[MS_GCOL_HITS + i]], 1ULL << 53, counts[i], err))
            return -1;
    const char *hr = p->field[g->col[MS_GCOL_HIT_RATE]];
    if (ms_parse_double(hr, &r->hit_rate) || !(r->hit_rate >= 0 && r->hit_rate <= 1))
        return field_fail(err, g, line, MS_GCOL_HIT_RATE, "'%s' is not a fraction in [0, 1]", hr);
    uint64_t n = r->hits + r->late + r->misses; /* on_cpu is a part of these */
    if (r->on_cpu > n)
        return field_fail(err, g, line, MS_GCOL_ON_CPU, "'%s' exceeds hits + late + misses = %llu",
                          p->field[g->col[MS_GCOL_ON_CPU]], (unsigned long long)n);
    double want = n ? (double)r->hits / (double)n : 0.0;
    if (fabs(want - r->hit_rate) > 5e-7 + 1e-12)
        return field_fail(err, g, line, MS_GCOL_HIT_RATE, "'%s' does not match hits / (hits + late + misses) = %.6f",
                          hr, want);
    p->has_expected = 1;
    return 0;
}

static const char *field_or(const ms_golden *g, char **f, int c, const char *dflt)
{
    return g->col[c] >= 0 && *f[g->col[c]] ? f[g->col[c]] : dflt;
}

static int parse_point(ms_golden *g, uint32_t line, ms_golden_point *p, int allow_empty, ms_err *err)
{
    p->prefetch = p->field[g->col[MS_GCOL_PREFETCH]];
    p->cache = p->field[g->col[MS_GCOL_CACHE]];
    p->sched = p->field[g->col[MS_GCOL_SCHED]];
    p->train = p->field[g->col[MS_GCOL_TRAIN]];
    const char *model = field_or(g, p->field, MS_GCOL_MODEL, NULL);
    const char *platform = field_or(g, p->field, MS_GCOL_PLATFORM, DEFAULT_PLATFORM);
    uint64_t d = 0;
    if (find_or_add_source(g, line, p->field[g->col[MS_GCOL_TRACE]], &p->source, err) ||
        check_policy(g, line, MS_GCOL_PREFETCH, MS_KIND_PREFETCH, p->prefetch, err) ||
        check_policy(g, line, MS_GCOL_CACHE, MS_KIND_CACHE, p->cache, err) ||
        check_policy(g, line, MS_GCOL_SCHED, MS_KIND_SCHED, p->sched, err) || parse_cache_size(g, line, p, err) ||
        parse_u64_field(g, line, MS_GCOL_DISTANCE, p->field[g->col[MS_GCOL_DISTANCE]], 1024, &d, err) ||
        parse_train(g, line, p, err) || parse_results(g, line, p, allow_empty, err))
        return -1;
    p->distance = (uint32_t)d;
    if (model && ms_model_load(model, &p->model, err))
        return field_fail(err, g, line, MS_GCOL_MODEL, "%s", err->msg);
    p->has_model = model != NULL;
    if (ms_platform_load(platform, &p->platform, err))
        return field_fail(err, g, line, MS_GCOL_PLATFORM, "%s", err->msg);
    return 0;
}

static int add_data_line(ms_golden *g, uint32_t line, const char *text, int allow_empty, ms_err *err)
{
    char **f;
    size_t n = split_fields(text, &f);
    if (n != g->ncols) {
        free_fields(f, n);
        return ms_fail(err, "%s:%u: expected %zu fields separated by ';' (as the header), got %zu", g->path, line,
                       g->ncols, n);
    }
    g->pts = ms_xrealloc(g->pts, g->n_pts + 1, sizeof *g->pts);
    ms_golden_point *p = &g->pts[g->n_pts++];
    memset(p, 0, sizeof *p);
    p->line = line;
    p->field = f;
    return parse_point(g, line, p, allow_empty, err);
}

int ms_golden_load(const char *path, int allow_empty_results, ms_golden *g, ms_err *err)
{
    memset(g, 0, sizeof *g);
    g->path = ms_xstrdup(path);
    if (read_lines(g, err))
        return -1;
    int have_header = 0;
    for (size_t i = 0; i < g->n_lines; i++) {
        uint32_t line = (uint32_t)i + 1;
        if (is_comment(g->lines[i]))
            continue;
        if (!have_header) {
            if (parse_header(g, line, g->lines[i], err))
                return -1;
            have_header = 1;
        } else if (add_data_line(g, line, g->lines[i], allow_empty_results, err)) {
            return -1;
        }
    }
    if (!have_header)
        return ms_fail(err, "%s: no header line (trace;prefetch;cache;sched;cache_experts;...)", path);
    if (!g->n_pts)
        return ms_fail(err, "%s: no points (only a header)", path);
    return 0;
}

void ms_golden_free(ms_golden *g)
{
    for (size_t i = 0; i < g->n_lines; i++)
        free(g->lines[i]);
    free(g->lines);
    for (size_t i = 0; i < g->n_pts; i++)
        free_fields(g->pts[i].field, g->ncols);
    free(g->pts);
    for (size_t i = 0; i < g->n_srcs; i++) {
        free(g->srcs[i].spec);
        free(g->srcs[i].input);
        free(g->srcs[i].h5);
    }
    free(g->srcs);
    free(g->path);
    memset(g, 0, sizeof *g);
}

ms_golden_result ms_golden_result_of(const ms_counts *c)
{
    ms_golden_result r = {c->hits, c->late, c->misses, c->on_cpu, 0};
    r.hit_rate = round(ms_metrics_hit_rate(c) * 1e6) / 1e6;
    return r;
}

static uint64_t abs_diff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

ms_golden_cmp ms_golden_compare(const ms_golden_result *want, const ms_golden_result *got, double hit_tol,
                                uint64_t count_tol)
{
    const double eps = 1e-9; /* both rates are rounded to 6 decimals */
    double d = got->hit_rate - want->hit_rate;
    if (d < -hit_tol - eps)
        return MS_CMP_REGRESSED;
    if (d > hit_tol + eps)
        return MS_CMP_IMPROVED;
    if (abs_diff(want->hits, got->hits) > count_tol || abs_diff(want->late, got->late) > count_tol ||
        abs_diff(want->misses, got->misses) > count_tol || abs_diff(want->on_cpu, got->on_cpu) > count_tol)
        return MS_CMP_CHANGED;
    return MS_CMP_SAME;
}

/* ---- --update ---- */

static const ms_golden_point *point_at_line(const ms_golden *g, uint32_t line, size_t *idx)
{
    for (size_t i = 0; i < g->n_pts; i++)
        if (g->pts[i].line == line) {
            *idx = i;
            return &g->pts[i];
        }
    return NULL;
}

static void write_point(FILE *f, const ms_golden *g, const ms_golden_point *p, const ms_golden_result *r)
{
    for (size_t i = 0; i < g->ncols; i++) {
        int c = -1;
        for (int k = 0; k < MS_GCOL_N; k++)
            if (g->col[k] == (int)i)
                c = k;
        if (i)
            fputc(';', f);
        if (c == MS_GCOL_HIT_RATE)
            fprintf(f, "%.6f", r->hit_rate);
        else if (col_is_result(c)) {
            const uint64_t v[4] = {r->hits, r->late, r->misses, r->on_cpu};
            fprintf(f, "%llu", (unsigned long long)v[c - RESULT_FIRST]);
        } else
            fputs(p->field[i], f);
    }
    fputc('\n', f);
}

int ms_golden_write(const ms_golden *g, const ms_golden_result *results, ms_err *err)
{
    /* the golden file is rewritten in place on purpose: a temporary beside
     * it, renamed over it (keeping its mode) only when every write worked */
    ms_out *o = ms_out_open("regress --update", g->path, err);
    if (!o)
        return -1;
    FILE *f = ms_out_fp(o);
    for (size_t i = 0; i < g->n_lines; i++) {
        size_t idx;
        const ms_golden_point *p = point_at_line(g, (uint32_t)i + 1, &idx);
        if (p)
            write_point(f, g, p, &results[idx]);
        else
            fprintf(f, "%s\n", g->lines[i]);
    }
    return ms_out_commit(o, err);
}
