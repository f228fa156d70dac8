/* Internal to the sglang / vllm importers: import_engine.c reads the API
 * responses and decodes the payloads, import_engine_build.c writes the
 * trace.  The public contract is ms_import_sglang / ms_import_vllm in
 * traces/import/import.h. */
#ifndef MS_IMPORT_ENGINE_H
#define MS_IMPORT_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "traces/import/import.h"

#define ENG_FILE_MAX (256u << 20)

typedef struct {
    char key[200];    /* response id (vLLM: "#choice" appended), or "line N" */
    uint64_t line;    /* record holding the payload: line (0 = whole document) */
    uint64_t index;   /* record index in the file (messages in document mode) */
    int32_t *ids;     /* [rows][La][K] as the engine sent them */
    uint64_t rows;
    long long P, C, cached; /* -1 unknown */
    int have;
} eng_req;

typedef struct {
    const char *path;
    const ms_import_opts *o;
    int vllm;
    ms_import_dims d;
    uint32_t La, K; /* engine layers and experts per token; 0 = not known yet */
    eng_req *reqs;
    size_t n, cap;
    uint64_t records, skipped, dup_cells;
    ms_import_report rep;
} eng_state;

/* "FILE:LINE" or "FILE (response N)" for a record. */
void eng_where(const eng_state *s, uint64_t line, uint64_t index, char *buf, size_t cap);
/* Reads every record of s->path into s->reqs. */
int eng_read_input(eng_state *s, ms_err *err);
/* Drops dense layers and writes every request (probs_kind topk_ids). */
int eng_write_trace(eng_state *s, const char *out_path, ms_err *err);

#endif
