/* The host backend (kernels/host_backend.h) against the executor contract:
 * stream order, `after`, a GPU expert after its slot's copy, slot reuse
 * after the last reader, release and "no free slot", times, an FFN whose
 * time grows with tokens, errors, and destroy with ops pending. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/backend.h"
#include "kernels/host_backend.h"
#include "kernels/host_ffn.h"

#define TOK 32

static ms_model tiny_model(void)
{
    ms_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "tiny");
    m.hidden = 256;
    m.expert_ffn = 512;
    m.expert_matrices = 3;
    m.expert_params = 3ull * 256 * 512;
    m.expert_bytes = 2 * m.expert_params;
    m.dense_params = 256ull * 1024;
    m.dense_bytes = 2 * m.dense_params;
    return m;
}

static ms_backend_config tiny_config(const ms_model *m)
{
    ms_backend_config c = {.model = m, .layers = 2, .experts = 4, .slots = 2, .max_tokens = TOK, .expert_scale = 1,
                           .cpu_threads = 1};
    return c;
}

/* A host backend of config c, its clock started. */
static void start_host(const ms_backend_config *c, ms_exec *x)
{
    ms_err err;
    CHECK_EQ_INT(ms_backend_create("host", c, x, &err), 0);
    CHECK_EQ_INT(ms_exec_begin(x, &err), 0);
}

static ms_op op_of(ms_op_kind kind, uint32_t layer, uint32_t expert, uint32_t tokens, ms_event after,
                   const ms_backend_config *c)
{
    ms_op op = {.kind = kind, .layer = layer, .expert = expert, .tokens = tokens, .after = after, .demand = 1};
    op.bytes = kind == MS_OP_DENSE ? (double)c->model->dense_bytes : ms_backend_expert_bytes(c);
    op.params = kind == MS_OP_DENSE ? (double)c->model->dense_params : ms_backend_expert_params(c);
    if (kind == MS_OP_COPY)
        op.params = 0, op.tokens = 0;
    return op;
}

typedef struct {
    double t0, t1;
} span;

static ms_event submit_ok(ms_exec *x, ms_op op)
{
    ms_event ev = MS_NO_EVENT;
    ms_err err;
    int rc = ms_exec_submit(x, &op, &ev, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc)
        fprintf(stderr, "submit: %s\n", err.msg);
    return ev;
}

static span wait_ok(ms_exec *x, ms_event ev)
{
    span s = {-1, -1};
    ms_err err;
    CHECK_EQ_INT(ms_exec_wait(x, ev, &s.t0, &s.t1, &err), 0);
    CHECK(s.t0 <= s.t1);
    return s;
}

static void test_ffn_matmul(void)
{
    /* y = x W with W = [[1, 2], [3, 4], [5, 6]] (bf16-exact), x = [[1, 0.5, -1]] */
    uint16_t w[6];
    for (int i = 0; i < 6; i++)
        w[i] = ms_float_to_bf16((float)(i + 1));
    float x[3] = {1, 0.5f, -1}, y[2];
    ms_ffn_matmul(x, w, y, 1, 3, 2);
    CHECK_NEAR(y[0], 1 + 1.5 - 5, 1e-6);
    CHECK_NEAR(y[1], 2 + 2 - 6, 1e-6);
    CHECK_NEAR(ms_bf16_to_float(ms_float_to_bf16(0.1f)), 0.10009765625, 1e-12);
}

/* The streaming kernel against a naive triple loop (double accumulation):
 * token counts across the 64-row token block, `in` not a multiple of 4,
 * `out` not a multiple of 16, and an `out` large enough to be split into
 * column blocks at many tokens. */
static void test_ffn_matmul_reference(void)
{
    static const uint32_t shapes[][3] = {{1, 7, 5}, {3, 13, 33}, {5, 64, 130}, {70, 37, 300}, {64, 9, 1000}, {65, 6, 17}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t T = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = malloc((size_t)T * in * sizeof *x), *y = malloc((size_t)T * out * sizeof *y);
        uint16_t *w = malloc((size_t)in * out * sizeof *w);
        for (size_t i = 0; i < (size_t)T * in; i++)
            x[i] = (float)((int)(i * 7 % 11) - 5) * 0.25f;
        for (size_t i = 0; i < (size_t)in * out; i++)
            w[i] = ms_float_to_bf16((float)((int)(i * 13 % 17) - 8) * 0.125f);
        for (size_t i = 0; i < (size_t)T * out; i++)
            y[i] = 1e30f; /* every output is written, not accumulated onto */
        ms_ffn_matmul(x, w, y, T, in, out);
        double worst = 0;
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t c = 0; c < out; c++) {
                double ref = 0;
                for (uint32_t k = 0; k < in; k++)
                    ref += (double)x[(size_t)t * in + k] * ms_bf16_to_float(w[(size_t)k * out + c]);
                double d = fabs(ref - y[(size_t)t * out + c]);
                worst = d > worst ? d : worst;
            }
        CHECK(worst < 1e-4); /* the products are exact in float: only the summation order differs */
        free(x);
        free(y);
        free(w);
    }
}

static void test_stream_order_and_after(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    ms_exec x;
    start_host(&c, &x);
    ms_event d[3];
    for (int i = 0; i < 3; i++)
        d[i] = submit_ok(&x, op_of(MS_OP_DENSE, 0, UINT32_MAX, TOK, MS_NO_EVENT, &c));
    /* a CPU expert and a copy that wait for the second dense op */
    ms_event cpu = submit_ok(&x, op_of(MS_OP_EXPERT_CPU, 1, 3, TOK, d[1], &c));
    ms_event cp = submit_ok(&x, op_of(MS_OP_COPY, 0, 0, 0, d[1], &c));
    span s[3];
    for (int i = 0; i < 3; i++)
        s[i] = wait_ok(&x, d[i]);
    for (int i = 1; i < 3; i++)
        CHECK(s[i].t0 >= s[i - 1].t1);
    CHECK(s[0].t0 >= 0);
    span sc = wait_ok(&x, cpu), sp = wait_ok(&x, cp);
    CHECK(sc.t0 >= s[1].t1);
    CHECK(sp.t0 >= s[1].t1);
    ms_exec_destroy(&x);
}

/* The copy waits (via `after`) for a slow CPU op; the GPU expert, alone on
 * the compute stream, must still wait for the copy. */
static void test_expert_waits_for_copy(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    ms_exec x;
    start_host(&c, &x);
    ms_event slow = submit_ok(&x, op_of(MS_OP_EXPERT_CPU, 0, 1, TOK, MS_NO_EVENT, &c));
    ms_event cp = submit_ok(&x, op_of(MS_OP_COPY, 1, 2, 0, slow, &c));
    ms_event run = submit_ok(&x, op_of(MS_OP_EXPERT_GPU, 1, 2, 1, MS_NO_EVENT, &c));
    span a = wait_ok(&x, slow), b = wait_ok(&x, cp), r = wait_ok(&x, run);
    CHECK(b.t0 >= a.t1);
    CHECK(r.t0 >= b.t1);
    ms_exec_destroy(&x);
}

/* A copy into a released slot waits for the last op that read it. */
static void test_slot_reuse_waits_for_reader(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    ms_exec x;
    ms_err err;
    CHECK_EQ_INT(ms_backend_create("host", &c, &x, &err), 0);
    ms_event c0 = submit_ok(&x, op_of(MS_OP_COPY, 0, 0, 0, MS_NO_EVENT, &c));
    ms_event c1 = submit_ok(&x, op_of(MS_OP_COPY, 0, 1, 0, MS_NO_EVENT, &c));
    CHECK_EQ_INT(ms_exec_begin(&x, &err), 0); /* preloaded: both copies read 0 */
    span p0 = wait_ok(&x, c0), p1 = wait_ok(&x, c1);
    CHECK(p0.t0 == 0 && p0.t1 == 0 && p1.t1 == 0);
    ms_event d = submit_ok(&x, op_of(MS_OP_DENSE, 0, UINT32_MAX, TOK, MS_NO_EVENT, &c));
    ms_event r0 = submit_ok(&x, op_of(MS_OP_EXPERT_GPU, 0, 0, TOK, MS_NO_EVENT, &c));
    CHECK_EQ_INT(ms_exec_release(&x, 0, 0, &err), 0);
    /* no free slot: (0,1) holds the other */
    ms_op extra = op_of(MS_OP_COPY, 1, 1, 0, MS_NO_EVENT, &c);
    ms_event ev;
    ms_event c2 = submit_ok(&x, op_of(MS_OP_COPY, 0, 2, 0, MS_NO_EVENT, &c));
    CHECK_EQ_INT(ms_exec_submit(&x, &extra, &ev, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "no free slot for expert (1, 1): all 2 slots hold experts");
    span sd = wait_ok(&x, d), sr = wait_ok(&x, r0), s2 = wait_ok(&x, c2);
    CHECK(sr.t0 >= sd.t1);
    CHECK(s2.t0 >= sr.t1);
    /* the slot (0,1) had: release it and the extra copy fits */
    CHECK_EQ_INT(ms_exec_release(&x, 0, 1, &err), 0);
    CHECK_EQ_INT(ms_exec_submit(&x, &extra, &ev, &err), 0);
    wait_ok(&x, ev);
    ms_exec_destroy(&x);
}

static void test_errors(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    ms_exec x;
    ms_err err;
    CHECK_EQ_INT(ms_backend_create("host", &c, &x, &err), 0);
    ms_event ev;
    double t0, t1;
    ms_op bad = op_of(MS_OP_EXPERT_GPU, 0, 3, 1, MS_NO_EVENT, &c);
    CHECK_EQ_INT(ms_exec_submit(&x, &bad, &ev, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "GPU expert (0, 3) is in no slot");
    bad = op_of(MS_OP_COPY, 2, 0, 0, MS_NO_EVENT, &c);
    CHECK_EQ_INT(ms_exec_submit(&x, &bad, &ev, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "expert (2, 0) outside 2 layers x 4 experts");
    bad = op_of(MS_OP_DENSE, 0, UINT32_MAX, TOK + 1, MS_NO_EVENT, &c);
    CHECK_EQ_INT(ms_exec_submit(&x, &bad, &ev, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "op of 33 token rows exceeds max_tokens 32");
    bad = op_of(MS_OP_COPY, 0, 0, 0, MS_NO_EVENT, &c);
    bad.bytes += 1;
    CHECK_EQ_INT(ms_exec_submit(&x, &bad, &ev, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "copy of 786433 bytes for expert (0, 0): an expert holds 786432 bytes");
    bad = op_of(MS_OP_EXPERT_CPU, 0, 0, 1, 7, &c);
    CHECK_EQ_INT(ms_exec_submit(&x, &bad, &ev, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "`after` event 7 is unknown (0 events submitted)");
    CHECK_EQ_INT(ms_exec_wait(&x, 0, &t0, &t1, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "wait on event 0 is unknown");
    CHECK_EQ_INT(ms_exec_release(&x, 1, 1, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "release of expert (1, 1), which is in no slot");
    CHECK_EQ_INT(x.ops->time_expert(x.st, TOK + 1, 1, &t0, &err), -1);
    ms_exec_destroy(&x);

    ms_model big = tiny_model();
    big.hidden = 4096, big.expert_ffn = 14336;
    ms_backend_config cb = tiny_config(&big);
    cb.layers = 100000, cb.experts = 1000;
    CHECK_EQ_INT(ms_backend_create("host", &cb, &x, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "of host memory is available; try --expert-scale");
    CHECK_STR_CONTAINS(err.msg, "store 100000 x 1000 experts x 336.00 MiB");
    cb = tiny_config(&m);
    cb.expert_scale = 0;
    CHECK_EQ_INT(ms_backend_create("host", &cb, &x, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "expert scale 0 outside (0, 1]");
    CHECK_EQ_INT(ms_backend_available("tpu", &err), 0);
    CHECK_STR_CONTAINS(err.msg, "unknown backend 'tpu' (known: host, cuda)");
    CHECK_EQ_INT(ms_backend_available("host", &err), 1);
#ifndef MS_HAVE_CUDA
    CHECK_EQ_INT(ms_backend_available("cuda", &err), 0);
    CHECK_STR_CONTAINS(err.msg, "moesim was not built with CUDA (nvcc was not found when it was configured)");
    CHECK_EQ_INT(ms_backend_create("cuda", &c, &x, &err), -1);
#endif
}

/* Scaled experts: expert_ffn 512 x 0.25 = 128; bytes and params shrink by 4. */
static void test_scale(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    c.expert_scale = 0.25;
    CHECK_EQ_INT(ms_backend_expert_ffn(&c), 128);
    CHECK_NEAR(ms_backend_expert_bytes(&c), m.expert_bytes / 4.0, 0);
    c.expert_scale = 1e-9;
    CHECK_EQ_INT(ms_backend_expert_ffn(&c), 1);
}

/* The FFN's time follows tokens: 32 rows cost several times 1 row (a
 * kernel that ignored tokens would give a ratio near 1). */
static void test_expert_time_grows(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    ms_exec x;
    ms_err err;
    CHECK_EQ_INT(ms_backend_create("host", &c, &x, &err), 0);
    /* the fastest of 5 timings each: a run preempted by another process on
     * a loaded host (CI shares 2 cores) only ever makes a timing longer */
    double t1 = INFINITY, t32 = INFINITY;
    for (int rep = 0; rep < 5; rep++) {
        double a, b;
        CHECK_EQ_INT(x.ops->time_expert(x.st, 1, 7, &a, &err), 0);
        CHECK_EQ_INT(x.ops->time_expert(x.st, TOK, 7, &b, &err), 0);
        t1 = a < t1 ? a : t1;
        t32 = b < t32 ? b : t32;
    }
    printf("expert FFN: 1 token %.3f ms, %d tokens %.3f ms (ratio %.1f)\n", t1 * 1e3, TOK, t32 * 1e3, t32 / t1);
    CHECK(t32 / t1 > 3 && t32 / t1 < 256); /* linear: <= 32 plus scheduling noise; quadratic: ~1000 */
    double tc;
    CHECK_EQ_INT(x.ops->time_copy(x.st, 1 << 20, 1, 0, 3, &tc, &err), 0);
    CHECK(tc > 0);
    CHECK(ms_host_backend_pinned_note(&x) != NULL);
    ms_exec_destroy(&x);
}

/* Times are monotone on each stream over a mixed workload. */
static void test_monotone_streams(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    ms_exec x;
    ms_err err;
    start_host(&c, &x);
    ms_event ev[40];
    ms_stream st[40];
    int n = 0;
    for (uint32_t e = 0; e < 8; e++) {
        uint32_t l = e / 4, j = e % 4;
        ev[n] = submit_ok(&x, op_of(MS_OP_COPY, l, j, 0, MS_NO_EVENT, &c)), st[n++] = MS_STREAM_COPY;
        ev[n] = submit_ok(&x, op_of(MS_OP_EXPERT_GPU, l, j, 1 + e, MS_NO_EVENT, &c)), st[n++] = MS_STREAM_COMPUTE;
        ev[n] = submit_ok(&x, op_of(MS_OP_EXPERT_CPU, l, (j + 1) % 4, 2, ev[n - 2], &c)), st[n++] = MS_STREAM_CPU;
        ev[n] = submit_ok(&x, op_of(MS_OP_DENSE, l, UINT32_MAX, 4, MS_NO_EVENT, &c)), st[n++] = MS_STREAM_COMPUTE;
        CHECK_EQ_INT(ms_exec_release(&x, l, j, &err), 0);
    }
    double last_end[MS_STREAMS] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        span s = wait_ok(&x, ev[i]);
        CHECK(s.t0 >= last_end[st[i]]);
        last_end[st[i]] = s.t1;
    }
    ms_exec_destroy(&x);
}

/* Destroy with ops pending: threads joined, memory freed (ASan/LSan). */
static void test_destroy_pending(void)
{
    ms_model m = tiny_model();
    ms_backend_config c = tiny_config(&m);
    ms_exec x;
    ms_err err;
    CHECK_EQ_INT(ms_backend_create("host", &c, &x, &err), 0);
    for (int i = 0; i < 20; i++) {
        submit_ok(&x, op_of(MS_OP_DENSE, 0, UINT32_MAX, TOK, MS_NO_EVENT, &c));
        submit_ok(&x, op_of(MS_OP_EXPERT_CPU, 0, 0, TOK, MS_NO_EVENT, &c));
    }
    ms_exec_destroy(&x);
}

int main(void)
{
    test_ffn_matmul();
    test_ffn_matmul_reference();
    test_stream_order_and_after();
    test_expert_waits_for_copy();
    test_slot_reuse_waits_for_reader();
    test_errors();
    test_scale();
    test_expert_time_grows();
    test_monotone_streams();
    test_destroy_pending();
    CHECK_DONE();
}
