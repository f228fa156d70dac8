/* The simulated timeline (sim/engine/exec.h), exact times by hand:
 *   - without [contention]: stream order, `after`, not_before and a GPU
 *     expert waiting for its copy, durations from the timing model;
 *   - with [contention]: a copy at half speed while the compute stream is
 *     busy (and past its last submitted op), a memory-bound compute op at
 *     1/1.5 speed while a copy runs (not past the copy stream's last op),
 *     gaps between the other stream's ops at full speed, compute-bound and
 *     CPU ops never slowed, and begin() forgetting what ran before the run. */
#include <stdio.h>

#include "check.h"
#include "sim/engine/exec.h"

#define MS_ 1e-3

/* 1 GB/s link and HBM, no latencies, so 1e6 bytes take 1 ms; FLOP/s high
 * enough that everything but compute_bound() is memory-bound. */
static ms_platform test_platform(double copy_contention, double compute_contention)
{
    ms_platform p = {.hbm_bw = 1e9, .gpu_flops = 1e12, .h2d_bw = 1e9, .d2h_bw = 1e9, .pageable_bw = 1e9,
                     .copy_engines = 1, .cpu_cores = 1, .dram_bw = 1e9, .cpu_flops_per_core = 1e12,
                     .ssd_bw = 1e9, .gpu_mem_bytes = 1e12};
    p.copy_contention = copy_contention;
    p.compute_contention = compute_contention;
    return p;
}

static ms_op dense(double bytes)
{
    return (ms_op){.kind = MS_OP_DENSE, .expert = UINT32_MAX, .tokens = 1, .bytes = bytes, .params = bytes / 2,
                   .after = MS_NO_EVENT, .iteration = 0};
}

/* 2 x params x tokens / FLOP/s = 2e9 x 1 / 1e12 = 2 ms > bytes / bw = 1 ms. */
static ms_op compute_bound(void)
{
    ms_op o = dense(1e6);
    o.params = 1e9;
    return o;
}

static ms_op copy(uint32_t expert, double bytes)
{
    return (ms_op){.kind = MS_OP_COPY, .expert = expert, .bytes = bytes, .demand = 1, .after = MS_NO_EVENT,
                   .iteration = 0};
}

static ms_op expert_op(ms_op_kind kind, uint32_t expert, double bytes)
{
    return (ms_op){.kind = kind, .expert = expert, .tokens = 1, .bytes = bytes, .params = bytes / 2,
                   .after = MS_NO_EVENT, .iteration = 0};
}

/* Submits op and checks its start and end (ms). */
static ms_event expect(ms_exec *x, ms_op op, double t0_ms, double t1_ms, int line)
{
    ms_event ev;
    ms_err err;
    double t0 = -1, t1 = -1;
    if (ms_exec_submit(x, &op, &ev, &err) || ms_exec_wait(x, ev, &t0, &t1, &err)) {
        fprintf(stderr, "line %d: %s\n", line, err.msg);
        CHECK(0);
        return MS_NO_EVENT;
    }
    if (fabs(t0 - t0_ms * MS_) > 1e-12 || fabs(t1 - t1_ms * MS_) > 1e-12) {
        fprintf(stderr, "line %d: got [%.6f, %.6f] ms, expected [%.6f, %.6f] ms\n", line, t0 / MS_, t1 / MS_, t0_ms,
                t1_ms);
        CHECK(0);
    }
    return ev;
}
#define EXPECT(x, op, t0, t1) expect(x, op, t0, t1, __LINE__)

static ms_exec make(const ms_platform *p)
{
    ms_exec x;
    ms_err err;
    CHECK(ms_exec_sim_create(p, 2, 8, &x, &err) == 0);
    CHECK(ms_exec_begin(&x, &err) == 0);
    return x;
}

static void independent_streams(void)
{
    ms_platform p = test_platform(0, 0);
    ms_exec x = make(&p);
    ms_event d = EXPECT(&x, dense(1e6), 0, 1);
    EXPECT(&x, copy(0, 2e6), 0, 2);                              /* overlaps at full speed */
    EXPECT(&x, expert_op(MS_OP_EXPERT_GPU, 0, 1e6), 2, 3);       /* waits for its copy */
    ms_op late = copy(1, 1e6);
    late.after = d;
    late.not_before_s = 2.5 * MS_;
    EXPECT(&x, late, 2.5, 3.5);                                  /* not_before beats stream end and after */
    EXPECT(&x, expert_op(MS_OP_EXPERT_CPU, 2, 1e6), 0, 1);       /* the CPU stream is its own */
    ms_exec_destroy(&x);
}

static void shared_memory(void)
{
    ms_platform p = test_platform(1.0, 0.5);
    ms_exec x = make(&p);
    EXPECT(&x, dense(1e6), 0, 1);
    /* 1 ms of copy: 0.5 ms of work by 1 ms (half speed beside the dense op), and past the last
     * compute op submitted the compute stream counts as busy: the other 0.5 ms at half speed too */
    EXPECT(&x, copy(0, 1e6), 0, 2);
    /* 1 ms of dense from 1 ms: 1 ms / 1.5 = 2/3 ms of work while the copy runs, 1/3 alone */
    EXPECT(&x, dense(1e6), 1, 2 + 1.0 / 3);
    ms_exec_destroy(&x);

    /* copy first (no compute submitted: it counts as busy, half speed), then compute beside it */
    x = make(&p);
    EXPECT(&x, copy(0, 1e6), 0, 2);
    EXPECT(&x, compute_bound(), 0, 2);  /* compute-bound: not slowed */
    ms_exec_destroy(&x);
    x = make(&p);
    EXPECT(&x, copy(0, 1e6), 0, 2);
    EXPECT(&x, dense(1e6), 0, 1.5);     /* memory-bound: 1 ms of work at 1/1.5 */
    /* past the copy stream's last op the compute stream does not assume copies */
    EXPECT(&x, dense(1e6), 1.5, 2.5 + 1.0 / 6);
    ms_exec_destroy(&x);

    /* gaps: compute busy [0,1] and [2,3] ms; a 2 ms copy from 0: 0.5 by 1, 1 more by 2 (the gap
     * runs at full speed), the last 0.5 at half speed -> 3 */
    x = make(&p);
    EXPECT(&x, dense(1e6), 0, 1);
    ms_op second = dense(1e6);
    second.not_before_s = 2 * MS_;
    EXPECT(&x, second, 2, 3);
    EXPECT(&x, copy(0, 2e6), 0, 3);
    /* the GPU expert waits for its copy (to 3); nothing else copies: full speed */
    EXPECT(&x, expert_op(MS_OP_EXPERT_GPU, 0, 1e6), 3, 4);
    /* a CPU expert beside all of it: never slowed */
    EXPECT(&x, expert_op(MS_OP_EXPERT_CPU, 1, 1e6), 0, 1);
    /* a copy starting after every compute op submitted: compute counts as busy, half speed */
    ms_op after_all = copy(1, 1e6);
    after_all.not_before_s = 10 * MS_;
    EXPECT(&x, after_all, 10, 12);
    ms_exec_destroy(&x);

    /* begin() forgets ops before the run (a preloaded cache) */
    ms_exec y;
    ms_err err;
    CHECK(ms_exec_sim_create(&p, 2, 8, &y, &err) == 0);
    EXPECT(&y, copy(3, 5e6), 0, 10);
    CHECK(ms_exec_begin(&y, &err) == 0);
    EXPECT(&y, dense(1e6), 0, 1);
    ms_exec_destroy(&y);
}

int main(void)
{
    independent_streams();
    shared_memory();
    CHECK_DONE();
}
