/* moesim.Trace and moesim.write_trace (docs/python.md "Traces").
 *
 * Reading: a Reader object holds one ms_trace_reader; read(i) hands out a
 * request as a dict of bytes (the Python layer views them as NumPy arrays
 * of the shapes in the meta).  Writing: the request dicts' arrays (C
 * contiguous, the dtypes the Python layer converted them to) are copied into
 * ms_request, checked (ms_request_check) and written by the same v2 writer
 * as the importers (ms_writer_*: checksums, content digest, atomic output);
 * dimensions come from a model profile and/or explicit values as the
 * importers' --model / --experts / --layers / --topk flags
 * (traces/import/import.h ms_import_dims_resolve). */
#include "python/src/ext.h"

#include <math.h>
#include <string.h>

#include <cJSON.h>

#include "sim/core/out.h"
#include "traces/format/trace.h"
#include "traces/import/import.h"
#include "traces/stats/stats.h"

/* ---- meta as a dict ---- */

static PyObject *u64_list(const uint64_t *a, uint32_t n)
{
    PyObject *l = PyList_New(n);
    for (uint32_t i = 0; l && i < n; i++)
        PyList_SET_ITEM(l, i, PyLong_FromUnsignedLongLong(a[i]));
    return l;
}

static PyObject *meta_dict(const ms_trace_meta *m)
{
    PyObject *eb = u64_list(m->expert_bytes, m->L), *db = u64_list(m->dense_bytes, m->L);
    if (!eb || !db) {
        Py_XDECREF(eb);
        Py_XDECREF(db);
        return NULL;
    }
    return Py_BuildValue("{s:I,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:I,s:O,s:O,s:O,s:K,s:K,s:K,s:N,s:N}",
                         "version", m->version, "content_sha256", m->content_sha256, "model", m->model_name,
                         "source", m->source, "L", m->L, "J", m->J, "K", m->K, "shared_experts", m->shared_experts,
                         "hidden_size", m->hidden_size, "probs_kind", ms_probs_kind_name(m->probs_kind), "embed_dim",
                         m->embed_dim, "spec_depth", m->spec_depth, "has_token_ids",
                         m->has_token_ids ? Py_True : Py_False, "has_text", m->has_text ? Py_True : Py_False,
                         "has_recorded_hits", m->has_recorded_hits ? Py_True : Py_False, "requests",
                         (unsigned long long)m->n_requests, "iterations", (unsigned long long)m->n_iterations, "rows",
                         (unsigned long long)m->n_rows, "expert_bytes", eb, "dense_bytes", db);
}

/* ---- Reader ---- */

typedef struct {
    PyObject_HEAD
    ms_trace_reader *r;
    ms_request req;
} Reader;

static int reader_init(Reader *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return -1;
    ms_err err;
    if (self->r)
        ms_reader_close(self->r);
    self->r = ms_reader_open(path, &err);
    if (!self->r) {
        PyErr_SetString(ms_py_TraceError, err.msg);
        return -1;
    }
    return 0;
}

static void reader_dealloc(Reader *self)
{
    if (self->r)
        ms_reader_close(self->r);
    ms_request_free(&self->req);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int reader_live(Reader *self)
{
    if (self->r)
        return 0;
    PyErr_SetString(ms_py_TraceError, "the trace is closed");
    return -1;
}

static PyObject *reader_meta(Reader *self, PyObject *unused)
{
    (void)unused;
    return reader_live(self) ? NULL : meta_dict(ms_reader_meta(self->r));
}

static PyObject *bytes_or_none(const void *p, size_t n)
{
    if (!p)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
}

/* read(i) -> {id, arrival_s, prompt_len, output_len, phases, row0, n_rows,
 * topk_ids, topk_w, probs, embedding, spec_ids, spec_w, recorded_hit,
 * token_ids, text} (arrays as bytes; None where the trace has none) */
static PyObject *reader_read(Reader *self, PyObject *arg)
{
    unsigned long long i = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred() || reader_live(self))
        return NULL;
    const ms_trace_meta *m = ms_reader_meta(self->r);
    if (i >= m->n_requests) {
        PyErr_Format(PyExc_IndexError, "request %llu out of range [0, %llu)", i, (unsigned long long)m->n_requests);
        return NULL;
    }
    ms_err err;
    if (ms_reader_read(self->r, i, &self->req, &err) != 1) {
        PyErr_SetString(ms_py_TraceError, err.msg);
        return NULL;
    }
    const ms_request *r = &self->req;
    size_t rows = r->n_rows, its = r->n_iters;
    size_t lk = (size_t)m->L * m->K, lj = (size_t)m->L * m->J;
    PyObject *phase = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)its);
    PyObject *row0 = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(its * sizeof(uint32_t)));
    PyObject *nrows = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(its * sizeof(uint32_t)));
    if (!phase || !row0 || !nrows) {
        Py_XDECREF(phase);
        Py_XDECREF(row0);
        Py_XDECREF(nrows);
        return NULL;
    }
    for (size_t k = 0; k < its; k++) {
        PyBytes_AS_STRING(phase)[k] = (char)r->iters[k].phase;
        memcpy(PyBytes_AS_STRING(row0) + k * 4, &r->iters[k].row0, 4);
        memcpy(PyBytes_AS_STRING(nrows) + k * 4, &r->iters[k].n_rows, 4);
    }
    size_t spec = (size_t)m->spec_depth * lk;
    return Py_BuildValue("{s:K,s:d,s:I,s:I,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N}", "id",
                         (unsigned long long)r->id, "arrival_s", r->arrival_s, "prompt_len", r->prompt_len,
                         "output_len", r->output_len, "phases", phase, "row0", row0, "n_rows", nrows, "topk_ids",
                         bytes_or_none(r->topk_ids, rows * lk * 4), "topk_w", bytes_or_none(r->topk_w, rows * lk * 4),
                         "probs", bytes_or_none(r->probs, rows * lj * 4), "embedding",
                         bytes_or_none(r->embedding, its * m->embed_dim * 4), "spec_ids",
                         bytes_or_none(r->spec_ids, rows * spec * 4), "spec_w", bytes_or_none(r->spec_w, rows * spec * 4),
                         "recorded_hit", bytes_or_none(r->recorded_hit, rows * lk), "token_ids",
                         bytes_or_none(r->token_ids, (size_t)r->n_tokens * 4), "text",
                         r->text ? PyUnicode_FromString(r->text) : (Py_INCREF(Py_None), Py_None));
}

/* stats() -> the JSON text of `moesim trace stats --json` without file and provenance */
static PyObject *reader_stats(Reader *self, PyObject *unused)
{
    (void)unused;
    if (reader_live(self))
        return NULL;
    ms_err err;
    ms_stats *s = ms_stats_new(ms_reader_meta(self->r), &err);
    if (!s)
        return ms_py_raise(ms_py_TraceError, &err);
    ms_reader_rewind(self->r);
    int rc;
    while ((rc = ms_reader_next(self->r, &self->req, &err)) == 1)
        if (ms_stats_add(s, &self->req, &err)) {
            rc = -1;
            break;
        }
    if (rc < 0) {
        ms_stats_free(s);
        return ms_py_raise(ms_py_TraceError, &err);
    }
    ms_stats_finish(s);
    cJSON *o = ms_stats_to_json(s);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    ms_stats_free(s);
    PyObject *out = txt ? PyUnicode_FromString(txt) : PyErr_NoMemory();
    cJSON_free(txt);
    return out;
}

static PyObject *reader_close(Reader *self, PyObject *unused)
{
    (void)unused;
    if (self->r)
        ms_reader_close(self->r);
    self->r = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef reader_methods[] = {
    {"meta", (PyCFunction)reader_meta, METH_NOARGS, "the trace's metadata"},
    {"read", (PyCFunction)reader_read, METH_O, "read(i): request i as a dict of bytes"},
    {"stats", (PyCFunction)reader_stats, METH_NOARGS, "trace stats --json as text"},
    {"close", (PyCFunction)reader_close, METH_NOARGS, "close the file"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "moesim._core.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a trace reader (moesim.Trace uses it)",
    .tp_methods = reader_methods,
    .tp_init = (initproc)reader_init,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)reader_dealloc,
};

/* ---- writer ---- */

/* A contiguous buffer of exactly n bytes from dict d's key (None or absent: NULL). */
static int get_buf(PyObject *d, const char *key, size_t n, int required, Py_buffer *b, const char *where)
{
    PyObject *o = PyDict_GetItemString(d, key);
    if (!o || o == Py_None) {
        if (required) {
            PyErr_Format(ms_py_ArgumentError, "%s: %s is required", where, key);
            return -1;
        }
        b->buf = NULL;
        return 0;
    }
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS))
        return -1;
    if ((size_t)b->len != n) {
        PyErr_Format(ms_py_ArgumentError, "%s: %s holds %zd bytes, expected %zu", where, key, b->len, n);
        PyBuffer_Release(b);
        b->buf = NULL;
        return -1;
    }
    return 0;
}

static int dict_u32(PyObject *d, const char *key, uint32_t *out, const char *where)
{
    PyObject *o = PyDict_GetItemString(d, key);
    unsigned long v = o ? PyLong_AsUnsignedLong(o) : (unsigned long)-1;
    if (!o || (v == (unsigned long)-1 && PyErr_Occurred()) || v > UINT32_MAX) {
        PyErr_Clear();
        PyErr_Format(ms_py_ArgumentError, "%s: %s: expected a whole number >= 0", where, key);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* One request dict (the Python layer made every array's dtype and shape
 * right, and the iterations) into *r. */
static int fill_request(const ms_trace_meta *m, PyObject *d, uint64_t idx, ms_request *r)
{
    char where[64];
    snprintf(where, sizeof where, "request %llu", (unsigned long long)idx);
    uint32_t rows, its;
    PyObject *arr = PyDict_GetItemString(d, "arrival_s");
    double arrival = arr ? PyFloat_AsDouble(arr) : 0;
    if ((arr && PyErr_Occurred()) || dict_u32(d, "n_rows_total", &rows, where) || dict_u32(d, "n_iters", &its, where) ||
        dict_u32(d, "prompt_len", &r->prompt_len, where) || dict_u32(d, "output_len", &r->output_len, where))
        return -1;
    PyObject *id = PyDict_GetItemString(d, "id");
    r->id = id ? PyLong_AsUnsignedLongLong(id) : idx;
    if (PyErr_Occurred())
        return -1;
    r->arrival_s = arrival;
    r->n_rows = rows;
    r->n_iters = its;
    ms_request_alloc(r, m);
    size_t lk = (size_t)m->L * m->K;
    Py_buffer ids = {0}, w = {0}, probs = {0}, emb = {0}, ph = {0}, r0 = {0}, nr = {0};
    int rc = -1;
    if (get_buf(d, "topk_ids", rows * lk * 4, 1, &ids, where) || get_buf(d, "topk_w", rows * lk * 4, 1, &w, where) ||
        get_buf(d, "probs", (size_t)rows * m->L * m->J * 4, m->probs_kind == MS_PROBS_FULL, &probs, where) ||
        get_buf(d, "embedding", (size_t)its * m->embed_dim * 4, m->embed_dim > 0, &emb, where) ||
        get_buf(d, "phases", its, 1, &ph, where) || get_buf(d, "row0", (size_t)its * 4, 1, &r0, where) ||
        get_buf(d, "n_rows", (size_t)its * 4, 1, &nr, where))
        goto done;
    memcpy(r->topk_ids, ids.buf, rows * lk * 4);
    memcpy(r->topk_w, w.buf, rows * lk * 4);
    if (probs.buf)
        memcpy(r->probs, probs.buf, (size_t)rows * m->L * m->J * 4);
    if (emb.buf)
        memcpy(r->embedding, emb.buf, (size_t)its * m->embed_dim * 4);
    for (uint32_t k = 0; k < its; k++) {
        r->iters[k].phase = ((const uint8_t *)ph.buf)[k] ? MS_PHASE_DECODE : MS_PHASE_PREFILL;
        memcpy(&r->iters[k].row0, (const char *)r0.buf + k * 4, 4);
        memcpy(&r->iters[k].n_rows, (const char *)nr.buf + k * 4, 4);
    }
    rc = 0;
done:
    if (ids.buf) PyBuffer_Release(&ids);
    if (w.buf) PyBuffer_Release(&w);
    if (probs.buf) PyBuffer_Release(&probs);
    if (emb.buf) PyBuffer_Release(&emb);
    if (ph.buf) PyBuffer_Release(&ph);
    if (r0.buf) PyBuffer_Release(&r0);
    if (nr.buf) PyBuffer_Release(&nr);
    return rc;
}

/* write_trace(path, dims, requests): dims {model, experts, layers, topk,
 * expert_bytes, dense_bytes, probs_kind, embed_dim, source}; requests an
 * iterable of request dicts.  Returns the number of requests written. */
PyObject *ms_py_write_trace(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path;
    PyObject *dims, *requests;
    if (!PyArg_ParseTuple(args, "sO!O", &path, &PyDict_Type, &dims, &requests))
        return NULL;
    ms_import_opts o;
    ms_import_opts_init(&o);
    PyObject *v;
    if ((v = PyDict_GetItemString(dims, "model")) && v != Py_None && !(o.model = PyUnicode_AsUTF8(v)))
        return NULL;
    uint32_t pk = 0, embed = 0;
    const char *source = "moesim.write_trace";
    if ((v = PyDict_GetItemString(dims, "source")) && !(source = PyUnicode_AsUTF8(v)))
        return NULL;
    if (dict_u32(dims, "experts", &o.experts, "write_trace") || dict_u32(dims, "layers", &o.layers, "write_trace") ||
        dict_u32(dims, "topk", &o.topk, "write_trace") || dict_u32(dims, "probs_kind", &pk, "write_trace") ||
        dict_u32(dims, "embed_dim", &embed, "write_trace"))
        return NULL;
    unsigned long long eb = 0, dbytes = 0;
    if ((v = PyDict_GetItemString(dims, "expert_bytes")) && v != Py_None)
        eb = PyLong_AsUnsignedLongLong(v);
    if ((v = PyDict_GetItemString(dims, "dense_bytes")) && v != Py_None) {
        dbytes = PyLong_AsUnsignedLongLong(v);
        o.have_dense_bytes = 1;
    }
    if (PyErr_Occurred())
        return NULL;
    o.expert_bytes = eb;
    o.dense_bytes = dbytes;
    ms_import_dims d;
    ms_err err;
    if (ms_import_dims_resolve(&o, "write_trace", &d, &err))
        return ms_py_raise(ms_py_ArgumentError, &err);
    if (!d.L || !d.K) {
        PyErr_SetString(ms_py_ArgumentError, "write_trace: the number of layers and top-k are unknown: give model= "
                                             "or layers= and topk=");
        return NULL;
    }
    ms_trace_meta m = {0};
    ms_import_meta_fill(&d, source, (ms_probs_kind)pk, &m);
    m.embed_dim = embed;
    PyObject *it = PyObject_GetIter(requests);
    if (!it) {
        ms_trace_meta_free(&m);
        return NULL;
    }
    ms_out_inputs_clear();
    ms_py_signals sigs;
    ms_py_signals_save(&sigs);
    ms_trace_writer *w = ms_writer_open(path, &m, &err);
    if (!w) {
        ms_py_signals_restore(&sigs);
        Py_DECREF(it);
        ms_trace_meta_free(&m);
        return ms_py_raise(ms_py_TraceError, &err);
    }
    uint64_t n = 0;
    PyObject *item;
    int failed = 0;
    while (!failed && (item = PyIter_Next(it))) {
        ms_request r = {0};
        if (!PyDict_Check(item)) {
            PyErr_Format(ms_py_ArgumentError, "request %llu: expected a dict", (unsigned long long)n);
            failed = 1;
        } else if (fill_request(&m, item, n, &r)) {
            failed = 1;
        } else if (ms_request_check(&m, &r, path, &err) || ms_writer_add(w, &r, &err)) {
            ms_fail_prefix(&err, "request %llu", (unsigned long long)n);
            PyErr_SetString(ms_py_TraceError, err.msg);
            failed = 1;
        }
        ms_request_free(&r);
        Py_DECREF(item);
        n++;
    }
    Py_DECREF(it);
    if (failed || PyErr_Occurred()) {
        ms_writer_abort(w);
        ms_py_signals_restore(&sigs);
        ms_trace_meta_free(&m);
        return NULL;
    }
    int rc = ms_writer_close(w, &err);
    ms_py_signals_restore(&sigs);
    ms_trace_meta_free(&m);
    if (rc)
        return ms_py_raise(ms_py_TraceError, &err);
    return PyLong_FromUnsignedLongLong(n);
}

int ms_py_trace_init(PyObject *module)
{
    if (PyType_Ready(&ReaderType))
        return -1;
    Py_INCREF(&ReaderType);
    return PyModule_AddObject(module, "Reader", (PyObject *)&ReaderType);
}
