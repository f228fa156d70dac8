/* `moesim sweep`: runs every point of a sweep spec (sweep_spec.h) and appends
 * one CSV row per point (sweep_csv.h), in worker processes (sweep_pool.h) or,
 * with --mpi, on the ranks of mpirun (sweep_mpi.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "traces/format/trace_cache.h"
#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/apps/sweep_csv.h"
#include "sim/apps/sweep_pool.h"
#include "sim/apps/sweep_spec.h"
#ifdef MS_HAVE_MPI
#include "sim/apps/sweep_mpi.h"
#endif

static const char sweep_usage[] =
    "usage: moesim sweep SPEC [--jobs N] [--shard I/N] [--resume] [-o FILE] [--strict] [--dry-run]\n"
    "       mpirun -np N moesim sweep SPEC --mpi [--shard I/N] [--resume] [-o FILE]\n"
    "       moesim sweep --merge OUT SHARD.csv...\n"
    "\n"
    "Runs every point of SPEC (an INI file) and appends one CSV row per point, in point\n"
    "order: point index, key, every parameter, every metric, and `error` (the one-line\n"
    "message of a point whose run failed; the sweep goes on).  Exit status: 0 when every\n"
    "point has its row, failed points included (the summary line counts them); 1 on an error\n"
    "that stops the sweep; with --strict, 1 as well when any point failed.\n"
    "\n"
    "  --jobs N, -j N  run N simulations at once, each in its own worker process (default 1);\n"
    "                  the CSV is byte-identical at any N\n"
    "  --shard I/N     run only the points p with p %% N == I (I is 0-based: 0/2 and 1/2), for job\n"
    "                  arrays (Slurm: --shard $SLURM_ARRAY_TASK_ID/N); the output becomes\n"
    "                  OUTPUT.shard-I-of-N.csv unless -o is given; join the shards with --merge\n"
    "  --mpi           run the points on the ranks of mpirun instead of --jobs workers: rank 0\n"
    "                  checks the spec, hands out points, writes the rows (the same bytes as\n"
    "                  --jobs 1); needs a build with -DMOESIM_MPI=ON\n"
    "  --resume        keep the rows an interrupted run finished (a partial last line is cut)\n"
    "                  and run the rest; without it an existing output is an error\n"
    "  -o FILE         write FILE instead of the spec's output\n"
    "  --strict        exit 1 when any point failed (its row is still written)\n"
    "  --dry-run       check the spec and the output as a real run would; print the number of\n"
    "                  points and run nothing\n"
    "  --merge OUT F.. join shard CSVs into OUT (rows sorted by point; every point exactly once)\n"
    "\n"
    "SPEC:\n"
    "  [sweep]\n"
    "  output = results.csv       ; relative paths (output, trace, *.ini) are relative to SPEC's folder\n"
    "  mode = product             ; product (default): every combination of the axes below\n"
    "                             ; list: one product per [point] section, concatenated\n"
    "  trace_cache = 2GiB         ; each process keeps decoded traces up to this size in memory (0 = off)\n"
    "  trace = a.h5, b.h5         ; axes: comma lists; numeric axes also take start:stop:step (inclusive)\n"
    "  model = mixtral-8x7b       ; model profile name or .ini (default none: sizes from the trace)\n"
    "  platform = rtx3090-pcie4   ; platform profile name or .ini (default rtx3090-pcie4)\n"
    "  prefetch = none, oracle, fmoe:capacity=100,mode=code   ; an item with '=' and no ':' belongs\n"
    "  cache = lru, lfu:reset=0   ;   to the policy before it (default none / lru / gpu)\n"
    "  sched = gpu\n"
    "  cache_experts = 16:64:16   ; exactly one of cache_experts, cache_bytes (4000MiB), cache_gb\n"
    "  distance = 1,2,3           ; default 1\n"
    "  batch = 1, 4               ; default 1\n"
    "  host_bytes = 0             ; host tier (0 = all experts in host memory)\n"
    "  h2d_gbps = 8,16,32,64,128  ; overrides the platform's H2D bandwidth (GB/s)\n"
    "  train = auto, 0.5          ; training split (auto or a fraction in [0, 1))\n"
    "  topk_fill = zero           ; zero or even\n"
    "  offline = 0                ; 1: every request arrives at t = 0\n"
    "  seed = 1\n"
    "  [point]                    ; mode = list only: keys here override [sweep]\n"
    "  prefetch = oracle\n"
    "\n"
    "Points are numbered in product order with trace outermost and seed innermost (the order of\n"
    "the keys above). Long lists continue on indented lines. Every key, value, policy, parameter,\n"
    "profile and trace is checked before anything runs.\n";

/* Rows are write()n one by one as they finish and fsync()ed at most this
 * often (and at the end): one fsync per row costs more than a small
 * simulation. */
#define SYNC_INTERVAL_S 0.1

typedef struct {
    const char *spec, *output, *merge_out;
    int jobs, resume, dry_run, mpi, strict;
    int shard_i, shard_n;
} sweep_flags;

typedef struct {
    const ms_sweep_spec *spec;
    const uint64_t *points; /* global indices of the jobs, in order */
    int fd;
    const char *path;
    uint64_t written, total, errors, base;
    int progress;
    double t0, last_draw, last_sync;
} sweep_run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_shard(const char *s, sweep_flags *f)
{
    unsigned long long i, n;
    char a[32], b[32];
    const char *slash = strchr(s, '/');
    if (!slash || (size_t)(slash - s) >= sizeof a || strlen(slash + 1) >= sizeof b)
        return ms_cli_usage("sweep: --shard %s: expected I/N, such as 0/4", s);
    memcpy(a, s, (size_t)(slash - s));
    a[slash - s] = 0;
    strcpy(b, slash + 1);
    if (ms_parse_u64(a, &i) || ms_parse_u64(b, &n) || n == 0 || n > 1000000)
        return ms_cli_usage("sweep: --shard %s: expected I/N with whole numbers, N >= 1", s);
    if (i >= n)
        return ms_cli_usage("sweep: --shard %s: shard index %llu out of range (0-based: 0 to %llu)", s, i, n - 1);
    f->shard_i = (int)i;
    f->shard_n = (int)n;
    return 0;
}

static int parse_sweep_flags(int argc, char **argv, sweep_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--resume")) {
            f->resume = 1;
            continue;
        }
        if (!strcmp(a, "--mpi")) {
            f->mpi = 1;
            continue;
        }
        if (!strcmp(a, "--dry-run")) {
            f->dry_run = 1;
            continue;
        }
        if (!strcmp(a, "--strict")) {
            f->strict = 1;
            continue;
        }
        if (!strcmp(a, "--merge")) {
            if (i + 1 >= argc)
                return ms_cli_usage("sweep: --merge needs OUT and at least one shard CSV");
            f->merge_out = argv[++i];
            f->spec = NULL;
            return 0;
        }
        if (a[0] != '-') {
            if (f->spec)
                return ms_cli_usage("sweep: unexpected argument '%s' (one SPEC)", a);
            f->spec = a;
            continue;
        }
        if (i + 1 >= argc)
            return ms_cli_usage("sweep: %s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--jobs") || !strcmp(a, "-j")) {
            unsigned long long n;
            if (ms_parse_u64(v, &n) || n < 1 || n > 4096)
                return ms_cli_usage("sweep: %s %s: expected a whole number in [1, 4096]", a, v);
            f->jobs = (int)n;
        } else if (!strcmp(a, "--shard")) {
            if (parse_shard(v, f))
                return 2;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            f->output = v;
        } else
            return ms_cli_usage("sweep: unknown option '%s' (see moesim sweep --help)", a);
    }
    if (!f->spec)
        return ms_cli_usage("sweep: missing SPEC (see moesim sweep --help)");
    if (f->mpi && f->jobs != 1)
        return ms_cli_usage("sweep: --mpi and --jobs exclude each other (mpirun -np N sets the workers)");
    return 0;
}

static void draw_progress(sweep_run *r, int final)
{
    double t = now_s();
    if (!final && t - r->last_draw < 0.1)
        return;
    r->last_draw = t;
    uint64_t k = r->written, n = r->total;
    double rate = (k - r->base) / (t - r->t0 > 1e-9 ? t - r->t0 : 1e-9);
    int width = 30, fill = n ? (int)(width * k / n) : width;
    fprintf(stderr, "\rsweep [%.*s%*s] %llu/%llu points  %.1f/s  ETA %.0f s ", fill,
            "##############################", width - fill, "", (unsigned long long)k, (unsigned long long)n, rate,
            rate > 0 ? (n - k) / rate : 0.0);
    if (final)
        fputc('\n', stderr);
    fflush(stderr);
}

static void worker_init(void *ctx)
{
    sweep_run *r = ctx;
    ms_trace_cache_enable(ms_sweep_trace_cache(r->spec));
}

static char *run_job(void *ctx, uint64_t job)
{
    sweep_run *r = ctx;
    uint64_t p = r->points[job];
    const ms_sweep_point *pt = ms_sweep_get(r->spec, p);
    ms_run_config cfg;
    ms_platform plat;
    char trace[4096];
    ms_sweep_config(r->spec, pt, &cfg, &plat, trace, sizeof trace);
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) /* m.trace: the digest of what the run read, when it got as far */
        return ms_sweep_csv_row(p, pt, &cfg, &m.trace, NULL, err.msg);
    char *row = ms_sweep_csv_row(p, pt, &cfg, &m.trace, &m, NULL);
    ms_metrics_free(&m);
    return row;
}

static int sink_row(void *ctx, uint64_t job, const char *row, size_t len, ms_err *err)
{
    (void)job;
    sweep_run *r = ctx;
    if (ms_sweep_csv_write(r->fd, r->path, row, len, err))
        return -1;
    double t = now_s();
    if (t - r->last_sync >= SYNC_INTERVAL_S) {
        if (ms_sweep_csv_sync(r->fd, r->path, err))
            return -1;
        r->last_sync = t;
    }
    r->written++;
    if (len >= 2 && row[len - 2] != ',')
        r->errors++;
    if (r->progress)
        draw_progress(r, 0);
    return 0;
}

/* OUTPUT.shard-I-of-N.csv (before a .csv extension, else appended). */
static char *shard_output(const char *out, int i, int n)
{
    size_t len = strlen(out), cap = len + 64;
    char *s = ms_xcalloc(cap, 1);
    int ext = len > 4 && !strcmp(out + len - 4, ".csv");
    snprintf(s, cap, "%.*s.shard-%d-of-%d%s", (int)(ext ? len - 4 : len), out, i, n, ext ? ".csv" : "");
    return s;
}

/* The global indices of this shard's points, in order (*mine of them). */
static uint64_t *shard_points(const sweep_flags *f, const ms_sweep_spec *spec, uint64_t *mine)
{
    uint64_t n = ms_sweep_npoints(spec);
    uint64_t *points = ms_xcalloc(n ? n : 1, sizeof *points);
    *mine = 0;
    for (uint64_t p = 0; p < n; p++)
        if (p % (uint64_t)f->shard_n == (uint64_t)f->shard_i)
            points[(*mine)++] = p;
    return points;
}

/* Runs the jobs: forked workers, or the MPI ranks once they are told to go. */
static int run_jobs(const sweep_flags *f, const ms_sweep_pool *pool, uint64_t njobs, uint64_t done, ms_err *err)
{
#ifdef MS_HAVE_MPI
    if (f->mpi) {
        int go = 1, rc = 0;
        ms_sweep_mpi_start(&go, &rc, &done);
        return ms_sweep_mpi_lead(pool, njobs, err);
    }
#else
    (void)done;
#endif
    return ms_sweep_pool_run(pool, njobs, f->jobs, err);
}

/* What the real run refuses before it starts, --dry-run included: an
 * output that is an input (the spec, a trace, a profile), a folder or a
 * device, in a missing or unwritable folder, or that exists without
 * --resume. */
static int check_output(const sweep_flags *f, const char *path, ms_err *err)
{
    if (ms_out_check("sweep: output", path, err))
        return -1;
    if (!f->resume && access(path, F_OK) == 0)
        return ms_fail(err, "%s exists; use --resume or remove it", path);
    return 0;
}

static int run_sweep(const sweep_flags *f, const ms_sweep_spec *spec)
{
    uint64_t n = ms_sweep_npoints(spec), mine;
    uint64_t *points = shard_points(f, spec, &mine);
    char *path = f->output ? ms_xstrdup(f->output)
                 : f->shard_n > 1 ? shard_output(ms_sweep_output(spec), f->shard_i, f->shard_n)
                                  : ms_xstrdup(ms_sweep_output(spec));
    ms_err err;
    uint64_t done;
    ms_out_input(f->spec);
    if (check_output(f, path, &err)) {
        free(points);
        free(path);
        return ms_cli_error(err.msg);
    }
    if (f->dry_run) {
        printf("%llu points (%llu in this shard) -> %s\n", (unsigned long long)n, (unsigned long long)mine, path);
        free(points);
        free(path);
        return 0;
    }
    int fd = ms_sweep_csv_open(path, f->resume, spec, points, mine, &done, &err);
    int rc = fd < 0 ? ms_cli_error(err.msg) : 0;
    if (fd >= 0) {
        sweep_run r = {.spec = spec, .points = points + done, .fd = fd, .path = path, .written = done,
                       .total = mine, .base = done, .progress = isatty(2), .t0 = now_s()};
        ms_sweep_pool pool = {.ctx = &r, .init = worker_init, .job = run_job, .sink = sink_row};
        if (run_jobs(f, &pool, mine - done, done, &err) || ms_sweep_csv_sync(fd, path, &err))
            rc = ms_cli_error(err.msg);
        else {
            if (r.progress)
                draw_progress(&r, 1);
            printf("sweep: %llu points in %s (%llu run now, %llu already there; %llu failed)\n",
                   (unsigned long long)mine, path, (unsigned long long)(mine - done), (unsigned long long)done,
                   (unsigned long long)r.errors);
            if (f->strict && r.errors) {
                snprintf(err.msg, sizeof err.msg, "sweep: %llu of the %llu points run now failed (--strict; "
                         "their rows hold the errors)", (unsigned long long)r.errors,
                         (unsigned long long)(mine - done));
                rc = ms_cli_error(err.msg);
            }
        }
        ms_sweep_csv_close(fd, path);
    }
    free(points);
    free(path);
    return rc;
}

/* A sweep in this process (with --mpi: on rank 0, the leader). */
static int sweep_main(int argc, char **argv)
{
    sweep_flags f = {.jobs = 1, .shard_n = 1};
    int rc = parse_sweep_flags(argc, argv, &f);
    if (rc)
        return rc;
    ms_err err;
    if (f.merge_out) {
        int first = 0;
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], "--merge"))
                first = i + 2;
        if (first >= argc)
            return ms_cli_usage("sweep: --merge needs OUT and at least one shard CSV");
        if (ms_sweep_csv_merge(f.merge_out, argv + first, argc - first, &err))
            return ms_cli_error(err.msg);
        printf("sweep: merged %d files into %s\n", argc - first, f.merge_out);
        return 0;
    }
    ms_sweep_spec *spec = ms_sweep_load(f.spec, &err);
    if (!spec)
        return ms_cli_error(err.msg);
    rc = run_sweep(&f, spec);
    ms_sweep_free(spec);
    return rc;
}

#ifdef MS_HAVE_MPI
/* A worker rank: the leader has checked the flags and the spec; this rank
 * loads the spec again (from the shared file system) and serves points. */
static int sweep_mpi_worker(int argc, char **argv)
{
    int go = 0, rc = 0;
    uint64_t done = 0;
    ms_sweep_mpi_start(&go, &rc, &done);
    if (!go)
        return rc;
    sweep_flags f = {.jobs = 1, .shard_n = 1};
    ms_err err;
    ms_sweep_spec *spec = NULL;
    if (parse_sweep_flags(argc, argv, &f)) {
        ms_sweep_mpi_work(NULL, "the flags do not parse on this rank");
        return 1;
    }
    if (!(spec = ms_sweep_load(f.spec, &err))) {
        ms_sweep_mpi_work(NULL, err.msg);
        return 1;
    }
    uint64_t mine;
    uint64_t *points = shard_points(&f, spec, &mine);
    sweep_run r = {.spec = spec, .points = points + done, .fd = -1};
    ms_sweep_pool pool = {.ctx = &r, .init = worker_init, .job = run_job, .sink = sink_row};
    ms_sweep_mpi_work(&pool, NULL);
    free(points);
    ms_sweep_free(spec);
    return 0;
}

static int sweep_mpi(int argc, char **argv)
{
    int rank, size;
    ms_sweep_mpi_init(&rank, &size);
    int rc = rank == 0 ? sweep_main(argc, argv) : sweep_mpi_worker(argc, argv);
    ms_sweep_mpi_finalize(rc);
    return rc;
}
#endif

int ms_cli_sweep(int argc, char **argv)
{
    int mpi = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(sweep_usage, stdout);
            return 0;
        }
        mpi |= !strcmp(argv[i], "--mpi");
    }
    if (!mpi)
        return sweep_main(argc, argv);
#ifdef MS_HAVE_MPI
    return sweep_mpi(argc, argv);
#else
    return ms_cli_usage("sweep: --mpi: not built with MPI (configure with -DMOESIM_MPI=ON)");
#endif
}
