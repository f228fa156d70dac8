/* Runs the jobs of a sweep in worker processes and hands their results back
 * in job order.
 *
 * With workers <= 1 every job runs in this process.  Otherwise `workers`
 * processes are forked (processes, not threads: Debian's HDF5 is not
 * thread-safe); the parent hands each idle worker the next job index over a
 * pipe, a worker runs it (single-threaded) and sends the finished row back
 * over its own pipe, and the parent calls sink() for job k only after jobs
 * 0..k-1: the output is the same bytes at any worker count.  init() runs
 * once in each process that runs jobs (e.g. to enable the trace cache).
 * Workers exit when the parent closes their pipe or dies (EOF, EPIPE). */
#ifndef MS_SWEEP_POOL_H
#define MS_SWEEP_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/err.h"

typedef struct {
    void *ctx;
    void (*init)(void *ctx);
    char *(*job)(void *ctx, uint64_t job); /* the finished row, malloc'd; never NULL */
    int (*sink)(void *ctx, uint64_t job, const char *row, size_t len, ms_err *err);
} ms_sweep_pool;

int ms_sweep_pool_run(const ms_sweep_pool *pool, uint64_t njobs, int workers, ms_err *err);

#endif
