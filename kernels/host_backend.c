/* The host backend (host_backend.h): three stream threads over one mutex and
 * condition variable; every op's dependencies are events submitted before
 * it, so the dependency graph is acyclic and every op eventually runs. */
#define _DEFAULT_SOURCE /* mlock, _SC_AVPHYS_PAGES */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/host_backend.h"
#include "kernels/host_ffn.h"

#define MIB (1024.0 * 1024.0)
#define NDEPS 2

typedef struct {
    double t0, t1; /* CLOCK_MONOTONIC seconds */
    int done;
} ev_rec;

typedef struct {
    ms_op op;
    ms_event ev;
    ms_event dep[NDEPS]; /* events it waits for besides stream order, or MS_NO_EVENT */
    int32_t slot;        /* copy: the slot it fills; GPU expert: the slot it reads */
} item;

typedef struct {
    item *v;
    size_t head, n, cap; /* pending items are v[head .. n) */
} fifo;

typedef struct host_exec host_exec;

typedef struct {
    host_exec *h;
    int stream;
    int started;
    pthread_t th;
    ms_ffn_scratch scratch;
} worker;

struct host_exec {
    uint32_t H, F, M, L, J, S, T;
    size_t expert_elems;  /* bf16 weights per expert */
    size_t dense_cols;    /* each layer's dense weights are [H][dense_cols] */
    uint16_t *store;      /* [L*J][expert_elems] */
    uint16_t *slot_buf;   /* [S][expert_elems] */
    uint16_t *dense;
    float *x;             /* [T][H] token rows, fixed data */
    int32_t *expert_slot; /* [L*J] slot holding the expert, or -1 */
    ms_event *slot_fill;  /* [S] the copy that filled it */
    ms_event *slot_reader;/* [S] the last op that read its current content */
    int64_t *slot_owner;  /* [S] expert index, or -1 when free */
    int32_t *free_q;      /* free slots, oldest release first (ring of S) */
    uint32_t free_head, free_n;
    /* One lock; a condition per stream worker and one for wait()/begin(),
     * each woken only when it may proceed: on 2 cores a broadcast to every
     * thread on every completion costs more than a small op. */
    pthread_mutex_t mu;
    pthread_cond_t work_cv[MS_STREAMS];
    int idle[MS_STREAMS];  /* the worker is waiting on work_cv */
    pthread_cond_t done_cv;
    int waiters;           /* threads in wait() or begin() */
    ms_event awaited;      /* the event of a lone wait(); MS_NO_EVENT: wake on any */
    int stop;
    ev_rec *ev;
    size_t nev, evcap, ndone;
    fifo q[MS_STREAMS];
    worker w[MS_STREAMS];
    ms_ffn_scratch probe;
    int cold;             /* evict the caches before every compute / CPU op */
    unsigned char *evict_buf; /* EVICT_SPAN bytes of pages really mapped (not the shared zero page) */
    volatile uint64_t evict_sink;
    double t0;
    char pinned_note[160];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- sizes and memory ---- */

static double total_bytes(const host_exec *h)
{
    double e = (double)h->expert_elems * 2;
    double scratch = (double)h->T * (2.0 * h->F + (double)(h->dense_cols > h->H ? h->dense_cols : h->H)) * 4;
    return e * h->L * h->J + e * h->S + (double)h->L * h->H * h->dense_cols * 2 + (double)h->T * h->H * 4 +
           scratch * (MS_STREAMS + 1);
}

static int check_memory(const host_exec *h, const ms_backend_config *c, ms_err *err)
{
    double need = total_bytes(h), avail = ms_host_mem_available();
    if (avail <= 0 || need <= 0.9 * avail)
        return 0;
    double e = (double)h->expert_elems * 2;
    double scale = floor(c->expert_scale * 0.8 * avail / need * 1000) / 1000;
    return ms_fail(err,
                   "host backend: needs %.0f MiB (store %u x %u experts x %.2f MiB = %.0f MiB, %u slots = %.0f "
                   "MiB, dense %.0f MiB) but only %.0f MiB of host memory is available; try --expert-scale %g",
                   need / MIB, h->L, h->J, e / MIB, e * h->L * h->J / MIB, h->S, e * h->S / MIB,
                   (double)h->L * h->H * h->dense_cols * 2 / MIB, avail / MIB, scale > 0 ? scale : 0.001);
}

/* Fixed weights in [-1/64, 1/64] (a repeating block: any fixed data will do). */
static void fill_bf16(uint16_t *dst, size_t n)
{
    uint16_t block[4096];
    uint32_t s = 12345;
    for (size_t i = 0; i < 4096; i++) {
        s = s * 1664525u + 1013904223u;
        block[i] = ms_float_to_bf16(((float)(s >> 8) / 16777216.0f - 0.5f) / 32.0f);
    }
    for (size_t i = 0; i < n; i += 4096)
        memcpy(dst + i, block, (n - i < 4096 ? n - i : 4096) * sizeof *dst);
}

static int alloc_buffers(host_exec *h, ms_err *err)
{
    size_t E = h->expert_elems, LJ = (size_t)h->L * h->J;
    h->store = malloc(LJ * E * 2);
    h->slot_buf = malloc((size_t)h->S * E * 2);
    h->dense = malloc((h->dense_cols ? (size_t)h->L * h->H * h->dense_cols : 1) * 2);
    h->x = malloc((size_t)h->T * h->H * sizeof *h->x);
    size_t ycols = h->dense_cols > h->H ? h->dense_cols : h->H;
    int bad = !h->store || !h->slot_buf || !h->dense || !h->x || ms_ffn_scratch_init(&h->probe, h->T, h->F, ycols);
    for (int k = 0; k < MS_STREAMS; k++)
        bad |= ms_ffn_scratch_init(&h->w[k].scratch, h->T, h->F, ycols);
    if (bad)
        return ms_fail(err, "host backend: out of memory allocating %.0f MiB (%u x %u experts x %.2f MiB + %u slots)",
                       total_bytes(h) / MIB, h->L, h->J, (double)E * 2 / MIB, h->S);
    fill_bf16(h->store, LJ * E);
    memset(h->slot_buf, 0, (size_t)h->S * E * 2);
    fill_bf16(h->dense, h->dense_cols ? (size_t)h->L * h->H * h->dense_cols : 1);
    for (size_t i = 0; i < (size_t)h->T * h->H; i++)
        h->x[i] = 0.01f * (float)(1 + i % 7);
    return 0;
}

/* ---- the streams ---- */

static int deps_done(const host_exec *h, const item *it)
{
    for (int d = 0; d < NDEPS; d++)
        if (it->dep[d] != MS_NO_EVENT && !h->ev[it->dep[d]].done)
            return 0;
    return 1;
}

static void run_op(host_exec *h, worker *w, const item *it)
{
    const ms_op *op = &it->op;
    size_t E = h->expert_elems;
    size_t x = (size_t)op->layer * h->J + op->expert;
    switch (op->kind) {
    case MS_OP_COPY:
        memcpy(h->slot_buf + (size_t)it->slot * E, h->store + x * E, (size_t)op->bytes);
        break;
    case MS_OP_EXPERT_GPU:
        ms_ffn_expert(h->x, h->slot_buf + (size_t)it->slot * E, op->tokens, h->H, h->F, h->M, &w->scratch);
        break;
    case MS_OP_EXPERT_CPU:
        ms_ffn_expert(h->x, h->store + x * E, op->tokens, h->H, h->F, h->M, &w->scratch);
        break;
    case MS_OP_DENSE: {
        size_t cols = (size_t)ceil(op->params / h->H);
        if (cols)
            ms_ffn_matmul(h->x, h->dense + (size_t)op->layer * h->H * h->dense_cols, w->scratch.y, op->tokens, h->H,
                          (uint32_t)cols);
        break;
    }
    default:
        break;
    }
}

/* Reads EVICT_SPAN bytes (read only: no dirty lines left to write back
 * during the timed op), so that no weight stays in the CPU caches. */
#define EVICT_SPAN (64u << 20)
static void evict_caches(host_exec *h)
{
    const uint64_t *b = (const uint64_t *)h->evict_buf;
    if (!b)
        return;
    uint64_t sum = 0;
    for (size_t i = 0; i < EVICT_SPAN / sizeof *b; i += 8)
        sum += b[i];
    h->evict_sink = sum;
}

static unsigned char *alloc_evict_buf(void)
{
    unsigned char *b = malloc(EVICT_SPAN);
    if (b)
        memset(b, 1, EVICT_SPAN);
    return b;
}

static int is_timed_cold(const host_exec *h, const ms_op *op)
{
    return h->cold && op->kind != MS_OP_COPY;
}

/* After event ev of `stream` completed: the other workers whose next op
 * can now run, and wait()/begin() when one waits for ev (or for any). */
static void wake_after_completion(host_exec *h, int stream, ms_event ev)
{
    for (int k = 0; k < MS_STREAMS; k++) {
        fifo *q = &h->q[k];
        if (k != stream && h->idle[k] && q->head < q->n && deps_done(h, &q->v[q->head]))
            pthread_cond_signal(&h->work_cv[k]);
    }
    if (h->waiters && (h->waiters > 1 || h->awaited == MS_NO_EVENT || h->awaited == ev))
        pthread_cond_broadcast(&h->done_cv);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    host_exec *h = w->h;
    fifo *q = &h->q[w->stream];
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->stop && !(q->head < q->n && deps_done(h, &q->v[q->head]))) {
            h->idle[w->stream] = 1;
            pthread_cond_wait(&h->work_cv[w->stream], &h->mu);
            h->idle[w->stream] = 0;
        }
        if (h->stop)
            break;
        item it = q->v[q->head++];
        int cold = is_timed_cold(h, &it.op);
        pthread_mutex_unlock(&h->mu);
        if (cold)
            evict_caches(h);
        double t0 = now_s();
        run_op(h, w, &it);
        double t1 = now_s();
        pthread_mutex_lock(&h->mu);
        h->ev[it.ev].t0 = t0;
        h->ev[it.ev].t1 = t1;
        h->ev[it.ev].done = 1;
        h->ndone++;
        wake_after_completion(h, w->stream, it.ev);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void fifo_push(fifo *q, const item *it)
{
    if (q->head == q->n)
        q->head = q->n = 0;
    if (q->n == q->cap && q->head > q->cap / 2) {
        memmove(q->v, q->v + q->head, (q->n - q->head) * sizeof *q->v);
        q->n -= q->head;
        q->head = 0;
    }
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->v = ms_xrealloc(q->v, q->cap, sizeof *q->v);
    }
    q->v[q->n++] = *it;
}

/* ---- submit: checks, then the op's dependencies in stream order ---- */

static int check_event(const host_exec *h, ms_event ev, const char *what, ms_err *err)
{
    if (ev >= 0 && (size_t)ev < h->nev)
        return 0;
    return ms_fail(err, "host backend: %s event %lld is unknown (%zu events submitted)", what, (long long)ev, h->nev);
}

static int check_op(const host_exec *h, const ms_op *op, ms_err *err)
{
    if (op->kind < 0 || op->kind >= MS_OP_KINDS)
        return ms_fail(err, "host backend: unknown op kind %d", (int)op->kind);
    if (op->kind != MS_OP_DENSE && (op->layer >= h->L || op->expert >= h->J))
        return ms_fail(err, "host backend: expert (%u, %u) outside %u layers x %u experts", op->layer, op->expert,
                       h->L, h->J);
    if (op->kind != MS_OP_COPY && op->tokens > h->T)
        return ms_fail(err, "host backend: op of %u token rows exceeds max_tokens %u", op->tokens, h->T);
    double ebytes = (double)h->expert_elems * 2;
    if (op->kind == MS_OP_COPY && !(op->bytes >= 0 && op->bytes <= ebytes))
        return ms_fail(err, "host backend: copy of %.0f bytes for expert (%u, %u): an expert holds %.0f bytes",
                       op->bytes, op->layer, op->expert, ebytes);
    double dense_max = (double)h->H * h->dense_cols;
    if (op->kind == MS_OP_DENSE && op->layer >= h->L)
        return ms_fail(err, "host backend: dense op of layer %u outside %u layers", op->layer, h->L);
    if (op->kind == MS_OP_DENSE && !(op->params >= 0 && op->params <= dense_max))
        return ms_fail(err, "host backend: dense op of %.0f params exceeds the dense buffer's %.0f params",
                       op->params, dense_max);
    if (op->after != MS_NO_EVENT)
        return check_event(h, op->after, "`after`", err);
    return 0;
}

static int take_slot(host_exec *h, const ms_op *op, int32_t *slot, ms_err *err)
{
    size_t x = (size_t)op->layer * h->J + op->expert;
    if (h->expert_slot[x] >= 0) { /* copied again while resident: refill its own slot */
        *slot = h->expert_slot[x];
        return 0;
    }
    if (!h->free_n)
        return ms_fail(err, "host backend: no free slot for expert (%u, %u): all %u slots hold experts (release one "
                       "first)", op->layer, op->expert, h->S);
    *slot = h->free_q[h->free_head];
    h->free_head = (h->free_head + 1) % h->S;
    h->free_n--;
    h->expert_slot[x] = *slot;
    h->slot_owner[*slot] = (int64_t)x;
    return 0;
}

static int host_submit(void *st, const ms_op *op, ms_event *out, ms_err *err)
{
    host_exec *h = st;
    pthread_mutex_lock(&h->mu);
    int rc = check_op(h, op, err);
    item it = {.op = *op, .ev = (ms_event)h->nev, .dep = {op->after, MS_NO_EVENT}, .slot = -1};
    size_t x = (size_t)op->layer * h->J + op->expert;
    if (!rc && op->kind == MS_OP_COPY && !(rc = take_slot(h, op, &it.slot, err))) {
        it.dep[1] = h->slot_reader[it.slot]; /* the last reader of its previous content */
        h->slot_fill[it.slot] = it.ev;
        h->slot_reader[it.slot] = MS_NO_EVENT;
    } else if (!rc && op->kind == MS_OP_EXPERT_GPU) {
        if (h->expert_slot[x] < 0)
            rc = ms_fail(err, "host backend: GPU expert (%u, %u) is in no slot (no copy submitted since its release)",
                         op->layer, op->expert);
        else {
            it.slot = h->expert_slot[x];
            it.dep[1] = h->slot_fill[it.slot];
            h->slot_reader[it.slot] = it.ev;
        }
    }
    if (!rc) {
        if (h->nev == h->evcap) {
            h->evcap = h->evcap ? 2 * h->evcap : 1024;
            h->ev = ms_xrealloc(h->ev, h->evcap, sizeof *h->ev);
        }
        h->ev[h->nev++] = (ev_rec){0, 0, 0};
        int k = ms_op_stream(op->kind);
        fifo_push(&h->q[k], &it);
        *out = it.ev;
        if (h->idle[k])
            pthread_cond_signal(&h->work_cv[k]);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* A waiter woke; `awaited` may be its own event while another still
 * sleeps on a different one: wake on any until that one sets its own again. */
static void leave_wait(host_exec *h)
{
    h->waiters--;
    h->awaited = MS_NO_EVENT;
}

static double since_begin(const host_exec *h, double t)
{
    return t > h->t0 ? t - h->t0 : 0;
}

static int host_wait(void *st, ms_event ev, double *start_s, double *end_s, ms_err *err)
{
    host_exec *h = st;
    pthread_mutex_lock(&h->mu);
    int rc = check_event(h, ev, "wait on", err);
    while (!rc && !h->ev[ev].done) {
        h->waiters++;
        h->awaited = ev;
        pthread_cond_wait(&h->done_cv, &h->mu);
        leave_wait(h);
    }
    if (!rc) {
        *start_s = since_begin(h, h->ev[ev].t0);
        *end_s = since_begin(h, h->ev[ev].t1);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static int host_release(void *st, uint32_t layer, uint32_t expert, ms_err *err)
{
    host_exec *h = st;
    pthread_mutex_lock(&h->mu);
    int rc = 0;
    size_t x = (size_t)layer * h->J + expert;
    if (layer >= h->L || expert >= h->J)
        rc = ms_fail(err, "host backend: release of expert (%u, %u) outside %u layers x %u experts", layer, expert,
                     h->L, h->J);
    else if (h->expert_slot[x] < 0)
        rc = ms_fail(err, "host backend: release of expert (%u, %u), which is in no slot", layer, expert);
    else {
        int32_t s = h->expert_slot[x];
        h->expert_slot[x] = -1;
        h->slot_owner[s] = -1;
        h->free_q[(h->free_head + h->free_n) % h->S] = s;
        h->free_n++;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static int host_begin(void *st, ms_err *err)
{
    (void)err;
    host_exec *h = st;
    pthread_mutex_lock(&h->mu);
    while (h->ndone < h->nev) {
        h->waiters++;
        h->awaited = MS_NO_EVENT;
        pthread_cond_wait(&h->done_cv, &h->mu);
        leave_wait(h);
    }
    h->t0 = now_s();
    pthread_mutex_unlock(&h->mu);
    return 0;
}

static void host_destroy(void *st)
{
    host_exec *h = st;
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    for (int k = 0; k < MS_STREAMS; k++)
        pthread_cond_broadcast(&h->work_cv[k]);
    pthread_mutex_unlock(&h->mu);
    for (int k = 0; k < MS_STREAMS; k++) {
        if (h->w[k].started)
            pthread_join(h->w[k].th, NULL);
        ms_ffn_scratch_free(&h->w[k].scratch);
        free(h->q[k].v);
    }
    ms_ffn_scratch_free(&h->probe);
    free(h->evict_buf);
    for (int k = 0; k < MS_STREAMS; k++)
        pthread_cond_destroy(&h->work_cv[k]);
    pthread_cond_destroy(&h->done_cv);
    pthread_mutex_destroy(&h->mu);
    free(h->store);
    free(h->slot_buf);
    free(h->dense);
    free(h->x);
    free(h->expert_slot);
    free(h->slot_fill);
    free(h->slot_reader);
    free(h->slot_owner);
    free(h->free_q);
    free(h->ev);
    free(h);
}

/* ---- calibration probes ---- */

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
    gsl_sort(v, 1, (size_t)n);
    return gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
}

/* Each rep copies from and to memory no rep touched recently: the buffers
 * span at least COLD_SPAN (twice this host's 32 MiB L3) and the reps walk
 * through them, so that small copies are not timed out of the cache (an
 * expert copy reads a cold store). */
#define COLD_SPAN (64.0 * MIB)

static int host_time_copy(void *st, double bytes, int to_device, int pageable, int reps, double *seconds, ms_err *err)
{
    host_exec *h = st;
    if (!(bytes >= 1 && bytes <= 1e15) || reps < 1)
        return ms_fail(err, "host backend: time_copy needs bytes >= 1 and reps >= 1 (got %.0f, %d)", bytes, reps);
    double span = bytes > COLD_SPAN ? bytes : COLD_SPAN, avail = ms_host_mem_available();
    if (avail > 0 && 2 * span > 0.9 * avail)
        return ms_fail(err, "host backend: a copy of %.0f MiB needs 2 x %.0f MiB but %.0f MiB is available", bytes / MIB,
                       span / MIB, avail / MIB);
    size_t n = (size_t)bytes, ns = (size_t)span, slots = ns / n;
    char *host = malloc(ns), *dev = malloc(ns);
    if (!host || !dev) {
        free(host);
        free(dev);
        return ms_fail(err, "host backend: out of memory for two %.0f MiB copy buffers", span / MIB);
    }
    int locked = 0;
    if (!pageable) {
        locked = mlock(host, ns) == 0;
        if (!locked)
            snprintf(h->pinned_note, sizeof h->pinned_note, "mlock failed (%s): pinned = pageable", strerror(errno));
    }
    memset(host, 1, ns);
    memset(dev, 2, ns);
    double *t = ms_xcalloc((size_t)reps, sizeof *t);
    for (int r = 0; r < reps; r++) {
        size_t off = (size_t)r % slots * n;
        double t0 = now_s();
        if (to_device)
            memcpy(dev + off, host + off, n);
        else
            memcpy(host + off, dev + off, n);
        t[r] = now_s() - t0;
    }
    *seconds = median(t, reps);
    free(t);
    if (locked)
        munlock(host, ns);
    free(host);
    free(dev);
    return 0;
}

static int host_time_expert(void *st, uint32_t tokens, int reps, double *seconds, ms_err *err)
{
    host_exec *h = st;
    if (tokens > h->T || reps < 1)
        return ms_fail(err, "host backend: time_expert of %u token rows (max_tokens %u), %d reps", tokens, h->T, reps);
    double *t = ms_xcalloc((size_t)reps, sizeof *t);
    if (!h->evict_buf && !(h->evict_buf = alloc_evict_buf()))
        return ms_fail(err, "host backend: out of memory for a %u MiB cache-eviction buffer", EVICT_SPAN >> 20);
    for (int r = 0; r < reps; r++) {
        evict_caches(h);
        double t0 = now_s();
        ms_ffn_expert(h->x, h->store, tokens, h->H, h->F, h->M, &h->probe);
        t[r] = now_s() - t0;
    }
    *seconds = median(t, reps);
    free(t);
    return 0;
}

static const ms_exec_ops host_ops = {
    .name = "host",
    .submit = host_submit,
    .wait = host_wait,
    .release = host_release,
    .begin = host_begin,
    .destroy = host_destroy,
    .time_copy = host_time_copy,
    .time_expert = host_time_expert,
};

int ms_host_backend_set_cold(ms_exec *x, int on)
{
    if (!x || x->ops != &host_ops)
        return -1;
    host_exec *h = x->st;
    if (!h->evict_buf && !(h->evict_buf = alloc_evict_buf()))
        return -1;
    pthread_mutex_lock(&h->mu);
    h->cold = on != 0;
    pthread_mutex_unlock(&h->mu);
    return 0;
}

const char *ms_host_backend_pinned_note(const ms_exec *x)
{
    if (!x || x->ops != &host_ops)
        return NULL;
    return ((const host_exec *)x->st)->pinned_note;
}

/* ---- create ---- */

static void init_slots(host_exec *h)
{
    size_t LJ = (size_t)h->L * h->J;
    h->expert_slot = ms_xcalloc(LJ, sizeof *h->expert_slot);
    for (size_t i = 0; i < LJ; i++)
        h->expert_slot[i] = -1;
    h->slot_fill = ms_xcalloc(h->S, sizeof *h->slot_fill);
    h->slot_reader = ms_xcalloc(h->S, sizeof *h->slot_reader);
    h->slot_owner = ms_xcalloc(h->S, sizeof *h->slot_owner);
    h->free_q = ms_xcalloc(h->S, sizeof *h->free_q);
    for (uint32_t s = 0; s < h->S; s++) {
        h->slot_fill[s] = h->slot_reader[s] = MS_NO_EVENT;
        h->slot_owner[s] = -1;
        h->free_q[s] = (int32_t)s;
    }
    h->free_n = h->S;
}

static int start_workers(host_exec *h, ms_err *err)
{
    for (int k = 0; k < MS_STREAMS; k++) {
        h->w[k].h = h;
        h->w[k].stream = k;
        int rc = pthread_create(&h->w[k].th, NULL, worker_main, &h->w[k]);
        if (rc)
            return ms_fail(err, "host backend: cannot start stream thread %d: %s", k, strerror(rc));
        h->w[k].started = 1;
    }
    return 0;
}

int ms_host_backend_create(const ms_backend_config *c, ms_exec *out, ms_err *err)
{
    if (ms_backend_check_config("host", c, err))
        return -1;
    host_exec *h = ms_xcalloc(1, sizeof *h);
    h->H = c->model->hidden;
    h->F = ms_backend_expert_ffn(c);
    h->M = c->model->expert_matrices;
    h->L = c->layers;
    h->J = c->experts;
    h->S = c->slots;
    h->T = c->max_tokens;
    h->expert_elems = ms_ffn_expert_bytes(h->H, h->F, h->M) / 2;
    /* one dense buffer per layer (as a model has), of the dense params the engine's ops carry (x expert_scale) */
    h->dense_cols = (size_t)ceil((double)c->model->dense_params * c->expert_scale / h->H);
    snprintf(h->pinned_note, sizeof h->pinned_note, "mlock'd");
    pthread_mutex_init(&h->mu, NULL);
    for (int k = 0; k < MS_STREAMS; k++)
        pthread_cond_init(&h->work_cv[k], NULL);
    pthread_cond_init(&h->done_cv, NULL);
    h->awaited = MS_NO_EVENT;
    init_slots(h);
    if (check_memory(h, c, err) || alloc_buffers(h, err) || start_workers(h, err)) {
        host_destroy(h);
        return -1;
    }
    h->t0 = now_s();
    out->ops = &host_ops;
    out->st = h;
    return 0;
}
