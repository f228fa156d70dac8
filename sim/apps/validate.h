/* `moesim validate`: one trace and one set of policies through the
 * simulated timeline and a real backend at once, and how far apart they are.
 *
 * The engine runs once, on a tee executor: every op goes to the simulated
 * timeline of the (calibrated) platform profile, whose times drive the
 * policies' decisions, and the same op, in the same order, to the real
 * backend (open loop: the real run executes the simulator's decisions).  An
 * op's issue point becomes an `after` event on the real backend: the latest
 * compute-stream op that ended, on the simulated timeline, by the op's
 * issue time (if the real backend has not finished it yet).  The tee reads
 * real times two iterations behind the engine, so the host runs ahead of the
 * device as a serving loop would.
 *
 * Both timelines are summarised with the same rules:
 *   - iteration latency: end of its last compute or CPU op minus the later
 *     of the previous iteration's end (the first: 0) and the earliest start
 *     of its own ops: idle time waiting for a request's arrival is not
 *     latency (the real run, open loop, does not wait for arrivals);
 *   - a GPU expert op is a miss when the latest copy of its expert is an
 *     on-demand load of the same iteration, else a hit when that copy ended
 *     by the end of the layer's dense op, else late (an expert resident
 *     before the run is a hit); experts run on the CPU are counted apart;
 *   - layer time: end of the layer's last compute or CPU op minus the end of
 *     the layer before it (layer 0: minus the iteration's start above).
 * Error of an iteration: |real - sim| / real. */
#ifndef MS_VALIDATE_H
#define MS_VALIDATE_H

#include <stdint.h>

#include "sim/engine/engine.h"
#include "sim/engine/exec.h"

typedef struct {
    uint64_t hits, late, misses, cpu;
} ms_validate_counts;

/* One op kind's durations (end - start) summed over the run. */
typedef struct {
    uint64_t n;
    double sim_s, real_s;
} ms_validate_opsum;

typedef struct {
    uint64_t iterations;
    double err_median, err_p95, err_max;   /* relative per-iteration latency error */
    double sim_total_s, real_total_s;      /* end of the last op */
    ms_validate_counts sim, real;
    uint32_t L;
    double *layer_sim_s, *layer_real_s;    /* [L] mean layer time */
    uint64_t ops;                          /* ops run on both */
    ms_validate_opsum kind[MS_OP_KINDS];   /* per op kind (exec.h) */
} ms_validate_result;

/* Where ms_validate writes its CSVs (each NULL: not written). */
typedef struct {
    const char *iterations, *layers, *ops;
} ms_validate_csvs;

/* The op kind's name in reports and the ops CSV: dense, copy, expert_gpu, expert_cpu. */
const char *ms_op_kind_name(ms_op_kind k);

/* Runs cfg (cfg->exec must be NULL: the tee takes its place) with the
 * simulated timeline of cfg->platform and `real`, which must be fresh (no op
 * submitted) and is left to the caller to destroy.  csv->iterations gets one
 * row per iteration:
 *   iteration,sim_s,real_s,error,sim_hits,sim_late,sim_misses,real_hits,real_late,real_misses
 * csv->layers one row per layer: layer,sim_mean_s,real_mean_s,difference;
 * csv->ops one row per op, in submission order:
 *   op,iteration,layer,expert,kind,tokens,demand,sim_start_s,sim_end_s,real_start_s,real_end_s
 * (expert -1 for dense ops).  m gets the engine's metrics (free with
 * ms_metrics_free).  0, or -1 with err. */
int ms_validate(const ms_run_config *cfg, ms_exec *real, const ms_validate_csvs *csv, ms_validate_result *out,
                ms_metrics *m, ms_err *err);
void ms_validate_result_free(ms_validate_result *r);

#endif
