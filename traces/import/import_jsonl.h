/* Internal to the jsonl importer (import_jsonl.c reads and checks the lines,
 * import_jsonl_req.c turns them into requests); the public contract is
 * ms_import_jsonl / ms_import_jsonl_files in traces/import/import.h. */
#ifndef MS_IMPORT_JSONL_H
#define MS_IMPORT_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "traces/import/import.h"

#define JL_MAX_LAYERS 4096u
#define JL_MAX_TOKENS (1u << 20) /* tokens per request; keeps a corrupt token index from asking for huge arrays */
#define JL_NO_PLEN UINT32_MAX    /* no prompt-length field on the line */

enum { F_REQUEST, F_TOKEN, F_LAYER, F_EXPERTS, F_WEIGHTS, F_PHASE, F_PROMPT_LEN, N_FIELDS };
#define JL_MAX_KEY_FIELDS 8

typedef struct {
    uint32_t key;   /* index into jl_state.keys: requests in order of first appearance */
    uint32_t file;  /* input index */
    uint64_t line;  /* line in that file */
    uint64_t seq;   /* global reading order (files in order, then lines) */
    uint32_t token, layer;
    uint32_t row;   /* token row in the request, derived from token (import_jsonl_req.c) */
    uint32_t plen;  /* prompt-length field, or JL_NO_PLEN */
    int8_t prompt;  /* 1 prompt, 0 decode, -1 from --prompt-len */
    uint32_t step;  /* --token-pos per-step: the request's step (0, 1, ...), set with row */
    size_t off;     /* into ids / w */
} jl_row;

typedef struct {
    char *text;      /* the key's field values, JSON, '\x1f'-separated (and the file index when namespaced) */
    uint64_t num;    /* the value when `numeric` */
    int numeric;     /* one key field, a non-negative integer */
} jl_key;

typedef struct {
    const char *const *paths;
    size_t n_files;
    const char *path; /* file being read */
    uint32_t file;
    const ms_import_opts *o;
    char names[N_FIELDS][64];
    char key_fields[JL_MAX_KEY_FIELDS][64];
    uint32_t n_key_fields;
    int custom_key;  /* --request-key given */
    ms_import_dims d;
    uint32_t max_layer;
    jl_row *rows;
    size_t n, cap;
    int32_t *ids;
    float *w;
    ms_probs_kind pk;
    /* request keys (hash set of texts) */
    jl_key *keys;
    uint32_t n_keys, cap_keys;
    uint32_t *slots; /* open addressing: key index + 1, 0 = empty */
    uint32_t n_slots;
    /* what import_jsonl_req.c found */
    uint64_t steps, decode_only, plen_field, plen_first_decode, plen_unknown;
    uint64_t prompt_steps; /* requests whose prompt is their first --prompt-len steps (per-step) */
    ms_import_report rep;
} jl_state;

/* Interns key text; returns its index (new keys get the next index). */
uint32_t jl_key_intern(jl_state *s, const char *text, int numeric, uint64_t num);
/* "7", or the values of a composite key ("gsm8k",17), for messages. */
void jl_key_name(const jl_state *s, uint32_t key, char *buf, size_t cap);
/* Derives rows, prompt lengths and builds and writes every request. */
int jl_write_requests(jl_state *s, const char *out_path, ms_err *err);

#endif
