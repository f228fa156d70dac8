/* The CPython extension module moesim._core (docs/python.md): what its
 * parts share.  Every function here runs with the GIL held; a run holds it
 * throughout (a Python policy's hooks are called from inside ms_run). */
#ifndef MS_PY_EXT_H
#define MS_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sim/core/err.h"

/* The exception classes (module.c): moesim.Error and its subclasses. */
extern PyObject *ms_py_Error, *ms_py_ArgumentError, *ms_py_PolicyError, *ms_py_TraceError;

/* The interpreter's handlers of SIGINT, SIGTERM and SIGHUP.  The checked
 * outputs (sim/core/out.h) install their own on first use (remove the
 * temporaries, then die of the signal); a call that may write saves the
 * interpreter's before and restores them after, so that Ctrl-C between
 * calls is a KeyboardInterrupt again. */
#include <signal.h>
typedef struct {
    struct sigaction old[3];
} ms_py_signals;
void ms_py_signals_save(ms_py_signals *s);
void ms_py_signals_restore(const ms_py_signals *s);

/* 0 and marks a simulation under way, or -1 with moesim.Error when one is
 * (a hook calling back into moesim); the caller clears ms_py_busy after. */
extern int ms_py_busy;
int ms_py_enter(const char *what);

/* Raises cls with the one-line message of err; returns NULL. */
PyObject *ms_py_raise(PyObject *cls, const ms_err *err);

/* Python policies (pypolicy.c). */
int ms_py_policy_init(PyObject *module);
/* register_policy(kind, name, factory, attrs) -> None */
PyObject *ms_py_register_policy(PyObject *self, PyObject *args);
/* Before a run: forget an earlier run's hook error. */
void ms_py_policy_run_begin(void);
/* After a run: when a hook raised, sets a PolicyError naming the hook
 * (its __cause__ the hook's exception, with its traceback) and returns -1. */
int ms_py_policy_run_end(void);
/* After a run in a sweep: when a hook failed, its one line (as the
 * PolicyError's) into msg, the failure forgotten, and 1; else 0. */
int ms_py_policy_failed(char *msg, size_t n);

/* Traces (trace.c): the Reader type; write_trace(path, dims, requests). */
int ms_py_trace_init(PyObject *module);
PyObject *ms_py_write_trace(PyObject *self, PyObject *args);

/* moesim.claims (claims.c): claims(out_dir, write, trace, model, platform,
 * only, requests, seed, sensitivity) -> the JSON text of claims --json */
PyObject *ms_py_claims(PyObject *self, PyObject *args);

/* moesim.sweep (sweep.c): sweep(spec_path, jobs) -> CSV text */
PyObject *ms_py_sweep(PyObject *self, PyObject *args);

#endif
