/* Model and platform profiles: INI files parsed with inih (libinih-dev).
 *
 * Both kinds are described by one table of fields (section, key, how to
 * parse, where to store, allowed range, which [source] entry cites it); a
 * single inih handler fills the struct from that table and stops at the
 * first error.  Cross-field checks (top_k <= experts, expert bytes matching
 * the parameter count, ...) run once the whole file is read. */
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

#define MAX_FIELDS 40
#define MAX_GROUPS 32
#define SOURCE_TEXT_CAP 256
#define RAW_VALUE_CAP 48

typedef enum {
    K_NAME,   /* profile name: letters, digits, '.', '-', '_' */
    K_TEXT,   /* free text */
    K_DTYPE,  /* one of the dtypes of [bytes_per_expert] */
    K_U32,    /* integer (ms_parse_u64) */
    K_COUNT_BYTES, /* exact byte or parameter count: integer, suffixes allowed (ms_parse_bytes) */
    K_BYTES,  /* byte quantity as double (ms_parse_bytes) */
    K_BW,     /* bytes per second: a byte quantity with an optional "/s" */
    K_DOUBLE, /* plain number (ms_parse_double) */
} field_kind;

typedef struct {
    const char *section;
    const char *key;
    field_kind kind;
    size_t offset;
    size_t cap;       /* K_NAME, K_TEXT, K_DTYPE: capacity of the char array */
    double lo, hi;    /* numeric range; lo is exclusive when lo_open */
    int lo_open;
    int required;
    const char *cite; /* [source] key that must cite this figure, or NULL */
} field_spec;

typedef struct {
    const char *kind;       /* "model" | "platform", for messages */
    const char *subdir;     /* "models" | "platforms" */
    const char *const *sections;
    const field_spec *fields;
    int nfields;
    const char *const *statuses; /* allowed first words of a [source] value */
    int cite_with_value;    /* platform: source lines show the figure's value */
} profile_schema;

#define STR(sec, key, kind, type, member, req) \
    { sec, key, kind, offsetof(type, member), sizeof(((type *)0)->member), 0, 0, 0, req, NULL }
#define NUM(sec, key, kind, type, member, lo, hi, lo_open, req, cite) \
    { sec, key, kind, offsetof(type, member), 0, lo, hi, lo_open, req, cite }

#define U32_MAX_D 4294967295.0
#define EXACT_MAX_D 9007199254740992.0 /* 2^53: every integer below is exact in a double */

/* ---- models ---- */

static const char *const model_sections[] = {"model", "bytes_per_expert", "source", NULL};
static const char *const model_statuses[] = {"V", "V2", "D", "U", NULL};

static const field_spec model_fields[] = {
    STR("model", "name", K_NAME, ms_model, name, 1),
    STR("model", "description", K_TEXT, ms_model, description, 1),
    NUM("model", "layers", K_U32, ms_model, layers, 1, U32_MAX_D, 0, 1, "structure"),
    NUM("model", "moe_layers", K_U32, ms_model, moe_layers, 1, U32_MAX_D, 0, 1, "structure"),
    NUM("model", "experts", K_U32, ms_model, experts, 1, U32_MAX_D, 0, 1, "structure"),
    NUM("model", "top_k", K_U32, ms_model, top_k, 1, U32_MAX_D, 0, 1, "structure"),
    NUM("model", "shared_experts", K_U32, ms_model, shared_experts, 0, U32_MAX_D, 0, 1, "structure"),
    NUM("model", "hidden", K_U32, ms_model, hidden, 1, U32_MAX_D, 0, 1, "structure"),
    NUM("model", "expert_ffn", K_U32, ms_model, expert_ffn, 1, U32_MAX_D, 0, 1, "structure"),
    NUM("model", "expert_matrices", K_U32, ms_model, expert_matrices, 2, 3, 0, 1, "structure"),
    NUM("model", "vocab", K_U32, ms_model, vocab, 1, U32_MAX_D, 0, 1, "structure"),
    STR("model", "dtype", K_DTYPE, ms_model, dtype, 1),
    NUM("model", "expert_params", K_COUNT_BYTES, ms_model, expert_params, 1, EXACT_MAX_D, 0, 1, "expert_size"),
    NUM("model", "expert_bytes", K_COUNT_BYTES, ms_model, expert_bytes, 1, EXACT_MAX_D, 0, 1, "expert_size"),
    NUM("model", "dense_params", K_COUNT_BYTES, ms_model, dense_params, 0, EXACT_MAX_D, 0, 1, "dense"),
    NUM("model", "dense_bytes", K_COUNT_BYTES, ms_model, dense_bytes, 0, EXACT_MAX_D, 0, 1, "dense"),
    NUM("bytes_per_expert", "bf16", K_COUNT_BYTES, ms_model, bytes_bf16, 1, EXACT_MAX_D, 0, 0, "expert_size"),
    NUM("bytes_per_expert", "fp32", K_COUNT_BYTES, ms_model, bytes_fp32, 1, EXACT_MAX_D, 0, 0, "expert_size"),
    NUM("bytes_per_expert", "fp8", K_COUNT_BYTES, ms_model, bytes_fp8, 1, EXACT_MAX_D, 0, 0, "expert_size"),
    NUM("bytes_per_expert", "mxfp4", K_COUNT_BYTES, ms_model, bytes_mxfp4, 1, EXACT_MAX_D, 0, 0, "expert_size"),
};

static const profile_schema model_schema = {
    "model", "models", model_sections, model_fields,
    (int)(sizeof model_fields / sizeof model_fields[0]), model_statuses, 0,
};

/* ---- platforms ---- */

static const char *const platform_sections[] = {"platform", "gpu",        "link",         "cpu",    "ssd",
                                                "policy",   "contention", "interconnect", "source", NULL};
static const char *const platform_statuses[] = {"datasheet", "measured", "derived", "estimate", NULL};

/* Every figure is cited under its own key in [source]. */
#define PF(sec, key, kind, lo, hi, lo_open) \
    NUM(sec, #key, kind, ms_platform, key, lo, hi, lo_open, 1, #key)
/* An optional figure: 0 when absent; cited in [source] when given. */
#define PF_OPTIONAL(sec, key, kind, lo, hi) NUM(sec, #key, kind, ms_platform, key, lo, hi, 0, 0, #key)

static const field_spec platform_fields[] = {
    STR("platform", "name", K_NAME, ms_platform, name, 1),
    STR("platform", "description", K_TEXT, ms_platform, description, 1),
    PF("gpu", gpu_mem_bytes, K_BYTES, 0, 1e15, 1),
    PF("gpu", hbm_bw, K_BW, 0, 1e15, 1),
    PF("gpu", gpu_flops, K_DOUBLE, 0, 1e18, 1),
    PF("gpu", launch_s, K_DOUBLE, 0, 1, 0),
    PF_OPTIONAL("gpu", gpus, K_U32, 1, 64),
    PF("link", h2d_bw, K_BW, 0, 1e15, 1),
    PF("link", h2d_latency_s, K_DOUBLE, 0, 1, 0),
    PF("link", d2h_bw, K_BW, 0, 1e15, 1),
    PF("link", d2h_latency_s, K_DOUBLE, 0, 1, 0),
    PF("link", pageable_bw, K_BW, 0, 1e15, 1),
    PF("link", copy_engines, K_U32, 1, 64, 0),
    NUM("link", "host_ceiling_bw", K_BW, ms_platform, host_ceiling_bw, 0, 1e15, 1, 0, "host_ceiling_bw"),
    PF("cpu", cpu_cores, K_U32, 1, 65536, 0),
    PF("cpu", dram_bw, K_BW, 0, 1e15, 1),
    PF("cpu", cpu_flops_per_core, K_DOUBLE, 0, 1e15, 1),
    PF("cpu", cpu_launch_s, K_DOUBLE, 0, 1, 0),
    PF("ssd", ssd_bw, K_BW, 0, 1e15, 1),
    PF("ssd", ssd_latency_s, K_DOUBLE, 0, 1, 0),
    PF("policy", policy_op_s, K_DOUBLE, 0, 1, 0),
    PF_OPTIONAL("contention", copy_contention, K_DOUBLE, 0, 100),
    PF_OPTIONAL("contention", compute_contention, K_DOUBLE, 0, 100),
    NUM("interconnect", "peer_bw", K_BW, ms_platform, peer_bw, 0, 1e15, 1, 0, "peer_bw"),
    PF_OPTIONAL("interconnect", peer_latency_s, K_DOUBLE, 0, 1),
    STR("platform", "framework", K_NAME, ms_platform, framework, 0),
};

_Static_assert(sizeof model_fields / sizeof model_fields[0] <= MAX_FIELDS, "raise MAX_FIELDS");
_Static_assert(sizeof platform_fields / sizeof platform_fields[0] <= MAX_FIELDS, "raise MAX_FIELDS");
_Static_assert(sizeof platform_fields / sizeof platform_fields[0] <= MAX_GROUPS, "raise MAX_GROUPS");

static const profile_schema platform_schema = {
    "platform", "platforms", platform_sections, platform_fields,
    (int)(sizeof platform_fields / sizeof platform_fields[0]), platform_statuses, 1,
};

/* ---- serving frameworks ---- */

static const char *const framework_sections[] = {"framework", "source", NULL};

static const field_spec framework_fields[] = {
    STR("framework", "name", K_NAME, ms_framework, name, 1),
    STR("framework", "description", K_TEXT, ms_framework, description, 1),
    NUM("framework", "layer_s", K_DOUBLE, ms_framework, layer_s, 0, 1, 0, 1, "layer_s"),
    NUM("framework", "iteration_s", K_DOUBLE, ms_framework, iteration_s, 0, 10, 0, 1, "iteration_s"),
};

static const profile_schema framework_schema = {
    "framework", "frameworks", framework_sections, framework_fields,
    (int)(sizeof framework_fields / sizeof framework_fields[0]), platform_statuses, 1,
};

/* ---- parsing state ---- */

typedef struct {
    const profile_schema *schema;
    const char *path;
    void *out;
    ms_err *err;
    FILE *fp;
    int line;
    int failed;
    unsigned char seen[MAX_FIELDS];
    char raw[MAX_FIELDS][RAW_VALUE_CAP];      /* value text, for source lines */
    const char *groups[MAX_GROUPS];           /* distinct [source] keys */
    int ngroups;
    unsigned char group_seen[MAX_GROUPS];
    char group_text[MAX_GROUPS][SOURCE_TEXT_CAP];
} parse_ctx;

static int ctx_fail(parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the first error as "FILE:LINE: message" (the one INI error form,
 * sim/core/ini.h; "FILE: message" outside a line); later calls are ignored. */
static int ctx_fail(parse_ctx *c, const char *fmt, ...)
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

static int is_plain_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '-' && *s != '_')
            return 0;
    return 1;
}

static void collect_groups(parse_ctx *c)
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

static int find_group(const parse_ctx *c, const char *key)
{
    for (int i = 0; i < c->ngroups; i++)
        if (!strcmp(c->groups[i], key))
            return i;
    return -1;
}

/* ---- one value ---- */

static void describe_range(const field_spec *f, char *buf, size_t cap)
{
    if (f->lo_open)
        snprintf(buf, cap, "must be > %g and <= %g", f->lo, f->hi);
    else
        snprintf(buf, cap, "must be in [%g, %g]", f->lo, f->hi);
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

static int store_text(parse_ctx *c, const field_spec *f, const char *value)
{
    char *dst = (char *)c->out + f->offset;
    if (strlen(value) >= f->cap)
        return ctx_fail(c, "[%s] %s = '%s': longer than %zu characters", f->section, f->key, value, f->cap - 1);
    if (f->kind == K_NAME && !is_plain_name(value))
        return ctx_fail(c, "[%s] %s = '%s': use only letters, digits, '.', '-', '_'", f->section, f->key, value);
    if (f->kind == K_DTYPE) {
        static const char *const dtypes[] = {"bf16", "fp32", "fp8", "mxfp4", NULL};
        if (!in_list(dtypes, value))
            return ctx_fail(c, "[%s] %s = '%s': not one of bf16, fp32, fp8, mxfp4", f->section, f->key, value);
    }
    if (f->kind == K_TEXT && !*value)
        return ctx_fail(c, "[%s] %s is empty", f->section, f->key);
    memcpy(dst, value, strlen(value) + 1);
    return 0;
}

static int store_number(parse_ctx *c, const field_spec *f, const char *value)
{
    double v;
    if (read_number(f->kind, value, &v))
        return ctx_fail(c, "[%s] %s = '%s': not %s", f->section, f->key, value, kind_hint(f->kind));
    if (!in_range(f, v)) {
        char range[96];
        describe_range(f, range, sizeof range);
        return ctx_fail(c, "[%s] %s = '%s': %s", f->section, f->key, value, range);
    }
    char *dst = (char *)c->out + f->offset;
    if (f->kind == K_U32) {
        uint32_t u = (uint32_t)v;
        memcpy(dst, &u, sizeof u);
    } else if (f->kind == K_COUNT_BYTES) {
        if (v != floor(v))
            return ctx_fail(c, "[%s] %s = '%s': not a whole number (%.17g)", f->section, f->key, value, v);
        uint64_t u = (uint64_t)v;
        memcpy(dst, &u, sizeof u);
    } else {
        memcpy(dst, &v, sizeof v);
    }
    return 0;
}

/* A [source] value starts with its status word, then the citation. */
static int store_source(parse_ctx *c, const char *key, const char *value)
{
    int g = find_group(c, key);
    if (g < 0) {
        char known[512] = "";
        size_t used = 0;
        for (int i = 0; i < c->ngroups && used < sizeof known; i++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", c->groups[i]);
        return ctx_fail(c, "unknown key '%s' in [source] (known: %s)", key, known);
    }
    if (c->group_seen[g])
        return ctx_fail(c, "duplicate key '%s' in [source]", key);
    char status[32];
    size_t n = strcspn(value, " \t");
    if (n == 0 || n >= sizeof status || !value[n]) {
        char allowed[128];
        join_list(c->schema->statuses, allowed, sizeof allowed);
        return ctx_fail(c, "[source] %s = '%s': expected '<status> <citation>' with status one of %s", key, value, allowed);
    }
    memcpy(status, value, n);
    status[n] = '\0';
    if (!in_list(c->schema->statuses, status)) {
        char allowed[128];
        join_list(c->schema->statuses, allowed, sizeof allowed);
        return ctx_fail(c, "[source] %s = '%s': status '%s' is not one of %s", key, value, status, allowed);
    }
    if (strlen(value) >= SOURCE_TEXT_CAP)
        return ctx_fail(c, "[source] %s: longer than %d characters", key, SOURCE_TEXT_CAP - 1);
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
        return ctx_fail(c, "key '%s' outside any [section]", name) == 0;
    if (!strcmp(section, "source"))
        return store_source(c, name, value) == 0;
    int i = find_field(c->schema, section, name);
    if (i < 0)
        return ctx_fail(c, "unknown key '%s' in [%s]", name, section) == 0;
    const field_spec *f = &c->schema->fields[i];
    if (c->seen[i])
        return ctx_fail(c, "duplicate key '%s' in [%s] (an indented line continues the previous value)", name,
                        section) == 0;
    c->seen[i] = 1;
    snprintf(c->raw[i], sizeof c->raw[i], "%s", value);
    int rc = (f->kind == K_NAME || f->kind == K_TEXT || f->kind == K_DTYPE) ? store_text(c, f, value)
                                                                           : store_number(c, f, value);
    return rc == 0;
}

/* The one INI reader's handler (sim/core/ini.h): 0 to go on, -1 after ctx_fail. */
static int on_value(ms_ini *ini, void *user, const char *section, const char *name, const char *value)
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

static int check_required(parse_ctx *c)
{
    c->line = 0;
    for (int i = 0; i < c->schema->nfields; i++) {
        const field_spec *f = &c->schema->fields[i];
        if (f->required && !c->seen[i])
            return ctx_fail(c, "missing required key '%s' in [%s]", f->key, f->section);
    }
    for (int g = 0; g < c->ngroups; g++) {
        int needed = group_needed(c, g);
        if (needed && !c->group_seen[g])
            return ctx_fail(c, "missing required key '%s' in [source]", c->groups[g]);
        if (!needed && c->group_seen[g])
            return ctx_fail(c, "[source] %s cites a figure the profile does not give", c->groups[g]);
    }
    return 0;
}

static int check_bytes_per_param(parse_ctx *c, const char *key, uint64_t bytes, uint64_t params, uint64_t per)
{
    if (bytes && bytes != params * per)
        return ctx_fail(c, "[bytes_per_expert] %s = %llu: expected %llu (%llu bytes x expert_params %llu)", key,
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

static int check_model(parse_ctx *c, const ms_model *m)
{
    if (m->moe_layers > m->layers)
        return ctx_fail(c, "[model] moe_layers = %u exceeds layers = %u", m->moe_layers, m->layers);
    if (m->top_k > m->experts)
        return ctx_fail(c, "[model] top_k = %u exceeds experts = %u", m->top_k, m->experts);
    /* Weights of one expert, plus at most one bias per output row of each matrix
     * (gate/up rows are expert_ffn long, the down rows hidden long). */
    uint64_t weights = (uint64_t)m->expert_matrices * m->hidden * m->expert_ffn;
    uint64_t biases = (uint64_t)(m->expert_matrices - 1) * m->expert_ffn + m->hidden;
    if (m->expert_params < weights || m->expert_params > weights + biases)
        return ctx_fail(c,
                        "[model] expert_params = %llu: expected expert_matrices*hidden*expert_ffn = %llu "
                        "plus at most %llu bias terms",
                        (unsigned long long)m->expert_params, (unsigned long long)weights,
                        (unsigned long long)biases);
    uint64_t native = native_bytes(m);
    if (!native)
        return ctx_fail(c, "missing key '%s' in [bytes_per_expert] for dtype = %s", m->dtype, m->dtype);
    if (m->expert_bytes != native)
        return ctx_fail(c, "[model] expert_bytes = %llu differs from [bytes_per_expert] %s = %llu",
                        (unsigned long long)m->expert_bytes, m->dtype, (unsigned long long)native);
    if (check_bytes_per_param(c, "bf16", m->bytes_bf16, m->expert_params, 2) ||
        check_bytes_per_param(c, "fp32", m->bytes_fp32, m->expert_params, 4) ||
        check_bytes_per_param(c, "fp8", m->bytes_fp8, m->expert_params, 1))
        return -1;
    /* MXFP4: 4 bits per weight plus scales and biases, always below bf16. */
    if (m->bytes_mxfp4 && (m->bytes_mxfp4 < weights / 2 || m->bytes_mxfp4 >= 2 * m->expert_params))
        return ctx_fail(c, "[bytes_per_expert] mxfp4 = %llu: outside [%llu, %llu) for %llu weights",
                        (unsigned long long)m->bytes_mxfp4, (unsigned long long)(weights / 2),
                        (unsigned long long)(2 * m->expert_params), (unsigned long long)weights);
    /* Dense weights are stored at 0.5 (4-bit) to 4 (fp32) bytes per parameter. */
    if (2 * m->dense_bytes < m->dense_params || m->dense_bytes > 4 * m->dense_params)
        return ctx_fail(c, "[model] dense_bytes = %llu: not 0.5 to 4 bytes per dense_params = %llu",
                        (unsigned long long)m->dense_bytes, (unsigned long long)m->dense_params);
    return 0;
}

/* ---- source text ---- */

/* Copies src into dst (capacity cap) without splitting a UTF-8 sequence,
 * ending in "..." when it had to cut. */
static void copy_truncated(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n < cap) {
        memcpy(dst, src, n + 1);
        return;
    }
    if (cap < 4) {
        dst[0] = '\0';
        return;
    }
    size_t keep = cap - 4;
    while (keep > 0 && ((unsigned char)src[keep] & 0xC0) == 0x80)
        keep--;
    memcpy(dst, src, keep);
    memcpy(dst + keep, "...", 4);
}

static void format_source_line(const parse_ctx *c, int g, char *line, size_t cap)
{
    const char *text = c->group_text[g];
    int f = -1;
    for (int i = 0; c->schema->cite_with_value && i < c->schema->nfields; i++)
        if (!strcmp(c->schema->fields[i].key, c->groups[g]))
            f = i;
    if (f < 0) {
        snprintf(line, cap, "%s: %s", c->groups[g], text);
        return;
    }
    size_t n = strcspn(text, " \t");
    const char *rest = text + n + strspn(text + n, " \t");
    snprintf(line, cap, "%s: %s (%.*s) %s", c->groups[g], c->raw[f], (int)n, text, rest);
}

/* Largest line length (with its '\n') that lets all lines fit in budget:
 * lines shorter than the share keep their length and leave the rest of
 * their share to the longer ones. */
static size_t fair_share(const size_t *len, int n, size_t budget)
{
    unsigned char fits[MAX_GROUPS] = {0};
    int nlong = n;
    size_t share = budget;
    for (int changed = 1; changed && nlong > 0;) {
        changed = 0;
        share = budget / (size_t)nlong;
        for (int i = 0; i < n; i++)
            if (!fits[i] && len[i] <= share) {
                fits[i] = 1;
                budget -= len[i];
                nlong--;
                changed = 1;
            }
    }
    return share;
}

/* One "key: ..." line per [source] entry.  When they do not all fit, the
 * longest citations are shortened so that every figure keeps its line. */
static void build_source(const parse_ctx *c, char *dst, size_t cap)
{
    char lines[MAX_GROUPS][SOURCE_TEXT_CAP + 96];
    size_t len[MAX_GROUPS];
    for (int g = 0; g < c->ngroups; g++) {
        lines[g][0] = '\0';
        if (c->group_seen[g])
            format_source_line(c, g, lines[g], sizeof lines[g]);
        len[g] = c->group_seen[g] ? strlen(lines[g]) + 1 : 0; /* with its '\n' */
    }
    size_t share = fair_share(len, c->ngroups, cap - 1);
    size_t used = 0;
    dst[0] = '\0';
    for (int g = 0; g < c->ngroups; g++) {
        if (!c->group_seen[g])
            continue;
        size_t room = cap - used;
        size_t lim = share < room ? share : room;
        if (lim < 2)
            break;
        copy_truncated(dst + used, lim, lines[g]); /* at most lim-1 chars: room for '\n' */
        used += strlen(dst + used);
        if (used + 1 >= cap)
            break;
        dst[used++] = '\n';
        dst[used] = '\0';
    }
    if (used && dst[used - 1] == '\n')
        dst[used - 1] = '\0'; /* no trailing newline */
}

/* ---- locating a profile (folder: ms_path_profiles, sim/core/paths.h) ---- */

static int is_path_spec(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n >= 4 && !strcmp(s + n - 4, ".ini"));
}

static int unknown_name_error(const profile_schema *s, const char *name, ms_err *err)
{
    char **names;
    int n;
    ms_err list_err;
    if (ms_profile_list(s->subdir, &names, &n, &list_err))
        return ms_fail(err, "unknown %s '%s': %s", s->kind, name, list_err.msg);
    char known[768] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof known; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", names[i]);
    ms_profile_list_free(names, n);
    if (!n) {
        char dir[4096] = "?";
        ms_path_profiles(dir, sizeof dir, &list_err); /* found a moment ago by ms_profile_list */
        return ms_fail(err, "unknown %s '%s' (no profiles in %s/%s)", s->kind, name, dir, s->subdir);
    }
    return ms_fail(err, "unknown %s '%s' (known: %s)", s->kind, name, known);
}

/* Opens the profile file; by_name tells whether it was looked up by name. */
static FILE *open_profile(const profile_schema *s, const char *name_or_path, char *path, size_t cap, int *by_name,
                          ms_err *err)
{
    *by_name = !is_path_spec(name_or_path);
    if (*by_name) {
        if (!is_plain_name(name_or_path)) {
            ms_fail(err, "invalid %s name '%s' (letters, digits, '.', '-', '_'; or a path ending in .ini)", s->kind,
                    name_or_path);
            return NULL;
        }
        char dir[4096];
        if (ms_path_profiles(dir, sizeof dir, err))
            return NULL;
        if (snprintf(path, cap, "%s/%s/%s.ini", dir, s->subdir, name_or_path) >= (int)cap) {
            ms_fail(err, "%s profile path too long for '%s'", s->kind, name_or_path);
            return NULL;
        }
    } else if (snprintf(path, cap, "%s", name_or_path) >= (int)cap) {
        ms_fail(err, "%s profile path too long: '%s'", s->kind, name_or_path);
        return NULL;
    }
    FILE *fp = fopen(path, "r");
    if (!fp) {
        if (*by_name && errno == ENOENT)
            unknown_name_error(s, name_or_path, err);
        else
            ms_fail(err, "%s: cannot open %s profile: %s", path, s->kind, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode)) {
        ms_fail(err, "%s: %s profile is not a regular file", path, s->kind);
        fclose(fp);
        return NULL;
    }
    return fp;
}

/* Applies --set KIND.KEY=VALUE overrides after the file: each is validated
 * like the file's value (type, range, and the whole-profile checks that
 * follow), and its [source] line says it was overridden. */
static int apply_sets(parse_ctx *c, const ms_profile_set *sets, int n)
{
    const char *file = c->path;
    for (int k = 0; k < n && !c->failed; k++) {
        char where[600];
        if (sets[k].where)
            snprintf(where, sizeof where, "%s", sets[k].where);
        else
            snprintf(where, sizeof where, "--set %s.%s=%s", c->schema->kind, sets[k].key, sets[k].value);
        c->path = where;
        c->line = 0;
        int i = -1;
        for (int j = 0; j < c->schema->nfields && i < 0; j++)
            if (!strcmp(c->schema->fields[j].key, sets[k].key))
                i = j;
        if (i < 0 || !strcmp(sets[k].key, "name")) {
            char known[1024] = "";
            size_t used = 0;
            for (int j = 0; j < c->schema->nfields && used < sizeof known; j++)
                if (strcmp(c->schema->fields[j].key, "name"))
                    used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "",
                                             c->schema->fields[j].key);
            ctx_fail(c, "unknown %s key '%s' (known: %s)", c->schema->kind, sets[k].key, known);
            break;
        }
        const field_spec *f = &c->schema->fields[i];
        int rc = (f->kind == K_NAME || f->kind == K_TEXT || f->kind == K_DTYPE) ? store_text(c, f, sets[k].value)
                                                                               : store_number(c, f, sets[k].value);
        if (rc)
            break;
        c->seen[i] = 1;
        snprintf(c->raw[i], sizeof c->raw[i], "%s", sets[k].value);
        int g = f->cite ? find_group(c, f->cite) : -1;
        if (g >= 0) {
            char text[700]; /* cut to the source line's room */
            snprintf(text, sizeof text, "override %s (the file's value replaced)", where);
            size_t n = strnlen(text, sizeof c->group_text[g] - 1);
            memcpy(c->group_text[g], text, n);
            c->group_text[g][n] = 0;
            c->group_seen[g] = 1;
        }
    }
    c->path = file;
    return c->failed ? -1 : 0;
}

/* Reads and validates one profile into out (a zeroed struct of the schema's
 * type); name_off/source_off/source_cap locate the name and source members. */
static int load_profile(const profile_schema *s, const char *name_or_path, void *out, size_t name_off,
                        size_t source_off, size_t source_cap, char *file, size_t file_cap,
                        const ms_profile_set *sets, int nsets, ms_err *err)
{
    if (!name_or_path || !*name_or_path)
        return ms_fail(err, "empty %s name", s->kind);
    char path[4096];
    int by_name;
    parse_ctx *c = ms_xcalloc(1, sizeof *c);
    c->fp = open_profile(s, name_or_path, path, sizeof path, &by_name, err);
    if (!c->fp) {
        free(c);
        return -1;
    }
    fclose(c->fp);
    c->fp = NULL;
    c->schema = s;
    c->path = path;
    c->out = out;
    c->err = err;
    collect_groups(c);
    char what[64];
    snprintf(what, sizeof what, "%s profile", s->kind);
    ms_ini_spec spec = {.what = what, .sections = s->sections, .on_value = on_value, .user = c};
    if (ms_ini_parse(path, &spec, err))
        c->failed = 1;
    c->line = 0;
    char with[6000];
    if (!c->failed && nsets && !apply_sets(c, sets, nsets)) {
        /* the whole-profile checks below name the overrides too */
        size_t used = (size_t)snprintf(with, sizeof with, "%.4000s with", path);
        for (int k = 0; k < nsets && used < sizeof with; k++)
            used += (size_t)snprintf(with + used, sizeof with - used, " --set %s.%s=%s", s->kind, sets[k].key,
                                     sets[k].value);
        c->path = with;
    }
    if (!c->failed && !check_required(c) && s == &model_schema)
        check_model(c, out);
    if (!c->failed && by_name) {
        const char *name = (const char *)out + name_off;
        if (strcmp(name, name_or_path))
            ctx_fail(c, "name = '%s' does not match the file name '%s'", name, name_or_path);
    }
    if (!c->failed)
        build_source(c, (char *)out + source_off, source_cap);
    if (!c->failed && snprintf(file, file_cap, "%s", path) >= (int)file_cap)
        ctx_fail(c, "path longer than %zu bytes", file_cap - 1);
    int failed = c->failed;
    free(c);
    return failed ? -1 : 0;
}

int ms_model_load_set(const char *name_or_path, const ms_profile_set *sets, int nsets, ms_model *out, ms_err *err)
{
    ms_model m;
    memset(&m, 0, sizeof m);
    if (load_profile(&model_schema, name_or_path, &m, offsetof(ms_model, name), offsetof(ms_model, source),
                     sizeof m.source, m.file, sizeof m.file, sets, nsets, err) ||
        ms_digest_file(m.file, m.sha256, err))
        return -1;
    ms_out_input(m.file);
    *out = m;
    return 0;
}

int ms_model_load(const char *name_or_path, ms_model *out, ms_err *err)
{
    return ms_model_load_set(name_or_path, NULL, 0, out, err);
}

int ms_platform_load_set(const char *name_or_path, const ms_profile_set *sets, int nsets, ms_platform *out,
                         ms_err *err)
{
    ms_platform p;
    memset(&p, 0, sizeof p);
    if (load_profile(&platform_schema, name_or_path, &p, offsetof(ms_platform, name),
                     offsetof(ms_platform, source), sizeof p.source, p.file, sizeof p.file, sets, nsets, err) ||
        ms_digest_file(p.file, p.sha256, err))
        return -1;
    if (p.framework[0]) {
        ms_framework fw;
        if (ms_framework_load(p.framework, &fw, err))
            return ms_fail_prefix(err, "%s: [platform] framework = %s", p.file, p.framework);
        p.framework_layer_s = fw.layer_s;
        p.framework_iteration_s = fw.iteration_s;
    }
    ms_out_input(p.file);
    *out = p;
    return 0;
}

int ms_platform_load(const char *name_or_path, ms_platform *out, ms_err *err)
{
    return ms_platform_load_set(name_or_path, NULL, 0, out, err);
}

int ms_framework_load(const char *name_or_path, ms_framework *out, ms_err *err)
{
    ms_framework f;
    memset(&f, 0, sizeof f);
    if (load_profile(&framework_schema, name_or_path, &f, offsetof(ms_framework, name),
                     offsetof(ms_framework, source), sizeof f.source, f.file, sizeof f.file, NULL, 0, err) ||
        ms_digest_file(f.file, f.sha256, err))
        return -1;
    ms_out_input(f.file);
    *out = f;
    return 0;
}

int ms_framework_resolve(const char *name, ms_framework *out, int *have, ms_err *err)
{
    *have = 0;
    if (!name || !*name)
        return 0;
    if (!strcmp(name, "none")) {
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "none");
    } else if (ms_framework_load(name, out, err)) {
        return -1;
    }
    *have = 1;
    return 0;
}

/* ---- listing ---- */

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int ms_profile_list(const char *kind, char ***names, int *n, ms_err *err)
{
    *names = NULL;
    *n = 0;
    if (!kind || (strcmp(kind, "models") && strcmp(kind, "platforms") && strcmp(kind, "frameworks")))
        return ms_fail(err, "profile kind '%s' is not 'models', 'platforms' or 'frameworks'", kind ? kind : "(null)");
    char base[4096], dir[4096];
    if (ms_path_profiles(base, sizeof base, err))
        return -1;
    if (snprintf(dir, sizeof dir, "%s/%s", base, kind) >= (int)sizeof dir)
        return ms_fail(err, "profile directory path too long: '%s'", base);
    DIR *d = opendir(dir);
    if (!d)
        return ms_fail(err, "%s: cannot open profile directory: %s", dir, strerror(errno));
    char **list = NULL;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 4 || strcmp(e->d_name + len - 4, ".ini"))
            continue;
        list = ms_xrealloc(list, (size_t)count + 1, sizeof *list);
        list[count] = ms_xstrdup(e->d_name);
        list[count][len - 4] = '\0';
        count++;
    }
    closedir(d);
    if (count)
        qsort(list, (size_t)count, sizeof *list, compare_names);
    *names = list;
    *n = count;
    return 0;
}

void ms_profile_list_free(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
