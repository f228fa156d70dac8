/* CLI helpers of the trace commands (cli_trace_common.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sim/core/out.h"
#include "sim/engine/report.h"
#include "sim/cli/cli_trace_common.h"

/* ---- the v1 note ---- */

#define MAX_NOTED 16
static char *noted[MAX_NOTED];
static int n_noted;

void ms_trace_cli_note_v1(const char *path, const ms_trace_meta *m)
{
    char line[1200];
    if (!ms_trace_v1_note(path, m, line, sizeof line))
        return;
    for (int i = 0; i < n_noted; i++)
        if (!strcmp(noted[i], path))
            return;
    if (n_noted < MAX_NOTED)
        noted[n_noted++] = ms_xstrdup(path);
    fprintf(stderr, "moesim: %s\n", line);
}

void ms_trace_cli_note_v1_file(const char *path)
{
    ms_err err;
    ms_trace_reader *r = ms_reader_open(path, &err);
    if (!r)
        return;
    ms_trace_cli_note_v1(path, ms_reader_meta(r));
    ms_reader_close(r);
}

/* ---- size estimate and free space ---- */

const char *ms_trace_cli_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

int ms_trace_cli_space(const char *what, const char *out, uint64_t estimate, const char *basis, int force,
                       ms_err *err)
{
    char dir[4096], est[32], avail[32];
    ms_out_dir_of(out, dir, sizeof dir);
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0)
        return ms_fail(err, "%s %s: cannot read the free space of %s: %s", what, out, dir, strerror(errno));
    uint64_t free_bytes = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    ms_trace_cli_bytes(estimate, est, sizeof est);
    ms_trace_cli_bytes(free_bytes, avail, sizeof avail);
    if (estimate > free_bytes && !force)
        return ms_fail(err, "%s %s: estimated output %s (%s) is more than the %s free in %s; free some space, "
                       "write elsewhere or pass --force", what, out, est, basis, avail, dir);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "moesim: %s %s: estimated output %s (%s), %s free in %s\n", what, out, est, basis, avail, dir);
    return 0;
}

/* ---- progress on a terminal ---- */

static struct {
    int on, drawn;
    const char *label;
    uint64_t total;
    double last;
} prog;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void draw(void *ctx, uint64_t requests, uint64_t rows, uint64_t bytes)
{
    (void)ctx;
    double t = now_s();
    if (t - prog.last < 0.2)
        return;
    prog.last = t;
    char b[32];
    ms_trace_cli_bytes(bytes, b, sizeof b);
    if (prog.total)
        fprintf(stderr, "\r%s: %llu / %llu requests (%.0f %%), %llu rows, %s ", prog.label,
                (unsigned long long)requests, (unsigned long long)prog.total, 100.0 * (double)requests / (double)prog.total,
                (unsigned long long)rows, b);
    else
        fprintf(stderr, "\r%s: %llu requests, %llu rows, %s ", prog.label, (unsigned long long)requests,
                (unsigned long long)rows, b);
    fflush(stderr);
    prog.drawn = 1;
}

void ms_trace_cli_progress_begin(const char *label, uint64_t total_requests)
{
    if (!isatty(STDERR_FILENO))
        return;
    prog.on = 1;
    prog.drawn = 0;
    prog.label = label;
    prog.total = total_requests;
    prog.last = now_s();
    ms_writer_set_progress(draw, NULL);
}

void ms_trace_cli_progress_end(void)
{
    if (!prog.on)
        return;
    ms_writer_set_progress(NULL, NULL);
    if (prog.drawn)
        fprintf(stderr, "\r%*s\r", 100, "");
    prog.on = prog.drawn = 0;
}

cJSON *ms_trace_cli_provenance(const char *path)
{
    cJSON *p = ms_report_provenance_base();
    ms_report_provenance_add_trace(p, "trace", path);
    return p;
}
