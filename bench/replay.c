/* bench/replay: replay throughput in layer-steps per second (one layer of one
 * iteration = one step), with the trace-reading cost measured separately.
 *
 *   bench_replay [--trace FILE] [--model NAME] [--layer-steps N] [--cache-experts N]
 *                [--combos PF+CACHE,...] [--repeat R]
 *
 * Without --trace it generates a seeded trace of model NAME (default
 * mixtral-8x7b; `moesim list` names the others) of about N layer-steps
 * (default 1,000,000) in /tmp.  For each prefetch+cache combination (default
 * none+lru,oracle+belady; e.g. fmoe+fmoe) it reports the whole replay, the
 * streaming read alone, and policy + engine work = replay - reads x read
 * (belady's next-use pre-pass reads the trace once more); ratio = reading
 * time / policy time (target >= 1.0: policies cost no more than reading the
 * trace).  Layer-steps are the whole trace's, also for a policy that learns
 * from a training split (--train auto: fmoe's offline store is filled from
 * the first 70 %, which is then not replayed, and that fill counts as policy
 * time).  Best of R repetitions (default 3).  Host wall-clock timing: a
 * benchmark, not a test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/engine/engine.h"
#include "sim/core/params.h"
#include "traces/synth/gen.h"
#include "traces/format/trace.h"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *msg)
{
    fprintf(stderr, "bench_replay: %s\n", msg);
    exit(1);
}

/* Streams every request once; returns seconds and the layer-step count. */
static double time_read(const char *path, uint64_t *steps)
{
    ms_err err;
    double t0 = wall();
    ms_trace_reader *rd = ms_reader_open(path, &err);
    if (!rd)
        die(err.msg);
    ms_request r = {0};
    int rc;
    uint64_t iters = 0;
    while ((rc = ms_reader_next(rd, &r, &err)) == 1)
        iters += r.n_iters;
    if (rc < 0)
        die(err.msg);
    *steps = iters * ms_reader_meta(rd)->L;
    ms_request_free(&r);
    ms_reader_close(rd);
    return wall() - t0;
}

static double time_run(const char *path, const ms_model *model, const ms_platform *plat, const char *pf,
                       const char *cache, double cap)
{
    ms_run_config cfg = {.trace_path = path, .model = model, .platform = plat, .prefetch_spec = pf,
                         .cache_spec = cache, .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS,
                         .cap_value = cap, .distance = 1, .max_batch = 1, .seed = 1};
    ms_metrics m;
    ms_err err;
    double t0 = wall();
    if (ms_run(&cfg, &m, &err))
        die(err.msg);
    double t = wall() - t0;
    ms_metrics_free(&m);
    return t;
}

#define MAX_COMBOS 8

/* "pf+cache,pf+cache,..." into pf[i], cache[i] (pointers into buf); returns the count. */
static size_t parse_combos(char *buf, const char *pf[], const char *cache[])
{
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *plus = strchr(tok, '+');
        if (!plus || plus == tok || !plus[1] || n == MAX_COMBOS)
            die("--combos takes up to 8 PREFETCH+CACHE pairs separated by commas, e.g. none+lru,fmoe+fmoe");
        *plus = 0;
        pf[n] = tok;
        cache[n++] = plus + 1;
    }
    if (!n)
        die("--combos is empty");
    return n;
}

int main(int argc, char **argv)
{
    const char *trace = NULL, *model_name = "mixtral-8x7b";
    char combos_buf[512] = "none+lru,oracle+belady";
    unsigned long long steps_target = 1000000, cap = 64, repeat = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            die("every option takes a value");
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "--trace"))
            trace = v;
        else if (!strcmp(a, "--model"))
            model_name = v;
        else if (!strcmp(a, "--combos") && strlen(v) < sizeof combos_buf)
            strcpy(combos_buf, v);
        else if ((!strcmp(a, "--layer-steps") && !ms_parse_u64(v, &steps_target)) ||
                 (!strcmp(a, "--cache-experts") && !ms_parse_u64(v, &cap)) ||
                 (!strcmp(a, "--repeat") && !ms_parse_u64(v, &repeat) && repeat > 0))
            continue;
        else
            die("usage: bench_replay [--trace FILE] [--model NAME] [--layer-steps N] [--cache-experts N] "
                "[--combos PF+CACHE,...] [--repeat R]");
    }
    ms_err err;
    ms_model model;
    ms_platform plat;
    const char *pf[MAX_COMBOS], *cache[MAX_COMBOS];
    size_t n_combos = parse_combos(combos_buf, pf, cache);
    if (ms_model_load(model_name, &model, &err) || ms_platform_load("rtx3090-pcie4", &plat, &err))
        die(err.msg);
    char gen_path[256];
    if (!trace) {
        snprintf(gen_path, sizeof gen_path, "/tmp/moesim-bench-replay-%s-%llu.h5", model_name, steps_target);
        ms_gen_params p;
        ms_gen_defaults(&p);
        p.seed = 7;
        p.requests = 0;
        p.layer_steps = steps_target;
        double t0 = wall();
        if (ms_gen_write(&p, &model, gen_path, NULL, &err))
            die(err.msg);
        printf("generated %s in %.2f s\n", gen_path, wall() - t0);
        trace = gen_path;
    }
    /* belady's next-use pre-pass reads the trace a second time: that read is
     * trace-reading cost too, so it counts twice on the read side. */
    uint64_t steps = 0;
    double read_s = 1e300;
    for (unsigned r = 0; r < repeat; r++) {
        double t = time_read(trace, &steps);
        read_s = t < read_s ? t : read_s;
    }
    printf("trace %s: %llu layer-steps, cache %llu experts, best of %llu\n", trace, (unsigned long long)steps, cap,
           repeat);
    printf("%-16s %10s %14s %14s %14s %8s\n", "prefetch+cache", "replay s", "replay step/s", "read step/s",
           "policy step/s", "ratio");
    for (size_t c = 0; c < n_combos; c++) {
        int reads = strcmp(cache[c], "belady") ? 1 : 2;
        double run_s = 1e300;
        for (unsigned r = 0; r < repeat; r++) {
            double t = time_run(trace, &model, &plat, pf[c], cache[c], (double)cap);
            run_s = t < run_s ? t : run_s;
        }
        double policy_s = run_s - reads * read_s;
        char name[64];
        snprintf(name, sizeof name, "%s+%s", pf[c], cache[c]);
        printf("%-16s %10.3f %14.0f %14.0f %14.0f %8.2f\n", name, run_s, steps / run_s, steps / read_s,
               policy_s > 0 ? steps / policy_s : 0.0, policy_s > 0 ? reads * read_s / policy_s : 0.0);
    }
    return 0;
}
