/* The row reader of `moesim published` (see published_rows.h). */
#include "sim/apps/published_rows.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/apps/published_presets.h"
#include "sim/core/ini.h"
#include "sim/core/out.h"
#include "sim/core/params.h"

/* ---- the keys ---- */

typedef enum { K_TEXT, K_NUM } key_kind;

typedef struct {
    const char *key;
    int required;
    key_kind kind;
    double lo, hi;       /* K_NUM: inclusive range */
    int lo_open;         /* K_NUM: lo excluded */
    int whole;           /* K_NUM: a whole number */
} key_spec;

enum {
    KEY_SOURCE, KEY_SYSTEM, KEY_MODEL, KEY_PLATFORM, KEY_BATCH, KEY_PROMPT_LEN, KEY_OUTPUT_LEN, KEY_METRIC,
    KEY_VALUE, KEY_READ, KEY_ROLE, KEY_SET, KEY_EXPERT_BITS, KEY_DENSE_BITS, KEY_UNCERTAINTY, KEY_TRACE,
    KEY_REQUESTS, KEY_SEED, KEY_SLOTS, KEY_PREFETCH, KEY_GPU_EXPERT_GB, KEY_CPU_OFFLOAD_GB, KEY_CPU_MOE_LAYERS,
    KEY_CPU_THREADS, KEY_ASSUME, KEY_NOTE, KEY_N
};

static const key_spec keys[KEY_N] = {
    [KEY_SOURCE] = {"source", 1, K_TEXT, 0, 0, 0, 0},
    [KEY_SYSTEM] = {"system", 1, K_TEXT, 0, 0, 0, 0},
    [KEY_MODEL] = {"model", 1, K_TEXT, 0, 0, 0, 0},
    [KEY_PLATFORM] = {"platform", 1, K_TEXT, 0, 0, 0, 0},
    [KEY_BATCH] = {"batch", 1, K_NUM, 1, 4096, 0, 1},
    [KEY_PROMPT_LEN] = {"prompt_len", 1, K_NUM, 1, 65536, 0, 1},
    [KEY_OUTPUT_LEN] = {"output_len", 1, K_NUM, 1, 65536, 0, 1},
    [KEY_METRIC] = {"metric", 1, K_TEXT, 0, 0, 0, 0},
    [KEY_VALUE] = {"value", 1, K_NUM, 0, 1e12, 1, 0},
    [KEY_READ] = {"read", 1, K_TEXT, 0, 0, 0, 0},
    [KEY_ROLE] = {"role", 1, K_TEXT, 0, 0, 0, 0},
    [KEY_SET] = {"set", 0, K_TEXT, 0, 0, 0, 0},
    [KEY_EXPERT_BITS] = {"expert_bits", 0, K_NUM, 0, 64, 1, 0},
    [KEY_DENSE_BITS] = {"dense_bits", 0, K_NUM, 0, 64, 1, 0},
    [KEY_UNCERTAINTY] = {"uncertainty", 0, K_NUM, 0, 1e12, 0, 0},
    [KEY_TRACE] = {"trace", 0, K_TEXT, 0, 0, 0, 0},
    [KEY_REQUESTS] = {"requests", 0, K_NUM, 1, 100000, 0, 1},
    [KEY_SEED] = {"seed", 0, K_NUM, 0, 4294967294.0, 0, 1},
    [KEY_SLOTS] = {"slots_per_layer", 0, K_NUM, 1, 65536, 0, 1},
    [KEY_PREFETCH] = {"prefetch", 0, K_NUM, 0, 1, 0, 1},
    [KEY_GPU_EXPERT_GB] = {"gpu_expert_gb", 0, K_NUM, 0, 1e6, 0, 0},
    [KEY_CPU_OFFLOAD_GB] = {"cpu_offload_gb", 0, K_NUM, 0, 1e6, 1, 0},
    [KEY_CPU_MOE_LAYERS] = {"cpu_moe_layers", 0, K_NUM, 0, 65536, 0, 1},
    [KEY_CPU_THREADS] = {"cpu_threads", 0, K_NUM, 1, 4096, 0, 1},
    [KEY_ASSUME] = {"assume", 0, K_TEXT, 0, 0, 0, 0},
    [KEY_NOTE] = {"note", 0, K_TEXT, 0, 0, 0, 0},
};

/* the knob of each knob key */
static const int knob_key[MS_PUB_KNOB_N] = {KEY_SLOTS, KEY_PREFETCH, KEY_GPU_EXPERT_GB, KEY_CPU_OFFLOAD_GB,
                                            KEY_CPU_MOE_LAYERS, KEY_CPU_THREADS};

static const char *const metric_names[MS_PUB_METRIC_N] = {"decode_tok_s", "tpot_ms", "ttft_ms", "e2e_tok_s"};

const char *ms_pub_metric_name(ms_pub_metric m) { return m < MS_PUB_METRIC_N ? metric_names[m] : "?"; }
const char *ms_pub_knob_name(ms_pub_knob k) { return k < MS_PUB_KNOB_N ? keys[knob_key[k]].key : "?"; }
const char *ms_pub_role_name(ms_pub_role r) { return r == MS_PUB_CALIBRATION ? "calibration" : "evaluation"; }

/* ---- the parse ---- */

typedef struct {
    ms_pub_rows *rows;
    const char *path;
    ms_err *err;
    int open;                    /* a row is being read */
    char name[64];
    char *val[KEY_N];            /* the row's values as written (NULL: not given) */
    size_t first_row;            /* this file's first row in rows */
} rd_ctx;

static int row_fail(rd_ctx *c, const char *key, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int row_fail(rd_ctx *c, const char *key, const char *value, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (value)
        return ms_fail(c->err, "%s: row %s: %s = %s: %s", c->path, c->name, key, value, why);
    return ms_fail(c->err, "%s: row %s: %s: %s", c->path, c->name, key, why);
}

static void clear_values(rd_ctx *c)
{
    for (int k = 0; k < KEY_N; k++) {
        free(c->val[k]);
        c->val[k] = NULL;
    }
}

static int parse_number(rd_ctx *c, int k, double *x)
{
    const key_spec *s = &keys[k];
    const char *v = c->val[k];
    int rc = ms_parse_double(v, x);
    if (rc == -1)
        return row_fail(c, s->key, v, "not a number");
    if (rc == -2 || !isfinite(*x) || *x < s->lo || *x > s->hi || (s->lo_open && *x <= s->lo) ||
        (s->whole && *x != floor(*x)))
        return row_fail(c, s->key, v, "expected %s in %c%g, %g]", s->whole ? "a whole number" : "a number",
                        s->lo_open ? '(' : '[', s->lo, s->hi);
    return 0;
}

static int copy_text(rd_ctx *c, int k, char *dst, size_t cap)
{
    if (!c->val[k]) {
        dst[0] = 0;
        return 0;
    }
    if (strlen(c->val[k]) >= cap)
        return row_fail(c, keys[k].key, c->val[k], "longer than %zu characters", cap - 1);
    memcpy(dst, c->val[k], strlen(c->val[k]) + 1);
    return 0;
}

static int one_of(rd_ctx *c, int k, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(c->val[k], names[i])) {
            *out = i;
            return 0;
        }
    char list[256] = "";
    size_t u = 0;
    for (int i = 0; i < n && u < sizeof list; i++)
        u += (size_t)snprintf(list + u, sizeof list - u, "%s%s", i ? ", " : "", names[i]);
    return row_fail(c, keys[k].key, c->val[k], "expected one of %s", list);
}

/* `set`: a comma list of platform.KEY=V / model.KEY=V; each checked when the
 * profile is loaded with it (the message names the row and the entry). */
static int parse_sets(rd_ctx *c, ms_pub_row *r)
{
    if (copy_text(c, KEY_SET, r->set_text, sizeof r->set_text))
        return -1;
    if (!r->set_text[0])
        return 0;
    memcpy(r->set_store, r->set_text, sizeof r->set_store);
    for (char *s = r->set_store; s && *s;) {
        char *e = strchr(s, ',');
        if (e)
            *e = 0;
        while (*s == ' ')
            s++;
        for (char *t = s + strlen(s); t > s && t[-1] == ' ';)
            *--t = 0;
        char *dot = strchr(s, '.'), *eq = strchr(s, '=');
        int is_model = !strncmp(s, "model.", 6), is_plat = !strncmp(s, "platform.", 9);
        if (!dot || !eq || eq < dot || (!is_model && !is_plat) || eq == dot + 1 || !eq[1])
            return row_fail(c, "set", r->set_text, "entry '%s' is not platform.KEY=VALUE or model.KEY=VALUE", s);
        int n = r->n_sets;
        if (n == MS_PUB_MAX_SETS)
            return row_fail(c, "set", r->set_text, "more than %d entries", MS_PUB_MAX_SETS);
        snprintf(r->set_where[n], sizeof r->set_where[n], "%s: row %s: set = %s", c->path, c->name, s);
        *eq = 0;
        r->set_key[n] = (short)(dot + 1 - r->set_store);
        r->set_value[n] = (short)(eq + 1 - r->set_store);
        r->set_is_model[n] = (char)is_model;
        r->n_sets++;
        s = e ? e + 1 : NULL;
    }
    return 0;
}

/* trace: relative to the row file's folder; it must be a readable file. */
static int resolve_trace(rd_ctx *c, ms_pub_row *r)
{
    if (!c->val[KEY_TRACE])
        return 0;
    const char *t = c->val[KEY_TRACE];
    char dir[1024];
    ms_out_dir_of(c->path, dir, sizeof dir);
    int n = t[0] == '/' ? snprintf(r->trace, sizeof r->trace, "%s", t)
                        : snprintf(r->trace, sizeof r->trace, "%s/%s", dir, t);
    if (n >= (int)sizeof r->trace)
        return row_fail(c, "trace", t, "path too long");
    if (access(r->trace, R_OK))
        return row_fail(c, "trace", t, "no readable file %s", r->trace);
    ms_out_input(r->trace); /* never written over by an output */
    return 0;
}

static int check_profiles(rd_ctx *c, ms_pub_row *r)
{
    ms_model m;
    ms_platform p;
    ms_err e;
    if (ms_model_load(r->model, &m, &e))
        return row_fail(c, "model", r->model, "%s", e.msg);
    if (ms_platform_load(r->platform, &p, &e))
        return row_fail(c, "platform", r->platform, "%s", e.msg);
    ms_profile_set ms[MS_PUB_MAX_SETS], ps[MS_PUB_MAX_SETS];
    int nm, np;
    ms_pub_row_sets(r, ms, &nm, ps, &np);
    if (ms_model_load_set(r->model, ms, nm, &m, c->err) || ms_platform_load_set(r->platform, ps, np, &p, c->err))
        return -1; /* the message names the set entry (its where) */
    if ((r->knob_given >> MS_PUB_SLOTS_PER_LAYER & 1) && r->knob[MS_PUB_SLOTS_PER_LAYER] > m.experts)
        return row_fail(c, "slots_per_layer", c->val[KEY_SLOTS], "more than the model's %u experts per layer",
                        m.experts);
    if ((r->knob_given >> MS_PUB_CPU_MOE_LAYERS & 1) && r->knob[MS_PUB_CPU_MOE_LAYERS] > m.moe_layers)
        return row_fail(c, "cpu_moe_layers", c->val[KEY_CPU_MOE_LAYERS], "more than the model's %u MoE layers",
                        m.moe_layers);
    return 0;
}

static int check_system(rd_ctx *c, ms_pub_row *r)
{
    const ms_pub_preset *ps = ms_pub_preset_find(r->system);
    if (!ps) {
        char names[512];
        return row_fail(c, "system", r->system, "unknown system (known: %s)", ms_pub_preset_names(names, sizeof names));
    }
    for (int k = 0; k < MS_PUB_KNOB_N; k++)
        if ((r->knob_given >> k & 1) && !(ps->knobs >> k & 1))
            return row_fail(c, keys[knob_key[k]].key, c->val[knob_key[k]], "system %s does not read this knob",
                            r->system);
    return 0;
}

static int fill_numbers(rd_ctx *c, ms_pub_row *r)
{
    double x;
    struct {
        int key;
        uint32_t *u;
        double *d;
    } nums[] = {{KEY_BATCH, &r->batch, NULL}, {KEY_PROMPT_LEN, &r->prompt_len, NULL},
                {KEY_OUTPUT_LEN, &r->output_len, NULL}, {KEY_REQUESTS, &r->requests, NULL},
                {KEY_VALUE, NULL, &r->value}, {KEY_EXPERT_BITS, NULL, &r->expert_bits},
                {KEY_DENSE_BITS, NULL, &r->dense_bits}, {KEY_UNCERTAINTY, NULL, &r->uncertainty}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (!c->val[nums[i].key])
            continue;
        if (parse_number(c, nums[i].key, &x))
            return -1;
        if (nums[i].u)
            *nums[i].u = (uint32_t)x;
        else
            *nums[i].d = x;
    }
    if (c->val[KEY_SEED]) {
        if (parse_number(c, KEY_SEED, &x))
            return -1;
        r->seed = (uint64_t)x;
    }
    for (int k = 0; k < MS_PUB_KNOB_N; k++)
        if (c->val[knob_key[k]]) {
            if (parse_number(c, knob_key[k], &r->knob[k]))
                return -1;
            r->knob_given |= 1u << k;
        }
    if (r->requests < r->batch && !r->trace[0] && !c->val[KEY_TRACE]) {
        char v[32];
        snprintf(v, sizeof v, "%u", r->requests);
        return row_fail(c, "requests", c->val[KEY_REQUESTS] ? c->val[KEY_REQUESTS] : v,
                        "fewer requests than batch = %u: the batch would never fill%s", r->batch,
                        c->val[KEY_REQUESTS] ? "" : " (4 is the default)");
    }
    if ((r->metric == MS_PUB_DECODE_TOK_S || r->metric == MS_PUB_TPOT_MS) && r->output_len < 2)
        return row_fail(c, "output_len", c->val[KEY_OUTPUT_LEN], "metric %s needs at least 2 output tokens",
                        metric_names[r->metric]);
    return 0;
}

/* The row just read: every key checked, then appended. */
static int finish_row(rd_ctx *c)
{
    if (!c->open)
        return 0;
    c->open = 0;
    for (int k = 0; k < KEY_N; k++)
        if (keys[k].required && !c->val[k])
            return row_fail(c, keys[k].key, NULL, "missing (required)");
    ms_pub_row *r = ms_xcalloc(1, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", c->name);
    snprintf(r->file, sizeof r->file, "%s", c->path);
    r->requests = 4;
    r->seed = 1;
    r->uncertainty = NAN;
    static const char *const reads[] = {"text", "table", "plot"}, *const roles[] = {"calibration", "evaluation"};
    int metric = 0, read = 0, role = 0;
    int rc = copy_text(c, KEY_SOURCE, r->source, sizeof r->source) ||
             copy_text(c, KEY_SYSTEM, r->system, sizeof r->system) ||
             copy_text(c, KEY_MODEL, r->model, sizeof r->model) ||
             copy_text(c, KEY_PLATFORM, r->platform, sizeof r->platform) ||
             copy_text(c, KEY_ASSUME, r->assume, sizeof r->assume) ||
             copy_text(c, KEY_NOTE, r->note, sizeof r->note) || one_of(c, KEY_METRIC, metric_names, 4, &metric) ||
             one_of(c, KEY_READ, reads, 3, &read) || one_of(c, KEY_ROLE, roles, 2, &role);
    if (!rc) {
        r->metric = (ms_pub_metric)metric;
        r->role = (ms_pub_role)role;
        snprintf(r->read, sizeof r->read, "%s", reads[read]);
        rc = fill_numbers(c, r) || check_system(c, r) || parse_sets(c, r) || check_profiles(c, r) ||
             resolve_trace(c, r);
    }
    if (rc) {
        free(r);
        return -1;
    }
    if (c->rows->n == c->rows->cap) {
        c->rows->cap = c->rows->cap ? 2 * c->rows->cap : 16;
        c->rows->row = ms_xrealloc(c->rows->row, c->rows->cap, sizeof *c->rows->row);
    }
    c->rows->row[c->rows->n++] = *r;
    free(r);
    return 0;
}

static int on_section(ms_ini *ini, void *user, const char *section)
{
    rd_ctx *c = user;
    if (finish_row(c))
        return -1;
    clear_values(c);
    if (strncmp(section, "row ", 4) || !section[4])
        return ms_ini_fail(ini, "[%s]: expected [row NAME]", section);
    const char *name = section + 4;
    if (strlen(name) >= sizeof c->name)
        return ms_ini_fail(ini, "[%s]: the row name is longer than %zu characters", section, sizeof c->name - 1);
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._-", *p)))
            return ms_ini_fail(ini, "[%s]: a row name is letters, digits, '.', '-' and '_'", section);
    for (size_t i = 0; i < c->rows->n; i++)
        if (!strcmp(c->rows->row[i].name, name))
            return ms_ini_fail(ini, "[%s]: row %s is also in %s", section, name, c->rows->row[i].file);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->open = 1;
    return 0;
}

static int on_value(ms_ini *ini, void *user, const char *section, const char *key, const char *value)
{
    rd_ctx *c = user;
    (void)section;
    if (!c->open)
        return ms_ini_fail(ini, "%s = %s: outside a [row NAME] section", key, value);
    int k = 0;
    while (k < KEY_N && strcmp(keys[k].key, key))
        k++;
    if (k == KEY_N)
        return row_fail(c, key, value, "unknown key");
    if (ms_ini_continuation(ini)) {
        if (keys[k].kind != K_TEXT || k == KEY_SYSTEM || k == KEY_MODEL || k == KEY_PLATFORM)
            return row_fail(c, key, value, "a continuation line holds text (source, set, assume, note) only");
        if (!c->val[k]) /* an indented line with no line of its key before it */
            return row_fail(c, key, value, "an indented (continuation) line without its key's line before it");
        size_t a = strlen(c->val[k]), b = strlen(value);
        c->val[k] = ms_xrealloc(c->val[k], a + b + 2, 1);
        c->val[k][a] = ' ';
        memcpy(c->val[k] + a + 1, value, b + 1);
        return 0;
    }
    if (c->val[k])
        return row_fail(c, key, value, "given twice (first: %s)", c->val[k]);
    c->val[k] = ms_xstrdup(value);
    return 0;
}

int ms_pub_rows_read(const char *path, ms_pub_rows *rows, ms_err *err)
{
    rd_ctx c = {.rows = rows, .path = path, .err = err, .first_row = rows->n};
    ms_ini_spec spec = {.what = "row file", .sections = NULL, .on_section = on_section, .on_value = on_value,
                        .user = &c};
    ms_out_input(path);
    int rc = ms_ini_parse(path, &spec, err);
    if (!rc)
        rc = finish_row(&c);
    if (!rc && rows->n == c.first_row)
        rc = ms_fail(err, "%s: no [row NAME] section", path);
    clear_values(&c);
    return rc;
}

void ms_pub_row_sets(const ms_pub_row *r, ms_profile_set *model_sets, int *n_model, ms_profile_set *platform_sets,
                     int *n_platform)
{
    *n_model = *n_platform = 0;
    for (int i = 0; i < r->n_sets; i++) {
        ms_profile_set *s = r->set_is_model[i] ? &model_sets[(*n_model)++] : &platform_sets[(*n_platform)++];
        s->key = r->set_store + r->set_key[i];
        s->value = r->set_store + r->set_value[i];
        s->where = r->set_where[i];
    }
}

void ms_pub_rows_free(ms_pub_rows *rows)
{
    free(rows->row);
    rows->row = NULL;
    rows->n = rows->cap = 0;
}
