/* The CUDA backend (kernels/cuda_backend.h) keeps the executor contract
 * (sim/engine/exec.h) on a real GPU:
 *   - ops on one stream run in submission order; an op waits for `after`;
 *   - a GPU expert waits for the copy that filled its slot; a copy into a
 *     reused slot waits for the slot's last reader;
 *   - a copy of B bytes puts exactly those B bytes in the slot (copied back
 *     and compared; the bytes past B keep the slot's earlier content);
 *   - no free slot, an expert holding no slot, CPU experts, too many tokens,
 *     an unknown event: one-line errors;
 *   - times: end >= start >= 0 after begin(); an expert's time grows with
 *     its tokens; a second wait() on an event gives the same times;
 *   - calibration probes give positive, plausible copy times;
 *   - oversized stores and slot pools fail before allocating, naming
 *     --expert-scale.
 * Config errors are checked everywhere; the rest needs a device: without
 * one the test checks the "no CUDA device" message and exits 77 (skipped). */
#include <stdint.h>

#include "check.h"
#include "kernels/cuda_backend.h"

#define TOL 1e-6 /* seconds: event resolution and float rounding */
#define HIDDEN 1024
#define FFN 2048
#define MAX_TOKENS 4096

static ms_model model;

static void make_model(void)
{
    memset(&model, 0, sizeof model);
    snprintf(model.name, sizeof model.name, "tiny");
    snprintf(model.dtype, sizeof model.dtype, "bf16");
    model.layers = model.moe_layers = 2;
    model.experts = 4;
    model.top_k = 2;
    model.hidden = HIDDEN;
    model.expert_ffn = FFN;
    model.expert_matrices = 3;
    model.expert_params = 3ull * HIDDEN * FFN;
    model.expert_bytes = 2 * model.expert_params;
    model.dense_params = 2ull * HIDDEN * HIDDEN;
    model.dense_bytes = 2 * model.dense_params;
}

static ms_backend_config config(void)
{
    ms_backend_config c = {&model, 2, 4, 3, MAX_TOKENS, 1.0, 1};
    return c;
}

static ms_op op_of(ms_op_kind kind, uint32_t layer, uint32_t expert, uint32_t tokens, ms_event after)
{
    ms_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.layer = layer;
    op.expert = expert;
    op.tokens = tokens;
    op.after = after;
    op.iteration = 0;
    if (kind == MS_OP_COPY)
        op.bytes = (double)model.expert_bytes;
    else if (kind == MS_OP_DENSE) {
        op.expert = UINT32_MAX;
        op.bytes = (double)model.dense_bytes;
        op.params = (double)model.dense_params;
    } else {
        op.bytes = (double)model.expert_bytes;
        op.params = (double)model.expert_params;
    }
    return op;
}

static ms_event submit(ms_exec *x, ms_op op)
{
    ms_event ev;
    ms_err err;
    if (ms_exec_submit(x, &op, &ev, &err)) {
        fprintf(stderr, "submit (kind %d, layer %u, expert %u): %s\n", (int)op.kind, op.layer, op.expert, err.msg);
        exit(1);
    }
    return ev;
}

typedef struct {
    double t0, t1;
} span;

static span wait_for(ms_exec *x, ms_event ev)
{
    span s = {-1, -1};
    ms_err err;
    if (ms_exec_wait(x, ev, &s.t0, &s.t1, &err)) {
        fprintf(stderr, "wait: %s\n", err.msg);
        exit(1);
    }
    CHECK(s.t1 >= s.t0);
    CHECK(s.t0 >= -TOL);
    return s;
}

static void expect_submit_error(ms_exec *x, ms_op op, const char *needle)
{
    ms_event ev;
    ms_err err;
    err.msg[0] = 0;
    CHECK(ms_exec_submit(x, &op, &ev, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK(!strchr(err.msg, '\n'));
}

static void expect_create_error(ms_backend_config c, const char *needle)
{
    ms_exec x;
    ms_err err;
    err.msg[0] = 0;
    CHECK(ms_cuda_backend_create(&c, &x, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK(!strchr(err.msg, '\n'));
}

static void check_config_errors(void)
{
    ms_backend_config c = config();
    c.expert_scale = 0;
    expect_create_error(c, "expert_scale 0 is out of range (0, 1]");
    c = config();
    c.slots = 0;
    expect_create_error(c, "slots 0");
    c = config();
    c.model = NULL;
    expect_create_error(c, "no model profile");
}

/* Stream order and `after`, on a fresh clock. */
static void check_order(ms_exec *x)
{
    ms_event c1 = submit(x, op_of(MS_OP_COPY, 0, 0, 0, MS_NO_EVENT));
    ms_event c2 = submit(x, op_of(MS_OP_COPY, 0, 1, 0, MS_NO_EVENT));
    ms_event d1 = submit(x, op_of(MS_OP_DENSE, 0, 0, 512, MS_NO_EVENT));
    ms_event d2 = submit(x, op_of(MS_OP_DENSE, 1, 0, 512, MS_NO_EVENT));
    ms_event d3 = submit(x, op_of(MS_OP_DENSE, 0, 0, 1, c2));  /* compute after a copy */
    ms_event c3 = submit(x, op_of(MS_OP_COPY, 0, 2, 0, d2));   /* copy after a compute op */
    span s1 = wait_for(x, c1), s2 = wait_for(x, c2), sd1 = wait_for(x, d1), sd2 = wait_for(x, d2);
    span sd3 = wait_for(x, d3), s3 = wait_for(x, c3);
    CHECK(s2.t0 >= s1.t1 - TOL);
    CHECK(sd2.t0 >= sd1.t1 - TOL);
    CHECK(sd3.t0 >= sd2.t1 - TOL);
    CHECK(sd3.t0 >= s2.t1 - TOL);
    CHECK(s3.t0 >= sd2.t1 - TOL);
    CHECK(s3.t0 >= s2.t1 - TOL);
    CHECK(sd1.t1 - sd1.t0 > 0);
    /* a second read of an event gives the same times; `after` on a read event is satisfied */
    span again = wait_for(x, c2);
    CHECK(again.t0 == s2.t0 && again.t1 == s2.t1);
    wait_for(x, submit(x, op_of(MS_OP_DENSE, 0, 0, 1, c1)));
}

/* Slots (0,0), (0,1), (0,2) are full: the copy dependency, slot reuse, errors. */
static void check_slots(ms_exec *x)
{
    ms_err err;
    expect_submit_error(x, op_of(MS_OP_COPY, 1, 1, 0, MS_NO_EVENT), "no free slot for the copy of expert (1, 1)");
    expect_submit_error(x, op_of(MS_OP_EXPERT_GPU, 1, 1, 8, MS_NO_EVENT), "GPU expert (1, 1) holds no slot");
    CHECK(ms_exec_release(x, 1, 1, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "release of expert (1, 1), which holds no slot");
    CHECK(ms_exec_release(x, 2, 0, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "outside 2 layers x 4 experts");

    /* a long reader of (0,0), then (0,0) evicted and (1,0) copied into its slot */
    ms_event reader = submit(x, op_of(MS_OP_EXPERT_GPU, 0, 0, MAX_TOKENS, MS_NO_EVENT));
    CHECK(ms_exec_release(x, 0, 0, &err) == 0);
    expect_submit_error(x, op_of(MS_OP_EXPERT_GPU, 0, 0, 8, MS_NO_EVENT), "GPU expert (0, 0) holds no slot");

    size_t bytes = 0;
    unsigned char *host10 = ms_cuda_backend_host_expert(x, 1, 0, &bytes), *host00 = ms_cuda_backend_host_expert(x, 0, 0, &bytes);
    CHECK(host10 && host00 && bytes >= model.expert_bytes);
    if (!host10 || !host00)
        return;
    for (size_t i = 0; i < bytes; i++)
        host10[i] = (unsigned char)(i * 131 + 7);
    size_t B = (size_t)model.expert_bytes - 1003; /* odd, short of the slot */
    ms_op copy = op_of(MS_OP_COPY, 1, 0, 0, MS_NO_EVENT);
    copy.bytes = (double)B;
    ms_event c = submit(x, copy);
    ms_event e = submit(x, op_of(MS_OP_EXPERT_GPU, 1, 0, 1, MS_NO_EVENT)); /* compute is idle once the reader is done */
    span sr = wait_for(x, reader), sc = wait_for(x, c), se = wait_for(x, e);
    CHECK(sc.t0 >= sr.t1 - TOL); /* the slot's last reader first */
    CHECK(se.t0 >= sc.t1 - TOL); /* the expert after its copy */

    unsigned char *back = malloc(bytes);
    CHECK(ms_cuda_backend_read_slot(x, 1, 0, back, bytes, &err) == 0);
    CHECK(memcmp(back, host10, B) == 0);
    CHECK(memcmp(back + B, host00 + B, bytes - B) == 0); /* untouched past B */
    free(back);

    /* a copy on an idle copy stream, then its expert on an idle compute stream */
    CHECK(ms_exec_release(x, 0, 1, &err) == 0);
    ms_event c11 = submit(x, op_of(MS_OP_COPY, 1, 1, 0, MS_NO_EVENT));
    ms_event e11 = submit(x, op_of(MS_OP_EXPERT_GPU, 1, 1, 16, MS_NO_EVENT));
    span s11 = wait_for(x, c11), t11 = wait_for(x, e11);
    CHECK(t11.t0 >= s11.t1 - TOL);
}

static void check_errors(ms_exec *x)
{
    ms_err err;
    double a, b;
    expect_submit_error(x, op_of(MS_OP_EXPERT_CPU, 1, 0, 4, MS_NO_EVENT), "CPU experts are not supported by the cuda backend yet");
    expect_submit_error(x, op_of(MS_OP_DENSE, 0, 0, MAX_TOKENS + 1, MS_NO_EVENT), "more than max_tokens 4096");
    expect_submit_error(x, op_of(MS_OP_COPY, 2, 0, 0, MS_NO_EVENT), "outside 2 layers x 4 experts");
    expect_submit_error(x, op_of(MS_OP_DENSE, 0, 0, 4, (ms_event)12345678), "never issued");
    ms_op big = op_of(MS_OP_DENSE, 0, 0, 4, MS_NO_EVENT);
    big.params = 4.0 * model.dense_params;
    expect_submit_error(x, big, "more than the dense buffer's");
    CHECK(ms_exec_wait(x, (ms_event)987654321, &a, &b, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "never issued");
}

/* Compute ops in submission order: starts never go back; more tokens take longer. */
static void check_times(ms_exec *x)
{
    ms_err err;
    CHECK(ms_exec_begin(x, &err) == 0);
    ms_event ev[6];
    uint32_t tokens[6] = {1, MAX_TOKENS, 1, MAX_TOKENS, 64, 1};
    for (int i = 0; i < 6; i++)
        ev[i] = submit(x, op_of(MS_OP_EXPERT_GPU, 1, 0, tokens[i], MS_NO_EVENT));
    span s[6];
    for (int i = 0; i < 6; i++)
        s[i] = wait_for(x, ev[i]);
    for (int i = 1; i < 6; i++)
        CHECK(s[i].t0 >= s[i - 1].t1 - TOL);
    CHECK(s[3].t1 - s[3].t0 > s[2].t1 - s[2].t0);

    double one = 0, many = 0;
    CHECK(x->ops->time_expert(x->st, 1, 5, &one, &err) == 0);
    CHECK(x->ops->time_expert(x->st, MAX_TOKENS, 5, &many, &err) == 0);
    printf("expert FFN %ux%ux3: 1 token %.1f us, %u tokens %.1f us\n", HIDDEN, FFN, one * 1e6, MAX_TOKENS, many * 1e6);
    CHECK(one > 0);
    CHECK(many > 1.5 * one);
    CHECK(x->ops->time_expert(x->st, MAX_TOKENS + 1, 1, &one, &err) == -1);
}

static void check_copy_probes(ms_exec *x)
{
    ms_err err;
    double bytes = 64.0 * 1024 * 1024;
    for (int dir = 0; dir < 2; dir++)
        for (int pageable = 0; pageable < 2; pageable++) {
            double s = 0;
            CHECK(x->ops->time_copy(x->st, bytes, !dir, pageable, 3, &s, &err) == 0);
            printf("copy 64 MiB %s %s: %.3f ms, %.1f GB/s\n", dir ? "D2H" : "H2D", pageable ? "pageable" : "pinned",
                   s * 1e3, bytes / s / 1e9);
            CHECK(s > 0);
            CHECK(bytes / s > 1e9 && bytes / s < 1e12);
        }
    double s = 0;
    CHECK(x->ops->time_copy(x->st, 4096, 1, 0, 5, &s, &err) == 0);
    CHECK(s > 0 && s < 1e-2);
}

static void check_memory_errors(void)
{
    ms_backend_config c = config();
    c.slots = 1000000; /* 12 MiB each: 11.7 TiB */
    expect_create_error(c, "--expert-scale");
    expect_create_error(c, "GiB free");
    c = config();
    c.layers = 100000;
    c.experts = 1000;
    expect_create_error(c, "MemAvailable");
}

int main(void)
{
    ms_err err;
    make_model();
    check_config_errors();
    if (!ms_cuda_available(&err)) {
        CHECK_STR_CONTAINS(err.msg, "no CUDA device (cudaGetDeviceCount: ");
        CHECK(!strchr(err.msg, '\n'));
        ms_backend_config c = config();
        expect_create_error(c, "no CUDA device (cudaGetDeviceCount: ");
        if (ms_check_failures)
            CHECK_DONE();
        printf("%s: skipped\n", err.msg);
        return 77;
    }
    ms_backend_config c = config();
    ms_exec x;
    if (ms_cuda_backend_create(&c, &x, &err)) {
        fprintf(stderr, "create: %s\n", err.msg);
        return 1;
    }
    CHECK(strcmp(x.ops->name, "cuda") == 0);
    CHECK(ms_exec_begin(&x, &err) == 0);
    check_order(&x);
    check_slots(&x);
    check_errors(&x);
    check_times(&x);
    check_copy_probes(&x);
    ms_exec_destroy(&x);
    check_memory_errors();
    CHECK_DONE();
}
