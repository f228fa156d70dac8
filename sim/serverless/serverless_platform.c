/* Serverless platform profile: INI parsing (inih) and validation. */
#include "sim/serverless/serverless_platform.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/ini.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"

enum { K_NAME, K_DESC, K_MEM, K_NUM };

typedef struct {
    const char *key;
    int kind;
    double min, max;
    size_t off; /* offset of the double (K_NUM) */
    double scale;
} sl_key;

#define OFF(f) offsetof(ms_sl_platform, f)
static const sl_key keys[] = {
    {"name", K_NAME, 0, 0, 0, 0},
    {"description", K_DESC, 0, 0, 0, 0},
    {"memory_mb", K_MEM, 1, 1e6, 0, 0},
    {"mb_per_vcpu", K_NUM, 1, 1e6, OFF(mb_per_vcpu), 1},
    {"vcpu_gflops", K_NUM, 1e-3, 1e6, OFF(vcpu_flops), 1e9},
    {"warm_start_ms", K_NUM, 0, 1e7, OFF(warm_start_s), 1e-3},
    {"storage_delay_ms", K_NUM, 0, 1e7, OFF(storage_delay_s), 1e-3},
    {"storage_bw_mbps", K_NUM, 1e-3, 1e9, OFF(storage_bw), 1e6},
    {"function_bw_mbps", K_NUM, 1e-3, 1e9, OFF(function_bw), 1e6},
    {"payload_mb", K_NUM, 1e-3, 1e9, OFF(payload_bytes), 1048576},
    {"price_per_gb_s", K_NUM, 0, 1, OFF(price_per_gb_s), 1},
    {"max_replicas", K_NUM, 1, 64, 0, 0},
    {"runtime_mb", K_NUM, 0, 1e6, OFF(runtime_bytes), 1048576},
    {"act_bytes", K_NUM, 1, 16, OFF(act_bytes), 1},
    {"lambdaml_mb", K_NUM, 1, 1e6, OFF(lambdaml_mb), 1},
    {"nonmoe_mb", K_NUM, 1, 1e6, OFF(nonmoe_mb), 1},
    {"cluster_price_per_hour", K_NUM, 0, 1e6, OFF(cluster_price_per_s), 1.0 / 3600},
    {"cluster_vcpus", K_NUM, 1, 1e6, OFF(cluster_vcpus), 1},
    {"cluster_vcpu_gflops", K_NUM, 1e-3, 1e6, OFF(cluster_vcpu_flops), 1e9},
    {"cluster_billing_s", K_NUM, 1, 1e9, OFF(cluster_billing_s), 1},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

typedef struct {
    ms_sl_platform *p;
    ms_ini *ini;
    int seen[N_KEYS];
} sl_ctx;

/* "FILE:LINE: key = value: why" through the one INI reader; returns -1. */
static int ctx_fail(sl_ctx *c, const char *key, const char *val, const char *why)
{
    return ms_ini_fail(c->ini, "%s = %s: %s", key, val, why);
}

static int parse_memory_list(sl_ctx *c, const char *val)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", val);
    c->p->n_mem = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        double v;
        if (ms_parse_double(tok, &v) || v < 1 || v > 1e6)
            return ctx_fail(c, "memory_mb", val, "expected comma-separated sizes in MB in [1, 1e6]");
        if (c->p->n_mem == MS_SL_MAX_MEM)
            return ctx_fail(c, "memory_mb", val, "more than 32 options");
        if (c->p->n_mem && v <= c->p->mem_mb[c->p->n_mem - 1])
            return ctx_fail(c, "memory_mb", val, "options must be strictly ascending");
        c->p->mem_mb[c->p->n_mem++] = v;
    }
    if (!c->p->n_mem)
        return ctx_fail(c, "memory_mb", val, "empty list");
    return 0;
}

static int on_value(ms_ini *ini, void *user, const char *section, const char *name, const char *value)
{
    sl_ctx *c = user;
    c->ini = ini;
    (void)section; /* the reader admits [serverless] only */
    for (size_t k = 0; k < N_KEYS; k++) {
        if (strcmp(keys[k].key, name))
            continue;
        if (c->seen[k])
            return ctx_fail(c, name, value, "repeated key");
        c->seen[k] = 1;
        if (keys[k].kind == K_NAME) {
            snprintf(c->p->name, sizeof c->p->name, "%s", value);
            return 0;
        }
        if (keys[k].kind == K_DESC) {
            snprintf(c->p->description, sizeof c->p->description, "%s", value);
            return 0;
        }
        if (keys[k].kind == K_MEM)
            return parse_memory_list(c, value);
        double v;
        if (ms_parse_double(value, &v) || v < keys[k].min || v > keys[k].max) {
            char why[96];
            snprintf(why, sizeof why, "expected a number in [%g, %g]", keys[k].min, keys[k].max);
            return ctx_fail(c, name, value, why);
        }
        if (!strcmp(name, "max_replicas")) {
            if (v != (int)v)
                return ctx_fail(c, name, value, "expected a whole number");
            c->p->max_replicas = (int)v;
        } else
            *(double *)((char *)c->p + keys[k].off) = v * keys[k].scale;
        return 0;
    }
    return ctx_fail(c, name, value, "unknown key");
}

int ms_sl_platform_load(const char *name_or_path, ms_sl_platform *out, ms_err *err)
{
    char path[4096];
    size_t n = strlen(name_or_path);
    if (!n)
        return ms_fail(err, "empty serverless profile name");
    if (strchr(name_or_path, '/') || (n >= 4 && !strcmp(name_or_path + n - 4, ".ini")))
        snprintf(path, sizeof path, "%s", name_or_path);
    else {
        char dir[4096];
        if (ms_path_profiles(dir, sizeof dir, err))
            return -1;
        if (snprintf(path, sizeof path, "%s/serverless/%s.ini", dir, name_or_path) >= (int)sizeof path)
            return ms_fail(err, "serverless profile path too long for '%s'", name_or_path);
    }
    memset(out, 0, sizeof *out);
    sl_ctx c = {.p = out};
    static const char *const sections[] = {"serverless", NULL};
    ms_ini_spec spec = {.what = "serverless profile", .sections = sections, .on_value = on_value, .user = &c};
    if (ms_ini_parse(path, &spec, err))
        return -1;
    for (size_t k = 0; k < N_KEYS; k++)
        if (!c.seen[k])
            return ms_ini_fail_file(err, path, "missing required key '%s' in [serverless]", keys[k].key);
    return 0;
}

double ms_sl_flops(const ms_sl_platform *p, double mem_mb)
{
    return p->vcpu_flops * mem_mb / p->mb_per_vcpu;
}
