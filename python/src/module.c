/* moesim._core: the C side of the Python package (docs/python.md).  The
 * Python layer (python/moesim/) checks argument types and turns every run
 * key into its text; this file validates the text with the run-key table
 * (sim/engine/runkeys.h) as `moesim run` does, loads the profiles, calls
 * ms_run and hands back the JSON report of `run --json`. */
#include "python/src/ext.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/core/out.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"
#include "sim/core/version.h"
#include "sim/engine/engine.h"
#include "sim/engine/report.h"
#include "sim/engine/runkeys.h"

PyObject *ms_py_Error, *ms_py_ArgumentError, *ms_py_PolicyError, *ms_py_TraceError;

static const int handled_signals[3] = {SIGINT, SIGTERM, SIGHUP};

void ms_py_signals_save(ms_py_signals *s)
{
    for (int i = 0; i < 3; i++)
        sigaction(handled_signals[i], NULL, &s->old[i]);
}

void ms_py_signals_restore(const ms_py_signals *s)
{
    for (int i = 0; i < 3; i++)
        sigaction(handled_signals[i], &s->old[i], NULL);
}

PyObject *ms_py_raise(PyObject *cls, const ms_err *err)
{
    PyErr_SetString(cls, err->msg);
    return NULL;
}

/* ---- listings ---- */

static PyObject *param_dict(const ms_param_spec *p)
{
    PyObject *d = PyDict_New();
    for (int i = 0; d && p && p[i].name; i++) {
        PyObject *v = p[i].type == MS_PARAM_ENUM
                          ? Py_BuildValue("{s:s,s:s,s:s,s:s}", "type", "enum", "default", p[i].def, "choices",
                                          p[i].choices, "help", p[i].help)
                          : Py_BuildValue("{s:s,s:s,s:d,s:d,s:s}", "type", p[i].type == MS_PARAM_INT ? "int" : "float",
                                          "default", p[i].def, "min", p[i].min, "max", p[i].max, "help", p[i].help);
        if (!v || PyDict_SetItemString(d, p[i].name, v)) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* policies() -> [{name, kind, summary, params}] in registry order */
static PyObject *py_policies(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *list = PyList_New(0);
    for (int i = 0; list && ms_policy_registry[i]; i++) {
        const ms_policy_desc *d = ms_policy_registry[i];
        PyObject *params = param_dict(d->params);
        PyObject *o = params ? Py_BuildValue("{s:s,s:s,s:s,s:N}", "name", d->name, "kind",
                                             ms_policy_kind_name(d->kind), "summary", d->summary, "params", params)
                             : NULL;
        if (!o || PyList_Append(list, o)) {
            Py_XDECREF(o);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(o);
    }
    return list;
}

static PyObject *model_info(const ms_model *m)
{
    return Py_BuildValue("{s:s,s:s,s:I,s:I,s:I,s:I,s:s,s:K,s:K,s:s,s:s}", "name", m->name, "description",
                         m->description, "L", m->moe_layers, "J", m->experts, "K", m->top_k, "shared_experts",
                         m->shared_experts, "dtype", m->dtype, "expert_params",
                         (unsigned long long)m->expert_params, "expert_bytes", (unsigned long long)m->expert_bytes,
                         "file", m->file, "sha256", m->sha256);
}

static PyObject *platform_info(const ms_platform *p)
{
    return Py_BuildValue("{s:s,s:s,s:d,s:d,s:d,s:I,s:s,s:s,s:s}", "name", p->name, "description", p->description,
                         "gpu_mem_bytes", p->gpu_mem_bytes, "h2d_bw", p->h2d_bw, "gpu_flops", p->gpu_flops, "gpus",
                         p->gpus, "framework", p->framework, "file", p->file, "sha256", p->sha256);
}

/* profiles(kind) -> [dict], kind "models" or "platforms"; a profile that
 * does not load raises (a shipped profile is checked by the tests). */
static PyObject *py_profiles(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind;
    if (!PyArg_ParseTuple(args, "s", &kind))
        return NULL;
    int models = !strcmp(kind, "models");
    if (!models && strcmp(kind, "platforms")) {
        PyErr_Format(ms_py_ArgumentError, "profiles: kind '%s': expected models or platforms", kind);
        return NULL;
    }
    char **names;
    int n;
    ms_err err;
    if (ms_profile_list(kind, &names, &n, &err))
        return ms_py_raise(ms_py_Error, &err);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        ms_model mo;
        ms_platform pl;
        PyObject *o = NULL;
        if (models ? ms_model_load(names[i], &mo, &err) : ms_platform_load(names[i], &pl, &err))
            ms_py_raise(ms_py_Error, &err);
        else
            o = models ? model_info(&mo) : platform_info(&pl);
        if (!o || PyList_Append(list, o))
            Py_CLEAR(list);
        Py_XDECREF(o);
    }
    ms_profile_list_free(names, n);
    return list;
}

/* runkeys() -> [(key, kind, default, help)] (sim/engine/runkeys.h) */
static PyObject *py_runkeys(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    static const char *const kinds[] = {"path", "model",    "platform", "policy",    "int",      "bytes",
                                        "gb",   "positive", "train",    "enum",      "placement", "framework"};
    PyObject *list = PyList_New(MS_RK_N);
    for (int i = 0; list && i < MS_RK_N; i++) {
        const ms_runkey *k = &ms_runkeys[i];
        PyObject *t = Py_BuildValue("(sszs)", k->key, kinds[k->kind], k->def, k->help);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

/* ---- run ---- */

#define MAX_SETS 32

/* What a run's keys gave beyond ms_run_config (the profiles and their
 * overrides, the framework), as ms_cli_load_profiles takes them. */
typedef struct {
    const char *model, *platform, *framework;
    ms_profile_set model_sets[MAX_SETS], platform_sets[MAX_SETS];
    int n_model_sets, n_platform_sets;
    int caps;
    char h2d[64];
    ms_model mo;
    ms_platform pl;
    ms_framework fw;
} run_extra;

static int key_error(const char *key, const char *val, const char *why)
{
    PyErr_Format(ms_py_ArgumentError, "run: %s=%s: %s", key, val, why);
    return -1;
}

/* One run key from its text, as `moesim run`'s flag of the same name
 * (ms_runkey_apply, sim/engine/runkeys.h): 0, or -1 with ArgumentError. */
static int set_key(ms_run_config *cfg, run_extra *x, int id, const char *val)
{
    const ms_runkey *k = &ms_runkeys[id];
    double v;
    char why[128];
    int rc = ms_runkey_apply(cfg, id, val, &v, why, sizeof why);
    if (rc < 0)
        return key_error(k->key, val, why);
    if (id == MS_RK_CACHE_EXPERTS || id == MS_RK_CACHE_BYTES || id == MS_RK_CACHE_GB)
        x->caps++;
    if (rc == 0)
        return 0;
    switch ((ms_runkey_id)id) { /* the keys that are not fields of ms_run_config */
    case MS_RK_MODEL: x->model = strcmp(val, "none") ? val : NULL; break;
    case MS_RK_PLATFORM: x->platform = val; break;
    case MS_RK_FRAMEWORK: x->framework = val; break;
    case MS_RK_H2D_GBPS:
        if (x->n_platform_sets == MAX_SETS)
            return key_error(k->key, val, "too many platform overrides");
        snprintf(x->h2d, sizeof x->h2d, "%.17gGB/s", v);
        x->platform_sets[x->n_platform_sets++] = (ms_profile_set){"h2d_bw", x->h2d, NULL};
        break;
    default:
        break;
    }
    return 0;
}

/* One "model.KEY" / "platform.KEY" override (the Python layer splits the
 * dict's keys): 0, or -1 with ArgumentError. */
static int add_set(run_extra *x, const char *key, const char *val)
{
    int is_model = !strncmp(key, "model.", 6), is_platform = !strncmp(key, "platform.", 9);
    if (!is_model && !is_platform)
        return key_error("set", key, "expected a key platform.KEY or model.KEY");
    ms_profile_set *sets = is_model ? x->model_sets : x->platform_sets;
    int *n = is_model ? &x->n_model_sets : &x->n_platform_sets;
    const char *bare = key + (is_model ? 6 : 9);
    if (!*bare)
        return key_error("set", key, "expected a key platform.KEY or model.KEY");
    if (*n == MAX_SETS)
        return key_error("set", key, "too many overrides of one profile");
    sets[(*n)++] = (ms_profile_set){bare, val, NULL};
    return 0;
}

static int load_profiles(ms_run_config *cfg, run_extra *x, ms_err *err)
{
    if (!x->model && x->n_model_sets)
        return ms_fail(err, "set model.%s: needs a model", x->model_sets[0].key);
    if (x->model && ms_model_load_set(x->model, x->model_sets, x->n_model_sets, &x->mo, err))
        return -1;
    if (ms_platform_load_set(x->platform, x->platform_sets, x->n_platform_sets, &x->pl, err))
        return -1;
    int have_fw;
    if (ms_framework_resolve(x->framework, &x->fw, &have_fw, err))
        return ms_fail_prefix(err, "framework");
    cfg->framework = have_fw ? &x->fw : NULL;
    cfg->model = x->model ? &x->mo : NULL;
    cfg->platform = &x->pl;
    cfg->model_sets = x->model_sets;
    cfg->n_model_sets = x->n_model_sets;
    cfg->platform_sets = x->platform_sets;
    cfg->n_platform_sets = x->n_platform_sets;
    return 0;
}

/* Fills cfg and x from keys ({key: text}) and sets ({"platform.K": text}).
 * The texts stay owned by the dicts, which outlive the run. */
static int parse_keys(PyObject *keys, PyObject *sets, ms_run_config *cfg, run_extra *x)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(keys, &pos, &k, &v)) {
        const char *key = PyUnicode_AsUTF8(k), *val = PyUnicode_AsUTF8(v);
        if (!key || !val)
            return -1;
        int id = ms_runkey_find(key);
        if (id < 0 || id == MS_RK_EVENTS) {
            PyErr_Format(ms_py_ArgumentError, "run: unknown key '%s'", key);
            return -1;
        }
        if (set_key(cfg, x, id, val))
            return -1;
    }
    pos = 0;
    while (PyDict_Next(sets, &pos, &k, &v)) {
        const char *key = PyUnicode_AsUTF8(k), *val = PyUnicode_AsUTF8(v);
        if (!key || !val || add_set(x, key, val))
            return -1;
    }
    if (!cfg->trace_path) {
        PyErr_SetString(ms_py_ArgumentError, "run: a trace is required");
        return -1;
    }
    if (x->caps != 1) {
        PyErr_SetString(ms_py_ArgumentError, "run: give exactly one of cache_experts, cache_bytes, cache_gb");
        return -1;
    }
    return 0;
}

/* Checks an optional output path before any work ("-" is refused: a
 * Python result reads its outputs back). */
static int check_output(const char *what, const char *path, ms_err *err)
{
    if (!path)
        return 0;
    if (!strcmp(path, "-"))
        return ms_fail(err, "%s: '-' (standard output) is not an output of moesim.run", what);
    return ms_out_check(what, path, err);
}

/* 1 while a run (or sweep, claims) is under way: a policy's hook that
 * calls moesim.run again would clobber the run's hook state. */
int ms_py_busy;

int ms_py_enter(const char *what)
{
    if (ms_py_busy) {
        PyErr_Format(ms_py_Error, "%s: called from inside a policy hook of a running simulation", what);
        return -1;
    }
    ms_py_busy = 1;
    return 0;
}

/* run(keys, sets, events, iterations, requests) -> JSON text of run --json */
static PyObject *py_run(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *keys, *sets;
    const char *events = NULL, *iterations = NULL, *requests = NULL;
    if (!PyArg_ParseTuple(args, "O!O!zzz", &PyDict_Type, &keys, &PyDict_Type, &sets, &events, &iterations,
                          &requests))
        return NULL;
    ms_run_config cfg = {.prefetch_spec = "none", .cache_spec = "lru", .sched_spec = "gpu", .distance = 1,
                         .max_batch = 1, .seed = 1, .keys_as_ini = 1};
    run_extra *x = PyMem_Calloc(1, sizeof *x);
    if (!x)
        return PyErr_NoMemory();
    x->platform = "rtx3090-pcie4";
    PyObject *out = NULL;
    ms_err err;
    if (parse_keys(keys, sets, &cfg, x))
        goto done;
    ms_out_inputs_clear();
    ms_out_input(cfg.trace_path);
    if (load_profiles(&cfg, x, &err) || check_output("events", events, &err) ||
        check_output("iterations", iterations, &err) || check_output("requests", requests, &err)) {
        ms_py_raise(ms_py_Error, &err);
        goto done;
    }
    cfg.events_path = events;
    cfg.iterations_path = iterations;
    cfg.requests_path = requests;
    ms_metrics m;
    ms_py_signals sigs;
    ms_py_signals_save(&sigs);
    if (ms_py_enter("moesim.run")) {
        ms_py_signals_restore(&sigs);
        goto done;
    }
    ms_py_policy_run_begin();
    int rc = ms_run(&cfg, &m, &err);
    ms_py_busy = 0;
    ms_py_signals_restore(&sigs);
    if (ms_py_policy_run_end()) {
        if (!rc)
            ms_metrics_free(&m);
        goto done;
    }
    if (rc) {
        ms_py_raise(ms_py_Error, &err);
        goto done;
    }
    cJSON *j = ms_report_json(&cfg, &m);
    PyObject *warnings = PyList_New(0);
    for (uint32_t i = 0; warnings && i < m.n_warnings; i++) {
        PyObject *w = PyUnicode_FromString(m.warnings[i]);
        if (!w || PyList_Append(warnings, w))
            Py_CLEAR(warnings);
        Py_XDECREF(w);
    }
    char *s = cJSON_PrintUnformatted(j);
    if (warnings && s)
        out = Py_BuildValue("(sN)", s, warnings);
    else
        Py_XDECREF(warnings);
    free(s);
    cJSON_Delete(j);
    ms_metrics_free(&m);
done:
    PyMem_Free(x);
    return out;
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("(ss)", ms_version(), ms_commit());
}

static PyMethodDef methods[] = {
    {"version", py_version, METH_NOARGS, "(version, commit) of the library"},
    {"policies", py_policies, METH_NOARGS, "every registered policy"},
    {"profiles", py_profiles, METH_VARARGS, "profiles('models' | 'platforms')"},
    {"runkeys", py_runkeys, METH_NOARGS, "the run keys: (key, kind, default, help)"},
    {"run", py_run, METH_VARARGS, "run(keys, sets, events, iterations, requests) -> (json, warnings)"},
    {"write_trace", ms_py_write_trace, METH_VARARGS, "write_trace(path, dims, requests) -> requests written"},
    {"claims", ms_py_claims, METH_VARARGS, "claims(out_dir, write, trace, model, platform, only, requests, seed, "
     "sensitivity) -> JSON text"},
    {"sweep", ms_py_sweep, METH_VARARGS, "sweep(spec_path, jobs) -> CSV text"},
    {"register_policy", ms_py_register_policy, METH_VARARGS, "register_policy(kind, name, factory, attrs)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "moesim._core", "moesim's C library", -1, methods,
                                       NULL, NULL, NULL, NULL};

static int add_error(PyObject *m, const char *name, PyObject *base, PyObject **out)
{
    char full[64];
    snprintf(full, sizeof full, "moesim.%s", name);
    *out = PyErr_NewException(full, base, NULL);
    if (!*out)
        return -1;
    Py_INCREF(*out);
    return PyModule_AddObject(m, name, *out);
}

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    PyObject *arg_bases = NULL, *trace_bases = NULL;
    if (add_error(m, "Error", NULL, &ms_py_Error))
        goto fail;
    arg_bases = PyTuple_Pack(2, ms_py_Error, PyExc_ValueError);
    trace_bases = PyTuple_Pack(1, ms_py_Error);
    if (!arg_bases || !trace_bases || add_error(m, "ArgumentError", arg_bases, &ms_py_ArgumentError) ||
        add_error(m, "PolicyError", ms_py_Error, &ms_py_PolicyError) ||
        add_error(m, "TraceError", trace_bases, &ms_py_TraceError) || ms_py_policy_init(m) ||
        ms_py_trace_init(m))
        goto fail;
    Py_DECREF(arg_bases);
    Py_DECREF(trace_bases);
    return m;
fail:
    Py_XDECREF(arg_bases);
    Py_XDECREF(trace_bases);
    Py_DECREF(m);
    return NULL;
}
