/* `name:k=v,k=v` policy specs and typed parameter tables.
 *
 * Every policy declares its parameters as an ms_param_spec table (name,
 * type, default, range, help).  ms_params_parse() checks the user's string
 * against it: unknown keys, malformed numbers, out-of-range values and
 * repeated keys are one-line errors naming the policy, key and value. */
#ifndef MS_PARAMS_H
#define MS_PARAMS_H

#include "sim/core/err.h"

typedef enum { MS_PARAM_INT, MS_PARAM_DOUBLE, MS_PARAM_ENUM } ms_param_type;

typedef struct {
    const char *name;
    ms_param_type type;
    const char *def;     /* default as text */
    double min, max;     /* inclusive range for INT / DOUBLE */
    const char *choices; /* "a|b|c" for ENUM */
    const char *help;
} ms_param_spec;

#define MS_PARAMS_MAX 32

typedef struct {
    int n;
    const ms_param_spec *spec[MS_PARAMS_MAX];
    double num[MS_PARAMS_MAX];     /* INT and DOUBLE values */
    char str[MS_PARAMS_MAX][64];   /* ENUM values, and every value as text */
} ms_params;

/* Splits "name:k=v,..." into name (copied into name_out) and the k=v text. */
int ms_spec_split(const char *spec, char *name_out, size_t name_cap, const char **kv_out, ms_err *err);
/* Fills p with defaults from specs (terminated by a {NULL} entry), then
 * applies kv ("k=v,k=v", may be empty or NULL).  `who` names the policy. */
int ms_params_parse(const ms_param_spec *specs, const char *kv, const char *who, ms_params *p, ms_err *err);
double ms_param_num(const ms_params *p, const char *name);  /* aborts on unknown name (a bug) */
const char *ms_param_str(const ms_params *p, const char *name);

/* Strict numeric parsing for flags and INI values, decimal only (no hex,
 * inf or nan); 0 ok, -1 malformed.  ms_parse_double returns -2 for a
 * well-formed number a double cannot hold (1e400, 1e-400): out of range. */
int ms_parse_double(const char *s, double *out);
int ms_parse_u64(const char *s, unsigned long long *out);
/* "4000MiB", "3.5GB", "1048576" -> bytes (B, KB, MB, GB, TB decimal; KiB, MiB, GiB, TiB binary). */
int ms_parse_bytes(const char *s, double *out);

#endif
