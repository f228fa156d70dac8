/* The systems of the published rows as presets (docs/published.md
 * "Presets"): each maps a public offloading system to moesim's prefetch,
 * cache and scheduling policies, a framework profile
 * (sim/profiles/frameworks/) and the knobs of a row it reads.  A row's
 * system must name one; a knob its preset does not read is a bad row. */
#ifndef MS_PUBLISHED_PRESETS_H
#define MS_PUBLISHED_PRESETS_H

#include <stdio.h>

#include "sim/apps/published_rows.h"
#include "sim/engine/engine.h"

typedef struct {
    const char *system;
    const char *framework;   /* framework profile name */
    unsigned knobs;          /* bit k: reads knob k (ms_pub_knob) */
    const char *what;        /* what the public system does */
    const char *where;       /* where its code says so */
} ms_pub_preset;

const ms_pub_preset *ms_pub_preset_find(const char *system);
/* The systems, comma-separated, into buf (for messages). */
const char *ms_pub_preset_names(char *buf, size_t n);
/* One line per preset: system, policies, framework, knobs. */
void ms_pub_presets_list(FILE *out);

/* What a row runs: its policies, cache capacity and framework. */
typedef struct {
    char prefetch[160], cache[160], sched[160];
    ms_cap_kind cap_kind;
    double cap_value;
    char framework[64];
    uint32_t cpu_cores;      /* > 0: the platform's cpu_cores for this row (cpu_threads) */
} ms_pub_setup;

/* One MoE layer's dense bytes and one expert's bytes of model m at row's
 * dense_bits / expert_bits (the model's own without them): what its run
 * charges (the run keys of the same names). */
double ms_pub_dense_bytes(const ms_pub_row *row, const ms_model *m);
double ms_pub_expert_bytes(const ms_pub_row *row, const ms_model *m);

/* The setup of row on its model m (loaded with the row's sets); gpu_room:
 * the bytes the row's GPU has for experts (budget.h ms_budget_cache_room:
 * memory less dense weights, embeddings, KV and the preset framework's
 * reserve), or NAN when unknown.  0, or -1 with one line
 * "FILE: row NAME: KEY = VALUE: why" when the row's knobs do not give its
 * system a setup (a knob missing or out of range, or nothing fits). */
int ms_pub_preset_setup(const ms_pub_row *row, const ms_model *m, double gpu_room, ms_pub_setup *s, ms_err *err);

#endif
