/* Sweep specifications: see sweep_spec.h. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policies/policy.h"
#include "traces/format/trace.h"
#include "traces/format/trace_cache.h"
#include "sim/core/params.h"
#include "sim/core/ini.h"
#include "sim/core/out.h"
#include "sim/engine/runkeys.h"
#include "sim/engine/placement.h"
#include "sim/apps/sweep_spec.h"

#define MAX_AXIS_VALUES 1000000u
#define MAX_POINTS 10000000ull
#define LINE_MAX_CHARS 4096

const char *const ms_sweep_param_names[MS_SW_NPARAM] = { /* = the first keys of ms_runkeys (test_runkeys) */
    "trace", "model", "platform", "prefetch", "cache", "sched", "cache_experts", "cache_bytes", "distance",
    "batch", "host_bytes", "h2d_gbps", "train", "topk_fill", "offline", "seed", "gpus", "placement", "cache_per_gpu",
    "framework",
};

/* The keys, their kinds, ranges and defaults: the run configuration's one
 * table (runkeys.h), whose first MS_SW_NPARAM entries are the sweep's. */
typedef ms_runkey axis_desc;
typedef ms_runkey_kind value_kind;
#define axes ms_runkeys
#define K_PATH MS_RKV_PATH
#define K_MODEL MS_RKV_MODEL
#define K_PLATFORM MS_RKV_PLATFORM
#define K_POLICY MS_RKV_POLICY
#define K_INT MS_RKV_INT
#define K_BYTES MS_RKV_BYTES
#define K_GB MS_RKV_GB
#define K_POS MS_RKV_POS
#define K_TRAIN MS_RKV_TRAIN
#define K_ENUM MS_RKV_ENUM
_Static_assert((int)MS_SW_NPARAM == (int)MS_RK_CACHE_GB, "the sweep's parameters are the first keys of runkeys.h");

#define MS_SWEEP_MAX_SETS 32

/* Values of one key as written, and where. */
typedef struct {
    char *raw;
    int line;
    int gb; /* cache_bytes given as cache_gb */
} raw_value;

typedef struct {
    raw_value raw[MS_SW_NPARAM];
    int line;           /* of the [point] header */
    char **vals[MS_SW_NPARAM];
    uint32_t n[MS_SW_NPARAM];
} group;

typedef struct {
    char *name;
    ms_model model;
    int none;
} model_slot;

typedef struct {
    char *name;
    ms_platform plat;
    char gbps[32];
    char gpus[16];      /* its GPU count, for points that do not give gpus */
} platform_slot;

/* A framework or placement value and what it resolves to. */
typedef struct {
    char *name;
    ms_framework fw;    /* framework */
    char *path;         /* placement: the name, or the resolved file */
} named_slot;

struct ms_sweep_spec {
    char *path, *dir;
    char *output;
    int output_line;
    int mode_list, mode_set;
    uint64_t trace_cache;
    int trace_cache_set;
    group base;
    group *groups;
    int ngroups;
    model_slot *models;
    int nmodels;
    platform_slot *plats;
    int nplats;
    named_slot *fws, *places;
    int nfws, nplaces;
    char **trace_paths; /* resolved, parallel to the unique trace texts */
    char **trace_texts;
    int ntraces;
    ms_sweep_point *points;
    uint64_t npoints;
    /* model.KEY / platform.KEY overrides of [sweep], applied to every
     * model or platform of the spec (their strings owned here) */
    ms_profile_set sets[2][MS_SWEEP_MAX_SETS];
    int nsets[2];
};

/* ---- parsing ---- */

typedef struct {
    ms_sweep_spec *s;
    int line;
    int failed;
    int continuation; /* the current line starts with white space */
    int in_point;     /* 0: [sweep], 1: [point], -1: before any section */
    int last_line_key_param;
    const char *last_key;
    ms_err *err;
} parse_ctx;

static int ctx_fail(parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ctx_fail(parse_ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failed = 1;
    return ms_fail(c->err, "%s:%d: %s", c->s->path, c->line, msg);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = 0;
    return s;
}

static group *current_group(parse_ctx *c)
{
    return c->in_point ? &c->s->groups[c->s->ngroups - 1] : &c->s->base;
}

/* Section headers: only [sweep] (once, first) and [point]. */
static int on_section(ms_ini *ini, void *user, const char *name)
{
    parse_ctx *c = user;
    c->line = ms_ini_line(ini);
    if (!strcmp(name, "sweep")) {
        if (c->in_point != -1)
            return ctx_fail(c, "[sweep] must come first and only once");
        c->in_point = 0;
        return 0;
    }
    /* "point": the reader admits no other name */
    if (c->in_point == -1)
        return ctx_fail(c, "[point] before [sweep]");
    ms_sweep_spec *s = c->s;
    s->groups = ms_xrealloc(s->groups, (size_t)s->ngroups + 1, sizeof *s->groups);
    memset(&s->groups[s->ngroups], 0, sizeof *s->groups);
    s->groups[s->ngroups++].line = c->line;
    c->in_point = 1;
    return 0;
}

static int param_index(const char *name, int *gb)
{
    *gb = 0;
    if (!strcmp(name, "cache_gb")) {
        *gb = 1;
        return MS_SW_CACHE_BYTES;
    }
    for (int i = 0; i < MS_SW_NPARAM; i++)
        if (!strcmp(name, ms_sweep_param_names[i]))
            return i;
    return -1;
}

static int set_setting(parse_ctx *c, const char *name, const char *value)
{
    ms_sweep_spec *s = c->s;
    if (!strcmp(name, "output")) {
        if (s->output)
            return ctx_fail(c, "key 'output' given twice");
        if (!*value)
            return ctx_fail(c, "output: empty path");
        s->output = ms_xstrdup(value);
        s->output_line = c->line;
        return 0;
    }
    if (!strcmp(name, "mode")) {
        if (s->mode_set)
            return ctx_fail(c, "key 'mode' given twice");
        s->mode_set = 1;
        if (!strcmp(value, "product"))
            s->mode_list = 0;
        else if (!strcmp(value, "list"))
            s->mode_list = 1;
        else
            return ctx_fail(c, "mode = %s: expected product or list", value);
        return 0;
    }
    /* trace_cache */
    double b;
    if (s->trace_cache_set)
        return ctx_fail(c, "key 'trace_cache' given twice");
    if (ms_parse_bytes(value, &b) || !(b >= 0))
        return ctx_fail(c, "trace_cache = %s: expected a size such as 2GiB (0 = off)", value);
    s->trace_cache = (uint64_t)b;
    s->trace_cache_set = 1;
    return 0;
}

/* model.KEY = VALUE / platform.KEY = VALUE in [sweep]: an override of every
 * model or platform of the spec, checked when they are loaded. */
static int add_profile_set(parse_ctx *c, const char *name, const char *value)
{
    int kind = !strncmp(name, "platform.", 9);
    const char *key = strchr(name, '.') + 1;
    if (c->in_point)
        return ctx_fail(c, "%s: profile overrides go in [sweep] (they apply to every point)", name);
    if (!*key)
        return ctx_fail(c, "%s: expected %s.KEY = VALUE", name, kind ? "platform" : "model");
    ms_profile_set *sets = c->s->sets[kind];
    int *n = &c->s->nsets[kind];
    for (int i = 0; i < *n; i++)
        if (!strcmp(sets[i].key, key))
            return ctx_fail(c, "key '%s' given twice", name);
    if (*n == MS_SWEEP_MAX_SETS)
        return ctx_fail(c, "%s: more than %d overrides of one profile", name, MS_SWEEP_MAX_SETS);
    char where[1400];
    snprintf(where, sizeof where, "%s:%d: %s = %s", c->s->path, c->line, name, value);
    sets[(*n)++] = (ms_profile_set){ms_xstrdup(key), ms_xstrdup(value), ms_xstrdup(where)};
    return 0;
}

static int is_profile_set(const char *name)
{
    return !strncmp(name, "model.", 6) || !strncmp(name, "platform.", 9);
}

static int is_setting(const char *name)
{
    return !strcmp(name, "output") || !strcmp(name, "mode") || !strcmp(name, "trace_cache");
}

static const char known_keys[] =
    "output, mode, trace_cache, trace, model, platform, prefetch, cache, sched, cache_experts, cache_bytes, "
    "cache_gb, distance, batch, host_bytes, h2d_gbps, train, topk_fill, offline, seed, gpus, placement, "
    "cache_per_gpu, framework, model.KEY, platform.KEY";

/* inih's convention: 1 to go on, 0 after ctx_fail */
static int value_line(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    parse_ctx *c = user;
    if (c->failed)
        return 0;
    if (c->in_point == -1)
        return ctx_fail(c, "key '%s' before [sweep]", name), 0;
    if (is_profile_set(name))
        return add_profile_set(c, name, value) == 0;
    int gb, p = param_index(name, &gb);
    if (p < 0 && !(is_setting(name) && !c->in_point))
        return ctx_fail(c, "unknown key '%s' in [%s] (known: %s)", name, c->in_point ? "point" : "sweep",
                        c->in_point ? known_keys + strlen("output, mode, trace_cache, ") : known_keys), 0;
    if (p < 0)
        return set_setting(c, name, value) == 0;
    group *g = current_group(c);
    raw_value *r = &g->raw[p];
    if (c->continuation && c->last_line_key_param == p && r->raw) {
        size_t n = strlen(r->raw) + strlen(value) + 2;
        r->raw = ms_xrealloc(r->raw, n, 1);
        strcat(strcat(r->raw, ","), value);
        return 1;
    }
    if (r->raw)
        return ctx_fail(c, "key '%s' given twice (continue a list on indented lines)", name), 0;
    if ((p == MS_SW_CACHE_EXPERTS && g->raw[MS_SW_CACHE_BYTES].raw) ||
        (p == MS_SW_CACHE_BYTES && g->raw[MS_SW_CACHE_EXPERTS].raw))
        return ctx_fail(c, "give one of cache_experts, cache_bytes, cache_gb"), 0;
    r->raw = ms_xstrdup(value);
    r->line = c->line;
    r->gb = gb;
    c->last_line_key_param = p;
    return 1;
}

static int on_value(ms_ini *ini, void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    c->line = ms_ini_line(ini);
    c->continuation = ms_ini_continuation(ini);
    return value_line(user, section, name, value) ? 0 : -1;
}

/* ---- numbers and ranges ---- */

/* Shortest text that reads back as exactly x. */
static void format_number(double x, char *buf, size_t cap)
{
    for (int prec = 12; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

typedef struct {
    char **v;
    uint32_t n, cap;
} value_list;

static void list_push(value_list *l, const char *text)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = ms_xrealloc(l->v, l->cap, sizeof *l->v);
    }
    l->v[l->n++] = ms_xstrdup(text);
}

static void list_free(value_list *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int parse_scalar(value_kind k, const char *s, double *x)
{
    return k == K_BYTES ? ms_parse_bytes(s, x) : ms_parse_double(s, x);
}

static int check_number(parse_ctx *c, const char *key, double x, const char *text)
{
    char why[128];
    if (ms_runkey_check(ms_runkey_find(key), x, why, sizeof why)) /* key: a sweep key, or cache_gb */
        return ctx_fail(c, "%s = %s: %s", key, text, why);
    return 0;
}

static int push_number(parse_ctx *c, const char *key, const axis_desc *a, double x, const char *text,
                       value_list *out)
{
    if (check_number(c, key, x, text))
        return -1;
    char buf[40];
    format_number(a->kind == K_GB ? x * 1e9 : x, buf, sizeof buf);
    list_push(out, buf);
    return 0;
}

/* start:stop:step, inclusive of stop. */
static int expand_range(parse_ctx *c, const char *key, const axis_desc *a, char *item, value_list *out)
{
    char *p1 = strchr(item, ':'), *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
    if (!p2 || strchr(p2 + 1, ':'))
        return ctx_fail(c, "%s = %s: a range is start:stop:step", key, item);
    *p1 = *p2 = 0;
    double lo, hi, step;
    char *ls = trim(item), *hs = trim(p1 + 1), *ss = trim(p2 + 1);
    if (parse_scalar(a->kind, ls, &lo) || parse_scalar(a->kind, hs, &hi) || parse_scalar(a->kind, ss, &step))
        return ctx_fail(c, "%s = %s:%s:%s: expected numbers in start:stop:step", key, ls, hs, ss);
    if (!(step > 0) || !(lo <= hi))
        return ctx_fail(c, "%s = %s:%s:%s: empty range (needs start <= stop and step > 0)", key, ls, hs, ss);
    double count = floor((hi - lo) / step + 1e-9) + 1;
    if (count > MAX_AXIS_VALUES)
        return ctx_fail(c, "%s = %s:%s:%s: more than %u values", key, ls, hs, ss, MAX_AXIS_VALUES);
    for (double i = 0; i < count; i++) {
        double x = lo + i * step;
        char text[64];
        snprintf(text, sizeof text, "%g (from %s:%s:%s)", x, ls, hs, ss);
        if (push_number(c, key, a, x, text, out))
            return -1;
    }
    return 0;
}

static int add_number_item(parse_ctx *c, const char *key, const axis_desc *a, char *item, value_list *out)
{
    if (a->kind == K_TRAIN && !strcmp(item, "auto")) {
        list_push(out, "auto");
        return 0;
    }
    if (strchr(item, ':'))
        return expand_range(c, key, a, item, out);
    double x;
    if (parse_scalar(a->kind, item, &x))
        return ctx_fail(c, "%s = %s: expected %s", key, item,
                        a->kind == K_INT ? "a number" : ms_runkey_expected(ms_runkey_find(key)));
    return push_number(c, key, a, x, item, out);
}

/* ---- named values: policies, profiles, traces ---- */

static int check_policy(parse_ctx *c, const char *key, ms_policy_kind kind, const char *spec)
{
    char name[64], who[96];
    const char *kv;
    ms_err e;
    ms_params params;
    if (ms_spec_split(spec, name, sizeof name, &kv, &e))
        return ctx_fail(c, "%s = %s: %s", key, spec, e.msg);
    const ms_policy_desc *d = ms_policy_find(kind, name);
    if (!d) {
        char known[512] = "";
        for (int i = 0; ms_policy_registry[i]; i++)
            if (ms_policy_registry[i]->kind == kind) {
                size_t u = strlen(known);
                snprintf(known + u, sizeof known - u, "%s%s", u ? ", " : "", ms_policy_registry[i]->name);
            }
        return ctx_fail(c, "unknown %s policy '%s' (known: %s)", ms_policy_kind_name(kind), name, known);
    }
    snprintf(who, sizeof who, "%s policy '%s'", ms_policy_kind_name(kind), name);
    if (ms_params_parse(d->params, kv, who, &params, &e))
        return ctx_fail(c, "%s", e.msg);
    return 0;
}

/* Relative paths are relative to the spec's folder. */
static char *resolve_path(const ms_sweep_spec *s, const char *p)
{
    if (p[0] == '/' || !strcmp(s->dir, "."))
        return ms_xstrdup(p);
    size_t n = strlen(s->dir) + strlen(p) + 2;
    char *out = ms_xcalloc(n, 1);
    snprintf(out, n, "%s/%s", s->dir, p);
    return out;
}

static int is_ini_path(const char *v)
{
    size_t n = strlen(v);
    return n > 4 && !strcmp(v + n - 4, ".ini");
}

static int load_model(parse_ctx *c, const char *v)
{
    ms_sweep_spec *s = c->s;
    for (int i = 0; i < s->nmodels; i++)
        if (!strcmp(s->models[i].name, v))
            return 0;
    model_slot m = {.name = ms_xstrdup(v), .none = !strcmp(v, "none")};
    ms_err e;
    char *path = is_ini_path(v) ? resolve_path(s, v) : ms_xstrdup(v);
    int rc = m.none ? 0 : ms_model_load_set(path, s->sets[0], s->nsets[0], &m.model, &e);
    free(path);
    if (rc) {
        free(m.name);
        if (!strncmp(e.msg, s->path, strlen(s->path))) /* an override's own FILE:LINE: key = value: why */
            return c->failed = 1, ms_fail(c->err, "%s", e.msg);
        return ctx_fail(c, "model = %s: %s", v, e.msg);
    }
    s->models = ms_xrealloc(s->models, (size_t)s->nmodels + 1, sizeof *s->models);
    s->models[s->nmodels++] = m;
    return 0;
}

static int load_platform(parse_ctx *c, const char *v)
{
    ms_sweep_spec *s = c->s;
    for (int i = 0; i < s->nplats; i++)
        if (!strcmp(s->plats[i].name, v))
            return 0;
    platform_slot p = {.name = ms_xstrdup(v)};
    ms_err e;
    char *path = is_ini_path(v) ? resolve_path(s, v) : ms_xstrdup(v);
    int rc = ms_platform_load_set(path, s->sets[1], s->nsets[1], &p.plat, &e);
    free(path);
    if (rc) {
        free(p.name);
        if (!strncmp(e.msg, s->path, strlen(s->path)))
            return c->failed = 1, ms_fail(c->err, "%s", e.msg);
        return ctx_fail(c, "platform = %s: %s", v, e.msg);
    }
    format_number(p.plat.h2d_bw / 1e9, p.gbps, sizeof p.gbps);
    snprintf(p.gpus, sizeof p.gpus, "%u", p.plat.gpus ? p.plat.gpus : 1);
    s->plats = ms_xrealloc(s->plats, (size_t)s->nplats + 1, sizeof *s->plats);
    s->plats[s->nplats++] = p;
    return 0;
}

static int load_framework(parse_ctx *c, const char *v)
{
    ms_sweep_spec *s = c->s;
    for (int i = 0; i < s->nfws; i++)
        if (!strcmp(s->fws[i].name, v))
            return 0;
    named_slot f = {.name = ms_xstrdup(v)};
    ms_err e;
    int have;
    char *path = is_ini_path(v) ? resolve_path(s, v) : ms_xstrdup(v);
    int rc = ms_framework_resolve(path, &f.fw, &have, &e);
    free(path);
    if (rc) {
        free(f.name);
        return ctx_fail(c, "framework = %s: %s", v, e.msg);
    }
    s->fws = ms_xrealloc(s->fws, (size_t)s->nfws + 1, sizeof *s->fws);
    s->fws[s->nfws++] = f;
    return 0;
}

/* round-robin, layer, balanced, or a readable file (checked against the
 * trace when a point runs). */
static int check_placement(parse_ctx *c, const char *v)
{
    ms_sweep_spec *s = c->s;
    for (int i = 0; i < s->nplaces; i++)
        if (!strcmp(s->places[i].name, v))
            return 0;
    named_slot p = {.name = ms_xstrdup(v)};
    p.path = ms_placement_kind(v) == MS_PLACE_FILE ? resolve_path(s, v) : ms_xstrdup(v);
    FILE *f = ms_placement_kind(v) == MS_PLACE_FILE ? fopen(p.path, "r") : NULL;
    if (ms_placement_kind(v) == MS_PLACE_FILE && !f) {
        free(p.name);
        free(p.path);
        return ctx_fail(c, "placement = %s: not round-robin, layer, balanced or a readable file", v);
    }
    if (f)
        fclose(f);
    s->places = ms_xrealloc(s->places, (size_t)s->nplaces + 1, sizeof *s->places);
    s->places[s->nplaces++] = p;
    return 0;
}

/* Opens the trace once (metadata and request table) to check it. */
static int check_trace(parse_ctx *c, const char *v)
{
    ms_sweep_spec *s = c->s;
    for (int i = 0; i < s->ntraces; i++)
        if (!strcmp(s->trace_texts[i], v))
            return 0;
    char *path = resolve_path(s, v);
    ms_err e;
    ms_trace_reader *rd = ms_reader_open(path, &e);
    if (!rd) {
        free(path);
        return ctx_fail(c, "trace = %s: %s", v, e.msg);
    }
    ms_reader_close(rd);
    ms_out_input(path); /* no output of the sweep may be this trace */
    s->trace_texts = ms_xrealloc(s->trace_texts, (size_t)s->ntraces + 1, sizeof *s->trace_texts);
    s->trace_paths = ms_xrealloc(s->trace_paths, (size_t)s->ntraces + 1, sizeof *s->trace_paths);
    s->trace_texts[s->ntraces] = ms_xstrdup(v);
    s->trace_paths[s->ntraces++] = path;
    return 0;
}

static int add_named_item(parse_ctx *c, int p, const char *key, const char *item, value_list *out)
{
    const axis_desc *a = &axes[p];
    int rc = 0;
    if (a->kind == K_PATH)
        rc = check_trace(c, item);
    else if (a->kind == K_MODEL)
        rc = load_model(c, item);
    else if (a->kind == K_PLATFORM)
        rc = load_platform(c, item);
    else if (a->kind == K_POLICY)
        rc = check_policy(c, key, (ms_policy_kind)(int)a->min, item);
    else if (a->kind == MS_RKV_FRAMEWORK)
        rc = load_framework(c, item);
    else if (a->kind == MS_RKV_PLACEMENT)
        rc = check_placement(c, item);
    else { /* K_ENUM */
        char choices[64];
        snprintf(choices, sizeof choices, "|%s|", a->choices);
        char probe[80];
        snprintf(probe, sizeof probe, "|%s|", item);
        if (!strstr(choices, probe))
            rc = ctx_fail(c, "%s = %s: expected one of %s", key, item, a->choices);
    }
    if (rc == 0)
        list_push(out, item);
    return rc;
}

/* Splits at commas; for policies, an item with '=' and no ':' continues the
 * previous spec's parameters. */
static int split_items(parse_ctx *c, int p, const char *key, const char *raw, value_list *items)
{
    char *copy = ms_xstrdup(raw), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *t = trim(tok);
        if (!*t) {
            rc = ctx_fail(c, "%s = %s: empty item in the list", key, raw);
            break;
        }
        if (axes[p].kind == K_POLICY && strchr(t, '=') && !strchr(t, ':')) {
            if (!items->n) {
                rc = ctx_fail(c, "%s = %s: parameter '%s' before any policy name", key, raw, t);
                break;
            }
            char **last = &items->v[items->n - 1];
            size_t n = strlen(*last) + strlen(t) + 2;
            *last = ms_xrealloc(*last, n, 1);
            strcat(strcat(*last, ","), t);
            continue;
        }
        list_push(items, t);
    }
    free(copy);
    if (rc == 0 && !items->n)
        rc = ctx_fail(c, "%s: empty list", key);
    return rc;
}

static int expand_values(parse_ctx *c, int p, const raw_value *r, value_list *out)
{
    const char *key = r->gb ? "cache_gb" : ms_sweep_param_names[p];
    axis_desc a = axes[r->gb ? MS_RK_CACHE_GB : p];
    c->line = r->line;
    value_list items = {0};
    int rc = split_items(c, p, key, r->raw, &items);
    for (uint32_t i = 0; rc == 0 && i < items.n; i++) {
        if (a.kind == K_INT || a.kind == K_BYTES || a.kind == K_GB || a.kind == K_POS || a.kind == K_TRAIN)
            rc = add_number_item(c, key, &a, items.v[i], out);
        else
            rc = add_named_item(c, p, key, items.v[i], out);
    }
    list_free(&items);
    if (rc == 0 && out->n > MAX_AXIS_VALUES)
        rc = ctx_fail(c, "%s: more than %u values", key, MAX_AXIS_VALUES);
    return rc;
}

/* ---- groups and points ---- */

/* g's values for every parameter: its own, else [sweep]'s, else the default. */
static int resolve_group(parse_ctx *c, group *g, const group *base, int line)
{
    int own_cap = g->raw[MS_SW_CACHE_EXPERTS].raw || g->raw[MS_SW_CACHE_BYTES].raw;
    for (int p = 0; p < MS_SW_NPARAM; p++) {
        const raw_value *r = g->raw[p].raw ? &g->raw[p] : NULL;
        int is_cap = p == MS_SW_CACHE_EXPERTS || p == MS_SW_CACHE_BYTES;
        if (!r && base && base->raw[p].raw && !(is_cap && own_cap))
            r = &base->raw[p];
        value_list l = {0};
        raw_value d = {.raw = (char *)axes[p].def, .line = line};
        if ((r || axes[p].def) && expand_values(c, p, r ? r : &d, &l)) {
            list_free(&l);
            return -1;
        }
        if (!r && !axes[p].def && p == MS_SW_TRACE) {
            c->line = line;
            return ctx_fail(c, "no trace: give trace = FILE[, FILE...]");
        }
        if (!r && !axes[p].def) /* h2d_gbps: the platform's; a capacity key not used */
            list_push(&l, "");
        g->vals[p] = l.v;
        g->n[p] = l.n;
    }
    if (!strcmp(g->vals[MS_SW_CACHE_EXPERTS][0], "") && !strcmp(g->vals[MS_SW_CACHE_BYTES][0], "")) {
        c->line = line;
        return ctx_fail(c, "no cache size: give cache_experts, cache_bytes or cache_gb");
    }
    return 0;
}

static const platform_slot *find_platform(const ms_sweep_spec *s, const char *name)
{
    for (int i = 0; i < s->nplats; i++)
        if (!strcmp(s->plats[i].name, name))
            return &s->plats[i];
    return NULL;
}

static int expand_points(parse_ctx *c)
{
    ms_sweep_spec *s = c->s;
    group *gs = s->mode_list ? s->groups : &s->base;
    int ng = s->mode_list ? s->ngroups : 1;
    uint64_t total = 0;
    for (int g = 0; g < ng; g++) {
        uint64_t n = 1;
        for (int p = 0; p < MS_SW_NPARAM; p++)
            n *= gs[g].n[p];
        total += n;
        if (total > MAX_POINTS) {
            c->line = 0;
            return ctx_fail(c, "the sweep has more than %llu points", MAX_POINTS);
        }
    }
    s->points = ms_xcalloc(total ? total : 1, sizeof *s->points);
    uint64_t k = 0;
    for (int g = 0; g < ng; g++) {
        uint32_t idx[MS_SW_NPARAM] = {0};
        for (;;) {
            ms_sweep_point *pt = &s->points[k++];
            for (int p = 0; p < MS_SW_NPARAM; p++)
                pt->v[p] = gs[g].vals[p][idx[p]];
            const platform_slot *ps = find_platform(s, pt->v[MS_SW_PLATFORM]);
            pt->h2d_override = pt->v[MS_SW_H2D_GBPS][0] != 0;
            if (!pt->h2d_override)
                pt->v[MS_SW_H2D_GBPS] = ps->gbps;
            pt->gpus_override = pt->v[MS_SW_GPUS][0] != 0;
            if (!pt->gpus_override)
                pt->v[MS_SW_GPUS] = ps->gpus;
            pt->fw_override = pt->v[MS_SW_FRAMEWORK][0] != 0;
            if (!pt->fw_override)
                pt->v[MS_SW_FRAMEWORK] = ps->plat.framework[0] ? ps->plat.framework : "none";
            int p = MS_SW_NPARAM - 1; /* the last parameter varies fastest */
            while (p >= 0 && ++idx[p] == gs[g].n[p])
                idx[p--] = 0;
            if (p < 0)
                break;
        }
    }
    s->npoints = k;
    return 0;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return ms_xstrdup(".");
    if (slash == path)
        return ms_xstrdup("/");
    size_t n = (size_t)(slash - path);
    char *d = ms_xcalloc(n + 1, 1);
    memcpy(d, path, n);
    return d;
}

static int check_whole_spec(parse_ctx *c)
{
    ms_sweep_spec *s = c->s;
    c->line = 0;
    if (c->in_point == -1)
        return ctx_fail(c, "no [sweep] section");
    if (!s->output)
        return ctx_fail(c, "[sweep] needs output = FILE.csv");
    if (s->mode_list && !s->ngroups)
        return ctx_fail(c, "mode = list needs at least one [point] section");
    if (!s->mode_list && s->ngroups) {
        c->line = s->groups[0].line;
        return ctx_fail(c, "[point] sections need mode = list in [sweep]");
    }
    if (!s->mode_list)
        return resolve_group(c, &s->base, NULL, 0);
    for (int g = 0; g < s->ngroups; g++)
        if (resolve_group(c, &s->groups[g], &s->base, s->groups[g].line))
            return -1;
    return 0;
}

ms_sweep_spec *ms_sweep_load(const char *path, ms_err *err)
{
    ms_sweep_spec *s = ms_xcalloc(1, sizeof *s);
    s->path = ms_xstrdup(path);
    s->dir = dir_of(path);
    s->trace_cache = MS_TRACE_CACHE_DEFAULT_BYTES;
    parse_ctx c = {.s = s, .err = err, .in_point = -1, .last_line_key_param = -1};
    static const char *const sections[] = {"sweep", "point", NULL};
    ms_ini_spec spec = {.what = "the sweep spec", .sections = sections, .on_section = on_section,
                        .on_value = on_value, .user = &c};
    if (ms_ini_parse(path, &spec, err))
        c.failed = 1;
    if (!c.failed && !check_whole_spec(&c) && !expand_points(&c)) {
        char *out = resolve_path(s, s->output);
        free(s->output);
        s->output = out;
        return s;
    }
    ms_sweep_free(s);
    return NULL;
}

static void group_free(group *g)
{
    for (int p = 0; p < MS_SW_NPARAM; p++) {
        free(g->raw[p].raw);
        for (uint32_t i = 0; i < g->n[p]; i++)
            free(g->vals[p][i]);
        free(g->vals[p]);
    }
}

void ms_sweep_free(ms_sweep_spec *s)
{
    if (!s)
        return;
    group_free(&s->base);
    for (int g = 0; g < s->ngroups; g++)
        group_free(&s->groups[g]);
    free(s->groups);
    for (int i = 0; i < s->nmodels; i++)
        free(s->models[i].name);
    free(s->models);
    for (int i = 0; i < s->nplats; i++)
        free(s->plats[i].name);
    free(s->plats);
    for (int i = 0; i < s->nfws; i++)
        free(s->fws[i].name);
    free(s->fws);
    for (int i = 0; i < s->nplaces; i++) {
        free(s->places[i].name);
        free(s->places[i].path);
    }
    free(s->places);
    for (int i = 0; i < s->ntraces; i++) {
        free(s->trace_texts[i]);
        free(s->trace_paths[i]);
    }
    free(s->trace_texts);
    free(s->trace_paths);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->nsets[k]; i++) {
            free((char *)s->sets[k][i].key);
            free((char *)s->sets[k][i].value);
            free((char *)s->sets[k][i].where);
        }
    free(s->points);
    free(s->output);
    free(s->dir);
    free(s->path);
    free(s);
}

const char *ms_sweep_output(const ms_sweep_spec *s)
{
    return s->output;
}

uint64_t ms_sweep_trace_cache(const ms_sweep_spec *s)
{
    return s->trace_cache;
}

uint64_t ms_sweep_npoints(const ms_sweep_spec *s)
{
    return s->npoints;
}

const ms_sweep_point *ms_sweep_get(const ms_sweep_spec *s, uint64_t i)
{
    return &s->points[i];
}

void ms_sweep_config(const ms_sweep_spec *s, const ms_sweep_point *p, ms_run_config *cfg, ms_platform *plat,
                     char *trace_buf, size_t trace_cap)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < s->ntraces; i++)
        if (!strcmp(s->trace_texts[i], p->v[MS_SW_TRACE]))
            snprintf(trace_buf, trace_cap, "%s", s->trace_paths[i]);
    cfg->trace_path = trace_buf;
    for (int i = 0; i < s->nmodels; i++)
        if (!strcmp(s->models[i].name, p->v[MS_SW_MODEL]))
            cfg->model = s->models[i].none ? NULL : &s->models[i].model;
    *plat = find_platform(s, p->v[MS_SW_PLATFORM])->plat;
    if (p->h2d_override)
        plat->h2d_bw = strtod(p->v[MS_SW_H2D_GBPS], NULL) * 1e9;
    cfg->platform = plat;
    cfg->keys_as_ini = 1; /* messages name keys as the spec does ("train") */
    cfg->model_sets = s->sets[0];
    cfg->n_model_sets = s->nsets[0];
    cfg->platform_sets = s->sets[1];
    cfg->n_platform_sets = s->nsets[1];
    cfg->prefetch_spec = p->v[MS_SW_PREFETCH];
    cfg->cache_spec = p->v[MS_SW_CACHE];
    cfg->sched_spec = p->v[MS_SW_SCHED];
    if (p->v[MS_SW_CACHE_EXPERTS][0]) {
        cfg->cap_kind = MS_CAP_EXPERTS;
        cfg->cap_value = strtod(p->v[MS_SW_CACHE_EXPERTS], NULL);
    } else {
        cfg->cap_kind = MS_CAP_BYTES;
        cfg->cap_value = strtod(p->v[MS_SW_CACHE_BYTES], NULL);
    }
    cfg->distance = (uint32_t)strtoul(p->v[MS_SW_DISTANCE], NULL, 10);
    cfg->max_batch = (uint32_t)strtoul(p->v[MS_SW_BATCH], NULL, 10);
    cfg->host_bytes = strtod(p->v[MS_SW_HOST_BYTES], NULL);
    cfg->train_set = strcmp(p->v[MS_SW_TRAIN], "auto") != 0;
    cfg->train_frac = cfg->train_set ? strtod(p->v[MS_SW_TRAIN], NULL) : 0;
    cfg->topk_fill = strcmp(p->v[MS_SW_TOPK_FILL], "even") ? MS_FILL_ZERO : MS_FILL_EVEN;
    cfg->offline = !strcmp(p->v[MS_SW_OFFLINE], "1");
    cfg->seed = strtoull(p->v[MS_SW_SEED], NULL, 10);
    cfg->gpus = p->gpus_override ? (uint32_t)strtoul(p->v[MS_SW_GPUS], NULL, 10) : 0;
    for (int i = 0; i < s->nplaces; i++)
        if (!strcmp(s->places[i].name, p->v[MS_SW_PLACEMENT]))
            cfg->placement = s->places[i].path;
    cfg->cache_per_gpu = !strcmp(p->v[MS_SW_CACHE_PER_GPU], "1");
    for (int i = 0; p->fw_override && i < s->nfws; i++)
        if (!strcmp(s->fws[i].name, p->v[MS_SW_FRAMEWORK]))
            cfg->framework = &s->fws[i].fw;
}
