/* The simulated timeline: the executor contract over the timing model. */
#include <math.h>
#include <stdlib.h>

#include "sim/engine/exec.h"
#include "sim/core/fminmax.h"
#include "sim/core/timing.h"

/* Busy intervals of the copy or the compute stream, in submission order
 * (FIFO streams: sorted and disjoint), the latest MS_EXEC_SIM_EVENTS. */
typedef struct {
    double t0[MS_EXEC_SIM_EVENTS], t1[MS_EXEC_SIM_EVENTS];
    uint64_t n;
} busy_log;

typedef struct {
    const ms_platform *p;
    ms_sim_timing t;    /* p and the framework's costs */
    int timed;          /* a framework is given: duration_timed */
    int sync_copies;    /* its copies = sync */
    uint32_t L, J;
    double stream_end[MS_EXEC_SIM_GPUS][MS_STREAMS]; /* [gpu][stream]; the CPU stream is [0] */
    busy_log *busy[2];  /* [MS_STREAM_COMPUTE], [MS_STREAM_COPY]; NULL without contention */
    double *copy_end;   /* [L*J] end of the latest copy of each expert */
    ms_event next;      /* id of the next event */
    ms_event ring_id[MS_EXEC_SIM_EVENTS];
    double ring_t0[MS_EXEC_SIM_EVENTS], ring_t1[MS_EXEC_SIM_EVENTS];
} sim_exec;

static inline double duration(const ms_platform *p, const ms_op *op)
{
    switch (op->kind) {
    case MS_OP_DENSE:
        return ms_t_dense_gpu(p, op->bytes, op->params, op->tokens);
    case MS_OP_COPY:
        return op->from_ssd ? ms_t_copy_ssd_h2d(p, op->bytes) : ms_t_copy_h2d(p, op->bytes);
    case MS_OP_EXPERT_GPU:
        return ms_t_expert_gpu(p, op->bytes, op->params, op->tokens);
    case MS_OP_EXPERT_CPU:
        /* without a framework: no CPU dequantisation (ms_exec_sim_duration_timed) */
        return ms_t_expert_cpu_on(p, op->bytes, op->params, op->tokens, 0, 0.0);
    default:
        return 0;
    }
}

double ms_exec_sim_duration(const ms_platform *p, const ms_op *op)
{
    return duration(p, op);
}

/* Dequantisation of an op's weights on the GPU: bytes / dequant_bw when they
 * are quantised (below 16 bits a parameter) and the framework has a rate. */
static double dequant_s(const ms_framework *fw, const ms_op *op)
{
    if (!(fw->dequant_bw > 0) || !(op->bytes * 8.0 < 16.0 * op->params))
        return 0;
    return op->bytes / fw->dequant_bw;
}

/* One expert's copy host -> GPU in copy_calls calls, from pinned or pageable
 * host memory (the SSD read first for a host-tier miss). */
static double copy_timed(const ms_sim_timing *t, const ms_op *op)
{
    const ms_platform *p = t->platform;
    double bw = ms_framework_pageable(t->framework) ? p->pageable_bw : p->h2d_bw;
    /* a swap writes the victim back first, in the same stream order */
    double back = t->framework->writeback ? p->d2h_latency_s + op->bytes / p->d2h_bw : 0;
    if (op->from_ssd) {
        bw = ms_fmin(bw, p->ssd_bw);
        return back + p->ssd_latency_s + t->copy_calls * p->h2d_latency_s + op->bytes / bw;
    }
    return back + t->copy_calls * p->h2d_latency_s + op->bytes / bw;
}

double ms_exec_sim_duration_timed(const ms_sim_timing *t, const ms_op *op)
{
    if (!t->framework)
        return duration(t->platform, op);
    switch (op->kind) {
    case MS_OP_COPY:
        return copy_timed(t, op);
    case MS_OP_EXPERT_GPU:
        return t->framework->expert_s + duration(t->platform, op) + dequant_s(t->framework, op);
    case MS_OP_DENSE:
        return duration(t->platform, op) + dequant_s(t->framework, op);
    case MS_OP_EXPERT_CPU:
        /* the framework's cpu_dequant_bw (per core) when the experts are
         * quantised: below 16 bits a parameter */
        return ms_t_expert_cpu_on(t->platform, op->bytes, op->params, op->tokens, 0,
                                  op->bytes * 8.0 < 16.0 * op->params ? t->framework->cpu_dequant_bw : 0.0);
    default:
        return duration(t->platform, op);
    }
}

static void log_busy(busy_log *b, double t0, double t1)
{
    size_t i = b->n++ % MS_EXEC_SIM_EVENTS;
    b->t0[i] = t0;
    b->t1[i] = t1;
}

/* The end of `work` seconds of an op starting at `start` that runs at
 * 1 / slow of its speed while the other stream is busy (its logged
 * intervals) and at full speed otherwise.  Past the other stream's last
 * submitted op it counts as busy when busy_tail is set: a copy's compute
 * has not been submitted yet (the engine submits a layer's copies before its
 * expert ops, and prefetches layers ahead), but it will run beside the copy:
 * the hits and the experts of earlier copies, the next layers. */
static double stretched_end(const busy_log *other, double start, double work, double slow, int busy_tail)
{
    uint64_t kept = other->n < MS_EXEC_SIM_EVENTS ? other->n : MS_EXEC_SIM_EVENTS;
    uint64_t first = other->n;
    while (first > other->n - kept && other->t1[(first - 1) % MS_EXEC_SIM_EVENTS] > start)
        first--;
    double t = start;
    for (uint64_t j = first; j < other->n; j++) {
        double b0 = ms_fmax(t, other->t0[j % MS_EXEC_SIM_EVENTS]), b1 = other->t1[j % MS_EXEC_SIM_EVENTS];
        if (b0 - t >= work)
            break;
        work -= b0 - t;
        t = b0;
        if ((b1 - t) / slow >= work)
            return t + work * slow;
        work -= (b1 - t) / slow;
        t = b1;
    }
    return t + work * (busy_tail ? slow : 1);
}

/* The op's slowdown from sharing memory with the other stream (profile
 * [contention]): copies always, compute ops when memory-bound. */
static double contention_slowdown(const ms_platform *p, const ms_op *op)
{
    if (op->kind == MS_OP_COPY)
        return 1 + p->copy_contention;
    if (ms_gpu_memory_bound(p, op->bytes, op->params, op->tokens))
        return 1 + p->compute_contention;
    return 1;
}

static int lookup(const sim_exec *s, ms_event ev, double *t0, double *t1, ms_err *err)
{
    size_t i = (size_t)ev % MS_EXEC_SIM_EVENTS;
    if (ev < 0 || ev >= s->next || s->ring_id[i] != ev) {
        ms_fail(err, "simulated executor: event %lld is unknown or older than the last %d events", (long long)ev,
                MS_EXEC_SIM_EVENTS);
        return -1;
    }
    *t0 = s->ring_t0[i];
    *t1 = s->ring_t1[i];
    return 0;
}

static int has_expert(const sim_exec *s, const ms_op *op, ms_err *err)
{
    if (op->layer < s->L && op->expert < s->J)
        return 1;
    ms_fail(err, "simulated executor: expert (%u, %u) outside %u layers x %u experts", op->layer, op->expert, s->L,
            s->J);
    return 0;
}

/* The checks of an op: its kind, its expert, its GPU (out of line: the
 * messages' calls would otherwise cost sim_time registers on every op). */
static __attribute__((noinline)) int bad_op(const sim_exec *s, const ms_op *op, ms_err *err)
{
    if (op->kind < 0 || op->kind >= MS_OP_KINDS)
        return ms_fail(err, "simulated executor: unknown op kind %d", (int)op->kind);
    int expert_op = op->kind == MS_OP_COPY || op->kind == MS_OP_EXPERT_GPU;
    if (expert_op && !has_expert(s, op, err))
        return -1;
    if (op->gpu >= MS_EXEC_SIM_GPUS || (op->gpu > 0 && s->busy[0]))
        return ms_fail(err, "simulated executor: GPU %u outside 0..%d (or with [contention])", op->gpu,
                       MS_EXEC_SIM_GPUS - 1);
    return 0;
}

/* The end of an op of stream k from start with [contention] (busy logs
 * kept); logs its interval. */
static __attribute__((noinline)) double contended_end(sim_exec *s, const ms_op *op, ms_stream k, double start,
                                                      double end)
{
    const busy_log *other = s->busy[k == MS_STREAM_COPY ? 0 : 1];
    end = stretched_end(other, start, end - start, contention_slowdown(s->p, op), k == MS_STREAM_COPY);
    log_busy(s->busy[k == MS_STREAM_COPY ? 1 : 0], start, end);
    return end;
}

/* Times op and records its event; *start_s and *end_s its times. */
static int sim_time(sim_exec *s, const ms_op *op, ms_event *out, double *start_s, double *end_s, ms_err *err)
{
    int expert_op = op->kind == MS_OP_COPY || op->kind == MS_OP_EXPERT_GPU;
    if ((unsigned)op->kind >= MS_OP_KINDS || (expert_op && (op->layer >= s->L || op->expert >= s->J)) ||
        op->gpu >= MS_EXEC_SIM_GPUS || (op->gpu > 0 && s->busy[0]))
        return bad_op(s, op, err) ? -1 : ms_fail(err, "simulated executor: invalid op");
    ms_stream k = ms_op_stream(op->kind);
    double *stream_end = &s->stream_end[k == MS_STREAM_CPU ? 0 : op->gpu][k];
    double start = ms_fmax(op->not_before_s, *stream_end);
    if (op->after != MS_NO_EVENT) {
        double a0, a1;
        if (lookup(s, op->after, &a0, &a1, err))
            return -1;
        start = ms_fmax(start, a1);
    }
    size_t x = expert_op ? (size_t)op->layer * s->J + op->expert : 0;
    if (op->kind == MS_OP_EXPERT_GPU)
        start = ms_fmax(start, s->copy_end[x]);
    if (s->sync_copies && op->kind == MS_OP_COPY) /* after the compute stream's previous op */
        start = ms_fmax(start, s->stream_end[op->gpu][MS_STREAM_COMPUTE]);
    double end = start + (s->timed ? ms_exec_sim_duration_timed(&s->t, op) : duration(s->p, op));
    if (s->busy[0] && k != MS_STREAM_CPU)
        end = contended_end(s, op, k, start, end);
    *stream_end = end;
    if (op->kind == MS_OP_COPY)
        s->copy_end[x] = end;
    if (s->sync_copies && op->kind == MS_OP_COPY) /* the compute stream waits for it */
        s->stream_end[op->gpu][MS_STREAM_COMPUTE] = ms_fmax(s->stream_end[op->gpu][MS_STREAM_COMPUTE], end);
    ms_event ev = s->next++;
    size_t i = (size_t)ev % MS_EXEC_SIM_EVENTS;
    s->ring_id[i] = ev;
    s->ring_t0[i] = start;
    s->ring_t1[i] = end;
    *out = ev;
    *start_s = start;
    *end_s = end;
    return 0;
}

static int sim_submit(void *st, const ms_op *op, ms_event *out, ms_err *err)
{
    double start, end;
    return sim_time(st, op, out, &start, &end, err);
}

static int sim_run(void *st, const ms_op *op, double *start_s, double *end_s, ms_err *err)
{
    ms_event ev;
    return sim_time(st, op, &ev, start_s, end_s, err);
}

static int sim_wait(void *st, ms_event ev, double *start_s, double *end_s, ms_err *err)
{
    return lookup(st, ev, start_s, end_s, err);
}

static int sim_release(void *st, uint32_t layer, uint32_t expert, ms_err *err)
{
    (void)st, (void)layer, (void)expert, (void)err;
    return 0;
}

/* Time 0: copies before the run (a preloaded cache) are ready at 0. */
static int sim_begin(void *st, ms_err *err)
{
    (void)err;
    sim_exec *s = st;
    for (int g = 0; g < MS_EXEC_SIM_GPUS; g++)
        for (int k = 0; k < MS_STREAMS; k++)
            s->stream_end[g][k] = 0;
    for (size_t x = 0; x < (size_t)s->L * s->J; x++)
        s->copy_end[x] = 0;
    for (int i = 0; i < 2 && s->busy[0]; i++)
        s->busy[i]->n = 0;
    return 0;
}

static void sim_destroy(void *st)
{
    sim_exec *s = st;
    if (!s)
        return;
    free(s->copy_end);
    free(s->busy[0]);
    free(s->busy[1]);
    free(s);
}

static const ms_exec_ops sim_ops = {
    .name = "sim",
    .submit = sim_submit,
    .wait = sim_wait,
    .release = sim_release,
    .begin = sim_begin,
    .destroy = sim_destroy,
    .run = sim_run,
};

int ms_exec_sim_create(const ms_platform *p, uint32_t layers, uint32_t experts, ms_exec *out, ms_err *err)
{
    ms_sim_timing t = {.platform = p, .framework = NULL, .copy_calls = 1};
    return ms_exec_sim_create_timed(&t, layers, experts, out, err);
}

int ms_exec_sim_create_timed(const ms_sim_timing *t, uint32_t layers, uint32_t experts, ms_exec *out, ms_err *err)
{
    const ms_platform *p = t->platform;
    if (!p || !layers || !experts || t->copy_calls < 1) {
        ms_fail(err, "simulated executor: needs a platform profile, at least one layer and expert and one call per copy");
        return -1;
    }
    sim_exec *s = ms_xcalloc(1, sizeof *s);
    s->p = p;
    s->t = *t;
    s->timed = t->framework != NULL;
    s->sync_copies = ms_framework_sync_copies(t->framework);
    s->L = layers;
    s->J = experts;
    s->copy_end = ms_xcalloc((size_t)layers * experts, sizeof *s->copy_end);
    for (size_t i = 0; i < MS_EXEC_SIM_EVENTS; i++)
        s->ring_id[i] = MS_NO_EVENT;
    if (p->copy_contention > 0 || p->compute_contention > 0)
        for (int i = 0; i < 2; i++)
            s->busy[i] = ms_xcalloc(1, sizeof *s->busy[i]);
    out->ops = &sim_ops;
    out->st = s;
    return 0;
}
