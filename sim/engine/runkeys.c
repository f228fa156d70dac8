/* The run configuration's keys (runkeys.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/core/params.h"
#include "sim/engine/engine.h"
#include "sim/engine/runkeys.h"

const ms_runkey ms_runkeys[MS_RK_N] = {
    [MS_RK_TRACE] = {"trace", MS_RKV_PATH, 0, 0, NULL, NULL, "trace file (format v1 or v2)"},
    [MS_RK_MODEL] = {"model", MS_RKV_MODEL, 0, 0, NULL, "none", "model profile: name or .ini path"},
    [MS_RK_PLATFORM] = {"platform", MS_RKV_PLATFORM, 0, 0, NULL, "rtx3090-pcie4", "platform profile: name or .ini path"},
    [MS_RK_PREFETCH] = {"prefetch", MS_RKV_POLICY, MS_KIND_PREFETCH, 0, NULL, "none", "prefetch policy name[:k=v,...]"},
    [MS_RK_CACHE] = {"cache", MS_RKV_POLICY, MS_KIND_CACHE, 0, NULL, "lru", "cache policy name[:k=v,...]"},
    [MS_RK_SCHED] = {"sched", MS_RKV_POLICY, MS_KIND_SCHED, 0, NULL, "gpu", "scheduler name[:k=v,...]"},
    [MS_RK_CACHE_EXPERTS] = {"cache_experts", MS_RKV_INT, 1, 1e9, NULL, NULL, "GPU expert cache in experts"},
    [MS_RK_CACHE_BYTES] = {"cache_bytes", MS_RKV_BYTES, 0, 1e18, NULL, NULL, "GPU expert cache in bytes (KB MB GB KiB MiB GiB)"},
    [MS_RK_DISTANCE] = {"distance", MS_RKV_INT, 0, 1024, NULL, "1", "prefetch distance in layers"},
    [MS_RK_BATCH] = {"batch", MS_RKV_INT, 1, 65536, NULL, "1", "continuous-batching limit in requests"},
    [MS_RK_HOST_BYTES] = {"host_bytes", MS_RKV_BYTES, 0, 1e18, NULL, "0", "host-memory expert tier in bytes; 0: all in host memory"},
    [MS_RK_H2D_GBPS] = {"h2d_gbps", MS_RKV_POS, 0, 1e12, NULL, NULL, "host-to-GPU link bandwidth in GB/s (default: the platform's)"},
    [MS_RK_TRAIN] = {"train", MS_RKV_TRAIN, 0, 1, NULL, "auto", "training split: auto or a fraction in [0, 1)"},
    [MS_RK_TOPK_FILL] = {"topk_fill", MS_RKV_ENUM, 0, 0, "zero|even", "zero", "top-k-only traces: mass outside the top-k"},
    [MS_RK_OFFLINE] = {"offline", MS_RKV_ENUM, 0, 0, "0|1", "0", "1: ignore arrival times"},
    [MS_RK_SEED] = {"seed", MS_RKV_INT, 0, 9007199254740992.0, NULL, "1", "seed handed to policies"},
    [MS_RK_CACHE_GB] = {"cache_gb", MS_RKV_GB, 0, 1e12, NULL, NULL, "GPU expert cache in 1e9 bytes"},
    [MS_RK_EVENTS] = {"events", MS_RKV_PATH, 0, 0, NULL, NULL, "CSV of every interval (run, validate)"},
    [MS_RK_EXPERT_BITS] = {"expert_bits", MS_RKV_POS, 0, 64, NULL, NULL,
                           "bits per routed-expert weight incl. scales: bytes = expert_params x bits / 8 (default: the trace's bytes)"},
    [MS_RK_DENSE_BITS] = {"dense_bits", MS_RKV_POS, 0, 64, NULL, NULL,
                          "bits per dense weight incl. scales: bytes = dense_params x bits / 8 (default: the trace's bytes)"},
    [MS_RK_GPUS] = {"gpus", MS_RKV_INT, 1, 64, NULL, NULL, "GPUs with expert parallelism (default: the platform's)"},
    [MS_RK_PLACEMENT] = {"placement", MS_RKV_PLACEMENT, 0, 0, NULL, "round-robin",
                         "experts on GPUs: round-robin, layer, balanced or a layer,expert,gpu file"},
    [MS_RK_CACHE_PER_GPU] = {"cache_per_gpu", MS_RKV_ENUM, 0, 0, "0|1", "0",
                             "1: the cache size is every GPU's; 0: the total, split evenly"},
    [MS_RK_FRAMEWORK] = {"framework", MS_RKV_FRAMEWORK, 0, 0, NULL, NULL,
                         "serving framework's host costs: name, .ini path or none (default: the platform's)"},
};

int ms_runkey_find(const char *key)
{
    for (int i = 0; i < MS_RK_N; i++)
        if (!strcmp(ms_runkeys[i].key, key))
            return i;
    return -1;
}

int ms_runkey_find_flag(const char *flag)
{
    if (strncmp(flag, "--", 2))
        return -1;
    char key[64];
    size_t n = strlen(flag + 2);
    if (n == 0 || n >= sizeof key)
        return -1;
    for (size_t i = 0; i <= n; i++) {
        char ch = flag[2 + i];
        if (ch == '_')
            return -1; /* the flag spells it '-' */
        key[i] = ch == '-' ? '_' : ch;
    }
    return ms_runkey_find(key);
}

const char *ms_runkey_flag(int id, char *buf, size_t n)
{
    snprintf(buf, n, "--%s", ms_runkeys[id].key);
    for (char *p = buf + 2; *p; p++)
        if (*p == '_')
            *p = '-';
    return buf;
}

const char *ms_runkey_word(int id, int as_ini, char *buf, size_t n)
{
    if (!as_ini)
        return ms_runkey_flag(id, buf, n);
    snprintf(buf, n, "%s", ms_runkeys[id].key);
    return buf;
}

int ms_runkey_parse(int id, const char *text, double *x)
{
    return ms_runkeys[id].kind == MS_RKV_BYTES ? ms_parse_bytes(text, x) : ms_parse_double(text, x);
}

int ms_runkey_check(int id, double x, char *why, size_t n)
{
    const ms_runkey *k = &ms_runkeys[id];
    switch (k->kind) {
    case MS_RKV_INT:
        if (x != floor(x) || x < k->min || x > k->max)
            return snprintf(why, n, "expected a whole number in [%g, %g]", k->min, k->max), -1;
        return 0;
    case MS_RKV_BYTES: {
        int zero_ok = k->def && !strcmp(k->def, "0"); /* host_bytes: 0 = every expert in host memory */
        if (!(x >= 0) || (x == 0 && !zero_ok) || x > k->max)
            return snprintf(why, n, "expected a %ssize such as 4000MiB", zero_ok ? "" : "positive "), -1;
        return 0;
    }
    case MS_RKV_GB:
    case MS_RKV_POS:
        if (!(x > 0))
            return snprintf(why, n, "expected a positive number"), -1;
        if (x > k->max)
            return snprintf(why, n, "expected a positive number up to %g", k->max), -1;
        return 0;
    case MS_RKV_TRAIN:
        if (!(x >= 0 && x < 1))
            return snprintf(why, n, "expected auto or a fraction in [0, 1)"), -1;
        return 0;
    default:
        return 0;
    }
}

const char *ms_runkey_expected(int id)
{
    switch (ms_runkeys[id].kind) {
    case MS_RKV_BYTES:
        return "a size such as 4000MiB";
    case MS_RKV_TRAIN:
        return "auto or a fraction";
    case MS_RKV_INT:
        return "a whole number";
    default:
        return "a number";
    }
}

/* A numeric key's value: 0, or -1 with why. */
static int runkey_number(int id, const char *val, double *x, char *why, size_t n)
{
    if (ms_runkey_parse(id, val, x))
        return snprintf(why, n, "expected %s", ms_runkey_expected(id)), -1;
    return ms_runkey_check(id, *x, why, n);
}

/* "0" or "1" into *flag: 0, or -1 with why. */
static int runkey_bool(const char *val, int *flag, char *why, size_t n)
{
    if (strcmp(val, "0") && strcmp(val, "1"))
        return snprintf(why, n, "expected 0 or 1"), -1;
    *flag = !strcmp(val, "1");
    return 0;
}

int ms_runkey_apply(ms_run_config *cfg, int id, const char *val, double *x, char *why, size_t n)
{
    const ms_runkey *k = &ms_runkeys[id];
    *x = 0;
    if ((k->kind == MS_RKV_INT || k->kind == MS_RKV_BYTES || k->kind == MS_RKV_GB || k->kind == MS_RKV_POS ||
         (k->kind == MS_RKV_TRAIN && strcmp(val, "auto"))) &&
        runkey_number(id, val, x, why, n))
        return -1;
    switch ((ms_runkey_id)id) {
    case MS_RK_TRACE: cfg->trace_path = val; return 0;
    case MS_RK_PREFETCH: cfg->prefetch_spec = val; return 0;
    case MS_RK_CACHE: cfg->cache_spec = val; return 0;
    case MS_RK_SCHED: cfg->sched_spec = val; return 0;
    case MS_RK_EVENTS: cfg->events_path = val; return 0;
    case MS_RK_CACHE_EXPERTS:
    case MS_RK_CACHE_BYTES:
    case MS_RK_CACHE_GB:
        cfg->cap_kind = id == MS_RK_CACHE_EXPERTS ? MS_CAP_EXPERTS : MS_CAP_BYTES;
        cfg->cap_value = id == MS_RK_CACHE_GB ? *x * 1e9 : *x;
        return 0;
    case MS_RK_DISTANCE: cfg->distance = (uint32_t)*x; return 0;
    case MS_RK_BATCH: cfg->max_batch = (uint32_t)*x; return 0;
    case MS_RK_HOST_BYTES: cfg->host_bytes = *x; return 0;
    case MS_RK_SEED: cfg->seed = (uint64_t)*x; return 0;
    case MS_RK_TRAIN:
        cfg->train_set = strcmp(val, "auto") != 0;
        cfg->train_frac = *x;
        return 0;
    case MS_RK_TOPK_FILL:
        if (strcmp(val, "zero") && strcmp(val, "even"))
            return snprintf(why, n, "expected zero or even"), -1;
        cfg->topk_fill = !strcmp(val, "even") ? MS_FILL_EVEN : MS_FILL_ZERO;
        return 0;
    case MS_RK_OFFLINE: return runkey_bool(val, &cfg->offline, why, n);
    case MS_RK_GPUS: cfg->gpus = (uint32_t)*x; return 0;
    case MS_RK_PLACEMENT: cfg->placement = val; return 0;
    case MS_RK_CACHE_PER_GPU: return runkey_bool(val, &cfg->cache_per_gpu, why, n);
    case MS_RK_EXPERT_BITS: cfg->expert_bits = *x; return 0;
    case MS_RK_DENSE_BITS: cfg->dense_bits = *x; return 0;
    case MS_RK_MODEL:
    case MS_RK_PLATFORM:
    case MS_RK_FRAMEWORK:
    case MS_RK_H2D_GBPS:
    case MS_RK_N:
        break;
    }
    return 1;
}
