#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/params.h"

/* 1 for a hexadecimal number ("0x1", "-0X1p3"): strtod reads them, moesim
 * takes decimal numbers only. */
static int is_hex(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    return s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

int ms_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s) || is_hex(s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end)
        return -1;
    if (errno == ERANGE) /* a well-formed number a double cannot hold: 1e400, 1e-400 */
        return -2;
    if (errno || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int ms_parse_u64(const char *s, unsigned long long *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int ms_parse_bytes(const char *s, double *out)
{
    static const struct { const char *suffix; double mult; } units[] = {
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1.0},
    };
    if (!s || !*s || isspace((unsigned char)*s) || is_hex(s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -1;
    double mult = 1.0;
    if (*end) {
        size_t i, n = sizeof units / sizeof units[0];
        for (i = 0; i < n; i++)
            if (!strcmp(end, units[i].suffix))
                break;
        if (i == n)
            return -1;
        mult = units[i].mult;
    }
    *out = v * mult;
    return 0;
}

int ms_spec_split(const char *spec, char *name_out, size_t name_cap, const char **kv_out, ms_err *err)
{
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    if (n == 0)
        return ms_fail(err, "empty policy name in '%s'", spec);
    if (n >= name_cap)
        return ms_fail(err, "policy name too long in '%s'", spec);
    memcpy(name_out, spec, n);
    name_out[n] = '\0';
    *kv_out = colon ? colon + 1 : "";
    return 0;
}

static int find_spec(const ms_param_spec *specs, const char *name)
{
    for (int i = 0; specs && specs[i].name; i++)
        if (!strcmp(specs[i].name, name))
            return i;
    return -1;
}

static void list_keys(const ms_param_spec *specs, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; specs && specs[i].name; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", specs[i].name);
    }
    if (!buf[0])
        snprintf(buf, cap, "none");
}

static int enum_has(const char *choices, const char *value)
{
    size_t n = strlen(value);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, value, n))
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* Converts and range-checks one value into slot i of p. */
static int set_value(const ms_param_spec *s, int i, const char *value, const char *who, ms_params *p, ms_err *err)
{
    if (strlen(value) >= sizeof p->str[i])
        return ms_fail(err, "%s: value of '%s' too long: '%s'", who, s->name, value);
    snprintf(p->str[i], sizeof p->str[i], "%s", value);
    if (s->type == MS_PARAM_ENUM) {
        if (!enum_has(s->choices, value))
            return ms_fail(err, "%s: %s=%s is not one of %s", who, s->name, value, s->choices);
        p->num[i] = 0;
        return 0;
    }
    double v;
    int bad = ms_parse_double(value, &v);
    if (bad == -2)
        return ms_fail(err, "%s: %s=%s is out of range [%g, %g] (beyond what a double holds)", who, s->name, value,
                       s->min, s->max);
    if (bad && is_hex(value))
        return ms_fail(err, "%s: %s=%s is not a number (decimal numbers only, no hex)", who, s->name, value);
    if (bad)
        return ms_fail(err, "%s: %s=%s is not a number", who, s->name, value);
    if (s->type == MS_PARAM_INT && v != floor(v))
        return ms_fail(err, "%s: %s=%s is not an integer", who, s->name, value);
    if (v < s->min || v > s->max)
        return ms_fail(err, "%s: %s=%s is out of range [%g, %g]", who, s->name, value, s->min, s->max);
    p->num[i] = v;
    return 0;
}

int ms_params_parse(const ms_param_spec *specs, const char *kv, const char *who, ms_params *p, ms_err *err)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; specs && specs[i].name; i++) {
        if (i >= MS_PARAMS_MAX)
            return ms_fail(err, "%s: too many parameters (a bug)", who);
        p->spec[i] = &specs[i];
        p->n = i + 1;
        if (set_value(&specs[i], i, specs[i].def, who, p, err))
            return ms_fail_prefix(err, "default (a bug)");
    }
    int seen[MS_PARAMS_MAX] = {0};
    const char *cur = kv ? kv : "";
    while (*cur) {
        const char *comma = strchr(cur, ',');
        size_t len = comma ? (size_t)(comma - cur) : strlen(cur);
        char item[256];
        if (len == 0 || len >= sizeof item)
            return ms_fail(err, "%s: malformed parameter list '%s'", who, kv);
        memcpy(item, cur, len);
        item[len] = '\0';
        char *eq = strchr(item, '=');
        if (!eq || eq == item)
            return ms_fail(err, "%s: parameter '%s' is not key=value", who, item);
        *eq = '\0';
        int i = find_spec(specs, item);
        if (i < 0) {
            char keys[512];
            list_keys(specs, keys, sizeof keys);
            return ms_fail(err, "%s: unknown parameter '%s' (known: %s)", who, item, keys);
        }
        if (seen[i]++)
            return ms_fail(err, "%s: parameter '%s' given twice", who, item);
        if (set_value(&specs[i], i, eq + 1, who, p, err))
            return -1;
        cur = comma ? comma + 1 : cur + len;
        if (comma && !*cur)
            return ms_fail(err, "%s: trailing ',' in '%s'", who, kv);
    }
    return 0;
}

static int param_index(const ms_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->spec[i]->name, name))
            return i;
    fprintf(stderr, "moesim: internal error: parameter '%s' not declared\n", name);
    abort();
}

double ms_param_num(const ms_params *p, const char *name)
{
    return p->num[param_index(p, name)];
}

const char *ms_param_str(const ms_params *p, const char *name)
{
    return p->str[param_index(p, name)];
}
