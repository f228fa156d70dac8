/* The run configuration's keys: one table for the CLI flags of `run` and
 * `validate`, the keys of a sweep spec and the columns of a regress golden
 * file.  One spelling rule: the flag is "--" + the key with '_' written '-'
 * (the key cache_experts is the flag --cache-experts).  Each key has one
 * kind, range, default and help text, and one value check
 * (ms_runkey_check) whose words every reader puts after its own "where"
 * (the flag, or FILE:LINE: key = value). */
#ifndef MS_RUNKEYS_H
#define MS_RUNKEYS_H

#include <stddef.h>

#include "sim/engine/engine.h"

/* In this order the sweep's parameters (sweep_spec.h MS_SW_*) come first
 * (the last four: several GPUs and the framework, ms_run_config's gpus,
 * placement, cache_per_gpu, framework); cache_gb (a cache_bytes in 1e9
 * bytes), events, expert_bits and dense_bits (CLI and moesim.run only: not
 * sweep axes, whose CSV columns and point keys are the parameters above)
 * follow. */
typedef enum {
    MS_RK_TRACE, MS_RK_MODEL, MS_RK_PLATFORM, MS_RK_PREFETCH, MS_RK_CACHE, MS_RK_SCHED,
    MS_RK_CACHE_EXPERTS, MS_RK_CACHE_BYTES, MS_RK_DISTANCE, MS_RK_BATCH, MS_RK_HOST_BYTES,
    MS_RK_H2D_GBPS, MS_RK_TRAIN, MS_RK_TOPK_FILL, MS_RK_OFFLINE, MS_RK_SEED,
    MS_RK_GPUS, MS_RK_PLACEMENT, MS_RK_CACHE_PER_GPU, MS_RK_FRAMEWORK,
    MS_RK_CACHE_GB, MS_RK_EVENTS, MS_RK_EXPERT_BITS, MS_RK_DENSE_BITS,
    MS_RK_N
} ms_runkey_id;

typedef enum {
    MS_RKV_PATH,      /* a file */
    MS_RKV_MODEL,     /* a model profile name or .ini path */
    MS_RKV_PLATFORM,  /* a platform profile name or .ini path */
    MS_RKV_POLICY,    /* name[:k=v,...]; min holds the policy kind */
    MS_RKV_INT,       /* a whole number in [min, max] */
    MS_RKV_BYTES,     /* a size such as 4000MiB: > 0 (>= 0 when the default is "0") */
    MS_RKV_GB,        /* a positive number of 1e9 bytes */
    MS_RKV_POS,       /* a positive number */
    MS_RKV_TRAIN,     /* auto, or a fraction in [0, 1) */
    MS_RKV_ENUM,      /* one of choices ("a|b") */
    MS_RKV_PLACEMENT, /* round-robin, layer, balanced or a placement file (sim/engine/placement.h) */
    MS_RKV_FRAMEWORK, /* a framework profile name or .ini path, or none */
} ms_runkey_kind;

typedef struct {
    const char *key;
    ms_runkey_kind kind;
    double min, max;
    const char *choices;  /* MS_RKV_ENUM */
    const char *def;      /* default as text; NULL: none (required, or one of a group) */
    const char *help;
} ms_runkey;

extern const ms_runkey ms_runkeys[MS_RK_N];

/* The id of a key ("cache_experts") or of a flag ("--cache-experts"); -1
 * when there is none. */
int ms_runkey_find(const char *key);
int ms_runkey_find_flag(const char *flag);
/* "--cache-experts" into buf (returns buf). */
const char *ms_runkey_flag(int id, char *buf, size_t n);
/* The key in the words of where it came from: the flag ("--cache-experts")
 * when as_ini is 0, the key ("cache_experts") when 1 (returns buf). */
const char *ms_runkey_word(int id, int as_ini, char *buf, size_t n);

/* Parses a number of a numeric key (sizes with their suffixes; "auto" is
 * not a number): 0, or -1 when text is not one. */
int ms_runkey_parse(int id, const char *text, double *x);
/* 0 when x is in the key's range, else -1 with the reason in why
 * ("expected a whole number in [1, 1e+09]"). */
int ms_runkey_check(int id, double x, char *why, size_t n);
/* What a value of the key must look like, for "not a number" messages. */
const char *ms_runkey_expected(int id);

/* Sets the ms_run_config field of key id from its text (numbers parsed and
 * checked as ms_runkey_parse / ms_runkey_check do; strings kept, not
 * copied): 0; 1 for a key that is not a field of ms_run_config (model,
 * platform, framework, h2d_gbps: the caller's, with *x its number where it
 * has one); -1 with the reason in why ("expected zero or even"), which every
 * reader puts after its own "where".  The CLI's flags and Python's
 * moesim.run keys both go through it. */
int ms_runkey_apply(ms_run_config *cfg, int id, const char *val, double *x, char *why, size_t n);

#endif
