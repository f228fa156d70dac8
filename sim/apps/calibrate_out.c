/* Calibration outputs (calibrate.h): the summary, the fitted platform
 * profile and the points CSV. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/apps/calibrate.h"
#include "sim/apps/calibrate_parts.h"
#include "sim/core/out.h"
#include "sim/core/version.h"

#define KIB 1024.0

/* ---- output ---- */

static void fmt_bytes(double b, char *buf, size_t cap)
{
    if (b >= KIB * KIB * KIB)
        snprintf(buf, cap, "%g GiB", b / (KIB * KIB * KIB));
    else if (b >= KIB * KIB)
        snprintf(buf, cap, "%g MiB", b / (KIB * KIB));
    else
        snprintf(buf, cap, "%g KiB", b / KIB);
}

/* A roofline's bandwidth as text: measured when some point was memory-bound;
 * else the fit only bounds it from below (the crossover is put at the least
 * intense point, so with bytes = 2 x params at 1 token it equals the FLOP rate
 * in number, GB/s against GFLOP/s), which the text says. */
static void fmt_roof_bw(const ms_fit_roof *f, double scale, const char *unit, char *buf, size_t cap)
{
    if (f->mem_points > 0 || !isfinite(f->bw))
        snprintf(buf, cap, scale == 1 ? "bw %.4g %s" : "bandwidth %.2f %s", f->bw / scale, unit);
    else
        snprintf(buf, cap, scale == 1 ? "bw >= %.4g %s (not measured: no memory-bound point, a lower bound)"
                                      : "bandwidth >= %.2f %s (not measured: no memory-bound point, a lower bound)",
                 f->bw / scale, unit);
}

void ms_calib_print(const ms_calib *c, FILE *out)
{
    static const char *const names[] = {"H2D pinned", "D2H pinned", "H2D pageable", "D2H pageable"};
    fprintf(out, "%-14s %10s %14s %14s %8s\n", "copy", "bytes", "measured_us", "fitted_us", "resid");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        for (int i = 0; i < c->nsizes; i++) {
            char b[32];
            fmt_bytes(c->sizes[i], b, sizeof b);
            double f = ms_fit_copy_eval(&c->copy[k], c->sizes[i]);
            fprintf(out, "%-14s %10s %14.3f %14.3f %+7.1f%%\n", names[k], b, c->copy_s[k][i] * 1e6, f * 1e6,
                    100 * (f - c->copy_s[k][i]) / c->copy_s[k][i]);
        }
    fprintf(out, "\n%-14s %8s %14s %14s %8s %12s\n", "compute", "tokens", "measured_ms", "fitted_ms", "resid",
            "GFLOP/s");
    const struct { const char *name; const double *s; const ms_fit_roof *f; double bytes, params; } rows[] = {
        {"expert FFN", c->expert_s, &c->gpu, c->expert_bytes, c->expert_params},
        {"dense", c->dense_s, &c->gpu, c->dense_bytes, c->dense_params},
        {"CPU expert", c->cpu_s, &c->cpu, c->expert_bytes, c->expert_params},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (int i = 0; i < c->ntokens; i++) {
            double f = ms_fit_roof_eval(rows[r].f, rows[r].bytes, rows[r].params, c->tokens[i]);
            fprintf(out, "%-14s %8.0f %14.4f %14.4f %+7.1f%% %12.2f\n", rows[r].name, c->tokens[i],
                    rows[r].s[i] * 1e3, f * 1e3, 100 * (f - rows[r].s[i]) / rows[r].s[i],
                    2 * rows[r].params * c->tokens[i] / rows[r].s[i] / 1e9);
        }
    fprintf(out, "\nfits (residuals relative: RMS / max)\n");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        fprintf(out, "  %-14s latency %.3f us, bandwidth %.2f GB/s   (%.1f%% / %.1f%%)\n", names[k],
                c->copy[k].latency_s * 1e6, c->copy[k].bw / 1e9, 100 * c->copy[k].rms_rel, 100 * c->copy[k].max_rel);
    const struct { const char *name; const ms_fit_roof *f; } fits[] = {
        {"expert FFN", &c->expert}, {"dense", &c->dense}, {"CPU expert", &c->cpu}};
    char bw[128];
    for (size_t r = 0; r < 3; r++) {
        if (r == 1 && !(c->dense_params > 0))
            continue;
        fmt_roof_bw(fits[r].f, 1e9, "GB/s", bw, sizeof bw);
        fprintf(out, "  %-14s launch %.1f us, %s, %.2f GFLOP/s, %d memory-bound point(s)   (%.1f%% / %.1f%%)\n",
                fits[r].name, fits[r].f->launch_s * 1e6, bw, fits[r].f->flops / 1e9, fits[r].f->mem_points,
                100 * fits[r].f->rms_rel, 100 * fits[r].f->max_rel);
    }
    fprintf(out, "  dense predicted by the expert fit: %.1f%% / %.1f%%\n", 100 * c->dense_pred_rms_rel,
            100 * c->dense_pred_max_rel);
    fmt_roof_bw(&c->gpu, 1e9, "GB/s", bw, sizeof bw);
    fprintf(out, "  [gpu] joint    launch %.1f us, %s, %.2f GFLOP/s, %d memory-bound of %d   (%.1f%% / "
            "%.1f%%; expert %.1f%% / %.1f%%, dense %.1f%% / %.1f%%)\n", c->gpu.launch_s * 1e6, bw,
            c->gpu.flops / 1e9, c->gpu.mem_points, c->gpu.n, 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel,
            100 * c->gpu_expert_rms_rel, 100 * c->gpu_expert_max_rel, 100 * c->gpu_dense_rms_rel,
            100 * c->gpu_dense_max_rel);
    fprintf(out, "overlap (%u tokens): copy alone %.3f ms, with compute %.3f ms (x%.2f); expert alone %.3f ms, with "
            "copy %.3f ms (x%.2f)\n", c->max_tokens, c->copy_alone_s * 1e3, c->copy_together_s * 1e3,
            ms_calib_slowdown(c->copy_together_s, c->copy_alone_s), c->expert_alone_s * 1e3, c->expert_together_s * 1e3,
            ms_calib_slowdown(c->expert_together_s, c->expert_alone_s));
    fprintf(out, "contention (1 token, %u experts rotated, %d+ samples): copy alone %.3f ms, compute busy %.3f ms "
            "(copy_contention %.3f); expert alone %.3f ms, copies busy %.3f ms (compute_contention %.3f)\n",
            c->rotation, c->contention_samples, c->cont_copy_alone_s * 1e3, c->cont_copy_busy_s * 1e3,
            c->copy_contention, c->cont_expert_alone_s * 1e3, c->cont_expert_busy_s * 1e3, c->compute_contention);
}

static void write_points(FILE *fp, const char *what, const double *x, const double *y, int n, const char *unit)
{
    fprintf(fp, "# %s (%s: seconds):", what, unit);
    for (int i = 0; i < n; i++)
        fprintf(fp, "%s %.0f:%.4g", i % 4 ? "" : "\n#  ", x[i], y[i]);
    fputc('\n', fp);
}

/* "#   text" in lines under 120 characters (inih reads lines up to 198), split at spaces. */
static void write_wrapped(FILE *fp, const char *text)
{
    while (*text) {
        size_t n = strlen(text);
        if (n > 110) {
            n = 110;
            while (n > 40 && text[n] != ' ')
                n--;
        }
        fprintf(fp, "#   %.*s\n", (int)n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

static void write_comments(FILE *fp, const ms_calib *c, const ms_calib_meta *m)
{
    static const char *const names[] = {"H2D pinned", "D2H pinned", "H2D pageable", "D2H pageable"};
    fprintf(fp, "# Platform profile measured by:\n");
    write_wrapped(fp, m->command);
    if (m->conditions)
        fprintf(fp, "# Conditions: %s\n", m->conditions);
    fprintf(fp, "# Expert: %.0f bytes, %.0f params; dense stand-in: %.0f bytes, %.0f params; %d reps (medians).\n",
            c->expert_bytes, c->expert_params, c->dense_bytes, c->dense_params, c->reps);
    fprintf(fp, "# Fit residuals, (model - measured) / measured, RMS / max:\n");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        fprintf(fp, "#   %-13s latency %.4g s, bw %.4g B/s: %.2f%% / %.2f%% over %d sizes\n", names[k],
                c->copy[k].latency_s, c->copy[k].bw, 100 * c->copy[k].rms_rel, 100 * c->copy[k].max_rel,
                c->copy[k].n);
    const struct { const char *name; const ms_fit_roof *f; } fits[] = {
        {"expert FFN", &c->expert}, {"dense", &c->dense}, {"CPU expert", &c->cpu}};
    char bw[128];
    for (int r = 0; r < 3; r++)
        if (r != 1 || c->dense_params > 0) {
            fmt_roof_bw(fits[r].f, 1, "B/s", bw, sizeof bw);
            fprintf(fp, "#   %-13s launch %.4g s, %s,\n#     %.4g FLOP/s, %d memory-bound: %.2f%% / %.2f%%\n",
                    fits[r].name, fits[r].f->launch_s, bw, fits[r].f->flops, fits[r].f->mem_points,
                    100 * fits[r].f->rms_rel, 100 * fits[r].f->max_rel);
        }
    fprintf(fp, "#   dense predicted by the expert fit: %.2f%% / %.2f%%\n", 100 * c->dense_pred_rms_rel,
            100 * c->dense_pred_max_rel);
    fmt_roof_bw(&c->gpu, 1, "B/s", bw, sizeof bw);
    fprintf(fp, "#   [gpu] joint   launch %.4g s, %s,\n#     %.4g FLOP/s, %d memory-bound of %d: %.2f%% / %.2f%% "
            "(expert %.2f%% / %.2f%%, dense %.2f%% / %.2f%%)\n", c->gpu.launch_s, bw, c->gpu.flops,
            c->gpu.mem_points, c->gpu.n, 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel, 100 * c->gpu_expert_rms_rel,
            100 * c->gpu_expert_max_rel, 100 * c->gpu_dense_rms_rel, 100 * c->gpu_dense_max_rel);
    fprintf(fp, "# Overlap (%u tokens): copy alone %.4g s, with compute %.4g s (x%.3f); expert alone %.4g s, "
            "with a copy %.4g s (x%.3f)\n", c->max_tokens, c->copy_alone_s, c->copy_together_s,
            ms_calib_slowdown(c->copy_together_s, c->copy_alone_s), c->expert_alone_s, c->expert_together_s,
            ms_calib_slowdown(c->expert_together_s, c->expert_alone_s));
    fprintf(fp, "# Contention (1 token, %u experts rotated, medians of >= %d ops): copy alone %.4g s, beside expert "
            "ops %.4g s;\n#   expert op alone %.4g s, beside copies %.4g s\n", c->rotation, c->contention_samples,
            c->cont_copy_alone_s, c->cont_copy_busy_s, c->cont_expert_alone_s, c->cont_expert_busy_s);
    fprintf(fp, "# Measured points:\n");
    for (int k = 0; k < MS_CAL_COPIES; k++)
        write_points(fp, names[k], c->sizes, c->copy_s[k], c->nsizes, "bytes");
    write_points(fp, "expert FFN", c->tokens, c->expert_s, c->ntokens, "tokens");
    write_points(fp, "dense stand-in", c->tokens, c->dense_s, c->ntokens, "tokens");
    write_points(fp, "CPU expert", c->tokens, c->cpu_s, c->ntokens, "tokens");
}

static void write_sections(FILE *fp, const ms_calib *c, const ms_calib_meta *m)
{
    fprintf(fp, "[platform]\nname = %s\ndescription = %s\n\n", m->name, m->description);
    fprintf(fp, "[gpu]\ngpu_mem_bytes = %.0f\nhbm_bw = %.6g\ngpu_flops = %.6g\nlaunch_s = %.6g\n\n",
            m->gpu_mem_bytes, c->gpu.bw, c->gpu.flops, c->gpu.launch_s);
    fprintf(fp, "[link]\nh2d_bw = %.6g\nh2d_latency_s = %.6g\nd2h_bw = %.6g\nd2h_latency_s = %.6g\n"
            "pageable_bw = %.6g\ncopy_engines = 1\n\n", c->copy[MS_CAL_H2D].bw, c->copy[MS_CAL_H2D].latency_s,
            c->copy[MS_CAL_D2H].bw, c->copy[MS_CAL_D2H].latency_s, c->copy[MS_CAL_H2D_PAGEABLE].bw);
    fprintf(fp, "[cpu]\ncpu_cores = %u\ndram_bw = %.6g\ncpu_flops_per_core = %.6g\ncpu_launch_s = %.6g\n\n",
            m->cpu_threads, c->cpu.bw, c->cpu.flops / m->cpu_threads, c->cpu.launch_s);
    fprintf(fp, "[ssd]\nssd_bw = 7GB/s\nssd_latency_s = 8e-5\n\n[policy]\npolicy_op_s = 1e-9\n\n");
    fprintf(fp, "[contention]\ncopy_contention = %.4g\ncompute_contention = %.4g\n\n", c->copy_contention,
            c->compute_contention);
}

static const char *roof_status(const ms_fit_roof *f)
{
    return f->mem_points ? "measured" : "derived";
}

static void write_source(FILE *fp, const ms_calib *c, const ms_calib_meta *m)
{
    const ms_fit_copy *h = &c->copy[MS_CAL_H2D], *d = &c->copy[MS_CAL_D2H], *p = &c->copy[MS_CAL_H2D_PAGEABLE];
    fprintf(fp, "[source]\n");
    fprintf(fp, "gpu_mem_bytes = estimate host MemTotal (the host backend's device memory is host memory)\n");
    fprintf(fp, "hbm_bw = %s joint expert FFN + dense roofline fit, %d memory-bound of %d points%s, resid RMS "
            "%.2f%% max %.2f%%\n", roof_status(&c->gpu), c->gpu.mem_points, c->gpu.n,
            c->gpu.mem_points ? "" : " (none: a lower bound, the crossover set at the least intense point)",
            100 * c->gpu.rms_rel,
            100 * c->gpu.max_rel);
    fprintf(fp, "gpu_flops = measured joint expert FFN + dense roofline fit over tokens %.0f..%.0f, resid RMS %.2f%% "
            "max %.2f%%\n", c->tokens[0], c->tokens[c->ntokens - 1], 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel);
    fprintf(fp, "launch_s = measured intercept of the joint expert FFN + dense roofline fit, resid RMS %.2f%% max "
            "%.2f%%\n", 100 * c->gpu.rms_rel, 100 * c->gpu.max_rel);
    fprintf(fp, "h2d_bw = measured fit of %d pinned H2D sizes (pinned: %s), resid RMS %.2f%% max %.2f%%\n", h->n,
            m->pinned_note, 100 * h->rms_rel, 100 * h->max_rel);
    fprintf(fp, "h2d_latency_s = measured intercept of the pinned H2D fit, resid RMS %.2f%% max %.2f%%\n",
            100 * h->rms_rel, 100 * h->max_rel);
    fprintf(fp, "d2h_bw = measured fit of %d pinned D2H sizes (pinned: %s), resid RMS %.2f%% max %.2f%%\n", d->n,
            m->pinned_note, 100 * d->rms_rel, 100 * d->max_rel);
    fprintf(fp, "d2h_latency_s = measured intercept of the pinned D2H fit, resid RMS %.2f%% max %.2f%%\n",
            100 * d->rms_rel, 100 * d->max_rel);
    fprintf(fp, "pageable_bw = measured fit of %d pageable H2D sizes, resid RMS %.2f%% max %.2f%%\n", p->n,
            100 * p->rms_rel, 100 * p->max_rel);
    fprintf(fp, "copy_engines = derived the backend has one copy stream\n");
    fprintf(fp, "cpu_cores = derived threads of the backend's CPU expert stream\n");
    fprintf(fp, "dram_bw = %s CPU expert roofline fit, %d memory-bound of %d points%s, resid RMS %.2f%% max %.2f%%\n",
            roof_status(&c->cpu), c->cpu.mem_points, c->cpu.n,
            c->cpu.mem_points ? "" : " (none: a lower bound, the crossover set at the least intense point)",
            100 * c->cpu.rms_rel, 100 * c->cpu.max_rel);
    fprintf(fp, "cpu_flops_per_core = measured CPU expert roofline fit / cpu_cores, resid RMS %.2f%% max %.2f%%\n",
            100 * c->cpu.rms_rel, 100 * c->cpu.max_rel);
    fprintf(fp, "cpu_launch_s = measured intercept of the CPU expert roofline fit\n");
    fprintf(fp, "ssd_bw = estimate not measured: NVMe PCIe 4.0 x4 sequential read as in h100-pcie5\n");
    fprintf(fp, "ssd_latency_s = estimate not measured: ~80 us NVMe read latency as in h100-pcie5\n");
    fprintf(fp, "policy_op_s = estimate not measured: ~1 ns of host time per multiply-add of policy work\n");
    fprintf(fp, "copy_contention = measured median copy beside 1-token expert ops / alone - 1 (%.4g / %.4g s), over "
            "%u experts\n", c->cont_copy_busy_s, c->cont_copy_alone_s, c->rotation);
    fprintf(fp, "compute_contention = measured median 1-token expert op beside copies / alone - 1 (%.4g / %.4g s), "
            "over %u experts\n", c->cont_expert_busy_s, c->cont_expert_alone_s, c->rotation);
}

int ms_calib_write_profile(const ms_calib *c, const ms_calib_meta *m, const char *path, ms_err *err)
{
    ms_out *o = ms_out_open("calibrate: --out", path, err);
    if (!o)
        return -1;
    FILE *fp = ms_out_fp(o);
    fprintf(fp, "; written by moesim %s (commit %s)\n", ms_version(), ms_commit());
    write_comments(fp, c, m);
    write_sections(fp, c, m);
    write_source(fp, c, m);
    return ms_out_commit(o, err);
}

static void csv_series(FILE *fp, const char *name, const double *x, const double *y, int n, int by_bytes,
                       double (*eval)(const void *, double), const void *f)
{
    for (int i = 0; i < n; i++) {
        double m = eval(f, x[i]);
        fprintf(fp, "%s,%.0f,%.0f,%.9g,%.9g,%.6f\n", name, by_bytes ? x[i] : 0, by_bytes ? 0 : x[i], y[i], m,
                (m - y[i]) / y[i]);
    }
}

static double eval_copy(const void *f, double x)
{
    return ms_fit_copy_eval(f, x);
}

typedef struct {
    const ms_fit_roof *f;
    double bytes, params;
} roof_ctx;

static double eval_roof(const void *p, double x)
{
    const roof_ctx *r = p;
    return ms_fit_roof_eval(r->f, r->bytes, r->params, x);
}

int ms_calib_write_csv(const ms_calib *c, const char *path, ms_err *err)
{
    static const char *const names[] = {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"};
    ms_out *o = ms_out_open("calibrate: --csv", path, err);
    if (!o)
        return -1;
    FILE *fp = ms_out_fp(o);
    fprintf(fp, "# moesim %s commit %s\n", ms_version(), ms_commit());
    fputs("series,bytes,tokens,seconds,fitted_s,rel_residual\n", fp);
    for (int k = 0; k < MS_CAL_COPIES; k++)
        csv_series(fp, names[k], c->sizes, c->copy_s[k], c->nsizes, 1, eval_copy, &c->copy[k]);
    roof_ctx e = {&c->gpu, c->expert_bytes, c->expert_params};
    roof_ctx d = {&c->gpu, c->dense_bytes, c->dense_params};
    roof_ctx u = {&c->cpu, c->expert_bytes, c->expert_params};
    csv_series(fp, "expert_ffn", c->tokens, c->expert_s, c->ntokens, 0, eval_roof, &e);
    csv_series(fp, "dense", c->tokens, c->dense_s, c->ntokens, 0, eval_roof, &d);
    csv_series(fp, "cpu_expert", c->tokens, c->cpu_s, c->ntokens, 0, eval_roof, &u);
    return ms_out_commit(o, err);
}
