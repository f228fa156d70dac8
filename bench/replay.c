/* bench/replay: replay throughput in layer-steps per second (one layer of one
 * iteration = one step), beside the cost of reading the trace alone.
 *
 *   bench_replay [--model NAME] [--platform NAME] [--trace FILE] [--layer-steps N]
 *                [--cache-experts N] [--repeat R] [--combos PF+CACHE[+SCHED],...]
 *
 * Without --trace it generates a seeded trace of the model (default
 * mixtral-8x7b) of about N layer-steps (default 1,000,000) in /tmp, once.
 * "read ids" streams every request with the top-k ids only (what none+lru
 * reads), "read all" with every part (what `trace validate` reads).  Each
 * combination (default: the issue-18 list) runs with --train auto: policies
 * that learn read the first 70 % of the requests offline and replay the
 * rest, so steps/s is the trace's layer-steps (each one learnt from or
 * replayed) over the run's wall time, training included; "replayed" is
 * m.total.layer_steps; "x lru" is the run's time over none+lru's.  Best of R
 * repetitions (default 3); the process's peak RSS at the end.  Host
 * wall-clock timing: a benchmark, not a test (bench/perf.sh runs it per
 * combination, for the peak RSS of each, and counts instructions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/bench_clock.h"
#include "sim/engine/engine.h"
#include "sim/core/params.h"
#include "traces/synth/gen.h"
#include "sim/core/digest.h"
#include "traces/format/trace.h"

static void die(const char *msg)
{
    fprintf(stderr, "bench_replay: %s\n", msg);
    exit(1);
}

/* Streams every request once with `parts`; returns seconds and the
 * layer-step count. */
static double time_read(const char *path, unsigned parts, uint64_t *steps)
{
    ms_err err;
    double t0 = bench_now_s();
    ms_trace_reader *rd = ms_reader_open(path, &err);
    if (!rd)
        die(err.msg);
    ms_reader_select(rd, parts);
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
    return bench_now_s() - t0;
}

typedef struct {
    char pf[64], cache[64], sched[64];
} combo;

/* "PF+CACHE" or "PF+CACHE+SCHED" (sched default gpu). */
static combo parse_combo(const char *text)
{
    combo c = {"", "", "gpu"};
    char buf[200];
    snprintf(buf, sizeof buf, "%s", text);
    char *a = strtok(buf, "+"), *b = strtok(NULL, "+"), *d = strtok(NULL, "+");
    if (!a || !b || strtok(NULL, "+"))
        die("--combos: expected PF+CACHE[+SCHED] items separated by commas");
    snprintf(c.pf, sizeof c.pf, "%s", a);
    snprintf(c.cache, sizeof c.cache, "%s", b);
    if (d)
        snprintf(c.sched, sizeof c.sched, "%s", d);
    return c;
}

/* One run; *steps = the layer-steps it replayed. */
static double time_run(const char *path, const ms_model *model, const ms_platform *plat, const combo *c, double cap,
                       uint64_t *steps)
{
    ms_run_config cfg = {.trace_path = path, .model = model, .platform = plat, .prefetch_spec = c->pf,
                         .cache_spec = c->cache, .sched_spec = c->sched, .cap_kind = MS_CAP_EXPERTS,
                         .cap_value = cap, .distance = 1, .max_batch = 1, .seed = 1};
    ms_metrics m;
    ms_err err;
    double t0 = bench_now_s();
    if (ms_run(&cfg, &m, &err))
        die(err.msg);
    double t = bench_now_s() - t0;
    *steps = m.total.layer_steps;
    ms_metrics_free(&m);
    return t;
}

/* The first 12 hex digits of a SHA-256 over everything the generated trace
 * depends on: every knob (defaults included), the source line (which names
 * the generator's version), the writer's storage (zstd levels) and the
 * model's layer sizes. A changed default, generator version, storage or
 * profile gives a new file name instead of a stale trace from an earlier
 * build. */
static void gen_key(const ms_gen_params *p, const ms_model *model, char key[13])
{
    char *knobs = NULL;
    size_t knobs_len = 0;
    FILE *mem = open_memstream(&knobs, &knobs_len);
    if (!mem)
        die("out of memory");
    ms_gen_write_knobs(mem, p);
    if (fclose(mem))
        die("out of memory");
    ms_trace_meta meta;
    ms_err err;
    if (ms_gen_meta(p, model, &meta, &err))
        die(err.msg);
    ms_digest *d = ms_digest_new();
    ms_digest_update(d, knobs, knobs_len);
    ms_digest_update(d, meta.source, strlen(meta.source));
    ms_digest_update(d, ms_trace_storage_tag(), strlen(ms_trace_storage_tag()));
    ms_digest_update(d, meta.model_name, strlen(meta.model_name));
    ms_digest_update(d, meta.expert_bytes, meta.L * sizeof *meta.expert_bytes);
    ms_digest_update(d, meta.dense_bytes, meta.L * sizeof *meta.dense_bytes);
    uint32_t shape[] = {meta.L, meta.J, meta.K, meta.hidden_size};
    ms_digest_update(d, shape, sizeof shape);
    char hex[MS_DIGEST_HEX];
    ms_digest_final(d, hex); /* frees d */
    ms_trace_meta_free(&meta);
    free(knobs);
    memcpy(key, hex, 12);
    key[12] = '\0';
}

static const char *trace_for(const char *model_name, const ms_model *model, unsigned long long steps_target,
                             char *buf, size_t n)
{
    ms_gen_params p;
    ms_err gerr;
    if (ms_gen_model_defaults(&p, model, &gerr)) {
        fprintf(stderr, "bench_replay: %s\n", gerr.msg);
        return NULL;
    }
    p.seed = 7;
    p.requests = 0;
    p.layer_steps = steps_target;
    char key[13];
    gen_key(&p, model, key);
    snprintf(buf, n, "/tmp/moesim-bench-replay-%s-%llu-%s.h5", model_name, steps_target, key);
    FILE *f = fopen(buf, "rb");
    if (f) { /* generated by an earlier run from the same knobs, generator and model */
        fclose(f);
        return buf;
    }
    ms_err err;
    double t0 = bench_now_s();
    if (ms_gen_write(&p, model, buf, NULL, &err))
        die(err.msg);
    printf("generated %s in %.2f s\n", buf, bench_now_s() - t0);
    return buf;
}

static const char *DEFAULT_COMBOS = "none+lru,eam+eam,hybrimoe+mrs+hybrid,fmoe+fmoe,oracle+belady,none+lfu";

int main(int argc, char **argv)
{
    const char *trace = NULL, *model_name = "mixtral-8x7b", *plat_name = "rtx3090-pcie4", *combos = DEFAULT_COMBOS;
    unsigned long long steps_target = 1000000, cap = 64, repeat = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            die("every option takes a value");
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "--trace"))
            trace = v;
        else if (!strcmp(a, "--model"))
            model_name = v;
        else if (!strcmp(a, "--platform"))
            plat_name = v;
        else if (!strcmp(a, "--combos"))
            combos = v;
        else if ((!strcmp(a, "--layer-steps") && !ms_parse_u64(v, &steps_target) && steps_target > 0) ||
                 (!strcmp(a, "--cache-experts") && !ms_parse_u64(v, &cap) && cap > 0) ||
                 (!strcmp(a, "--repeat") && !ms_parse_u64(v, &repeat) && repeat > 0))
            continue;
        else
            die("usage: bench_replay [--model NAME] [--platform NAME] [--trace FILE] [--layer-steps N] "
                "[--cache-experts N] [--repeat R] [--combos PF+CACHE[+SCHED],...]");
    }
    ms_err err;
    ms_model model;
    ms_platform plat;
    if (ms_model_load(model_name, &model, &err) || ms_platform_load(plat_name, &plat, &err))
        die(err.msg);
    char gen_path[512];
    if (!trace)
        trace = trace_for(model_name, &model, steps_target, gen_path, sizeof gen_path);
    if (!trace)
        die("cannot generate the bench trace");
    uint64_t steps = 0;
    double read_ids = 1e300, read_all = 1e300;
    for (unsigned r = 0; r < repeat; r++) {
        double t = time_read(trace, 0, &steps);
        read_ids = t < read_ids ? t : read_ids;
        t = time_read(trace, MS_PART_ALL, &steps);
        read_all = t < read_all ? t : read_all;
    }
    printf("trace %s (%s): %llu layer-steps, cache %llu experts, %s, best of %llu\n", trace, model_name,
           (unsigned long long)steps, cap, plat_name, repeat);
    printf("%-28s %10s %12s %14s %8s\n", "combination", "seconds", "replayed", "steps/s", "x lru");
    printf("%-28s %10.3f %12s %14.0f %8s\n", "read ids", read_ids, "", steps / read_ids, "");
    printf("%-28s %10.3f %12s %14.0f %8s\n", "read all", read_all, "", steps / read_all, "");
    char list[1024];
    snprintf(list, sizeof list, "%s", combos);
    double lru_s = 0;
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        combo c = parse_combo(item);
        double best = 1e300;
        uint64_t run_steps = 0;
        for (unsigned r = 0; r < repeat; r++) {
            double t = time_run(trace, &model, &plat, &c, (double)cap, &run_steps);
            best = t < best ? t : best;
        }
        if (!strcmp(item, "none+lru"))
            lru_s = best;
        char ratio[32] = "";
        if (lru_s > 0)
            snprintf(ratio, sizeof ratio, "%.1f", best / lru_s);
        printf("%-28s %10.3f %12llu %14.0f %8s\n", item, best, (unsigned long long)run_steps, steps / best, ratio);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS %.1f MB\n", ru.ru_maxrss / 1024.0);
    return 0;
}
