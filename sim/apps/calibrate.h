/* Calibration of a real backend (`moesim calibrate`): the measurement plan,
 * the measurements (through the executor contract only: time_copy,
 * time_expert, submit/wait), the least-squares fits of the timing model
 * (sim/core/timing.h) and the platform profile they make.
 *
 * Fits (GSL), every one weighted by 1/t^2 so that residuals are relative:
 *   copies:   t(bytes) = latency + bytes / bandwidth        (gsl_fit_wlinear)
 *   rooflines t(tokens) = launch + max(bytes / bw, 2 params tokens / flops):
 *             a linear fit per segment: the first k points (memory-bound)
 *             fit a constant, the rest launch + slope x tokens
 *             (gsl_fit_wlinear); the k with the least squared relative
 *             residual whose segments are consistent (each point on its own
 *             side of the crossover) wins; a negative launch is refit as 0
 *             through the origin (gsl_fit_wmul), as is a negative copy
 *             latency.  With k = 0 (no
 *             memory-bound point) the bandwidth is the smallest the data
 *             allow: the crossover at the first point (marked "derived").
 *   the profile's [gpu] roofline: one joint fit of the expert FFN and the
 *             dense stand-in points (ms_fit_roofline_joint: one kernel, two
 *             op sizes, so launch and bandwidth are told apart).
 * Each fit reports the RMS and the largest relative residual. */
#ifndef MS_CALIBRATE_H
#define MS_CALIBRATE_H

#include <stdio.h>

#include "sim/core/err.h"
#include "sim/engine/exec.h"

typedef struct {
    double latency_s, bw;   /* t = latency_s + bytes / bw */
    double rms_rel, max_rel;/* residuals (model - measured) / measured */
    int n;
} ms_fit_copy;

typedef struct {
    double launch_s, bw, flops;
    int mem_points;         /* points in the memory-bound segment (k) */
    double rms_rel, max_rel;
    int n;
} ms_fit_roof;

int ms_fit_copy_line(const double *bytes, const double *secs, int n, ms_fit_copy *out, ms_err *err);
int ms_fit_roofline(const double *tokens, const double *secs, int n, double bytes, double params, ms_fit_roof *out,
                    ms_err *err);
/* One roofline (launch, bw, flops) over points of several op sizes run by
 * the same kernel (the expert FFN and the dense stand-in): point i took
 * secs[i] for tokens[i] rows over bytes[i] / params[i].  Memory-bound
 * points are those below a crossover in arithmetic intensity
 * 2 params tokens / bytes; every candidate crossover gets one weighted
 * multilinear least-squares fit (gsl_multifit_wlinear, weights 1/t^2)
 *   t = launch + bytes / bw [memory-bound] + 2 params tokens / flops [else],
 * inconsistent candidates are dropped, the least RMS relative residual wins
 * (with no memory-bound point, bw puts the crossover at the least intense
 * point).  At least 3 points, at most MS_CALIB_JOINT_MAX. */
#define MS_CALIB_JOINT_MAX 64
int ms_fit_roofline_joint(const double *tokens, const double *bytes, const double *params, const double *secs, int n,
                          ms_fit_roof *out, ms_err *err);
double ms_fit_copy_eval(const ms_fit_copy *f, double bytes);
double ms_fit_roof_eval(const ms_fit_roof *f, double bytes, double params, double tokens);

/* Copy sizes 4 KiB x 4^i up to max_bytes; tokens 1, 2, 3, 4, 6, 8, 12, 16,
 * ... (2^i and 3 x 2^(i-1)) up to and including max_tokens. */
#define MS_CALIB_MAX_POINTS 32
int ms_calib_sizes(double max_bytes, double *sizes);
int ms_calib_tokens(unsigned max_tokens, double *tokens);

typedef enum { MS_CAL_H2D = 0, MS_CAL_D2H, MS_CAL_H2D_PAGEABLE, MS_CAL_D2H_PAGEABLE, MS_CAL_COPIES } ms_cal_copy;

typedef struct {
    /* what was measured */
    double expert_bytes, expert_params, dense_bytes, dense_params;
    unsigned max_tokens;
    int reps;
    int nsizes, ntokens;
    double sizes[MS_CALIB_MAX_POINTS], tokens[MS_CALIB_MAX_POINTS];
    double copy_s[MS_CAL_COPIES][MS_CALIB_MAX_POINTS];
    double expert_s[MS_CALIB_MAX_POINTS], dense_s[MS_CALIB_MAX_POINTS], cpu_s[MS_CALIB_MAX_POINTS];
    /* overlap: one expert copy and one GPU expert op (max_tokens rows) alone, then submitted together */
    double copy_alone_s, expert_alone_s, copy_together_s, expert_together_s;
    /* contention (the profile's [contention]), 1 token: copies with the compute
     * stream kept busy, and expert ops with the copy stream kept busy, over
     * `rotation` experts each (so no op reads weights a recent op cached) */
    uint32_t rotation;
    int contention_samples;
    double cont_copy_alone_s, cont_copy_busy_s, cont_expert_alone_s, cont_expert_busy_s;
    double copy_contention, compute_contention; /* busy / alone - 1, at least 0 */
    /* the host backend times compute ops cold (caches evicted first); the
     * contention probe turns that off (NULL: the backend has no such mode) */
    int (*set_cold)(ms_exec *x, int on);
    /* fits */
    ms_fit_copy copy[MS_CAL_COPIES];
    ms_fit_roof expert, dense, cpu;  /* each series alone (reported) */
    ms_fit_roof gpu;                 /* expert FFN + dense stand-in jointly: the profile's [gpu] roofline */
    double gpu_expert_rms_rel, gpu_expert_max_rel, gpu_dense_rms_rel, gpu_dense_max_rel; /* its residuals per series */
    double dense_pred_rms_rel, dense_pred_max_rel; /* the dense stand-in predicted by the expert fit */
} ms_calib;

/* Experts the contention probe rotates through: enough to cover 2 x 64 MiB
 * (twice a large L3), 2 .. 32.  The backend needs 3 x that many experts and
 * slots in one layer: K stay resident for the expert ops, 2K take copies in
 * turn.  Each phase's op counts are sized from the alone times (so that
 * one stream stays busy through the other's ops even where a copy takes
 * 50x a 1-token expert op, as over PCIe), at most 4096 ops a phase. */
uint32_t ms_calib_rotation(double expert_bytes);

/* Runs the plan on x (a real backend built for one layer of
 * 3 x ms_calib_rotation(c->expert_bytes) experts and as many slots; expert
 * (0,0) and (0,1) serve the single-op probes); fills c->sizes/tokens from
 * max_bytes and max_tokens, then the measurements and the fits.  `progress`
 * (may be NULL) gets one line per measured series. */
int ms_calib_run(ms_exec *x, double max_bytes, int reps, ms_calib *c, FILE *progress, ms_err *err);
/* The fits of c's measurements (ms_calib_run calls it; exposed for tests). */
int ms_calib_fit(ms_calib *c, ms_err *err);

typedef struct {
    const char *name, *description, *command, *pinned_note;
    const char *conditions; /* e.g. the load average while measuring; may be NULL */
    double gpu_mem_bytes;  /* host MemTotal for the host backend */
    unsigned cpu_threads;  /* threads of the CPU expert stream: the profile's cpu_cores */
} ms_calib_meta;

/* Writes the platform profile INI (ms_platform_load's format) with the fits'
 * residuals and the measured points in '#' comments. */
int ms_calib_write_profile(const ms_calib *c, const ms_calib_meta *m, const char *path, ms_err *err);
/* One CSV row per measured point: series,bytes,tokens,seconds,fitted_s,rel_residual. */
int ms_calib_write_csv(const ms_calib *c, const char *path, ms_err *err);
/* A table of measured vs fitted values. */
void ms_calib_print(const ms_calib *c, FILE *out);

#endif
