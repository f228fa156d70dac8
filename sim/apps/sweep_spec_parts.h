/* What the parts of the sweep spec reader share (internal to
 * sim/apps/sweep_spec*.c; the contract is sweep_spec.h): sweep_spec.c reads
 * the INI and expands the points, sweep_values.c parses and checks the
 * values of one key (numbers, ranges, policies, profiles, traces). */
#ifndef MS_SWEEP_SPEC_PARTS_H
#define MS_SWEEP_SPEC_PARTS_H

#include <stdint.h>

#include "sim/apps/sweep_spec.h"
#include "sim/core/profile.h"
#include "sim/engine/runkeys.h"

#define MAX_AXIS_VALUES 1000000u
#define MAX_POINTS 10000000ull
#define LINE_MAX_CHARS 4096

/* The keys, their kinds, ranges and defaults: the run configuration's one
 * table (runkeys.h), whose first MS_SW_NPARAM entries are the sweep's. */
typedef ms_runkey axis_desc;
typedef ms_runkey_kind value_kind;
#define axes ms_runkeys
#define K_PATH MS_RKV_PATH
#define K_MODEL MS_RKV_MODEL
#define K_PLATFORM MS_RKV_PLATFORM
#define K_POLICY MS_RKV_POLICY
#define K_INT MS_RKV_INT
#define K_BYTES MS_RKV_BYTES
#define K_GB MS_RKV_GB
#define K_POS MS_RKV_POS
#define K_TRAIN MS_RKV_TRAIN
#define K_ENUM MS_RKV_ENUM
_Static_assert((int)MS_SW_NPARAM == (int)MS_RK_CACHE_GB, "the sweep's parameters are the first keys of runkeys.h");

#define MS_SWEEP_MAX_SETS 32

/* Values of one key as written, and where. */
typedef struct {
    char *raw;
    int line;
    int gb; /* cache_bytes given as cache_gb */
} raw_value;

typedef struct {
    raw_value raw[MS_SW_NPARAM];
    int line;           /* of the [point] header */
    char **vals[MS_SW_NPARAM];
    uint32_t n[MS_SW_NPARAM];
} group;

typedef struct {
    char *name;
    ms_model model;
    int none;
} model_slot;

typedef struct {
    char *name;
    ms_platform plat;
    char gbps[32];
    char gpus[16];      /* its GPU count, for points that do not give gpus */
} platform_slot;

/* A framework or placement value and what it resolves to. */
typedef struct {
    char *name;
    ms_framework fw;    /* framework */
    char *path;         /* placement: the name, or the resolved file */
} named_slot;

struct ms_sweep_spec {
    char *path, *dir;
    char *output;
    int output_line;
    int mode_list, mode_set;
    uint64_t trace_cache;
    int trace_cache_set;
    group base;
    group *groups;
    int ngroups;
    model_slot *models;
    int nmodels;
    platform_slot *plats;
    int nplats;
    named_slot *fws, *places;
    int nfws, nplaces;
    char **trace_paths; /* resolved, parallel to the unique trace texts */
    char **trace_texts;
    int ntraces;
    ms_sweep_point *points;
    uint64_t npoints;
    /* model.KEY / platform.KEY overrides of [sweep], applied to every
     * model or platform of the spec (their strings owned here) */
    ms_profile_set sets[2][MS_SWEEP_MAX_SETS];
    int nsets[2];
};

typedef struct {
    ms_sweep_spec *s;
    int line;
    int failed;
    int continuation; /* the current line starts with white space */
    int in_point;     /* 0: [sweep], 1: [point], -1: before any section */
    int last_line_key_param;
    const char *last_key;
    ms_err *err;
} parse_ctx;

typedef struct {
    char **v;
    uint32_t n, cap;
} value_list;

/* sweep_spec.c */
/* Records the first error as FILE:LINE: message; returns -1. */
int sw_ctx_fail(parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *sw_trim(char *s);
/* sweep_values.c */
void sw_list_push(value_list *l, const char *text);
void sw_list_free(value_list *l);
char *sw_resolve_path(const ms_sweep_spec *s, const char *p);
int sw_expand_values(parse_ctx *c, int p, const raw_value *r, value_list *out);

#endif
