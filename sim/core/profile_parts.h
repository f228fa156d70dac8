/* What the parts of the profile reader share (internal to
 * sim/core/profile*.c; the contract is profile.h): profile_schema.c holds
 * the tables of fields, profile_values.c parses and checks values and whole
 * files, profile.c finds, loads, overrides and lists profiles. */
#ifndef MS_PROFILE_PARTS_H
#define MS_PROFILE_PARTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/core/err.h"
#include "sim/core/ini.h"
#include "sim/core/profile.h"

#define MAX_FIELDS 40
#define MAX_GROUPS 32
#define SOURCE_TEXT_CAP 256
#define RAW_VALUE_CAP 48

typedef enum {
    K_NAME,   /* profile name: letters, digits, '.', '-', '_' */
    K_TEXT,   /* free text */
    K_DTYPE,  /* one of the dtypes of [bytes_per_expert] */
    K_U32,    /* integer (ms_parse_u64) */
    K_COUNT_BYTES, /* exact byte or parameter count: integer, suffixes allowed (ms_parse_bytes) */
    K_BYTES,  /* byte quantity as double (ms_parse_bytes) */
    K_BW,     /* bytes per second: a byte quantity with an optional "/s" */
    K_DOUBLE, /* plain number (ms_parse_double) */
} field_kind;

typedef struct {
    const char *section;
    const char *key;
    field_kind kind;
    size_t offset;
    size_t cap;       /* K_NAME, K_TEXT, K_DTYPE: capacity of the char array */
    double lo, hi;    /* numeric range; lo is exclusive when lo_open */
    int lo_open;
    int required;
    const char *cite; /* [source] key that must cite this figure, or NULL */
} field_spec;

typedef struct {
    const char *kind;       /* "model" | "platform", for messages */
    const char *subdir;     /* "models" | "platforms" */
    const char *const *sections;
    const field_spec *fields;
    int nfields;
    const char *const *statuses; /* allowed first words of a [source] value */
    int cite_with_value;    /* platform: source lines show the figure's value */
} profile_schema;

#define STR(sec, key, kind, type, member, req) \
    { sec, key, kind, offsetof(type, member), sizeof(((type *)0)->member), 0, 0, 0, req, NULL }
#define NUM(sec, key, kind, type, member, lo, hi, lo_open, req, cite) \
    { sec, key, kind, offsetof(type, member), 0, lo, hi, lo_open, req, cite }

#define U32_MAX_D 4294967295.0
#define EXACT_MAX_D 9007199254740992.0 /* 2^53: every integer below is exact in a double */


typedef struct {
    const profile_schema *schema;
    const char *path;
    void *out;
    ms_err *err;
    FILE *fp;
    int line;
    int failed;
    unsigned char seen[MAX_FIELDS];
    char raw[MAX_FIELDS][RAW_VALUE_CAP];      /* value text, for source lines */
    const char *groups[MAX_GROUPS];           /* distinct [source] keys */
    int ngroups;
    unsigned char group_seen[MAX_GROUPS];
    char group_text[MAX_GROUPS][SOURCE_TEXT_CAP];
} parse_ctx;


/* profile_schema.c */
extern const profile_schema pf_model_schema;
extern const profile_schema pf_platform_schema;
extern const profile_schema pf_framework_schema;
/* profile_values.c */
/* Records the first error as FILE:LINE: message; returns -1. */
int pf_ctx_fail(parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pf_is_plain_name(const char *s);
void pf_collect_groups(parse_ctx *c);
int pf_find_group(const parse_ctx *c, const char *key);
int pf_store_text(parse_ctx *c, const field_spec *f, const char *value);
int pf_store_number(parse_ctx *c, const field_spec *f, const char *value);
int pf_on_value(ms_ini *ini, void *user, const char *section, const char *name, const char *value);
int pf_check_required(parse_ctx *c);
int pf_check_model(parse_ctx *c, const ms_model *m);
/* profile.c */


#endif
