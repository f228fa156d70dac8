/* Locality targets: the file reader and the comparison (contract in
 * targets.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/ini.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "traces/stats/segment.h"
#include "traces/stats/targets.h"

/* ---- reading ---- */

enum { K_STATISTIC, K_GRAN, K_SCOPE, K_RESET, K_SLOTS, K_FRACTION, K_WINDOW, K_RHO, K_VALUE, K_TOL, K_SOURCE,
       K_READ, K_WORKLOAD, K_NOTE, N_KEYS };
static const char *const key_names[N_KEYS] = {"statistic", "granularity", "scope",    "reset",
                                              "slots",     "fraction",    "window",   "rho",
                                              "value",     "tolerance",   "source",   "read",
                                              "workload",  "note"};

/* ms_target_stat's names, in its order */
static const char *const stat_names[] = {"lru_hit", "lru_miss", "reuse_prev", "reuse_w8", "h_req", "h_iter",
                                         "h_trace", "h_req_decode", "srp", "sch"};
#define N_STATS ((int)(sizeof stat_names / sizeof stat_names[0]))

typedef struct {
    ms_targets *ts;
    ms_err *err;
    int in_model, in_target;
    unsigned char seen[N_KEYS];
    int model_seen;
} read_ctx;

static int is_lru(ms_target_stat s)
{
    return s == MS_TGT_LRU_HIT || s == MS_TGT_LRU_MISS;
}

static int is_segment(ms_target_stat s)
{
    return s == MS_TGT_SRP || s == MS_TGT_SCH;
}

/* Hit rates get an absolute default tolerance, the other statistics a relative one. */
static int is_hit_rate(ms_target_stat s)
{
    return is_lru(s) || s == MS_TGT_SCH;
}

static int pick(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    return -1;
}

static int fail_at(ms_err *err, const char *path, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_at(ms_err *err, const char *path, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ms_ini_vfail_at(err, path, line, fmt, ap);
    va_end(ap);
    return -1;
}

/* Fills err as FILE:LINE (the target's own line) and returns -1. */
static int target_fail(const read_ctx *c, const ms_target *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int target_fail(const read_ctx *c, const ms_target *t, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return fail_at(c->err, c->ts->file, t->line, "[target %s]: %s", t->name, why);
}

/* window (srp, sch) and rho (sch) are given exactly where they apply. */
static int segment_checks(const read_ctx *c, const ms_target *t)
{
    if (!is_segment(t->stat)) {
        for (int k = K_WINDOW; k <= K_RHO; k++)
            if (c->seen[k])
                return target_fail(c, t, "key %s applies to srp and sch only", key_names[k]);
        return 0;
    }
    if (!c->seen[K_WINDOW])
        return target_fail(c, t, "key window missing (statistic %s needs it)", stat_names[t->stat]);
    if (t->stat == MS_TGT_SCH && !c->seen[K_RHO])
        return target_fail(c, t, "key rho missing (statistic sch needs it)");
    if (t->stat == MS_TGT_SRP && c->seen[K_RHO])
        return target_fail(c, t, "key rho applies to sch only");
    if (!(t->value >= 0 && t->value <= 1))
        return target_fail(c, t, "value = %g: %s is a fraction in 0 .. 1", t->value, stat_names[t->stat]);
    return 0;
}

/* The checks of a finished [target] section, and its default tolerance. */
static int finish_target(read_ctx *c)
{
    if (!c->in_target)
        return 0;
    c->in_target = 0;
    ms_target *t = &c->ts->t[c->ts->n - 1];
    static const int always[] = {K_STATISTIC, K_VALUE, K_SOURCE, K_READ, K_WORKLOAD};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (!c->seen[always[i]])
            return target_fail(c, t, "key %s missing", key_names[always[i]]);
    if (is_lru(t->stat)) {
        static const int lru_keys[] = {K_GRAN, K_SCOPE, K_RESET};
        for (size_t i = 0; i < sizeof lru_keys / sizeof lru_keys[0]; i++)
            if (!c->seen[lru_keys[i]])
                return target_fail(c, t, "key %s missing (statistic %s needs it)", key_names[lru_keys[i]],
                                   t->stat == MS_TGT_LRU_HIT ? "lru_hit" : "lru_miss");
        if (c->seen[K_SLOTS] == c->seen[K_FRACTION])
            return target_fail(c, t, "give exactly one of slots and fraction");
        if (!(t->value >= 0 && t->value <= 1))
            return target_fail(c, t, "value = %g: a rate must lie in 0 .. 1", t->value);
    } else {
        for (int k = K_GRAN; k <= K_FRACTION; k++)
            if (c->seen[k])
                return target_fail(c, t, "key %s applies to lru_hit and lru_miss only", key_names[k]);
    }
    if (segment_checks(c, t))
        return -1;
    if (!c->seen[K_TOL]) {
        t->tolerance = is_hit_rate(t->stat) ? 0.05 : 0.10;
        t->tol_relative = !is_hit_rate(t->stat);
    }
    return 0;
}

static int on_section(ms_ini *ini, void *user, const char *section)
{
    read_ctx *c = user;
    if (finish_target(c))
        return -1;
    c->in_model = c->in_target = 0;
    if (!strcmp(section, "model")) {
        c->in_model = 1;
        return 0;
    }
    if (strncmp(section, "target ", 7) || !section[7])
        return ms_ini_fail(ini, "[%s]: unknown section (expected [model] or [target NAME])", section);
    const char *name = section + 7;
    if (strlen(name) >= sizeof c->ts->t[0].name)
        return ms_ini_fail(ini, "[%s]: target name longer than %zu characters", section, sizeof c->ts->t[0].name - 1);
    for (int i = 0; i < c->ts->n; i++)
        if (!strcmp(c->ts->t[i].name, name))
            return ms_ini_fail(ini, "[%s]: target given twice (first on line %d)", section, c->ts->t[i].line);
    if (c->ts->n == MS_TARGETS_MAX)
        return ms_ini_fail(ini, "[%s]: more than %d targets", section, MS_TARGETS_MAX);
    ms_target *t = &c->ts->t[c->ts->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->line = ms_ini_line(ini);
    memset(c->seen, 0, sizeof c->seen);
    c->in_target = 1;
    return 0;
}

static int copy_text(ms_ini *ini, const ms_target *t, const char *key, const char *v, char *dst, size_t cap)
{
    if (!v[0] || strlen(v) >= cap)
        return ms_ini_fail(ini, "[target %s] %s = %s: need 1 .. %zu characters", t->name, key, v, cap - 1);
    snprintf(dst, cap, "%s", v);
    return 0;
}

static int set_number(ms_ini *ini, const ms_target *t, const char *key, const char *v, double lo, double hi,
                      double *out)
{
    if (ms_parse_double(v, out) || !isfinite(*out))
        return ms_ini_fail(ini, "[target %s] %s = %s: not a number", t->name, key, v);
    if (*out < lo || *out > hi)
        return ms_ini_fail(ini, "[target %s] %s = %s: out of range %g .. %g", t->name, key, v, lo, hi);
    return 0;
}

static int set_tolerance(ms_ini *ini, ms_target *t, const char *v)
{
    char buf[64];
    size_t n = strlen(v);
    t->tol_relative = n > 1 && n < sizeof buf && v[n - 1] == '%';
    snprintf(buf, sizeof buf, "%.*s", (int)(t->tol_relative ? n - 1 : n), v);
    if (set_number(ini, t, "tolerance", buf, 0, t->tol_relative ? 100 : 1e6, &t->tolerance))
        return -1;
    if (t->tol_relative)
        t->tolerance /= 100;
    return 0;
}

/* An indented line continues source, workload or note (one space between). */
static int continue_text(ms_ini *ini, ms_target *t, int k, const char *v)
{
    char *dst = k == K_SOURCE ? t->source : k == K_WORKLOAD ? t->workload : k == K_NOTE ? t->note : NULL;
    size_t cap = k == K_SOURCE ? sizeof t->source : k == K_WORKLOAD ? sizeof t->workload : sizeof t->note;
    if (!dst)
        return ms_ini_fail(ini, "[target %s] %s: only source, workload and note continue on indented lines", t->name,
                           key_names[k]);
    size_t n = strlen(dst);
    if (n + 1 + strlen(v) >= cap)
        return ms_ini_fail(ini, "[target %s] %s: longer than %zu characters", t->name, key_names[k], cap - 1);
    snprintf(dst + n, cap - n, " %s", v);
    return 0;
}

static int target_value(ms_ini *ini, read_ctx *c, const char *key, const char *value)
{
    const char *v = value;
    ms_target *t = &c->ts->t[c->ts->n - 1];
    int k = pick(key, key_names, N_KEYS);
    if (k < 0)
        return ms_ini_fail(ini, "[target %s] %s: unknown key", t->name, key);
    if (ms_ini_continuation(ini))
        return continue_text(ini, t, k, v);
    if (c->seen[k])
        return ms_ini_fail(ini, "[target %s] %s: given twice", t->name, key);
    c->seen[k] = 1;
    static const char *const grans[] = {"layer", "global"}, *const scopes[] = {"decode", "all"},
                             *const resets[] = {"request", "none"}, *const reads[] = {"text", "table", "plot"};
    int i;
    switch (k) {
    case K_STATISTIC:
        if ((i = pick(v, stat_names, N_STATS)) < 0)
            return ms_ini_fail(ini, "[target %s] statistic = %s: unknown (lru_hit, lru_miss, reuse_prev, reuse_w8, "
                                    "h_req, h_iter, h_trace, h_req_decode, srp, sch)", t->name, v);
        t->stat = (ms_target_stat)i;
        return 0;
    case K_GRAN:
        if ((i = pick(v, grans, 2)) < 0)
            return ms_ini_fail(ini, "[target %s] granularity = %s: expected layer or global", t->name, v);
        t->gran = (ms_loc_granularity)i;
        return 0;
    case K_SCOPE:
        if ((i = pick(v, scopes, 2)) < 0)
            return ms_ini_fail(ini, "[target %s] scope = %s: expected decode or all", t->name, v);
        t->scope = (ms_loc_scope)i;
        return 0;
    case K_RESET:
        if ((i = pick(v, resets, 2)) < 0)
            return ms_ini_fail(ini, "[target %s] reset = %s: expected request or none", t->name, v);
        t->reset = (ms_loc_reset)i;
        return 0;
    case K_SLOTS:
        if (set_number(ini, t, key, v, 1, 1e9, &t->slots))
            return -1;
        if (t->slots != floor(t->slots))
            return ms_ini_fail(ini, "[target %s] slots = %s: not a whole number", t->name, v);
        return 0;
    case K_FRACTION:
        if (set_number(ini, t, key, v, 0, 1, &t->fraction))
            return -1;
        if (t->fraction <= 0)
            return ms_ini_fail(ini, "[target %s] fraction = %s: must be above 0", t->name, v);
        return 0;
    case K_WINDOW:
        if (set_number(ini, t, key, v, 1, 1e6, &t->window))
            return -1;
        if (ms_segment_window_index(t->window) < 0)
            return ms_ini_fail(ini, "[target %s] window = %s: expected 4, 16, 64 or 256 (segment.h)", t->name, v);
        return 0;
    case K_RHO:
        if (set_number(ini, t, key, v, 0, 1e6, &t->rho))
            return -1;
        if (ms_segment_rho_index(t->rho) < 0)
            return ms_ini_fail(ini, "[target %s] rho = %s: expected 2 (segment.h: the published point)", t->name, v);
        return 0;
    case K_VALUE:
        return set_number(ini, t, key, v, 0, 1e6, &t->value);
    case K_TOL:
        return set_tolerance(ini, t, v);
    case K_SOURCE:
        return copy_text(ini, t, key, v, t->source, sizeof t->source);
    case K_READ:
        if (pick(v, reads, 3) < 0)
            return ms_ini_fail(ini, "[target %s] read = %s: expected text, table or plot", t->name, v);
        snprintf(t->read, sizeof t->read, "%s", v);
        return 0;
    case K_WORKLOAD:
        return copy_text(ini, t, key, v, t->workload, sizeof t->workload);
    default:
        return copy_text(ini, t, key, v, t->note, sizeof t->note);
    }
}

static int on_value(ms_ini *ini, void *user, const char *section, const char *key, const char *value)
{
    read_ctx *c = user;
    (void)section;
    if (c->in_model) {
        if (strcmp(key, "name"))
            return ms_ini_fail(ini, "[model] %s: unknown key (only name)", key);
        if (c->model_seen)
            return ms_ini_fail(ini, "[model] name: given twice");
        c->model_seen = 1;
        if (!value[0] || strlen(value) >= sizeof c->ts->model)
            return ms_ini_fail(ini, "[model] name = %s: need 1 .. %zu characters", value, sizeof c->ts->model - 1);
        snprintf(c->ts->model, sizeof c->ts->model, "%s", value);
        return 0;
    }
    if (c->in_target)
        return target_value(ini, c, key, value);
    return ms_ini_fail(ini, "%s: key outside a section", key);
}

static int targets_path(const char *name_or_path, char *path, size_t cap, ms_err *err)
{
    size_t n = strlen(name_or_path);
    if (n > 4 && !strcmp(name_or_path + n - 4, ".ini")) {
        snprintf(path, cap, "%s", name_or_path);
        return 0;
    }
    for (const char *p = name_or_path; *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') || *p == '.' ||
              *p == '-' || *p == '_'))
            return ms_fail(err, "targets '%s': not a model name (letters, digits, '.', '-', '_') or a path ending in .ini",
                           name_or_path);
    char dir[900];
    if (ms_path_profiles(dir, sizeof dir, err))
        return -1;
    if ((size_t)snprintf(path, cap, "%s/targets/%s.ini", dir, name_or_path) >= cap)
        return ms_fail(err, "targets '%s': path too long", name_or_path);
    return 0;
}

int ms_targets_load(const char *name_or_path, ms_targets *out, ms_err *err)
{
    memset(out, 0, sizeof *out);
    if (targets_path(name_or_path, out->file, sizeof out->file, err))
        return -1;
    read_ctx c = {.ts = out, .err = err};
    ms_ini_spec spec = {.what = "targets file", .sections = NULL, .on_section = on_section, .on_value = on_value,
                        .user = &c};
    if (ms_ini_parse(out->file, &spec, err) || finish_target(&c))
        return -1;
    if (!c.model_seen)
        return ms_ini_fail_file(err, out->file, "[model] name missing");
    if (!out->n)
        return ms_ini_fail_file(err, out->file, "no [target NAME] section");
    return 0;
}

/* ---- comparing ---- */

uint64_t ms_target_entries(const ms_target *t, uint32_t L, uint32_t J)
{
    if (t->slots > 0)
        return (uint64_t)t->slots;
    uint64_t keys = t->gran == MS_LOC_LAYER ? J : (uint64_t)L * J;
    uint64_t c = (uint64_t)ceil(t->fraction * (double)keys - 1e-9);
    return c ? c : 1;
}

double ms_target_measure(const ms_target *t, const ms_stats *s)
{
    const ms_stats_report *rp = ms_stats_report_get(s);
    if (!rp)
        return NAN;
    switch (t->stat) {
    case MS_TGT_LRU_HIT:
    case MS_TGT_LRU_MISS: {
        double h = ms_locality_lru_hit(ms_stats_locality(s), t->gran, t->scope, t->reset,
                                       ms_target_entries(t, rp->L, rp->J));
        return t->stat == MS_TGT_LRU_HIT ? h : 1 - h;
    }
    case MS_TGT_REUSE_PREV:
        return rp->mean.reuse_prev;
    case MS_TGT_REUSE_W8:
        return rp->mean.reuse_w8;
    case MS_TGT_H_REQ:
        return rp->mean.h_req;
    case MS_TGT_H_ITER:
        return rp->mean.h_iter;
    case MS_TGT_H_REQ_DECODE:
        return ms_locality_h_req_decode(ms_stats_locality(s));
    case MS_TGT_SRP:
        return ms_segment_srp(ms_stats_segment(s), (uint32_t)t->window);
    case MS_TGT_SCH:
        return ms_segment_sch(ms_stats_segment(s), (uint32_t)t->window, t->rho);
    default:
        return rp->mean.h_trace;
    }
}

int ms_target_met(const ms_target *t, double measured)
{
    if (!isfinite(measured))
        return 0;
    double allowed = t->tol_relative ? t->tolerance * fabs(t->value) : t->tolerance;
    return fabs(measured - t->value) <= allowed + 1e-12;
}

void ms_target_describe(const ms_target *t, uint32_t L, uint32_t J, char *buf, size_t cap)
{
    if (t->stat == MS_TGT_SRP) {
        snprintf(buf, cap, "srp window=%g", t->window);
        return;
    }
    if (t->stat == MS_TGT_SCH) {
        snprintf(buf, cap, "sch global window=%g rho=%g", t->window, t->rho);
        return;
    }
    if (!(t->stat == MS_TGT_LRU_HIT || t->stat == MS_TGT_LRU_MISS)) {
        snprintf(buf, cap, "%s", stat_names[t->stat]);
        return;
    }
    snprintf(buf, cap, "%s %s %s reset=%s %llu %s", stat_names[t->stat], ms_loc_granularity_name(t->gran),
             ms_loc_scope_name(t->scope), ms_loc_reset_name(t->reset),
             (unsigned long long)ms_target_entries(t, L, J), t->gran == MS_LOC_LAYER ? "slots/layer" : "entries");
}

int ms_targets_print(const ms_targets *ts, const ms_stats *s, FILE *out)
{
    const ms_stats_report *rp = ms_stats_report_get(s);
    int missed = 0;
    fprintf(out, "targets %s (model %s): %d\n", ts->file, ts->model, ts->n);
    fprintf(out, "%-22s %-48s %8s %8s %8s %9s  %s\n", "target", "statistic", "target", "trace", "diff", "tolerance",
            "");
    for (int i = 0; i < ts->n; i++) {
        const ms_target *t = &ts->t[i];
        char what[96], tol[24];
        ms_target_describe(t, rp->L, rp->J, what, sizeof what);
        if (t->tol_relative)
            snprintf(tol, sizeof tol, "%g%%", t->tolerance * 100);
        else
            snprintf(tol, sizeof tol, "%g", t->tolerance);
        double v = ms_target_measure(t, s);
        int met = ms_target_met(t, v);
        missed += !met;
        if (isfinite(v))
            fprintf(out, "%-22s %-48s %8.3f %8.3f %+8.3f %9s  %s\n", t->name, what, t->value, v, v - t->value, tol,
                    met ? "ok" : "MISS");
        else
            fprintf(out, "%-22s %-48s %8.3f %8s %8s %9s  %s\n", t->name, what, t->value, "-", "-", tol,
                    "MISS (undefined on this trace)");
    }
    fprintf(out, "%d of %d targets met\n", ts->n - missed, ts->n);
    return missed;
}
