/* The MPI driver of `moesim sweep --mpi` (compiled only with -DMOESIM_MPI=ON,
 * which defines MS_HAVE_MPI): the same jobs, rows and sink as sweep_pool.h,
 * spread over the ranks of `mpirun -np N` instead of forked workers.
 *
 * Rank 0, the leader, parses the flags, validates the spec and opens the
 * output (with --resume: counts the rows already there) before anything
 * runs, then releases every rank with ms_sweep_mpi_start: go, or stop with
 * an exit code (a bad spec: only the leader prints its one line).  With go,
 * ms_sweep_mpi_lead hands out job indices one at a time to ranks 1..N-1 as
 * each becomes idle (dynamic: a slow point holds up one rank only), receives
 * the finished rows and calls pool->sink for job k only after jobs 0..k-1,
 * as ms_sweep_pool_run does: the CSV is byte-identical to --jobs 1.  With
 * N = 1 the leader runs every job itself.
 *
 * Worker ranks call ms_sweep_mpi_work: pool->init once, then pool->job for
 * each index they get, until the leader says stop.  A worker that could not
 * set up (setup_error non-NULL, e.g. the spec is unreadable on its node)
 * reports it; the leader then hands out nothing more, writes the in-order
 * rows it has, and fails with "sweep: --mpi: rank K: MESSAGE".
 *
 * Messages (MPI_COMM_WORLD, bytes): worker -> leader HELLO (empty, or the
 * setup error) then ROW {uint64 job, row text}; leader -> worker JOB
 * {uint64 job} or STOP (empty).  The leader keeps two jobs queued at each
 * worker (no idle round trip between points), hands out no more after an
 * error, and sends STOP to a worker as soon as it holds none: every worker
 * is stopped on every path of the leader.  Waits poll with short sleeps
 * (Open MPI's blocking probe spins a core). */
#ifndef MS_SWEEP_MPI_H
#define MS_SWEEP_MPI_H

#include <stdint.h>

#include "sim/core/err.h"
#include "sim/apps/sweep_pool.h"

/* MPI_Init; this process's rank and the number of ranks. */
void ms_sweep_mpi_init(int *rank, int *size);
/* Collective, once: the leader's *go (1 run, 0 stop), *rc (the exit code
 * when stopping) and *done (rows already in the output) reach every rank. */
void ms_sweep_mpi_start(int *go, int *rc, uint64_t *done);
/* Leader: runs jobs 0..njobs-1 on the workers (or itself when alone). */
int ms_sweep_mpi_lead(const ms_sweep_pool *pool, uint64_t njobs, ms_err *err);
/* Worker: serves jobs until stopped; pool may be NULL with setup_error. */
void ms_sweep_mpi_work(const ms_sweep_pool *pool, const char *setup_error);
/* On the leader, releases the workers with stop and rc when
 * ms_sweep_mpi_start was never called (an early error, --dry-run); then
 * MPI_Finalize. */
void ms_sweep_mpi_finalize(int rc);

#endif
