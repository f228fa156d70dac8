/* Policies written in Python (docs/python.md "Policies in Python").
 *
 * A registered Python policy gets one of SLOTS descriptors (ms_policy_desc)
 * whose hooks are the trampolines below; the engine finds it by name
 * through the registry's finder (policies/policy.h ms_policy_set_finder),
 * so the engine and the registry name no Python policy.  Only the hooks the
 * Python class defines are set: a missing hook behaves as a NULL C hook.
 * Each trampoline hands the hook a View (the ms_view_* functions of
 * policies/view.h, valid only during the hook) and the hook's ids.
 *
 * The first exception a hook raises (or a hook's bad return value) is kept
 * with its traceback; every later hook of the run is skipped (a victim
 * search then finds none, which ends the run), and the run raises
 * PolicyError naming the policy and the hook, chained to the exception. */
#include "python/src/ext.h"

#include <float.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policies/policy.h"

#define SLOTS 64

/* ---- the View ---- */

typedef struct {
    PyObject_HEAD
    ms_view *v;         /* NULL outside a hook */
    int writable;       /* a prefetcher's hook: may prefetch and charge */
    unsigned reads;     /* MS_PART_* the policy declared */
    uint32_t L, J, K, D;
    PyObject *gate_buf; /* bytearray of J floats */
    PyObject *gate_arr; /* numpy view of gate_buf */
} View;

static PyTypeObject ViewType;

static int view_live(View *w)
{
    if (w->v)
        return 0;
    PyErr_SetString(ms_py_PolicyError, "the view is valid only inside a hook");
    return -1;
}

/* A whole number >= 0 from o (an int, a NumPy integer: anything with
 * __index__); (unsigned long)-1 with an exception set when it is none. */
static unsigned long as_index(PyObject *o)
{
    PyObject *i = PyNumber_Index(o);
    if (!i)
        return (unsigned long)-1;
    unsigned long x = PyLong_AsUnsignedLong(i);
    Py_DECREF(i);
    return x;
}

static int arg_u32(PyObject *o, uint32_t lim, const char *what, uint32_t *out)
{
    unsigned long x = as_index(o);
    if (x == (unsigned long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a whole number >= 0", what);
        return -1;
    }
    if (x >= lim) {
        PyErr_Format(PyExc_IndexError, "%s %lu out of range [0, %u)", what, x, lim);
        return -1;
    }
    *out = (uint32_t)x;
    return 0;
}

/* (l, e) of a METH_FASTCALL call, checked against L and J. */
static int args_le(View *w, PyObject *const *args, Py_ssize_t n, const char *fn, uint32_t *l, uint32_t *e)
{
    if (view_live(w))
        return -1;
    if (n != 2) {
        PyErr_Format(PyExc_TypeError, "View.%s(l, e) takes 2 arguments (%zd given)", fn, n);
        return -1;
    }
    return arg_u32(args[0], w->L, "layer", l) || arg_u32(args[1], w->J, "expert", e) ? -1 : 0;
}

static int args_l(View *w, PyObject *const *args, Py_ssize_t n, const char *fn, uint32_t *l)
{
    if (view_live(w))
        return -1;
    if (n != 1) {
        PyErr_Format(PyExc_TypeError, "View.%s(l) takes 1 argument (%zd given)", fn, n);
        return -1;
    }
    return arg_u32(args[0], w->L, "layer", l);
}

#define VIEW_LE_BOOL(fn)                                                                       \
    static PyObject *view_##fn(View *w, PyObject *const *args, Py_ssize_t n)                  \
    {                                                                                          \
        uint32_t l, e;                                                                         \
        if (args_le(w, args, n, #fn, &l, &e))                                                  \
            return NULL;                                                                       \
        return PyBool_FromLong(ms_view_##fn(w->v, l, e));                                      \
    }
VIEW_LE_BOOL(resident)
VIEW_LE_BOOL(cached)
VIEW_LE_BOOL(evictable)
VIEW_LE_BOOL(fits)
VIEW_LE_BOOL(queued)
VIEW_LE_BOOL(prefetched_unused)

/* cached (holds a slot) but not yet resident: its copy is in flight */
static PyObject *view_in_flight(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l, e;
    if (args_le(w, args, n, "in_flight", &l, &e))
        return NULL;
    return PyBool_FromLong(ms_view_cached(w->v, l, e) && !ms_view_resident(w->v, l, e));
}

static PyObject *view_next_use(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l, e;
    if (args_le(w, args, n, "next_use", &l, &e))
        return NULL;
    uint64_t s = ms_view_next_use(w->v, l, e);
    if (s == UINT64_MAX)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(s);
}

static PyObject *view_score(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l, e;
    if (args_le(w, args, n, "score", &l, &e))
        return NULL;
    return PyFloat_FromDouble(ms_view_score(w->v, l, e));
}

static int need_writable(View *w, const char *fn)
{
    if (w->writable)
        return 0;
    PyErr_Format(ms_py_PolicyError, "View.%s: only a prefetcher's hooks may act on the engine", fn);
    return -1;
}

static PyObject *view_set_score(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l, e;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "View.set_score(l, e, score) takes 3 arguments");
        return NULL;
    }
    double s = PyFloat_AsDouble(args[2]);
    if (args_le(w, args, 2, "set_score", &l, &e) || (s == -1.0 && PyErr_Occurred()) || need_writable(w, "set_score"))
        return NULL;
    ms_view_set_score(w->v, l, e, s);
    Py_RETURN_NONE;
}

static PyObject *view_prefetch(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l, e;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "View.prefetch(l, e, priority) takes 3 arguments");
        return NULL;
    }
    double p = PyFloat_AsDouble(args[2]);
    if (args_le(w, args, 2, "prefetch", &l, &e) || (p == -1.0 && PyErr_Occurred()) || need_writable(w, "prefetch"))
        return NULL;
    if (!isfinite(p)) {
        PyErr_Format(PyExc_ValueError, "View.prefetch: priority %g is not finite", p);
        return NULL;
    }
    ms_view_prefetch(w->v, l, e, p);
    Py_RETURN_NONE;
}

static PyObject *view_charge(View *w, PyObject *arg, int sync)
{
    double s = PyFloat_AsDouble(arg);
    if (view_live(w) || (s == -1.0 && PyErr_Occurred()) || need_writable(w, sync ? "charge_sync" : "charge_async"))
        return NULL;
    if (!(s >= 0) || !isfinite(s)) {
        PyErr_Format(PyExc_ValueError, "View.charge: %g seconds: expected a finite number >= 0", s);
        return NULL;
    }
    if (sync)
        ms_view_charge_sync(w->v, s);
    else
        ms_view_charge_async(w->v, s);
    Py_RETURN_NONE;
}
static PyObject *view_charge_sync(View *w, PyObject *arg) { return view_charge(w, arg, 1); }
static PyObject *view_charge_async(View *w, PyObject *arg) { return view_charge(w, arg, 0); }

static PyObject *view_clear_prefetches(View *w, PyObject *unused)
{
    (void)unused;
    if (view_live(w) || need_writable(w, "clear_prefetches"))
        return NULL;
    ms_view_clear_prefetches(w->v);
    Py_RETURN_NONE;
}

static PyObject *view_capacity_experts(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l;
    if (args_l(w, args, n, "capacity_experts", &l))
        return NULL;
    return PyFloat_FromDouble(ms_view_capacity_experts(w->v, l));
}

static PyObject *view_expert_bytes(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l;
    if (args_l(w, args, n, "expert_bytes", &l))
        return NULL;
    return PyFloat_FromDouble(ms_view_expert_bytes(w->v, l));
}

/* activated(l) -> [(expert, tokens, weight_sum)] in order of first appearance */
static PyObject *view_activated(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l, na;
    if (args_l(w, args, n, "activated", &l))
        return NULL;
    const ms_act *a = ms_view_activated(w->v, l, &na);
    PyObject *list = PyList_New(na);
    for (uint32_t i = 0; list && i < na; i++) {
        PyObject *t = Py_BuildValue("(IId)", a[i].expert, a[i].tokens, (double)a[i].weight_sum);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

/* gate(l) -> the layer's gate probabilities averaged over the batch, a
 * float32 NumPy array of J over the view's own buffer: no copy, refilled by
 * the next call. */
static PyObject *view_gate(View *w, PyObject *const *args, Py_ssize_t n)
{
    uint32_t l;
    if (args_l(w, args, n, "gate", &l))
        return NULL;
    if (!(w->reads & MS_PART_GATE)) {
        PyErr_SetString(ms_py_PolicyError, "View.gate: the policy must declare reads = {'gate'}");
        return NULL;
    }
    if (!w->gate_arr) {
        PyObject *np = PyImport_ImportModule("numpy");
        if (!np)
            return NULL;
        w->gate_arr = PyObject_CallMethod(np, "frombuffer", "Os", w->gate_buf, "float32");
        Py_DECREF(np);
        if (!w->gate_arr)
            return NULL;
    }
    ms_view_gate_mean(w->v, l, (float *)PyByteArray_AS_STRING(w->gate_buf));
    Py_INCREF(w->gate_arr);
    return w->gate_arr;
}

static PyObject *view_incoming(View *w, PyObject *unused)
{
    (void)unused;
    uint32_t l, e;
    if (view_live(w))
        return NULL;
    if (!ms_view_incoming(w->v, &l, &e))
        Py_RETURN_NONE;
    return Py_BuildValue("(II)", l, e);
}

#define VIEW_SCALAR(fn, conv)                                   \
    static PyObject *view_##fn(View *w, PyObject *unused)       \
    {                                                           \
        (void)unused;                                           \
        if (view_live(w))                                       \
            return NULL;                                        \
        return conv(ms_view_##fn(w->v));                        \
    }
VIEW_SCALAR(now, PyFloat_FromDouble)
VIEW_SCALAR(iteration, PyLong_FromUnsignedLongLong)
VIEW_SCALAR(layer, PyLong_FromUnsignedLong)
VIEW_SCALAR(step, PyLong_FromUnsignedLongLong)
VIEW_SCALAR(batch_rows, PyLong_FromUnsignedLong)
VIEW_SCALAR(link_free, PyFloat_FromDouble)

static PyObject *view_phase(View *w, PyObject *unused)
{
    (void)unused;
    if (view_live(w))
        return NULL;
    return PyUnicode_FromString(ms_view_phase(w->v) == MS_PHASE_PREFILL ? "prefill" : "decode");
}

#define FAST(fn, doc) {#fn, (PyCFunction)(void (*)(void))view_##fn, METH_FASTCALL, doc}
#define NOARG(fn, doc) {#fn, (PyCFunction)(void (*)(void))view_##fn, METH_NOARGS, doc}
#define ONEARG(fn, doc) {#fn, (PyCFunction)(void (*)(void))view_##fn, METH_O, doc}
static PyMethodDef view_methods[] = {
    FAST(resident, "resident(l, e): weights on the GPU, ready now"),
    FAST(cached, "cached(l, e): holds a GPU slot (ready or in flight)"),
    FAST(evictable, "evictable(l, e): may be chosen as a victim now"),
    FAST(in_flight, "in_flight(l, e): holds a slot, its copy not landed yet (cached and not resident)"),
    FAST(fits, "fits(l, e): the cache has room for it without an eviction"),
    FAST(queued, "queued(l, e): a prefetch request is queued"),
    FAST(prefetched_unused, "prefetched_unused(l, e): prefetched and not used since"),
    FAST(next_use, "next_use(l, e): the step of its next use, None when never (needs_future)"),
    FAST(score, "score(l, e): the score board (NaN when never set)"),
    FAST(set_score, "set_score(l, e, score)"),
    FAST(prefetch, "prefetch(l, e, priority): queue a prefetch (prefetchers only)"),
    FAST(capacity_experts, "capacity_experts(l): the cache's capacity in experts of layer l"),
    FAST(expert_bytes, "expert_bytes(l)"),
    FAST(activated, "activated(l): [(expert, tokens, weight_sum)] of the running iteration"),
    FAST(gate, "gate(l): the layer's mean gate probabilities, a float32 NumPy view (reads = {'gate'})"),
    NOARG(incoming, "incoming(): the (l, e) that needs the room, or None"),
    NOARG(now, "now(): the simulated clock in seconds"),
    NOARG(iteration, "iteration(): 0-based, engine order"),
    NOARG(layer, "layer(): the running layer"),
    NOARG(step, "step(): iteration * L + layer"),
    NOARG(phase, "phase(): 'prefill' or 'decode'"),
    NOARG(batch_rows, "batch_rows(): token rows in this iteration"),
    NOARG(link_free, "link_free(): when the H2D engine finishes what it has started"),
    NOARG(clear_prefetches, "clear_prefetches() (prefetchers only)"),
    ONEARG(charge_sync, "charge_sync(seconds): a decision cost that delays GPU compute (prefetchers only)"),
    ONEARG(charge_async, "charge_async(seconds): a cost that delays later prefetches (prefetchers only)"),
    {NULL, NULL, 0, NULL},
};

static PyObject *view_get_L(View *w, void *c) { (void)c; return PyLong_FromUnsignedLong(w->L); }
static PyObject *view_get_J(View *w, void *c) { (void)c; return PyLong_FromUnsignedLong(w->J); }
static PyObject *view_get_K(View *w, void *c) { (void)c; return PyLong_FromUnsignedLong(w->K); }
static PyGetSetDef view_getset[] = {
    {"L", (getter)view_get_L, NULL, "MoE layers", NULL},
    {"J", (getter)view_get_J, NULL, "routed experts per layer", NULL},
    {"K", (getter)view_get_K, NULL, "experts per token row", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static void view_dealloc(View *w)
{
    Py_XDECREF(w->gate_buf);
    Py_XDECREF(w->gate_arr);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyTypeObject ViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "moesim.View",
    .tp_basicsize = sizeof(View),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The engine as a policy sees it (policies/view.h); valid only inside a hook.",
    .tp_methods = view_methods,
    .tp_getset = view_getset,
    .tp_dealloc = (destructor)view_dealloc,
};

/* ---- registered policies ---- */

enum { /* every hook, of the three kinds */
    H_ON_ITERATION, H_ON_LAYER_START, H_ON_GATE, H_BEFORE_LOADS, H_ON_ITERATION_END, H_STATE_BYTES,
    H_ADMIT, H_ON_INSERT, H_ON_ACCESS, H_ON_EVICT, H_VICTIM, H_FULL, H_PROTECTS, H_OVERFLOW,
    H_PLACE, H_N
};
static const char *const hook_names[H_N] = {
    "on_iteration", "on_layer_start", "on_gate", "before_loads", "on_iteration_end", "state_bytes",
    "admit", "on_insert", "on_access", "on_evict", "victim", "full", "protects", "overflow", "place",
};

typedef struct {
    int used;
    char name[64];
    ms_policy_desc desc;
    ms_prefetch_ops pops;
    ms_cache_ops cops;
    ms_sched_ops sops;
    ms_param_spec params[MS_PARAMS_MAX + 1];
    char param_names[MS_PARAMS_MAX][64], param_defs[MS_PARAMS_MAX][64];
    PyObject *factory; /* called with the parameters: the policy object of one run */
    ms_step_rules rules;
} slot;

static slot slots[SLOTS];

typedef struct {
    slot *sl;
    PyObject *obj;
    View *view;
    PyObject *hook[H_N];
} pstate;

/* The running run's first hook failure. */
static struct {
    int failed;
    char who[256];
    PyObject *exc; /* the hook's exception (NULL: a bad return value, message in who) */
} run_ctx;

void ms_py_policy_run_begin(void)
{
    run_ctx.failed = 0;
    run_ctx.who[0] = '\0';
    Py_CLEAR(run_ctx.exc);
}

int ms_py_policy_run_end(void)
{
    if (!run_ctx.failed)
        return 0;
    PyObject *exc = run_ctx.exc;
    run_ctx.exc = NULL;
    run_ctx.failed = 0;
    if (!exc) {
        PyErr_SetString(ms_py_PolicyError, run_ctx.who);
        return -1;
    }
    if (PyErr_GivenExceptionMatches(exc, PyExc_KeyboardInterrupt)) { /* Ctrl-C in a hook stops the run as such */
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
        return -1;
    }
    PyObject *s = PyObject_Str(exc);
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    PyObject *e = PyObject_CallFunction(ms_py_PolicyError, "s", "");
    if (e) {
        PyObject *text = PyUnicode_FromFormat("%s raised %s: %s", run_ctx.who, Py_TYPE(exc)->tp_name,
                                              msg ? msg : "?");
        if (text) {
            PyObject *a = PyTuple_Pack(1, text);
            if (a)
                PyObject_SetAttrString(e, "args", a);
            Py_XDECREF(a);
            Py_DECREF(text);
        }
        PyException_SetCause(e, exc); /* steals exc */
        PyErr_SetObject(ms_py_PolicyError, e);
        Py_DECREF(e);
    } else {
        Py_DECREF(exc);
    }
    Py_XDECREF(s);
    return -1;
}

int ms_py_policy_failed(char *msg, size_t n)
{
    if (!run_ctx.failed)
        return 0;
    PyObject *str = run_ctx.exc ? PyObject_Str(run_ctx.exc) : NULL;
    const char *text = str ? PyUnicode_AsUTF8(str) : NULL;
    if (run_ctx.exc)
        snprintf(msg, n, "%s raised %s: %s", run_ctx.who, Py_TYPE(run_ctx.exc)->tp_name, text ? text : "?");
    else
        snprintf(msg, n, "%s", run_ctx.who);
    Py_XDECREF(str);
    PyErr_Clear();
    ms_py_policy_run_begin();
    return 1;
}

static void fail_hook(const pstate *s, int h)
{
    if (run_ctx.failed) {
        PyErr_Clear();
        return;
    }
    run_ctx.failed = 1;
    snprintf(run_ctx.who, sizeof run_ctx.who, "%s policy '%s': hook %s", ms_policy_kind_name(s->sl->desc.kind),
             s->sl->name, hook_names[h]);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    run_ctx.exc = value;
}

/* A hook's bad return value: the run fails with this message. */
static void fail_value(const pstate *s, int h, const char *fmt, ...)
{
    if (run_ctx.failed)
        return;
    run_ctx.failed = 1;
    int n = snprintf(run_ctx.who, sizeof run_ctx.who, "%s policy '%s': hook %s ",
                     ms_policy_kind_name(s->sl->desc.kind), s->sl->name, hook_names[h]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof run_ctx.who)
        vsnprintf(run_ctx.who + n, sizeof run_ctx.who - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Calls hook h with (view, a, b) (na of a, b used); NULL when skipped or failed. */
static PyObject *call(pstate *s, int h, const ms_view *v, int writable, int na, uint32_t a, uint32_t b)
{
    if (run_ctx.failed)
        return NULL;
    PyObject *argv[4];
    argv[0] = (PyObject *)s->view;
    int n = 1;
    if (na >= 1)
        argv[n++] = PyLong_FromUnsignedLong(a);
    if (na >= 2)
        argv[n++] = PyLong_FromUnsignedLong(b);
    s->view->v = (ms_view *)v;
    s->view->writable = writable;
    PyObject *r = PyObject_Vectorcall(s->hook[h], argv, (size_t)n, NULL);
    s->view->v = NULL;
    for (int i = 1; i < n; i++)
        Py_XDECREF(argv[i]);
    if (!r)
        fail_hook(s, h);
    return r;
}

static void call_void(pstate *s, int h, const ms_view *v, int writable, int na, uint32_t a, uint32_t b)
{
    PyObject *r = call(s, h, v, writable, na, a, b);
    Py_XDECREF(r);
}

static int call_bool(pstate *s, int h, const ms_view *v, uint32_t a, uint32_t b, int dflt)
{
    PyObject *r = call(s, h, v, 0, 2, a, b);
    if (!r)
        return dflt;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (t < 0) {
        fail_hook(s, h);
        return dflt;
    }
    return t;
}

/* prefetch hooks */
static void p_on_iteration(void *st, ms_view *v) { call_void(st, H_ON_ITERATION, v, 1, 0, 0, 0); }
static void p_on_layer_start(void *st, ms_view *v, uint32_t l) { call_void(st, H_ON_LAYER_START, v, 1, 1, l, 0); }
static void p_on_gate(void *st, ms_view *v, uint32_t l) { call_void(st, H_ON_GATE, v, 1, 1, l, 0); }
static void p_before_loads(void *st, ms_view *v, uint32_t l) { call_void(st, H_BEFORE_LOADS, v, 1, 1, l, 0); }
static void p_on_iteration_end(void *st, ms_view *v) { call_void(st, H_ON_ITERATION_END, v, 1, 0, 0, 0); }
static double p_state_bytes(const void *st)
{
    pstate *s = (pstate *)st;
    if (run_ctx.failed)
        return 0;
    PyObject *r = PyObject_CallNoArgs(s->hook[H_STATE_BYTES]);
    double x = r ? PyFloat_AsDouble(r) : -1;
    Py_XDECREF(r);
    if (!r || (x == -1 && PyErr_Occurred())) {
        fail_hook(s, H_STATE_BYTES);
        return 0;
    }
    return x;
}

/* cache hooks */
static int c_admit(void *st, const ms_view *v, uint32_t l, uint32_t e) { return call_bool(st, H_ADMIT, v, l, e, 1); }
static void c_on_insert(void *st, const ms_view *v, uint32_t l, uint32_t e) { call_void(st, H_ON_INSERT, v, 0, 2, l, e); }
static void c_on_access(void *st, const ms_view *v, uint32_t l, uint32_t e) { call_void(st, H_ON_ACCESS, v, 0, 2, l, e); }
static void c_on_evict(void *st, const ms_view *v, uint32_t l, uint32_t e) { call_void(st, H_ON_EVICT, v, 0, 2, l, e); }
static void c_on_gate(void *st, const ms_view *v, uint32_t l) { call_void(st, H_ON_GATE, v, 0, 1, l, 0); }
static int c_full(void *st, const ms_view *v, uint32_t l, uint32_t e) { return call_bool(st, H_FULL, v, l, e, 0); }
static int c_protects(void *st, const ms_view *v, uint32_t l, uint32_t e) { return call_bool(st, H_PROTECTS, v, l, e, 0); }
static int c_overflow(void *st, const ms_view *v, uint32_t l, uint32_t e) { return call_bool(st, H_OVERFLOW, v, l, e, 0); }
static void c_step_rules(const void *st, ms_step_rules *out) { *out = ((const pstate *)st)->sl->rules; }

static int c_victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    pstate *s = st;
    PyObject *r = call(s, H_VICTIM, v, 0, 0, 0, 0);
    if (!r || r == Py_None) {
        Py_XDECREF(r);
        return 0;
    }
    unsigned long a = 0, b = 0;
    int ok = (PyTuple_Check(r) || PyList_Check(r)) && PySequence_Fast_GET_SIZE(r) == 2;
    if (ok) {
        a = as_index(PySequence_Fast_GET_ITEM(r, 0));
        b = as_index(PySequence_Fast_GET_ITEM(r, 1));
        ok = !PyErr_Occurred();
        PyErr_Clear();
    }
    Py_DECREF(r);
    if (!ok) {
        fail_value(s, H_VICTIM, "returned something other than None or (layer, expert), two whole numbers");
        return 0;
    }
    if (a >= s->view->L || b >= s->view->J || !ms_view_evictable(v, (uint32_t)a, (uint32_t)b)) {
        fail_value(s, H_VICTIM, "returned (%lu, %lu), which is not evictable now", a, b);
        return 0;
    }
    *l = (uint32_t)a;
    *e = (uint32_t)b;
    return 1;
}

/* scheduler hook: place(view, l, acts, cached) -> a sequence of n truth values (True: on the CPU) */
static void s_place(void *st, ms_view *v, uint32_t l, uint32_t n, const ms_act *acts, const uint8_t *cached,
                    uint8_t *on_cpu)
{
    pstate *s = st;
    if (run_ctx.failed)
        return;
    PyObject *la = PyList_New(n), *lc = PyList_New(n);
    for (uint32_t i = 0; la && lc && i < n; i++) {
        PyList_SET_ITEM(la, i, Py_BuildValue("(IId)", acts[i].expert, acts[i].tokens, (double)acts[i].weight_sum));
        PyList_SET_ITEM(lc, i, PyBool_FromLong(cached[i]));
    }
    PyObject *pl = PyLong_FromUnsignedLong(l);
    PyObject *argv[4] = {(PyObject *)s->view, pl, la, lc};
    PyObject *r = NULL;
    if (la && lc && pl && !PyErr_Occurred()) {
        s->view->v = v;
        s->view->writable = 0;
        r = PyObject_Vectorcall(s->hook[H_PLACE], argv, 4, NULL);
        s->view->v = NULL;
    }
    Py_XDECREF(la);
    Py_XDECREF(lc);
    Py_XDECREF(pl);
    if (!r) {
        fail_hook(s, H_PLACE);
        return;
    }
    PyObject *seq = PySequence_Fast(r, "");
    Py_DECREF(r);
    if (!seq || PySequence_Fast_GET_SIZE(seq) != (Py_ssize_t)n) {
        PyErr_Clear();
        Py_XDECREF(seq);
        fail_value(s, H_PLACE, "returned something other than a sequence of %u truth values", n);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        int t = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seq, i));
        if (t < 0) {
            fail_hook(s, H_PLACE);
            break;
        }
        on_cpu[i] = (uint8_t)t;
    }
    Py_DECREF(seq);
}

static void p_destroy(void *st)
{
    pstate *s = st;
    if (!s)
        return;
    for (int h = 0; h < H_N; h++)
        Py_XDECREF(s->hook[h]);
    Py_XDECREF(s->obj);
    Py_XDECREF(s->view);
    PyMem_Free(s);
}

static PyObject *env_dict(const ms_policy_env *env)
{
    const ms_trace_meta *m = env->meta;
    return Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:K,s:s,s:s,s:s,s:d}", "L", m->L, "J", m->J, "K", m->K, "embed_dim",
                         m->embed_dim, "distance", env->distance, "seed", (unsigned long long)env->seed, "trace",
                         env->trace_path ? env->trace_path : "", "model", env->model ? env->model->name : "",
                         "topk_fill", env->topk_fill == MS_FILL_EVEN ? "even" : "zero", "train", env->split.frac);
}

/* The policy object of one run: factory(**params), then its create(env)
 * when it has one; its hooks bound once. */
static void *slot_create(int i, const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    slot *sl = &slots[i];
    pstate *s = PyMem_Calloc(1, sizeof *s);
    if (!s) {
        ms_fail(err, "out of memory");
        return NULL;
    }
    s->sl = sl;
    int h_create = -1;
    PyObject *kw = PyDict_New();
    for (int k = 0; kw && k < p->n; k++) {
        double x = p->num[k];
        PyObject *val = p->spec[k]->type == MS_PARAM_INT ? PyLong_FromDouble(x) : PyFloat_FromDouble(x);
        if (!val || PyDict_SetItemString(kw, p->spec[k]->name, val))
            Py_CLEAR(kw);
        Py_XDECREF(val);
    }
    PyObject *noargs = PyTuple_New(0);
    s->obj = kw && noargs ? PyObject_Call(sl->factory, noargs, kw) : NULL;
    Py_XDECREF(noargs);
    Py_XDECREF(kw);
    s->view = PyObject_New(View, &ViewType);
    if (s->view) {
        s->view->v = NULL;
        s->view->gate_arr = NULL;
        s->view->L = env->meta->L;
        s->view->J = env->meta->J;
        s->view->K = env->meta->K;
        s->view->D = env->meta->embed_dim;
        s->view->reads = sl->desc.reads;
        s->view->gate_buf = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(env->meta->J * sizeof(float)));
    }
    if (!s->obj || !s->view || !s->view->gate_buf)
        goto fail;
    for (int h = 0; h < H_N; h++) {
        if (PyObject_HasAttrString(s->obj, hook_names[h]) && !(s->hook[h] = PyObject_GetAttrString(s->obj, hook_names[h])))
            goto fail;
    }
    if (PyObject_HasAttrString(s->obj, "create")) {
        h_create = 0;
        PyObject *ed = env_dict(env);
        PyObject *r = ed ? PyObject_CallMethod(s->obj, "create", "O", ed) : NULL;
        Py_XDECREF(ed);
        if (!r)
            goto fail;
        Py_DECREF(r);
    }
    return s;
fail:
    if (!run_ctx.failed) {
        run_ctx.failed = 1;
        snprintf(run_ctx.who, sizeof run_ctx.who, "%s policy '%s': %s", ms_policy_kind_name(sl->desc.kind), sl->name,
                 h_create == 0 ? "hook create" : "creating the policy object");
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value && tb)
            PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        run_ctx.exc = value;
    }
    PyErr_Clear();
    p_destroy(s);
    ms_fail(err, "%s failed", run_ctx.who);
    return NULL;
}

/* create_A_B is slot A * 8 + B's create hook (the hook has no other way
 * to know its descriptor). */
#define CREATE_FN(a, b)                                                                          \
    static void *create_##a##_##b(const ms_params *p, const ms_policy_env *env, ms_err *err)     \
    {                                                                                            \
        return slot_create((a) * 8 + (b), p, env, err);                                          \
    }
#define C8(a) CREATE_FN(a, 0) CREATE_FN(a, 1) CREATE_FN(a, 2) CREATE_FN(a, 3) CREATE_FN(a, 4) CREATE_FN(a, 5) \
    CREATE_FN(a, 6) CREATE_FN(a, 7)
C8(0) C8(1) C8(2) C8(3) C8(4) C8(5) C8(6) C8(7)
#define R8(a) create_##a##_0, create_##a##_1, create_##a##_2, create_##a##_3, create_##a##_4, create_##a##_5, \
    create_##a##_6, create_##a##_7
static void *(*const creates[SLOTS])(const ms_params *, const ms_policy_env *, ms_err *) = {
    R8(0), R8(1), R8(2), R8(3), R8(4), R8(5), R8(6), R8(7)};

static const ms_policy_desc *find_py(ms_policy_kind kind, const char *name)
{
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].used && slots[i].desc.kind == kind && !strcmp(slots[i].name, name))
            return &slots[i].desc;
    return NULL;
}

static int has_hook(PyObject *hooks, int h)
{
    PyObject *n = PyUnicode_FromString(hook_names[h]);
    int r = n ? PySequence_Contains(hooks, n) : -1;
    Py_XDECREF(n);
    return r > 0;
}

/* attrs: {hooks: (names...), params: [(name, "int"|"float", default text)],
 *         reads: int, needs_future, needs_weights, uses_distance, uses_training: bool,
 *         order, protect: int, cpu_hits_untouched: bool, summary: str} */
static int fill_slot(slot *sl, ms_policy_kind kind, PyObject *attrs)
{
    PyObject *hooks = PyDict_GetItemString(attrs, "hooks"), *params = PyDict_GetItemString(attrs, "params");
    if (!hooks || !params || !PyList_Check(params)) {
        PyErr_SetString(PyExc_TypeError, "register_policy: attrs needs hooks and params");
        return -1;
    }
    Py_ssize_t np = PyList_GET_SIZE(params);
    if (np > MS_PARAMS_MAX) {
        PyErr_Format(ms_py_ArgumentError, "policy '%s': more than %d parameters", sl->name, MS_PARAMS_MAX);
        return -1;
    }
    memset(sl->params, 0, sizeof sl->params);
    for (Py_ssize_t k = 0; k < np; k++) {
        const char *name, *type, *def;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(params, k), "sss", &name, &type, &def))
            return -1;
        snprintf(sl->param_names[k], sizeof sl->param_names[k], "%s", name);
        snprintf(sl->param_defs[k], sizeof sl->param_defs[k], "%s", def);
        int is_int = !strcmp(type, "int");
        sl->params[k] = (ms_param_spec){sl->param_names[k], is_int ? MS_PARAM_INT : MS_PARAM_DOUBLE, sl->param_defs[k],
                                        is_int ? -9007199254740992.0 : -DBL_MAX, is_int ? 9007199254740992.0 : DBL_MAX,
                                        NULL, "a parameter of the Python policy"};
    }
#define FLAG(key) (PyDict_GetItemString(attrs, key) ? PyLong_AsLong(PyDict_GetItemString(attrs, key)) : 0)
    ms_policy_desc *d = &sl->desc;
    memset(d, 0, sizeof *d);
    d->name = sl->name;
    d->kind = kind;
    d->summary = "a policy written in Python";
    d->params = sl->params;
    d->needs_future = (int)FLAG("needs_future");
    d->needs_weights = (int)FLAG("needs_weights");
    d->reads = (unsigned)FLAG("reads");
    d->uses_distance = (int)FLAG("uses_distance");
    d->uses_training = (int)FLAG("uses_training");
    sl->rules = (ms_step_rules){(ms_step_order)FLAG("order"), (ms_step_protect)FLAG("protect"),
                                (int)FLAG("cpu_hits_untouched"), (int)FLAG("lookup_at_turn")};
#undef FLAG
    if (PyErr_Occurred())
        return -1;
    int i = (int)(sl - slots);
    memset(&sl->pops, 0, sizeof sl->pops);
    memset(&sl->cops, 0, sizeof sl->cops);
    memset(&sl->sops, 0, sizeof sl->sops);
    if (kind == MS_KIND_PREFETCH) {
        sl->pops = (ms_prefetch_ops){.create = creates[i], .destroy = p_destroy};
        sl->pops.on_iteration = has_hook(hooks, H_ON_ITERATION) ? p_on_iteration : NULL;
        sl->pops.on_layer_start = has_hook(hooks, H_ON_LAYER_START) ? p_on_layer_start : NULL;
        sl->pops.on_gate = has_hook(hooks, H_ON_GATE) ? p_on_gate : NULL;
        sl->pops.before_loads = has_hook(hooks, H_BEFORE_LOADS) ? p_before_loads : NULL;
        sl->pops.on_iteration_end = has_hook(hooks, H_ON_ITERATION_END) ? p_on_iteration_end : NULL;
        sl->pops.state_bytes = has_hook(hooks, H_STATE_BYTES) ? p_state_bytes : NULL;
        d->prefetch = &sl->pops;
    } else if (kind == MS_KIND_CACHE) {
        sl->cops = (ms_cache_ops){.create = creates[i], .destroy = p_destroy, .step_rules = c_step_rules};
        sl->cops.admit = has_hook(hooks, H_ADMIT) ? c_admit : NULL;
        sl->cops.on_insert = has_hook(hooks, H_ON_INSERT) ? c_on_insert : NULL;
        sl->cops.on_access = has_hook(hooks, H_ON_ACCESS) ? c_on_access : NULL;
        sl->cops.on_evict = has_hook(hooks, H_ON_EVICT) ? c_on_evict : NULL;
        sl->cops.on_gate = has_hook(hooks, H_ON_GATE) ? c_on_gate : NULL;
        sl->cops.victim = c_victim; /* required: the Python layer checks it */
        sl->cops.full = has_hook(hooks, H_FULL) ? c_full : NULL;
        sl->cops.protects = has_hook(hooks, H_PROTECTS) ? c_protects : NULL;
        sl->cops.overflow = has_hook(hooks, H_OVERFLOW) ? c_overflow : NULL;
        d->cache = &sl->cops;
    } else {
        sl->sops = (ms_sched_ops){.create = creates[i], .destroy = p_destroy, .place = s_place};
        d->sched = &sl->sops;
    }
    return 0;
}

PyObject *ms_py_register_policy(PyObject *self, PyObject *args)
{
    (void)self;
    int kind;
    const char *name;
    PyObject *factory, *attrs;
    if (!PyArg_ParseTuple(args, "isOO!", &kind, &name, &factory, &PyDict_Type, &attrs))
        return NULL;
    if (kind < MS_KIND_PREFETCH || kind > MS_KIND_SCHED) {
        PyErr_Format(ms_py_ArgumentError, "register_policy: kind %d", kind);
        return NULL;
    }
    if (!*name || strlen(name) >= sizeof slots[0].name || strpbrk(name, ":,= ")) {
        PyErr_Format(ms_py_ArgumentError, "policy name '%s': expected 1 to 63 characters without ':', ',', '=' or spaces",
                     name);
        return NULL;
    }
    for (int i = 0; ms_policy_registry[i]; i++)
        if ((int)ms_policy_registry[i]->kind == kind && !strcmp(ms_policy_registry[i]->name, name)) {
            PyErr_Format(ms_py_ArgumentError, "policy name '%s': a built-in %s policy has it", name,
                         ms_policy_kind_name(kind));
            return NULL;
        }
    slot *sl = (slot *)find_py(kind, name), *free_sl = NULL;
    if (sl)
        sl = (slot *)((char *)sl - offsetof(slot, desc));
    for (int i = 0; !sl && !free_sl && i < SLOTS; i++)
        if (!slots[i].used)
            free_sl = &slots[i];
    if (!sl && !free_sl) {
        PyErr_Format(ms_py_ArgumentError, "policy '%s': more than %d Python policies registered", name, SLOTS);
        return NULL;
    }
    slot *t = sl ? sl : free_sl;
    slot saved = *t;
    snprintf(t->name, sizeof t->name, "%s", name);
    if (fill_slot(t, kind, attrs)) {
        *t = saved;
        return NULL;
    }
    Py_INCREF(factory);
    Py_XDECREF(saved.used ? saved.factory : NULL);
    t->factory = factory;
    t->used = 1;
    Py_RETURN_NONE;
}

int ms_py_policy_init(PyObject *module)
{
    if (PyType_Ready(&ViewType))
        return -1;
    Py_INCREF(&ViewType);
    if (PyModule_AddObject(module, "View", (PyObject *)&ViewType))
        return -1;
    ms_policy_set_finder(find_py);
    return 0;
}
