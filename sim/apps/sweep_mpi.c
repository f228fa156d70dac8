/* MPI driver of a sweep: see sweep_mpi.h. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/apps/sweep_mpi.h"

enum { TAG_HELLO = 1, TAG_ROW, TAG_JOB, TAG_STOP };

#define LEADER 0
/* Jobs kept in hand by each worker: it starts the next one at once instead
 * of waiting for a round trip to the leader (two wake-ups on a busy node). */
#define QUEUED 2

static int started; /* ms_sweep_mpi_start was called */

void ms_sweep_mpi_init(int *rank, int *size)
{
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

void ms_sweep_mpi_start(int *go, int *rc, uint64_t *done)
{
    uint64_t msg[3] = {(uint64_t)*go, (uint64_t)*rc, *done};
    MPI_Bcast(msg, 3, MPI_UINT64_T, LEADER, MPI_COMM_WORLD);
    *go = (int)msg[0];
    *rc = (int)msg[1];
    *done = msg[2];
    started = 1;
}

void ms_sweep_mpi_finalize(int rc)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == LEADER && !started) {
        int go = 0;
        uint64_t done = 0;
        ms_sweep_mpi_start(&go, &rc, &done);
    }
    MPI_Finalize();
}

/* MPI_Probe without its busy wait (Open MPI spins a whole core in a
 * blocking probe, which on an oversubscribed node starves the rank that
 * computes): polls, sleeping 20 us doubling up to 1 ms between polls. */
static void probe_wait(int source, MPI_Status *st)
{
    long ns = 20000;
    for (;;) {
        int flag = 0;
        MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, st);
        if (flag)
            return;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000)
            ns *= 2;
    }
}

/* Receives the next message from any worker: malloc'd, NUL-terminated. */
static char *recv_any(int *source, int *tag, size_t *len)
{
    MPI_Status st;
    int n;
    probe_wait(MPI_ANY_SOURCE, &st);
    MPI_Get_count(&st, MPI_BYTE, &n);
    char *buf = ms_xcalloc((size_t)n + 1, 1);
    MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    *source = st.MPI_SOURCE;
    *tag = st.MPI_TAG;
    *len = (size_t)n;
    return buf;
}

typedef struct {
    char **msg;   /* per job: the ROW message holding its row, until sunk */
    size_t *len;  /* its row length */
    uint64_t njobs, next_send, next_sink;
} reorder;

/* Files a ROW message; -1 when its job is out of range or came twice. */
static int file_row(reorder *o, char *buf, size_t n, int source, ms_err *err)
{
    uint64_t job;
    if (n < sizeof job)
        return free(buf), ms_fail(err, "sweep: --mpi: rank %d sent a truncated row", source);
    memcpy(&job, buf, sizeof job);
    if (job >= o->next_send || o->msg[job] || job < o->next_sink)
        return free(buf), ms_fail(err, "sweep: --mpi: rank %d sent job %llu, which it was not given", source,
                                  (unsigned long long)job);
    o->msg[job] = buf;
    o->len[job] = n - sizeof job;
    return 0;
}

/* Sinks the in-order prefix of finished rows. */
static int flush_rows(const ms_sweep_pool *pool, reorder *o, ms_err *err)
{
    while (o->next_sink < o->njobs && o->msg[o->next_sink]) {
        uint64_t j = o->next_sink++;
        int rc = pool->sink(pool->ctx, j, o->msg[j] + sizeof j, o->len[j], err);
        free(o->msg[j]);
        o->msg[j] = NULL;
        if (rc)
            return -1;
    }
    return 0;
}

/* Sends jobs to a worker until it has QUEUED in hand (none after an error),
 * or STOP once it has none left.  Returns 1 when the worker was stopped. */
static int top_up(reorder *o, int *inflight, int worker, int rc)
{
    while (rc == 0 && o->next_send < o->njobs && *inflight < QUEUED) {
        uint64_t job = o->next_send++;
        MPI_Send(&job, (int)sizeof job, MPI_BYTE, worker, TAG_JOB, MPI_COMM_WORLD);
        ++*inflight;
    }
    if (*inflight > 0)
        return 0;
    MPI_Send(NULL, 0, MPI_BYTE, worker, TAG_STOP, MPI_COMM_WORLD);
    return 1;
}

static int lead_workers(const ms_sweep_pool *pool, uint64_t njobs, int workers, ms_err *err)
{
    reorder o = {.msg = ms_xcalloc(njobs ? njobs : 1, sizeof *o.msg),
                 .len = ms_xcalloc(njobs ? njobs : 1, sizeof *o.len),
                 .njobs = njobs};
    int *inflight = ms_xcalloc((size_t)workers + 1, sizeof *inflight); /* by rank */
    int rc = 0, active = workers;
    while (active > 0) {
        int source, tag;
        size_t n;
        char *buf = recv_any(&source, &tag, &n);
        if (tag == TAG_HELLO) {
            if (n > 0 && rc == 0)
                rc = ms_fail(err, "sweep: --mpi: rank %d: %s", source, buf);
            free(buf);
        } else if (tag == TAG_ROW) {
            inflight[source]--;
            if (file_row(&o, buf, n, source, err) || (rc == 0 && flush_rows(pool, &o, err)))
                rc = -1;
        } else {
            free(buf);
            rc = ms_fail(err, "sweep: --mpi: rank %d sent an unknown message (tag %d)", source, tag);
        }
        active -= top_up(&o, &inflight[source], source, rc);
    }
    for (uint64_t j = 0; j < njobs; j++)
        free(o.msg[j]);
    free(o.msg);
    free(o.len);
    free(inflight);
    return rc;
}

int ms_sweep_mpi_lead(const ms_sweep_pool *pool, uint64_t njobs, ms_err *err)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == 1)
        return ms_sweep_pool_run(pool, njobs, 1, err);
    return lead_workers(pool, njobs, size - 1, err);
}

static void send_row(uint64_t job, const char *row)
{
    size_t len = strlen(row);
    char *msg = ms_xcalloc(sizeof job + len, 1);
    memcpy(msg, &job, sizeof job);
    memcpy(msg + sizeof job, row, len);
    MPI_Send(msg, (int)(sizeof job + len), MPI_BYTE, LEADER, TAG_ROW, MPI_COMM_WORLD);
    free(msg);
}

void ms_sweep_mpi_work(const ms_sweep_pool *pool, const char *setup_error)
{
    if (!pool && !setup_error)
        setup_error = "no jobs to run";
    if (!setup_error && pool->init)
        pool->init(pool->ctx);
    const char *hello = setup_error ? setup_error : "";
    MPI_Send(hello, (int)strlen(hello), MPI_BYTE, LEADER, TAG_HELLO, MPI_COMM_WORLD);
    for (;;) {
        MPI_Status st;
        uint64_t job = 0;
        probe_wait(LEADER, &st);
        int n;
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (st.MPI_TAG != TAG_JOB || n != (int)sizeof job || setup_error) {
            char sink[sizeof job];
            MPI_Recv(sink, n <= (int)sizeof sink ? n : 0, MPI_BYTE, LEADER, st.MPI_TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            return; /* STOP (a leader never sends jobs to a worker that failed) */
        }
        MPI_Recv(&job, n, MPI_BYTE, LEADER, TAG_JOB, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        char *row = pool->job(pool->ctx, job);
        send_row(job, row);
        free(row);
    }
}
