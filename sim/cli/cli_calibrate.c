/* `moesim calibrate`: measures a real backend through the executor contract
 * and writes a platform profile fitted to it (sim/apps/calibrate.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/host_backend.h"
#include "sim/apps/calibrate.h"
#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/core/profile.h"

static const char calibrate_usage[] =
    "usage: moesim calibrate --backend host|cuda [--model NAME] [--expert-scale F] [--out PROFILE.ini]\n"
    "                        [--max-bytes B] [--reps N] [--max-tokens N] [--csv MEASUREMENTS.csv]\n"
    "                        [--name NAME] [--description TEXT]\n"
    "\n"
    "Measures the backend through the executor contract: H2D and D2H copies of 4 KiB x 4^i up to\n"
    "--max-bytes (pinned and pageable), the expert FFN, the dense stand-in and the CPU expert over\n"
    "1, 2, 3, 4, 6, 8, 12, ... --max-tokens token rows, one copy overlapping one expert op, and\n"
    "1-token expert ops and copies beside each other over rotated experts (the profile's [contention]:\n"
    "how much each slows the other when they share one memory).  Fits\n"
    "latency + bytes/bandwidth and the roofline launch + max(bytes/bw, 2 params tokens/FLOP/s) with GSL\n"
    "least squares (the profile's [gpu] roofline: expert FFN and dense stand-in jointly), prints\n"
    "measured vs fitted values and writes a platform profile (fit residuals and the measured points in\n"
    "# comments), then loads it back as a check.  The experts have the model's dimensions with\n"
    "expert_ffn x --expert-scale; the dense stand-in has the model's dense bytes x --expert-scale (as\n"
    "`moesim validate --expert-scale` runs it).  --max-tokens should cover the largest op validation\n"
    "runs (a prefill: prompt rows x batch).  Defaults: --model mixtral-8x7b --expert-scale 1\n"
    "--out calibrated-BACKEND.ini --max-bytes 1GiB --reps 5 --max-tokens 64; --name is the --out\n"
    "file's stem.\n";

typedef struct {
    const char *backend, *model, *out, *csv, *name, *description;
    double scale, max_bytes;
    unsigned long long reps, max_tokens;
} calib_flags;

/* A byte size: ms_parse_bytes' forms, or a number with K, M, G (binary) as in 4M. */
static int parse_size(const char *s, double *out)
{
    size_t n = strlen(s);
    const char *units = "KMG";
    const char *u = n > 1 ? strchr(units, s[n - 1]) : NULL;
    if (!u || !s[n - 1])
        return ms_parse_bytes(s, out);
    char tmp[64];
    if (n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n - 1);
    tmp[n - 1] = '\0';
    if (ms_parse_double(tmp, out) || *out < 0)
        return -1;
    *out *= (double)(1ull << (10 * (1 + (u - units))));
    return 0;
}

static int parse_flags(int argc, char **argv, calib_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return fputs(calibrate_usage, stdout), -1;
        if (strncmp(a, "--", 2))
            return ms_cli_usage("calibrate: unexpected argument '%s' (see moesim calibrate --help)", a);
        if (i + 1 >= argc)
            return ms_cli_usage("calibrate: %s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--backend"))
            f->backend = v;
        else if (!strcmp(a, "--model"))
            f->model = v;
        else if (!strcmp(a, "--out"))
            f->out = v;
        else if (!strcmp(a, "--csv"))
            f->csv = v;
        else if (!strcmp(a, "--name"))
            f->name = v;
        else if (!strcmp(a, "--description"))
            f->description = v;
        else if (!strcmp(a, "--expert-scale")) {
            if (ms_parse_double(v, &f->scale) || !(f->scale > 0 && f->scale <= 1))
                return ms_cli_usage("calibrate: --expert-scale %s: expected a number in (0, 1]", v);
        } else if (!strcmp(a, "--max-bytes")) {
            if (parse_size(v, &f->max_bytes) || f->max_bytes < 16384 || f->max_bytes > 64.0 * (1ull << 30))
                return ms_cli_usage("calibrate: --max-bytes %s: expected a byte size in [16KiB, 64GiB] such as 64M or 64MiB",
                                    v);
        } else if (!strcmp(a, "--reps")) {
            if (ms_parse_u64(v, &f->reps) || f->reps < 1 || f->reps > 64)
                return ms_cli_usage("calibrate: --reps %s: expected a whole number in [1, 64]", v);
        } else if (!strcmp(a, "--max-tokens")) {
            if (ms_parse_u64(v, &f->max_tokens) || f->max_tokens < 2 || f->max_tokens > 65536)
                return ms_cli_usage("calibrate: --max-tokens %s: expected a whole number in [2, 65536]", v);
        } else
            return ms_cli_usage("calibrate: unknown option '%s' (see moesim calibrate --help)", a);
    }
    if (!f->backend)
        return ms_cli_usage("calibrate: --backend host|cuda is required");
    return 0;
}

/* Fails early (before any measurement) when --out cannot be written. */
static int check_writable(const char *flag, const char *path, ms_err *err)
{
    char what[64];
    snprintf(what, sizeof what, "calibrate: %s", flag);
    return ms_out_check(what, path, err);
}

/* The --out file's stem when it is a valid profile name. */
static void default_name(const char *out, char *name, size_t cap)
{
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    size_t n = strlen(base);
    if (n > 4 && !strcmp(base + n - 4, ".ini"))
        n -= 4;
    int ok = n > 0 && n < cap;
    for (size_t i = 0; ok && i < n; i++)
        ok = (base[i] >= 'a' && base[i] <= 'z') || (base[i] >= 'A' && base[i] <= 'Z') ||
             (base[i] >= '0' && base[i] <= '9') || strchr(".-_", base[i]);
    if (ok)
        snprintf(name, cap, "%.*s", (int)n, base);
    else
        snprintf(name, cap, "calibrated");
}

static void os_name(char *buf, size_t cap)
{
    snprintf(buf, cap, "Linux");
    FILE *fp = fopen("/etc/os-release", "r");
    if (!fp)
        return;
    char line[256];
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, "PRETTY_NAME=", 12)) {
            char *v = line + 12;
            v[strcspn(v, "\n")] = '\0';
            if (*v == '"')
                v++, v[strcspn(v, "\"")] = '\0';
            snprintf(buf, cap, "%.*s", (int)cap - 1, v);
        }
    fclose(fp);
}

/* "load average A B C before, D E F after" from /proc/loadavg. */
static void read_loadavg(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *fp = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    if (fp && fscanf(fp, "%lf %lf %lf", &a, &b, &c) == 3)
        snprintf(buf, cap, "%.2f %.2f %.2f", a, b, c);
    if (fp)
        fclose(fp);
}

static void join_argv(int argc, char **argv, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "moesim");
    for (int i = 0; i < argc && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, " %s", argv[i]);
}

static int run_calibration(const calib_flags *f, const ms_model *model, const ms_backend_config *bc, int argc,
                           char **argv, ms_err *err)
{
    char load0[64], load1[64], conditions[200];
    read_loadavg(load0, sizeof load0);
    ms_exec x = {0};
    if (ms_backend_create(f->backend, bc, &x, err))
        return -1;
    if (!strcmp(f->backend, "host") && ms_host_backend_set_cold(&x, 1)) {
        ms_exec_destroy(&x);
        return ms_fail(err, "calibrate: out of memory for the host backend's cache-eviction buffer");
    }
    ms_calib c;
    memset(&c, 0, sizeof c);
    c.expert_bytes = ms_backend_expert_bytes(bc);
    c.expert_params = ms_backend_expert_params(bc);
    c.dense_bytes = (double)model->dense_bytes * bc->expert_scale; /* as the engine's work_scale runs it */
    c.dense_params = (double)model->dense_params * bc->expert_scale;
    c.max_tokens = bc->max_tokens;
    c.rotation = bc->experts / 3;
    c.set_cold = !strcmp(f->backend, "host") ? ms_host_backend_set_cold : NULL;
    printf("calibrating the %s backend: %s experts of %.2f MiB (expert_ffn %u x scale %g), tokens up to %u\n",
           f->backend, model->name, c.expert_bytes / 1048576.0, ms_backend_expert_ffn(bc), bc->expert_scale,
           bc->max_tokens);
    fflush(stdout);
    int rc = ms_calib_run(&x, f->max_bytes, (int)f->reps, &c, stdout, err);
    const char *note = ms_host_backend_pinned_note(&x);
    char pinned[200];
    snprintf(pinned, sizeof pinned, "%s", note ? note : "cudaHostAlloc");
    ms_exec_destroy(&x);
    if (rc)
        return -1;
    read_loadavg(load1, sizeof load1);
    snprintf(conditions, sizeof conditions, "%ld online CPUs; load average (1, 5, 15 min) %s before, %s after",
             sysconf(_SC_NPROCESSORS_ONLN), *load0 ? load0 : "unknown", *load1 ? load1 : "unknown");
    ms_calib_print(&c, stdout);

    char name[128], desc[256], os[96], cmd[1024];
    default_name(f->out, name, sizeof name);
    os_name(os, sizeof os);
    if (snprintf(desc, sizeof desc, "%s backend calibrated on a %ld-core %s host, model %s at expert scale %g", f->backend,
             sysconf(_SC_NPROCESSORS_ONLN), os, model->name, bc->expert_scale) >= (int)sizeof desc)
        desc[sizeof desc - 1] = '\0';
    join_argv(argc, argv, cmd, sizeof cmd);
    ms_calib_meta meta = {.name = f->name ? f->name : name, .description = f->description ? f->description : desc,
                          .command = cmd, .pinned_note = pinned, .conditions = conditions, .gpu_mem_bytes = ms_host_mem_total(),
                          .cpu_threads = bc->cpu_threads};
    if (ms_calib_write_profile(&c, &meta, f->out, err) || (f->csv && ms_calib_write_csv(&c, f->csv, err)))
        return -1;
    char path[4096];
    snprintf(path, sizeof path, "%s%s", strchr(f->out, '/') ? "" : "./", f->out);
    ms_platform p;
    if (ms_platform_load(path, &p, err))
        return ms_fail_prefix(err, "calibrate: the written profile does not load");
    printf("wrote %s (platform '%s'; loads with ms_platform_load)%s%s\n", f->out, p.name, f->csv ? ", " : "",
           f->csv ? f->csv : "");
    return 0;
}

int ms_cli_calibrate(int argc, char **argv)
{
    calib_flags f = {.model = "mixtral-8x7b", .scale = 1, .max_bytes = 1073741824.0, .reps = 5, .max_tokens = 64};
    int prc = parse_flags(argc, argv, &f);
    if (prc)
        return prc < 0 ? 0 : prc;
    char out_default[64];
    snprintf(out_default, sizeof out_default, "calibrated-%s.ini", f.backend);
    if (!f.out)
        f.out = out_default;
    if (f.name) {
        char tmp[128];
        default_name(f.name, tmp, sizeof tmp);
        if (strcmp(tmp, f.name))
            return ms_cli_usage("calibrate: --name %s: use letters, digits, '.', '-', '_'", f.name);
    }
    ms_err err;
    ms_model model;
    if (!ms_backend_available(f.backend, &err) || ms_model_load(f.model, &model, &err) ||
        check_writable("--out", f.out, &err) || (f.csv && check_writable("--csv", f.csv, &err)))
        return ms_cli_error(err.msg);
    ms_backend_config bc = {.model = &model, .layers = 1, .max_tokens = (uint32_t)f.max_tokens,
                            .expert_scale = f.scale, .cpu_threads = 1};
    bc.experts = bc.slots = 3 * ms_calib_rotation(ms_backend_expert_bytes(&bc)); /* the contention probe's */
    if (run_calibration(&f, &model, &bc, argc, argv, &err))
        return ms_cli_error(err.msg);
    return 0;
}
