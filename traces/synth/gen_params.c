/* Generator params files: see gen_params.h for the format and contract. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>



#include "sim/core/ini.h"
#include "sim/core/params.h"
#include "traces/synth/gen_params.h"

#define PARAMS_MAX_LAYERS 4096u
#define PARAMS_MAX_EXPERTS 512u
#define PARAMS_DEFAULT_VOCAB 32000u

typedef struct {
    double *v;
    uint32_t n, cap;
    int line; /* first line of the value */
} num_list;

typedef struct {
    const char *path;
    FILE *fp;
    int line;
    int cont;             /* the current raw line continues the previous value */
    int failed;
    ms_err *err;
    ms_gen_file *f;
    char section[32];
    /* [gen] keys seen */
    char gen_seen[64][32];
    int n_gen_seen;
    /* [model] */
    int model_seen[9];
    num_list expert_bytes, dense_bytes;
    /* [popularity], [decode_popularity] */
    num_list *pop;                       /* [PARAMS_MAX_LAYERS] */
    num_list *dpop[MS_GEN_MAX_PHASES];   /* [PARAMS_MAX_LAYERS] each, allocated on first use */
    char dpop_section[MS_GEN_MAX_PHASES][32]; /* the section each phase was given in */
    /* [lengths] */
    num_list len_prompt, len_output;
    /* [periods] */
    num_list per_period, per_repeat;
    char last_key[64];
} parse_ctx;

static const char *const model_keys[] = {"name", "moe_layers", "experts", "top_k", "shared_experts",
                                         "hidden", "vocab", "expert_bytes", "dense_bytes"};
enum { MK_NAME, MK_L, MK_J, MK_K, MK_SHARED, MK_HIDDEN, MK_VOCAB, MK_EBYTES, MK_DBYTES, MK_N };

static int ctx_fail(parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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

/* Appends the whitespace-separated numbers of text to a list. */
static int list_append(parse_ctx *c, num_list *l, const char *key, const char *text)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *tok = strtok(buf, " \t,"); tok; tok = strtok(NULL, " \t,")) {
        double v;
        if (ms_parse_double(tok, &v) || !isfinite(v) || v < 0)
            return ctx_fail(c, "[%s] %s: '%s' is not a non-negative number", c->section, key, tok);
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 64;
            l->v = ms_xrealloc(l->v, l->cap, sizeof *l->v);
        }
        l->v[l->n++] = v;
    }
    return 0;
}

static int parse_u32_in(parse_ctx *c, const char *key, const char *value, uint32_t lo, uint32_t hi, uint32_t *out)
{
    unsigned long long v;
    if (ms_parse_u64(value, &v))
        return ctx_fail(c, "[model] %s = '%s': not a non-negative integer", key, value);
    if (v < lo || v > hi)
        return ctx_fail(c, "[model] %s = %s: out of range [%u, %u]", key, value, lo, hi);
    *out = (uint32_t)v;
    return 0;
}

static int model_value(parse_ctx *c, const char *key, const char *value)
{
    int k = -1;
    for (int i = 0; i < MK_N; i++)
        if (!strcmp(model_keys[i], key))
            k = i;
    if (k < 0)
        return ctx_fail(c, "unknown key '%s' in [model] (known: name, moe_layers, experts, top_k, shared_experts, "
                           "hidden, vocab, expert_bytes, dense_bytes)", key);
    if (c->cont && (k == MK_EBYTES || k == MK_DBYTES))
        return list_append(c, k == MK_EBYTES ? &c->expert_bytes : &c->dense_bytes, key, value);
    if (c->cont)
        return ctx_fail(c, "[model] %s: only expert_bytes and dense_bytes may continue on the next line", key);
    if (c->model_seen[k])
        return ctx_fail(c, "[model] %s given twice", key);
    c->model_seen[k] = c->line;
    ms_model *m = &c->f->model;
    switch (k) {
    case MK_NAME:
        if (!*value || strlen(value) >= sizeof m->name)
            return ctx_fail(c, "[model] name = '%s': empty or longer than %zu characters", value, sizeof m->name - 1);
        for (const char *s = value; *s; s++)
            if (!isalnum((unsigned char)*s) && !strchr(".-_", *s))
                return ctx_fail(c, "[model] name = '%s': use only letters, digits, '.', '-', '_'", value);
        snprintf(m->name, sizeof m->name, "%s", value);
        return 0;
    case MK_L: return parse_u32_in(c, key, value, 1, PARAMS_MAX_LAYERS, &m->moe_layers);
    case MK_J: return parse_u32_in(c, key, value, 1, PARAMS_MAX_EXPERTS, &m->experts);
    case MK_K: return parse_u32_in(c, key, value, 1, PARAMS_MAX_EXPERTS, &m->top_k);
    case MK_SHARED: return parse_u32_in(c, key, value, 0, 1024, &m->shared_experts);
    case MK_HIDDEN: return parse_u32_in(c, key, value, 0, 1u << 20, &m->hidden);
    case MK_VOCAB: return parse_u32_in(c, key, value, 1, 1u << 30, &m->vocab);
    default:
        c->expert_bytes.line = k == MK_EBYTES ? c->line : c->expert_bytes.line;
        c->dense_bytes.line = k == MK_DBYTES ? c->line : c->dense_bytes.line;
        return list_append(c, k == MK_EBYTES ? &c->expert_bytes : &c->dense_bytes, key, value);
    }
}

static int gen_value(parse_ctx *c, const char *key, const char *value)
{
    if (c->cont)
        return ctx_fail(c, "[gen] %s: a knob's value fits on one line", key);
    for (int i = 0; i < c->n_gen_seen; i++)
        if (!strcmp(c->gen_seen[i], key))
            return ctx_fail(c, "[gen] %s given twice", key);
    if (c->n_gen_seen < 64 && strlen(key) < sizeof c->gen_seen[0])
        snprintf(c->gen_seen[c->n_gen_seen++], sizeof c->gen_seen[0], "%s", key);
    ms_err e;
    if (ms_gen_set(&c->f->p, key, value, &e)) {
        const char *msg = e.msg;
        if (!strncmp(msg, "trace gen: ", 11))
            msg += 11;
        return ctx_fail(c, "[gen] %s", msg);
    }
    return 0;
}

static int popularity_value(parse_ctx *c, num_list *lists, const char *key, const char *value)
{
    char *end;
    if (strncmp(key, "layer", 5) || !isdigit((unsigned char)key[5]))
        return ctx_fail(c, "unknown key '%s' in [%s] (expected layer0, layer1, ...)", key, c->section);
    errno = 0;
    unsigned long l = strtoul(key + 5, &end, 10);
    if (*end || errno || l >= PARAMS_MAX_LAYERS)
        return ctx_fail(c, "unknown key '%s' in [%s] (expected layer0 .. layer%u)", key, c->section,
                        PARAMS_MAX_LAYERS - 1);
    num_list *nl = &lists[l];
    if (!c->cont && nl->line)
        return ctx_fail(c, "[%s] %s given twice", c->section, key);
    if (!nl->line)
        nl->line = c->line;
    return list_append(c, nl, key, value);
}

/* The section a params file writes decode phase k (0-based) in. */
static void decode_phase_section(uint32_t k, char out[32])
{
    snprintf(out, 32, k ? "decode_phase%u" : "decode_popularity", k + 1);
}

/* The decode phase (0-based) a section holds: [decode_popularity] 0,
 * [late_decode_popularity] (the older name of [decode_phase2]) 1,
 * [decode_phaseK] K-1; -1 for any other section. */
static int decode_phase_of(const char *section)
{
    if (!strcmp(section, "decode_popularity"))
        return 0;
    if (!strcmp(section, "late_decode_popularity"))
        return 1;
    if (strncmp(section, "decode_phase", 12) || !isdigit((unsigned char)section[12]))
        return -1;
    char *end;
    unsigned long k = strtoul(section + 12, &end, 10);
    return *end || k < 2 || k > MS_GEN_MAX_PHASES ? -1 : (int)k - 1;
}

static int decode_phase_value(parse_ctx *c, const char *section, const char *key, const char *value)
{
    int k = decode_phase_of(section);
    if (k < 0) /* the INI reader admits only the listed sections: a bug */
        return ctx_fail(c, "unknown section [%s]", section);
    if (c->dpop_section[k][0] && strcmp(c->dpop_section[k], section))
        return ctx_fail(c, "[%s] and [%s] are the same decode phase: give one of them", c->dpop_section[k], section);
    snprintf(c->dpop_section[k], sizeof c->dpop_section[k], "%s", section);
    if (!c->dpop[k])
        c->dpop[k] = ms_xcalloc(PARAMS_MAX_LAYERS, sizeof *c->dpop[k]);
    return popularity_value(c, c->dpop[k], key, value);
}

/* [lengths] prompt = P0 P1 ..., output = O0 O1 ...: whole numbers. */
static int lengths_value(parse_ctx *c, const char *key, const char *value)
{
    num_list *nl = !strcmp(key, "prompt") ? &c->len_prompt : !strcmp(key, "output") ? &c->len_output : NULL;
    if (!nl)
        return ctx_fail(c, "unknown key '%s' in [lengths] (expected prompt, output)", key);
    if (!c->cont && nl->line)
        return ctx_fail(c, "[lengths] %s given twice", key);
    if (!nl->line)
        nl->line = c->line;
    uint32_t from = nl->n;
    if (list_append(c, nl, key, value))
        return -1;
    for (uint32_t i = from; i < nl->n; i++)
        if (nl->v[i] != floor(nl->v[i]) || nl->v[i] > 65536 || (nl == &c->len_prompt && nl->v[i] < 1))
            return ctx_fail(c, "[lengths] %s: value %u (%g) is not a whole number in [%d, 65536]", key, i,
                            nl->v[i], nl == &c->len_prompt ? 1 : 0);
    return 0;
}

/* [periods] period = P0 P1 ... (whole numbers), repeat = q0 q1 ... in [0, 1]. */
static int periods_value(parse_ctx *c, const char *key, const char *value)
{
    num_list *nl = !strcmp(key, "period") ? &c->per_period : !strcmp(key, "repeat") ? &c->per_repeat : NULL;
    if (!nl)
        return ctx_fail(c, "unknown key '%s' in [periods] (expected period, repeat)", key);
    if (!c->cont && nl->line)
        return ctx_fail(c, "[periods] %s given twice", key);
    if (!nl->line)
        nl->line = c->line;
    uint32_t from = nl->n;
    if (list_append(c, nl, key, value))
        return -1;
    for (uint32_t i = from; i < nl->n; i++) {
        if (nl == &c->per_period && (nl->v[i] != floor(nl->v[i]) || nl->v[i] > MS_GEN_MAX_PERIOD))
            return ctx_fail(c, "[periods] period: value %u (%g) is not a whole number in [0, %d]", i, nl->v[i],
                            MS_GEN_MAX_PERIOD);
        if (nl == &c->per_repeat && nl->v[i] > 1)
            return ctx_fail(c, "[periods] repeat: value %u (%g) is not a probability in [0, 1]", i, nl->v[i]);
    }
    return 0;
}

static int on_value(ms_ini *ini, void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    c->line = ms_ini_line(ini);
    c->cont = ms_ini_continuation(ini);
    snprintf(c->section, sizeof c->section, "%s", section);
    if (!*section)
        return ctx_fail(c, "key '%s' outside any [section]", name);
    if (!strcmp(section, "model")) {
        c->f->has_model = 1;
        return model_value(c, name, value);
    }
    if (!strcmp(section, "gen"))
        return gen_value(c, name, value);
    if (!strcmp(section, "lengths"))
        return lengths_value(c, name, value);
    if (!strcmp(section, "periods"))
        return periods_value(c, name, value);
    if (!strcmp(section, "popularity"))
        return popularity_value(c, c->pop, name, value);
    return decode_phase_value(c, section, name, value);
}

/* expert_bytes / dense_bytes: one value for all layers, or L values. */
static int layer_bytes(parse_ctx *c, num_list *l, const char *key, uint32_t L, uint64_t **out, uint64_t *model_field)
{
    c->line = l->line;
    if (l->n != 1 && l->n != L)
        return ctx_fail(c, "[model] %s: %u values, expected 1 or moe_layers = %u", key, l->n, L);
    *out = ms_xcalloc(L, sizeof **out);
    for (uint32_t i = 0; i < L; i++) {
        double v = l->v[l->n == 1 ? 0 : i];
        if (v != floor(v) || v > 9007199254740992.0)
            return ctx_fail(c, "[model] %s: value %u (%.17g) is not a whole number of bytes", key, i, v);
        (*out)[i] = (uint64_t)v;
    }
    *model_field = (*out)[0];
    return 0;
}

static int finish_model(parse_ctx *c)
{
    ms_gen_file *f = c->f;
    ms_model *m = &f->model;
    c->line = 0;
    for (int k = MK_L; k <= MK_DBYTES; k++)
        if ((k == MK_L || k == MK_J || k == MK_K || k == MK_EBYTES || k == MK_DBYTES) && !c->model_seen[k])
            return ctx_fail(c, "missing required key '%s' in [model]", model_keys[k]);
    if (!c->model_seen[MK_NAME])
        snprintf(m->name, sizeof m->name, "params");
    if (!c->model_seen[MK_VOCAB])
        m->vocab = PARAMS_DEFAULT_VOCAB;
    if (m->top_k > m->experts) {
        c->line = c->model_seen[MK_K];
        return ctx_fail(c, "[model] top_k = %u exceeds experts = %u", m->top_k, m->experts);
    }
    snprintf(m->description, sizeof m->description, "shape from params file %s", c->path);
    snprintf(m->dtype, sizeof m->dtype, "bf16");
    m->layers = m->moe_layers;
    m->expert_matrices = 3;
    if (layer_bytes(c, &c->expert_bytes, "expert_bytes", m->moe_layers, &f->expert_bytes, &m->expert_bytes) ||
        layer_bytes(c, &c->dense_bytes, "dense_bytes", m->moe_layers, &f->dense_bytes, &m->dense_bytes))
        return -1;
    f->p.layer_expert_bytes = f->expert_bytes;
    f->p.layer_dense_bytes = f->dense_bytes;
    return 0;
}

/* [popularity] or [decode_popularity] (`name`) into *out ([L][J]). */
static int finish_popularity(parse_ctx *c, const ms_model *shape, const num_list *lists, const char *name,
                             double **out)
{
    ms_gen_file *f = c->f;
    int any = 0;
    for (uint32_t l = 0; l < PARAMS_MAX_LAYERS; l++)
        any |= lists[l].line != 0;
    if (!any)
        return 0;
    if (!shape) {
        c->line = 0;
        return ctx_fail(c, "[%s] needs the model shape: add a [model] section or pass --model", name);
    }
    uint32_t L = shape->moe_layers, J = shape->experts;
    for (uint32_t l = L; l < PARAMS_MAX_LAYERS; l++)
        if (lists[l].line) {
            c->line = lists[l].line;
            return ctx_fail(c, "[%s] layer%u: the model has only %u MoE layers", name, l, L);
        }
    *out = ms_xcalloc((size_t)L * J, sizeof **out);
    for (uint32_t l = 0; l < L; l++) {
        const num_list *nl = &lists[l];
        c->line = nl->line;
        if (!nl->line) {
            c->line = 0;
            return ctx_fail(c, "[%s] layer%u is missing (every layer 0..%u needs J = %u weights)", name, l, L - 1, J);
        }
        if (nl->n != J)
            return ctx_fail(c, "[%s] layer%u: %u values, expected experts = %u", name, l, nl->n, J);
        double s = 0;
        for (uint32_t j = 0; j < J; j++)
            s += (*out)[(size_t)l * J + j] = nl->v[j];
        if (!(s > 0))
            return ctx_fail(c, "[%s] layer%u: every weight is 0", name, l);
    }
    f->L = L;
    f->J = J;
    return 0;
}

/* The decode phases: [decode_popularity], then [decode_phase2] (or
 * [late_decode_popularity]) .. [decode_phaseP] without a gap, into one
 * [P][L][J] array. */
static int finish_decode_phases(parse_ctx *c, const ms_model *shape)
{
    ms_gen_file *f = c->f;
    uint32_t P = 0;
    while (P < MS_GEN_MAX_PHASES && c->dpop[P])
        P++;
    for (uint32_t k = P; k < MS_GEN_MAX_PHASES; k++)
        if (c->dpop[k]) {
            char missing[32];
            decode_phase_section(P, missing);
            c->line = 0;
            for (uint32_t l = 0; l < PARAMS_MAX_LAYERS && !c->line; l++)
                c->line = c->dpop[k][l].line;
            return ctx_fail(c, "[%s] needs [%s] (decode phases are numbered without a gap)", c->dpop_section[k],
                            missing);
        }
    if (!P)
        return 0;
    double *phase[MS_GEN_MAX_PHASES] = {0};
    for (uint32_t k = 0; k < P; k++)
        if (finish_popularity(c, shape, c->dpop[k], c->dpop_section[k], &phase[k])) {
            for (uint32_t i = 0; i <= k; i++)
                free(phase[i]);
            return -1;
        }
    size_t LJ = (size_t)f->L * f->J;
    f->decode_popularity = ms_xcalloc(P * LJ, sizeof *f->decode_popularity);
    for (uint32_t k = 0; k < P; k++) {
        memcpy(f->decode_popularity + k * LJ, phase[k], LJ * sizeof *phase[k]);
        free(phase[k]);
    }
    f->p.decode_popularity = f->decode_popularity;
    f->p.decode_phases = P;
    return 0;
}

/* A section of two per-request lists (`[lengths]`, `[periods]`): 0 when
 * neither is given, 1 when both are, of the same nonzero length, else the
 * one-line error (-1). */
static int paired_lists(parse_ctx *c, const char *section, const char *na, const num_list *a, const char *nb,
                        const num_list *b)
{
    if (!a->line && !b->line)
        return 0;
    c->line = a->line ? a->line : b->line;
    if (!a->line || !b->line)
        return ctx_fail(c, "[%s] needs both %s and %s (one entry per request)", section, na, nb);
    if (a->n != b->n || a->n == 0)
        return ctx_fail(c, "[%s] %s has %u values, %s %u: expected the same number, at least 1", section, na, a->n,
                        nb, b->n);
    return 1;
}

/* [lengths]: both lists, of the same length. */
static int finish_lengths(parse_ctx *c)
{
    ms_gen_file *f = c->f;
    num_list *pl = &c->len_prompt, *ol = &c->len_output;
    int rc = paired_lists(c, "lengths", "prompt", pl, "output", ol);
    if (rc <= 0)
        return rc;
    f->n_lens = pl->n;
    f->prompt_lens = ms_xcalloc(pl->n, sizeof *f->prompt_lens);
    f->output_lens = ms_xcalloc(pl->n, sizeof *f->output_lens);
    for (uint32_t i = 0; i < pl->n; i++) {
        f->prompt_lens[i] = (uint32_t)pl->v[i];
        f->output_lens[i] = (uint32_t)ol->v[i];
    }
    f->p.prompt_lens = f->prompt_lens;
    f->p.output_lens = f->output_lens;
    f->p.n_lens = f->n_lens;
    return 0;
}

/* [periods]: both lists, of the same length. */
static int finish_periods(parse_ctx *c)
{
    ms_gen_file *f = c->f;
    num_list *pl = &c->per_period, *ql = &c->per_repeat;
    int rc = paired_lists(c, "periods", "period", pl, "repeat", ql);
    if (rc <= 0)
        return rc;
    f->n_periods = pl->n;
    f->periods = ms_xcalloc(pl->n, sizeof *f->periods);
    f->period_repeats = ms_xcalloc(pl->n, sizeof *f->period_repeats);
    for (uint32_t i = 0; i < pl->n; i++) {
        f->periods[i] = (uint32_t)pl->v[i];
        f->period_repeats[i] = ql->v[i];
    }
    f->p.periods = f->periods;
    f->p.period_repeats = f->period_repeats;
    f->p.n_periods = f->n_periods;
    return 0;
}

static void ctx_free(parse_ctx *c)
{
    free(c->per_period.v);
    free(c->per_repeat.v);
    free(c->expert_bytes.v);
    free(c->dense_bytes.v);
    for (uint32_t l = 0; l < PARAMS_MAX_LAYERS; l++)
        free(c->pop[l].v);
    free(c->pop);
    for (uint32_t k = 0; k < MS_GEN_MAX_PHASES; k++) {
        for (uint32_t l = 0; c->dpop[k] && l < PARAMS_MAX_LAYERS; l++)
            free(c->dpop[k][l].v);
        free(c->dpop[k]);
    }
    free(c->len_prompt.v);
    free(c->len_output.v);
}

int ms_gen_file_load(const char *path, const ms_model *shape, ms_gen_file *f, ms_err *err)
{
    memset(f, 0, sizeof *f);
    ms_gen_defaults(&f->p);
    parse_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.err = err;
    c.f = f;
    c.pop = ms_xcalloc(PARAMS_MAX_LAYERS, sizeof *c.pop);
    static const char *const sections[] = {
        "model", "gen", "popularity", "decode_popularity", "late_decode_popularity", "decode_phase2",
        "decode_phase3", "decode_phase4", "decode_phase5", "decode_phase6", "decode_phase7", "decode_phase8",
        "decode_phase9", "decode_phase10", "decode_phase11", "decode_phase12", "decode_phase13", "decode_phase14",
        "decode_phase15", "decode_phase16", "lengths", "periods", NULL};
    ms_ini_spec spec = {.what = "params file", .sections = sections, .on_value = on_value, .user = &c};
    if (ms_ini_parse(path, &spec, err))
        c.failed = 1;
    if (!c.failed && f->has_model)
        finish_model(&c);
    const ms_model *shp = shape ? shape : f->has_model ? &f->model : NULL;
    if (!c.failed && finish_popularity(&c, shp, c.pop, "popularity", &f->popularity) == 0)
        f->p.popularity = f->popularity;
    if (!c.failed)
        finish_decode_phases(&c, shp);
    if (!c.failed)
        finish_lengths(&c);
    if (!c.failed)
        finish_periods(&c);
    ctx_free(&c);
    if (c.failed) {
        ms_gen_file_free(f);
        return -1;
    }
    return 0;
}

void ms_gen_file_free(ms_gen_file *f)
{
    free(f->popularity);
    free(f->decode_popularity);
    free(f->prompt_lens);
    free(f->output_lens);
    free(f->periods);
    free(f->period_repeats);
    f->periods = NULL;
    f->period_repeats = NULL;
    f->n_periods = 0;
    f->p.periods = NULL;
    f->p.period_repeats = NULL;
    f->p.n_periods = 0;
    free(f->expert_bytes);
    free(f->dense_bytes);
    f->popularity = f->decode_popularity = NULL;
    f->prompt_lens = f->output_lens = NULL;
    f->n_lens = 0;
    f->expert_bytes = f->dense_bytes = NULL;
    f->p.popularity = f->p.decode_popularity = NULL;
    f->p.decode_phases = 0;
    f->p.prompt_lens = f->p.output_lens = NULL;
    f->p.n_lens = 0;
    f->p.layer_expert_bytes = f->p.layer_dense_bytes = NULL;
}

/* "key = v0 v1 ..." with at most `per_line` values a line, the rest on
 * indented continuation lines (inih's line limit is 200 characters). */
static void write_list(FILE *out, const char *key, const double *v, uint32_t n, const char *fmt)
{
    const uint32_t per_line = 12;
    fprintf(out, "%s =", key);
    for (uint32_t i = 0; i < n; i++) {
        if (i && i % per_line == 0)
            fputs("\n   ", out);
        fputc(' ', out);
        fprintf(out, fmt, v[i]);
    }
    fputc('\n', out);
}

static void write_bytes(FILE *out, const char *key, const uint64_t *per_layer, uint64_t all, uint32_t L)
{
    int same = 1;
    for (uint32_t l = 1; per_layer && l < L; l++)
        same &= per_layer[l] == per_layer[0];
    if (!per_layer || same) {
        fprintf(out, "%s = %llu\n", key, (unsigned long long)(per_layer ? per_layer[0] : all));
        return;
    }
    double *v = ms_xcalloc(L, sizeof *v);
    for (uint32_t l = 0; l < L; l++)
        v[l] = (double)per_layer[l];
    write_list(out, key, v, L, "%.0f");
    free(v);
}

static void write_popularity(FILE *out, const char *section, const double *pop, const ms_model *m)
{
    if (!pop)
        return;
    fprintf(out, "\n[%s]\n", section);
    for (uint32_t l = 0; l < m->moe_layers; l++) {
        char key[32];
        snprintf(key, sizeof key, "layer%u", l);
        write_list(out, key, pop + (size_t)l * m->experts, m->experts, "%.6g");
    }
}

int ms_gen_file_write(FILE *out, const char *comment, const ms_model *m, const uint64_t *expert_bytes,
                      const uint64_t *dense_bytes, const ms_gen_params *p)
{
    for (const char *s = comment; s && *s;) {
        const char *nl = strchr(s, '\n');
        int len = nl ? (int)(nl - s) : (int)strlen(s);
        fprintf(out, "; %.*s\n", len, s);
        s += len + (nl ? 1 : 0);
    }
    fprintf(out, "\n[model]\nname = %s\nmoe_layers = %u\nexperts = %u\ntop_k = %u\nshared_experts = %u\n"
                 "hidden = %u\nvocab = %u\n",
            m->name, m->moe_layers, m->experts, m->top_k, m->shared_experts, m->hidden, m->vocab);
    write_bytes(out, "expert_bytes", expert_bytes, m->expert_bytes, m->moe_layers);
    write_bytes(out, "dense_bytes", dense_bytes, m->dense_bytes, m->moe_layers);
    fputs("\n[gen]\n", out);
    ms_gen_write_knobs(out, p);
    write_popularity(out, "popularity", p->popularity, m);
    for (uint32_t k = 0; p->decode_popularity && k < p->decode_phases; k++) {
        char section[32];
        decode_phase_section(k, section);
        write_popularity(out, section, p->decode_popularity + (size_t)k * m->moe_layers * m->experts, m);
    }
    if (p->n_lens) {
        double *v = ms_xcalloc(p->n_lens, sizeof *v);
        fputs("\n[lengths]\n", out);
        for (uint32_t i = 0; i < p->n_lens; i++)
            v[i] = p->prompt_lens[i];
        write_list(out, "prompt", v, p->n_lens, "%.0f");
        for (uint32_t i = 0; i < p->n_lens; i++)
            v[i] = p->output_lens[i];
        write_list(out, "output", v, p->n_lens, "%.0f");
        free(v);
    }
    if (p->n_periods) {
        double *v = ms_xcalloc(p->n_periods, sizeof *v);
        fputs("\n[periods]\n", out);
        for (uint32_t i = 0; i < p->n_periods; i++)
            v[i] = p->periods[i];
        write_list(out, "period", v, p->n_periods, "%.0f");
        write_list(out, "repeat", p->period_repeats, p->n_periods, "%.6g");
        free(v);
    }
    return ferror(out) ? -1 : 0;
}
