/* Sweep specifications: see sweep_spec.h.  This file reads the INI and
 * expands the points; sweep_values.c parses one key's values. */
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
#include "sim/apps/sweep_spec_parts.h"

const char *const ms_sweep_param_names[MS_SW_NPARAM] = { /* = the first keys of ms_runkeys (test_runkeys) */
    "trace", "model", "platform", "prefetch", "cache", "sched", "cache_experts", "cache_bytes", "distance",
    "batch", "host_bytes", "h2d_gbps", "train", "topk_fill", "offline", "seed", "gpus", "placement", "cache_per_gpu",
    "framework",
};



int sw_ctx_fail(parse_ctx *c, const char *fmt, ...)
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

char *sw_trim(char *s)
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
            return sw_ctx_fail(c, "[sweep] must come first and only once");
        c->in_point = 0;
        return 0;
    }
    /* "point": the reader admits no other name */
    if (c->in_point == -1)
        return sw_ctx_fail(c, "[point] before [sweep]");
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
            return sw_ctx_fail(c, "key 'output' given twice");
        if (!*value)
            return sw_ctx_fail(c, "output: empty path");
        s->output = ms_xstrdup(value);
        s->output_line = c->line;
        return 0;
    }
    if (!strcmp(name, "mode")) {
        if (s->mode_set)
            return sw_ctx_fail(c, "key 'mode' given twice");
        s->mode_set = 1;
        if (!strcmp(value, "product"))
            s->mode_list = 0;
        else if (!strcmp(value, "list"))
            s->mode_list = 1;
        else
            return sw_ctx_fail(c, "mode = %s: expected product or list", value);
        return 0;
    }
    /* trace_cache */
    double b;
    if (s->trace_cache_set)
        return sw_ctx_fail(c, "key 'trace_cache' given twice");
    if (ms_parse_bytes(value, &b) || !(b >= 0) || b > 1e18) /* 1e18: below UINT64_MAX, far above any memory */
        return sw_ctx_fail(c, "trace_cache = %s: expected a size such as 2GiB (0 = off, at most 1e18 bytes)", value);
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
        return sw_ctx_fail(c, "%s: profile overrides go in [sweep] (they apply to every point)", name);
    if (!*key)
        return sw_ctx_fail(c, "%s: expected %s.KEY = VALUE", name, kind ? "platform" : "model");
    ms_profile_set *sets = c->s->sets[kind];
    int *n = &c->s->nsets[kind];
    for (int i = 0; i < *n; i++)
        if (!strcmp(sets[i].key, key))
            return sw_ctx_fail(c, "key '%s' given twice", name);
    if (*n == MS_SWEEP_MAX_SETS)
        return sw_ctx_fail(c, "%s: more than %d overrides of one profile", name, MS_SWEEP_MAX_SETS);
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

/* inih's convention: 1 to go on, 0 after sw_ctx_fail */
static int value_line(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    parse_ctx *c = user;
    if (c->failed)
        return 0;
    if (c->in_point == -1)
        return sw_ctx_fail(c, "key '%s' before [sweep]", name), 0;
    if (is_profile_set(name))
        return add_profile_set(c, name, value) == 0;
    int gb, p = param_index(name, &gb);
    if (p < 0 && !(is_setting(name) && !c->in_point))
        return sw_ctx_fail(c, "unknown key '%s' in [%s] (known: %s)", name, c->in_point ? "point" : "sweep",
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
        return sw_ctx_fail(c, "key '%s' given twice (continue a list on indented lines)", name), 0;
    if ((p == MS_SW_CACHE_EXPERTS && g->raw[MS_SW_CACHE_BYTES].raw) ||
        (p == MS_SW_CACHE_BYTES && g->raw[MS_SW_CACHE_EXPERTS].raw))
        return sw_ctx_fail(c, "give one of cache_experts, cache_bytes, cache_gb"), 0;
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
        if ((r || axes[p].def) && sw_expand_values(c, p, r ? r : &d, &l)) {
            sw_list_free(&l);
            return -1;
        }
        if (!r && !axes[p].def && p == MS_SW_TRACE) {
            c->line = line;
            return sw_ctx_fail(c, "no trace: give trace = FILE[, FILE...]");
        }
        if (!r && !axes[p].def) /* h2d_gbps: the platform's; a capacity key not used */
            sw_list_push(&l, "");
        g->vals[p] = l.v;
        g->n[p] = l.n;
    }
    if (!strcmp(g->vals[MS_SW_CACHE_EXPERTS][0], "") && !strcmp(g->vals[MS_SW_CACHE_BYTES][0], "")) {
        c->line = line;
        return sw_ctx_fail(c, "no cache size: give cache_experts, cache_bytes or cache_gb");
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
            return sw_ctx_fail(c, "the sweep has more than %llu points", MAX_POINTS);
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
        return sw_ctx_fail(c, "no [sweep] section");
    if (!s->output)
        return sw_ctx_fail(c, "[sweep] needs output = FILE.csv");
    if (s->mode_list && !s->ngroups)
        return sw_ctx_fail(c, "mode = list needs at least one [point] section");
    if (!s->mode_list && s->ngroups) {
        c->line = s->groups[0].line;
        return sw_ctx_fail(c, "[point] sections need mode = list in [sweep]");
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
        char *out = sw_resolve_path(s, s->output);
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
