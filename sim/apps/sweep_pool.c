/* Worker processes of a sweep: see sweep_pool.h. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/apps/sweep_pool.h"

typedef struct {
    pid_t pid;
    int cmd;     /* parent -> worker: job indices */
    int res;     /* worker -> parent: {job, len, row} */
    int busy;
    uint64_t job;
} worker;

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 1 read, 0 clean EOF before any byte, -1 error or short. */
static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return got == 0 && r == 0 ? 0 : -1;
        got += (size_t)r;
    }
    return 1;
}

static int run_in_process(const ms_sweep_pool *pool, uint64_t njobs, ms_err *err)
{
    if (pool->init)
        pool->init(pool->ctx);
    for (uint64_t j = 0; j < njobs; j++) {
        char *row = pool->job(pool->ctx, j);
        int rc = pool->sink(pool->ctx, j, row, strlen(row), err);
        free(row);
        if (rc)
            return -1;
    }
    return 0;
}

static void worker_main(const ms_sweep_pool *pool, int cmd, int res)
{
    if (pool->init)
        pool->init(pool->ctx);
    uint64_t job;
    while (read_all(cmd, &job, sizeof job) == 1) {
        char *row = pool->job(pool->ctx, job);
        uint64_t len = strlen(row);
        int ok = write_all(res, &job, sizeof job) == 0 && write_all(res, &len, sizeof len) == 0 &&
                 write_all(res, row, len) == 0;
        free(row);
        if (!ok)
            break;
    }
    exit(0); /* atexit handlers run: HDF5 closes, test shims report */
}

static int start_workers(const ms_sweep_pool *pool, worker *w, int n, ms_err *err)
{
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        int c[2], r[2];
        if (pipe(c))
            return ms_fail(err, "sweep: pipe: %s", strerror(errno));
        if (pipe(r)) {
            close(c[0]);
            close(c[1]);
            return ms_fail(err, "sweep: pipe: %s", strerror(errno));
        }
        pid_t pid = fork();
        if (pid < 0) {
            close(c[0]), close(c[1]), close(r[0]), close(r[1]);
            return ms_fail(err, "sweep: fork: %s", strerror(errno));
        }
        if (pid == 0) {
            for (int k = 0; k < i; k++) {
                close(w[k].cmd);
                close(w[k].res);
            }
            close(c[1]);
            close(r[0]);
            worker_main(pool, c[0], r[1]);
        }
        close(c[0]);
        close(r[1]);
        w[i] = (worker){.pid = pid, .cmd = c[1], .res = r[0]};
    }
    return 0;
}

static void stop_workers(worker *w, int n, int kill_them)
{
    for (int i = 0; i < n; i++) {
        if (w[i].cmd >= 0)
            close(w[i].cmd);
        w[i].cmd = -1;
        if (kill_them && w[i].pid > 0)
            kill(w[i].pid, SIGKILL);
    }
    for (int i = 0; i < n; i++) {
        if (w[i].res >= 0)
            close(w[i].res);
        if (w[i].pid > 0)
            waitpid(w[i].pid, NULL, 0);
    }
}

/* Hands out job indices, collects rows, and flushes the in-order prefix. */
static int parent_loop(const ms_sweep_pool *pool, worker *w, int n, uint64_t njobs, ms_err *err)
{
    char **done = ms_xcalloc(njobs ? njobs : 1, sizeof *done);
    size_t *lens = ms_xcalloc(njobs ? njobs : 1, sizeof *lens);
    uint64_t next_send = 0, next_sink = 0;
    struct pollfd *pf = ms_xcalloc((size_t)n, sizeof *pf);
    int rc = 0;
    for (int i = 0; i < n && next_send < njobs; i++) {
        w[i].job = next_send++;
        w[i].busy = 1;
        if (write_all(w[i].cmd, &w[i].job, sizeof w[i].job))
            rc = ms_fail(err, "sweep: worker %d stopped before its first point", i);
    }
    while (rc == 0 && next_sink < njobs) {
        for (int i = 0; i < n; i++)
            pf[i] = (struct pollfd){.fd = w[i].busy ? w[i].res : -1, .events = POLLIN};
        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = ms_fail(err, "sweep: poll: %s", strerror(errno));
            break;
        }
        for (int i = 0; rc == 0 && i < n; i++) {
            if (!w[i].busy || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            uint64_t job, len;
            if (read_all(w[i].res, &job, sizeof job) != 1 || read_all(w[i].res, &len, sizeof len) != 1 ||
                job != w[i].job || len > ((uint64_t)1 << 30)) {
                rc = ms_fail(err, "sweep: worker %d (pid %ld) died while running job %llu", i, (long)w[i].pid,
                             (unsigned long long)w[i].job);
                break;
            }
            done[job] = ms_xcalloc(len + 1, 1);
            lens[job] = len;
            if (read_all(w[i].res, done[job], len) != 1) {
                rc = ms_fail(err, "sweep: worker %d died while sending job %llu", i, (unsigned long long)job);
                break;
            }
            w[i].busy = 0;
            if (next_send < njobs) {
                w[i].job = next_send++;
                w[i].busy = 1;
                if (write_all(w[i].cmd, &w[i].job, sizeof w[i].job))
                    rc = ms_fail(err, "sweep: worker %d stopped", i);
            }
        }
        while (rc == 0 && next_sink < njobs && done[next_sink]) {
            rc = pool->sink(pool->ctx, next_sink, done[next_sink], lens[next_sink], err);
            free(done[next_sink]);
            done[next_sink++] = NULL;
        }
    }
    for (uint64_t j = 0; j < njobs; j++)
        free(done[j]);
    free(done);
    free(lens);
    free(pf);
    return rc;
}

int ms_sweep_pool_run(const ms_sweep_pool *pool, uint64_t njobs, int workers, ms_err *err)
{
    if (workers <= 1 || njobs <= 1)
        return run_in_process(pool, njobs, err);
    if ((uint64_t)workers > njobs)
        workers = (int)njobs;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    worker *w = ms_xcalloc((size_t)workers, sizeof *w);
    for (int i = 0; i < workers; i++)
        w[i].cmd = w[i].res = -1;
    int rc = start_workers(pool, w, workers, err);
    if (rc == 0)
        rc = parent_loop(pool, w, workers, njobs, err);
    stop_workers(w, workers, rc != 0);
    free(w);
    sigaction(SIGPIPE, &old, NULL);
    return rc;
}
