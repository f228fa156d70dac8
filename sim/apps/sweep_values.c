/* The values of one sweep key (sweep_spec_parts.h): numbers and ranges,
 * policy specs, model / platform / framework profiles, placements and traces,
 * each checked as it is read. */
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


void sw_list_push(value_list *l, const char *text)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = ms_xrealloc(l->v, l->cap, sizeof *l->v);
    }
    l->v[l->n++] = ms_xstrdup(text);
}

void sw_list_free(value_list *l)
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
        return sw_ctx_fail(c, "%s = %s: %s", key, text, why);
    return 0;
}

static int push_number(parse_ctx *c, const char *key, const axis_desc *a, double x, const char *text,
                       value_list *out)
{
    if (check_number(c, key, x, text))
        return -1;
    char buf[40];
    format_number(a->kind == K_GB ? x * 1e9 : x, buf, sizeof buf);
    sw_list_push(out, buf);
    return 0;
}

/* start:stop:step, inclusive of stop. */
static int expand_range(parse_ctx *c, const char *key, const axis_desc *a, char *item, value_list *out)
{
    char *p1 = strchr(item, ':'), *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
    if (!p2 || strchr(p2 + 1, ':'))
        return sw_ctx_fail(c, "%s = %s: a range is start:stop:step", key, item);
    *p1 = *p2 = 0;
    double lo, hi, step;
    char *ls = sw_trim(item), *hs = sw_trim(p1 + 1), *ss = sw_trim(p2 + 1);
    if (parse_scalar(a->kind, ls, &lo) || parse_scalar(a->kind, hs, &hi) || parse_scalar(a->kind, ss, &step))
        return sw_ctx_fail(c, "%s = %s:%s:%s: expected numbers in start:stop:step", key, ls, hs, ss);
    if (!(step > 0) || !(lo <= hi))
        return sw_ctx_fail(c, "%s = %s:%s:%s: empty range (needs start <= stop and step > 0)", key, ls, hs, ss);
    double count = floor((hi - lo) / step + 1e-9) + 1;
    if (count > MAX_AXIS_VALUES)
        return sw_ctx_fail(c, "%s = %s:%s:%s: more than %u values", key, ls, hs, ss, MAX_AXIS_VALUES);
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
        sw_list_push(out, "auto");
        return 0;
    }
    if (strchr(item, ':'))
        return expand_range(c, key, a, item, out);
    double x;
    if (parse_scalar(a->kind, item, &x))
        return sw_ctx_fail(c, "%s = %s: expected %s", key, item,
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
    const ms_policy_desc *d = ms_policy_lookup(kind, spec, name, sizeof name, &kv, &e);
    if (!d && e.msg[0])
        return sw_ctx_fail(c, "%s = %s: %s", key, spec, e.msg);
    if (!d) {
        char known[512] = "";
        for (int i = 0; ms_policy_registry[i]; i++)
            if (ms_policy_registry[i]->kind == kind) {
                size_t u = strlen(known);
                snprintf(known + u, sizeof known - u, "%s%s", u ? ", " : "", ms_policy_registry[i]->name);
            }
        return sw_ctx_fail(c, "unknown %s policy '%s' (known: %s)", ms_policy_kind_name(kind), name, known);
    }
    snprintf(who, sizeof who, "%s policy '%s'", ms_policy_kind_name(kind), name);
    if (ms_params_parse(d->params, kv, who, &params, &e))
        return sw_ctx_fail(c, "%s", e.msg);
    return 0;
}

/* Relative paths are relative to the spec's folder. */
char *sw_resolve_path(const ms_sweep_spec *s, const char *p)
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
    char *path = is_ini_path(v) ? sw_resolve_path(s, v) : ms_xstrdup(v);
    int rc = m.none ? 0 : ms_model_load_set(path, s->sets[0], s->nsets[0], &m.model, &e);
    if (rc == 0 && !m.none) /* a key the trace decides would change nothing: refused (engine.h) */
        rc = ms_run_check_model_sets(s->sets[0], s->nsets[0], &e);
    free(path);
    if (rc) {
        free(m.name);
        if (!strncmp(e.msg, s->path, strlen(s->path))) /* an override's own FILE:LINE: key = value: why */
            return c->failed = 1, ms_fail(c->err, "%s", e.msg);
        return sw_ctx_fail(c, "model = %s: %s", v, e.msg);
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
    char *path = is_ini_path(v) ? sw_resolve_path(s, v) : ms_xstrdup(v);
    int rc = ms_platform_load_set(path, s->sets[1], s->nsets[1], &p.plat, &e);
    free(path);
    if (rc) {
        free(p.name);
        if (!strncmp(e.msg, s->path, strlen(s->path)))
            return c->failed = 1, ms_fail(c->err, "%s", e.msg);
        return sw_ctx_fail(c, "platform = %s: %s", v, e.msg);
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
    char *path = is_ini_path(v) ? sw_resolve_path(s, v) : ms_xstrdup(v);
    int rc = ms_framework_resolve(path, &f.fw, &have, &e);
    free(path);
    if (rc) {
        free(f.name);
        return sw_ctx_fail(c, "framework = %s: %s", v, e.msg);
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
    p.path = ms_placement_kind(v) == MS_PLACE_FILE ? sw_resolve_path(s, v) : ms_xstrdup(v);
    FILE *f = ms_placement_kind(v) == MS_PLACE_FILE ? fopen(p.path, "r") : NULL;
    if (ms_placement_kind(v) == MS_PLACE_FILE && !f) {
        free(p.name);
        free(p.path);
        return sw_ctx_fail(c, "placement = %s: not round-robin, layer, balanced or a readable file", v);
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
    char *path = sw_resolve_path(s, v);
    ms_err e;
    ms_trace_reader *rd = ms_reader_open(path, &e);
    if (!rd) {
        free(path);
        return sw_ctx_fail(c, "trace = %s: %s", v, e.msg);
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
            rc = sw_ctx_fail(c, "%s = %s: expected one of %s", key, item, a->choices);
    }
    if (rc == 0)
        sw_list_push(out, item);
    return rc;
}

/* Splits at commas; for policies, an item with '=' and no ':' continues the
 * previous spec's parameters. */
static int split_items(parse_ctx *c, int p, const char *key, const char *raw, value_list *items)
{
    char *copy = ms_xstrdup(raw), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *t = sw_trim(tok);
        if (!*t) {
            rc = sw_ctx_fail(c, "%s = %s: empty item in the list", key, raw);
            break;
        }
        if (axes[p].kind == K_POLICY && strchr(t, '=') && !strchr(t, ':')) {
            if (!items->n) {
                rc = sw_ctx_fail(c, "%s = %s: parameter '%s' before any policy name", key, raw, t);
                break;
            }
            char **last = &items->v[items->n - 1];
            size_t n = strlen(*last) + strlen(t) + 2;
            *last = ms_xrealloc(*last, n, 1);
            strcat(strcat(*last, ","), t);
            continue;
        }
        sw_list_push(items, t);
    }
    free(copy);
    if (rc == 0 && !items->n)
        rc = sw_ctx_fail(c, "%s: empty list", key);
    return rc;
}

int sw_expand_values(parse_ctx *c, int p, const raw_value *r, value_list *out)
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
    sw_list_free(&items);
    if (rc == 0 && out->n > MAX_AXIS_VALUES)
        rc = sw_ctx_fail(c, "%s: more than %u values", key, MAX_AXIS_VALUES);
    return rc;
}
