/* Published measurements as data (docs/published.md "Row files"): one
 * [row NAME] section per published number of a real offloading system, in
 * the .ini files of sim/profiles/published/ or the files given to `moesim published
 * --rows`.  ms_pub_rows_read validates every key of every row: a bad row is
 * one line
 *
 *   FILE: row NAME: KEY = VALUE: why
 *
 * (an unknown key, system, model or platform; a value out of range; a
 * missing required key, "KEY: missing (required)"; a knob the row's system
 * does not read; a bad `set` entry; a repeated key or row). */
#ifndef MS_PUBLISHED_ROWS_H
#define MS_PUBLISHED_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"

typedef enum { MS_PUB_DECODE_TOK_S, MS_PUB_TPOT_MS, MS_PUB_TTFT_MS, MS_PUB_E2E_TOK_S, MS_PUB_METRIC_N } ms_pub_metric;
typedef enum { MS_PUB_CALIBRATION, MS_PUB_EVALUATION } ms_pub_role;

/* The system knobs a row may give (each preset reads some of them). */
typedef enum {
    MS_PUB_SLOTS_PER_LAYER, MS_PUB_PREFETCH, MS_PUB_GPU_EXPERT_GB, MS_PUB_CPU_OFFLOAD_GB,
    MS_PUB_CPU_MOE_LAYERS, MS_PUB_CPU_THREADS, MS_PUB_KNOB_N
} ms_pub_knob;

#define MS_PUB_MAX_SETS 16

typedef struct {
    char name[64];
    char file[1024];            /* the row file */
    char source[512], system[32], model[128], platform[128];
    char set_text[1024];        /* the `set` value as written */
    char set_store[1024];       /* set_text split into key\0value\0 pairs (sets[] point into it) */
    char set_where[MS_PUB_MAX_SETS][160];
    int n_sets;
    short set_key[MS_PUB_MAX_SETS], set_value[MS_PUB_MAX_SETS]; /* offsets into set_store */
    char set_is_model[MS_PUB_MAX_SETS];
    double expert_bits, dense_bits; /* 0: not given (the model's dtype) */
    uint32_t batch, prompt_len, output_len, requests;
    uint64_t seed;
    ms_pub_metric metric;
    double value;
    double uncertainty;         /* NaN: not given */
    char read[8];               /* text | table | plot */
    ms_pub_role role;
    char trace[1200];           /* resolved against the row file's folder; "" = generated */
    unsigned knob_given;        /* bit k: knob k given */
    double knob[MS_PUB_KNOB_N];
    char assume[512], note[512];
} ms_pub_row;

typedef struct {
    ms_pub_row *row;
    size_t n, cap;
} ms_pub_rows;

/* Reads every row of path and appends them to *rows (a row name repeated
 * across files is refused too).  0, or -1 with the bad row's one line. */
int ms_pub_rows_read(const char *path, ms_pub_rows *rows, ms_err *err);
void ms_pub_rows_free(ms_pub_rows *rows);
/* The row's `set` entries as profile overrides (pointing into *r). */
void ms_pub_row_sets(const ms_pub_row *r, ms_profile_set *model_sets, int *n_model, ms_profile_set *platform_sets,
                     int *n_platform);

const char *ms_pub_metric_name(ms_pub_metric m);
const char *ms_pub_knob_name(ms_pub_knob k);
const char *ms_pub_role_name(ms_pub_role r);

#endif
