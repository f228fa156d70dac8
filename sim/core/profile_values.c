/* Profile values and whole-file checks (profile_parts.h): one INI value
 * parsed, range-checked and stored through its field, [source] lines,
 * required fields and the cross-field checks of a model. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


#include "sim/core/digest.h"
#include "sim/core/ini.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"

#include "sim/core/profile_parts.h"

/* Records the first error as "FILE:LINE: message" (the one INI error form,
 * sim/core/ini.h; "FILE: message" outside a line); later calls are ignored. */
int pf_ctx_fail(parse_ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    ms_ini_vfail_at(c->err, c->path, c->line, fmt, ap);
    va_end(ap);
    return -1;
}

static int in_list(const char *const *list, const char *s)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], s))
            return 1;
    return 0;
}

static void join_list(const char *const *list, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; list[i] && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", list[i]);
}

int pf_is_plain_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '-' && *s != '_')
            return 0;
    return 1;
}

void pf_collect_groups(parse_ctx *c)
{
    for (int i = 0; i < c->schema->nfields; i++) {
        const char *g = c->schema->fields[i].cite;
        if (!g)
            continue;
        int known = 0;
        for (int j = 0; j < c->ngroups; j++)
            known |= !strcmp(c->groups[j], g);
        if (!known && c->ngroups < MAX_GROUPS)
            c->groups[c->ngroups++] = g;
    }
}

static int find_field(const profile_schema *s, const char *section, const char *key)
{
    for (int i = 0; i < s->nfields; i++)
        if (!strcmp(s->fields[i].section, section) && !strcmp(s->fields[i].key, key))
            return i;
    return -1;
}

int pf_find_group(const parse_ctx *c, const char *key)
{
    for (int i = 0; i < c->ngroups; i++)
        if (!strcmp(c->groups[i], key))
            return i;
    return -1;
}

/* ---- one value ---- */

/* "must be in [0.1, 1e+04] GB/s (the plausible range, docs/profile-files.md)" */
static void describe_range(const field_spec *f, char *buf, size_t cap)
{
    double unit = f->kind == K_BW ? 1e9 : 1;
    const char *name = f->kind == K_BW ? " GB/s" : "";
    if (f->lo_open)
        snprintf(buf, cap, "must be > %g and <= %g%s (the plausible range, docs/profile-files.md)", f->lo / unit,
                 f->hi / unit, name);
    else
        snprintf(buf, cap, "must be in [%g, %g]%s (the plausible range, docs/profile-files.md)", f->lo / unit,
                 f->hi / unit, name);
}

static int in_range(const field_spec *f, double v)
{
    return (f->lo_open ? v > f->lo : v >= f->lo) && v <= f->hi;
}

/* Reads the number a numeric field holds; -1 when the text is malformed. */
static int read_number(field_kind kind, const char *value, double *v)
{
    unsigned long long u;
    switch (kind) {
    case K_U32:
        if (ms_parse_u64(value, &u))
            return -1;
        *v = (double)u;
        return 0;
    case K_COUNT_BYTES:
    case K_BYTES:
        return ms_parse_bytes(value, v);
    case K_BW: {
        char tmp[RAW_VALUE_CAP];
        size_t n = strlen(value);
        if (n >= sizeof tmp)
            return -1;
        memcpy(tmp, value, n + 1);
        if (n > 2 && !strcmp(tmp + n - 2, "/s"))
            tmp[n - 2] = '\0';
        return ms_parse_bytes(tmp, v);
    }
    case K_DOUBLE:
        return ms_parse_double(value, v);
    default:
        return -1;
    }
}

static const char *kind_hint(field_kind kind)
{
    switch (kind) {
    case K_U32: return "an unsigned integer";
    case K_COUNT_BYTES: return "an integer count (suffixes B, KB, MiB, ... allowed)";
    case K_BYTES: return "a byte size such as 24GiB";
    case K_BW: return "a bandwidth in bytes/s such as 32GB/s";
    default: return "a number";
    }
}

int pf_store_text(parse_ctx *c, const field_spec *f, const char *value)
{
    char *dst = (char *)c->out + f->offset;
    if (strlen(value) >= f->cap)
        return pf_ctx_fail(c, "[%s] %s = '%s': longer than %zu characters", f->section, f->key, value, f->cap - 1);
    if (f->kind == K_NAME && !pf_is_plain_name(value))
        return pf_ctx_fail(c, "[%s] %s = '%s': use only letters, digits, '.', '-', '_'", f->section, f->key, value);
    if (f->kind == K_DTYPE) {
        static const char *const dtypes[] = {"bf16", "fp32", "fp8", "mxfp4", NULL};
        if (!in_list(dtypes, value))
            return pf_ctx_fail(c, "[%s] %s = '%s': not one of bf16, fp32, fp8, mxfp4", f->section, f->key, value);
    }
    if (f->kind == K_TEXT && !*value)
        return pf_ctx_fail(c, "[%s] %s is empty", f->section, f->key);
    memcpy(dst, value, strlen(value) + 1);
    return 0;
}

int pf_store_number(parse_ctx *c, const field_spec *f, const char *value)
{
    double v;
    if (read_number(f->kind, value, &v))
        return pf_ctx_fail(c, "[%s] %s = '%s': not %s", f->section, f->key, value, kind_hint(f->kind));
    if (!in_range(f, v)) {
        char range[96];
        describe_range(f, range, sizeof range);
        return pf_ctx_fail(c, "[%s] %s = '%s': %s", f->section, f->key, value, range);
    }
    char *dst = (char *)c->out + f->offset;
    if (f->kind == K_U32) {
        uint32_t u = (uint32_t)v;
        memcpy(dst, &u, sizeof u);
    } else if (f->kind == K_COUNT_BYTES) {
        if (v != floor(v))
            return pf_ctx_fail(c, "[%s] %s = '%s': not a whole number (%.17g)", f->section, f->key, value, v);
        uint64_t u = (uint64_t)v;
        memcpy(dst, &u, sizeof u);
    } else {
        memcpy(dst, &v, sizeof v);
    }
    return 0;
}

/* ---- a model's [routing] knobs (kept as text; the generator checks them) ---- */

static ms_routing_knob *find_knob(parse_ctx *c, const char *key)
{
    ms_model *m = c->out;
    for (int i = 0; i < m->n_routing; i++)
        if (!strcmp(m->routing[i].key, key))
            return &m->routing[i];
    return NULL;
}

static int store_routing(parse_ctx *c, const char *key, const char *value)
{
    ms_model *m = c->out;
    if (find_knob(c, key))
        return pf_ctx_fail(c, "[routing] %s: given twice", key);
    if (m->n_routing == MS_ROUTING_MAX)
        return pf_ctx_fail(c, "[routing] %s: more than %d knobs", key, MS_ROUTING_MAX);
    ms_routing_knob *k = &m->routing[m->n_routing];
    if (!pf_is_plain_name(key) || strlen(key) >= sizeof k->key)
        return pf_ctx_fail(c, "[routing] %s: not a knob name", key);
    if (!value[0] || strlen(value) >= sizeof k->value)
        return pf_ctx_fail(c, "[routing] %s = '%s': need 1 .. %zu characters", key, value, sizeof k->value - 1);
    snprintf(k->key, sizeof k->key, "%s", key);
    snprintf(k->value, sizeof k->value, "%s", value);
    k->line = c->line;
    m->n_routing++;
    return 0;
}

/* [source] routing.KNOB = fitted <how> | estimate <why>: after its knob. */
static int store_routing_source(parse_ctx *c, const char *key, const char *value)
{
    const char *name = key + strlen("routing.");
    ms_routing_knob *k = find_knob(c, name);
    if (!k)
        return pf_ctx_fail(c, "[source] %s: no knob %s in [routing] above", key, name);
    if (k->source[0])
        return pf_ctx_fail(c, "duplicate key '%s' in [source]", key);
    size_t n = strcspn(value, " \t");
    if (!value[n] || !((n == 6 && !strncmp(value, "fitted", 6)) || (n == 8 && !strncmp(value, "estimate", 8))))
        return pf_ctx_fail(c, "[source] %s = '%s': expected 'fitted <target, command>' or 'estimate <why>'", key,
                           value);
    if (strlen(value) >= sizeof k->source)
        return pf_ctx_fail(c, "[source] %s: longer than %zu characters", key, sizeof k->source - 1);
    snprintf(k->source, sizeof k->source, "%s", value);
    return 0;
}

/* Every [routing] knob is cited (reported at the knob's line). */
static int check_routing_sources(parse_ctx *c)
{
    if (c->schema != &pf_model_schema)
        return 0;
    const ms_model *m = c->out;
    for (int i = 0; i < m->n_routing; i++)
        if (!m->routing[i].source[0]) {
            c->line = m->routing[i].line;
            return pf_ctx_fail(c, "[routing] %s: no [source] routing.%s entry (fitted ... or estimate ...)",
                               m->routing[i].key, m->routing[i].key);
        }
    return 0;
}

/* A [source] value starts with its status word, then the citation. */
static int store_source(parse_ctx *c, const char *key, const char *value)
{
    if (c->schema == &pf_model_schema && !strncmp(key, "routing.", 8))
        return store_routing_source(c, key, value);
    int g = pf_find_group(c, key);
    if (g < 0) {
        char known[512] = "";
        size_t used = 0;
        for (int i = 0; i < c->ngroups && used < sizeof known; i++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", c->groups[i]);
        return pf_ctx_fail(c, "unknown key '%s' in [source] (known: %s)", key, known);
    }
    if (c->group_seen[g])
        return pf_ctx_fail(c, "duplicate key '%s' in [source]", key);
    char status[32];
    size_t n = strcspn(value, " \t");
    if (n == 0 || n >= sizeof status || !value[n]) {
        char allowed[128];
        join_list(c->schema->statuses, allowed, sizeof allowed);
        return pf_ctx_fail(c, "[source] %s = '%s': expected '<status> <citation>' with status one of %s", key, value, allowed);
    }
    memcpy(status, value, n);
    status[n] = '\0';
    if (!in_list(c->schema->statuses, status)) {
        char allowed[128];
        join_list(c->schema->statuses, allowed, sizeof allowed);
        return pf_ctx_fail(c, "[source] %s = '%s': status '%s' is not one of %s", key, value, status, allowed);
    }
    if (strlen(value) >= SOURCE_TEXT_CAP)
        return pf_ctx_fail(c, "[source] %s: longer than %d characters", key, SOURCE_TEXT_CAP - 1);
    memcpy(c->group_text[g], value, strlen(value) + 1);
    c->group_seen[g] = 1;
    return 0;
}

/* inih handler: returns nonzero to continue.  After the first error every
 * call is refused, and the reader below stops feeding lines. */
static int on_ini_value(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    if (c->failed)
        return 0;
    if (!*section)
        return pf_ctx_fail(c, "key '%s' outside any [section]", name) == 0;
    if (!strcmp(section, "source"))
        return store_source(c, name, value) == 0;
    if (!strcmp(section, "routing"))
        return store_routing(c, name, value) == 0;
    int i = find_field(c->schema, section, name);
    if (i < 0)
        return pf_ctx_fail(c, "unknown key '%s' in [%s]", name, section) == 0;
    const field_spec *f = &c->schema->fields[i];
    if (c->seen[i])
        return pf_ctx_fail(c, "duplicate key '%s' in [%s] (an indented line continues the previous value)", name,
                        section) == 0;
    c->seen[i] = 1;
    snprintf(c->raw[i], sizeof c->raw[i], "%s", value);
    int rc = (f->kind == K_NAME || f->kind == K_TEXT || f->kind == K_DTYPE) ? pf_store_text(c, f, value)
                                                                           : pf_store_number(c, f, value);
    return rc == 0;
}

/* The one INI reader's handler (sim/core/ini.h): 0 to go on, -1 after pf_ctx_fail. */
int pf_on_value(ms_ini *ini, void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    c->line = ms_ini_line(ini);
    return on_ini_value(user, section, name, value) ? 0 : -1;
}

/* ---- whole-file checks ---- */

/* A [source] key must be given when a figure citing it is required or given. */
static int group_needed(const parse_ctx *c, int g)
{
    for (int i = 0; i < c->schema->nfields; i++) {
        const field_spec *f = &c->schema->fields[i];
        if (f->cite && !strcmp(f->cite, c->groups[g]) && (f->required || c->seen[i]))
            return 1;
    }
    return 0;
}

int pf_check_required(parse_ctx *c)
{
    if (check_routing_sources(c))
        return -1;
    c->line = 0;
    for (int i = 0; i < c->schema->nfields; i++) {
        const field_spec *f = &c->schema->fields[i];
        if (f->required && !c->seen[i])
            return pf_ctx_fail(c, "missing required key '%s' in [%s]", f->key, f->section);
    }
    for (int g = 0; g < c->ngroups; g++) {
        int needed = group_needed(c, g);
        if (needed && !c->group_seen[g])
            return pf_ctx_fail(c, "missing required key '%s' in [source]", c->groups[g]);
        if (!needed && c->group_seen[g])
            return pf_ctx_fail(c, "[source] %s cites a figure the profile does not give", c->groups[g]);
    }
    return 0;
}

static int check_bytes_per_param(parse_ctx *c, const char *key, uint64_t bytes, uint64_t params, uint64_t per)
{
    if (bytes && bytes != params * per)
        return pf_ctx_fail(c, "[bytes_per_expert] %s = %llu: expected %llu (%llu bytes x expert_params %llu)", key,
                        (unsigned long long)bytes, (unsigned long long)(params * per), (unsigned long long)per,
                        (unsigned long long)params);
    return 0;
}

static uint64_t native_bytes(const ms_model *m)
{
    if (!strcmp(m->dtype, "bf16"))
        return m->bytes_bf16;
    if (!strcmp(m->dtype, "fp32"))
        return m->bytes_fp32;
    if (!strcmp(m->dtype, "fp8"))
        return m->bytes_fp8;
    return m->bytes_mxfp4;
}

int pf_check_model(parse_ctx *c, const ms_model *m)
{
    if (m->moe_layers > m->layers)
        return pf_ctx_fail(c, "[model] moe_layers = %u exceeds layers = %u", m->moe_layers, m->layers);
    if (m->encoder_moe_layers >= m->moe_layers)
        return pf_ctx_fail(c, "[model] encoder_moe_layers = %u: expected fewer than moe_layers = %u (a decoder "
                              "needs at least one MoE layer)",
                           m->encoder_moe_layers, m->moe_layers);
    if (m->top_k > m->experts)
        return pf_ctx_fail(c, "[model] top_k = %u exceeds experts = %u", m->top_k, m->experts);
    /* Weights of one expert, plus at most one bias per output row of each matrix
     * (gate/up rows are expert_ffn long, the down rows hidden long). */
    uint64_t weights = (uint64_t)m->expert_matrices * m->hidden * m->expert_ffn;
    uint64_t biases = (uint64_t)(m->expert_matrices - 1) * m->expert_ffn + m->hidden;
    if (m->expert_params < weights || m->expert_params > weights + biases)
        return pf_ctx_fail(c,
                        "[model] expert_params = %llu: expected expert_matrices*hidden*expert_ffn = %llu "
                        "plus at most %llu bias terms",
                        (unsigned long long)m->expert_params, (unsigned long long)weights,
                        (unsigned long long)biases);
    uint64_t native = native_bytes(m);
    if (!native)
        return pf_ctx_fail(c, "missing key '%s' in [bytes_per_expert] for dtype = %s", m->dtype, m->dtype);
    if (m->expert_bytes != native)
        return pf_ctx_fail(c, "[model] expert_bytes = %llu differs from [bytes_per_expert] %s = %llu",
                        (unsigned long long)m->expert_bytes, m->dtype, (unsigned long long)native);
    if (check_bytes_per_param(c, "bf16", m->bytes_bf16, m->expert_params, 2) ||
        check_bytes_per_param(c, "fp32", m->bytes_fp32, m->expert_params, 4) ||
        check_bytes_per_param(c, "fp8", m->bytes_fp8, m->expert_params, 1))
        return -1;
    /* MXFP4: 4 bits per weight plus scales and biases, always below bf16. */
    if (m->bytes_mxfp4 && (m->bytes_mxfp4 < weights / 2 || m->bytes_mxfp4 >= 2 * m->expert_params))
        return pf_ctx_fail(c, "[bytes_per_expert] mxfp4 = %llu: outside [%llu, %llu) for %llu weights",
                        (unsigned long long)m->bytes_mxfp4, (unsigned long long)(weights / 2),
                        (unsigned long long)(2 * m->expert_params), (unsigned long long)weights);
    /* Dense weights are stored at 0.5 (4-bit) to 4 (fp32) bytes per parameter. */
    if (2 * m->dense_bytes < m->dense_params || m->dense_bytes > 4 * m->dense_params)
        return pf_ctx_fail(c, "[model] dense_bytes = %llu: not 0.5 to 4 bytes per dense_params = %llu",
                        (unsigned long long)m->dense_bytes, (unsigned long long)m->dense_params);
    return 0;
}
