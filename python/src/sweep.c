/* moesim.sweep: every point of a sweep spec (sim/apps/sweep_spec.h), run in
 * worker processes as `moesim sweep` runs them (sim/apps/sweep_pool.h), the
 * rows (sim/apps/sweep_csv.h) collected in point order into one text the
 * Python layer reads as a DataFrame; no output file is written. */
#include "python/src/ext.h"

#include <stdlib.h>
#include <string.h>

#include "sim/apps/sweep_csv.h"
#include "sim/apps/sweep_pool.h"
#include "sim/apps/sweep_spec.h"
#include "sim/core/out.h"
#include "traces/format/trace_cache.h"

typedef struct {
    const ms_sweep_spec *spec;
    char *text;
    size_t len, cap;
} sweep_ctx;

static void worker_init(void *ctx)
{
    sweep_ctx *c = ctx;
    ms_trace_cache_enable(ms_sweep_trace_cache(c->spec));
}

/* One point's row, as `moesim sweep` makes it (sim/cli/cli_sweep.c run_job). */
static char *run_job(void *ctx, uint64_t job)
{
    sweep_ctx *c = ctx;
    const ms_sweep_point *pt = ms_sweep_get(c->spec, job);
    ms_run_config cfg;
    ms_platform plat;
    char trace[4096];
    ms_sweep_config(c->spec, pt, &cfg, &plat, trace, sizeof trace);
    ms_metrics m;
    ms_err err;
    ms_py_policy_run_begin();
    int rc = ms_run(&cfg, &m, &err);
    if (ms_py_policy_failed(err.msg, sizeof err.msg)) { /* a Python hook raised: the point failed */
        ms_trace_digest taken = m.trace;
        if (!rc)
            ms_metrics_free(&m);
        return ms_sweep_csv_row(job, pt, &cfg, &taken, NULL, err.msg);
    }
    if (rc)
        return ms_sweep_csv_row(job, pt, &cfg, &m.trace, NULL, err.msg);
    char *row = ms_sweep_csv_row(job, pt, &cfg, &m.trace, &m, NULL);
    ms_metrics_free(&m);
    return row;
}

static void append(sweep_ctx *c, const char *s, size_t n)
{
    if (c->len + n + 1 > c->cap) {
        c->cap = (c->len + n + 1) * 2;
        c->text = ms_xrealloc(c->text, c->cap, 1);
    }
    memcpy(c->text + c->len, s, n);
    c->len += n;
    c->text[c->len] = '\0';
}

static int sink_row(void *ctx, uint64_t job, const char *row, size_t len, ms_err *err)
{
    (void)job;
    (void)err;
    append(ctx, row, len);
    return 0;
}

/* sweep(spec_path, jobs) -> CSV text (header and one row per point) */
PyObject *ms_py_sweep(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path;
    int jobs;
    if (!PyArg_ParseTuple(args, "si", &path, &jobs))
        return NULL;
    if (jobs < 1 || jobs > 1024) {
        PyErr_Format(ms_py_ArgumentError, "sweep: jobs=%d: expected a whole number in [1, 1024]", jobs);
        return NULL;
    }
    ms_err err;
    if (ms_py_enter("moesim.sweep"))
        return NULL;
    ms_out_inputs_clear();
    ms_out_input(path);
    ms_sweep_spec *spec = ms_sweep_load(path, &err);
    if (!spec) {
        ms_py_busy = 0;
        return ms_py_raise(ms_py_Error, &err);
    }
    sweep_ctx c = {.spec = spec};
    const char *header = ms_sweep_csv_header();
    append(&c, header, strlen(header));
    ms_sweep_pool pool = {.ctx = &c, .init = worker_init, .job = run_job, .sink = sink_row};
    ms_py_signals sigs;
    ms_py_signals_save(&sigs);
    int rc = ms_sweep_pool_run(&pool, ms_sweep_npoints(spec), jobs, &err);
    ms_py_signals_restore(&sigs);
    ms_py_busy = 0;
    ms_trace_cache_enable(0);
    ms_sweep_free(spec);
    PyObject *out = rc ? ms_py_raise(ms_py_Error, &err) : PyUnicode_FromStringAndSize(c.text, (Py_ssize_t)c.len);
    free(c.text);
    return out;
}
