/* Internal to the dense-csv importer: import_densecsv_cols.c finds the
 * layer files and sorts the header's columns (sequence, phase, ignored,
 * experts); import_densecsv.c reads the rows and writes the requests.  The
 * public contract is ms_import_densecsv in traces/import/import.h. */
#ifndef MS_IMPORT_DENSECSV_H
#define MS_IMPORT_DENSECSV_H

#include <stdint.h>

#include "traces/import/import.h"

#define DC_MAX_LAYERS 4096u
#define DC_MAX_ROWS (1u << 20) /* token rows per request */

enum { COL_EXPERT = 0, COL_SEQ, COL_PHASE, COL_IGNORED };

typedef struct {
    const char *dir;
    const ms_import_opts *o;
    char prefix[128], suffix[128];
    uint32_t L;
    long first_file;   /* file number of layer 0 */
    char **paths;      /* [L] */
    ms_lines *in;      /* [L] */
    char *header;      /* column line of layer 0 */
    uint8_t *col_kind; /* [n_cols] COL_* */
    int has_seq, has_phase;
    uint32_t n_cols, J;
    ms_probs_kind pk;
    ms_import_dims d;
    ms_trace_meta meta;
    /* current request */
    int in_req;
    uint64_t req_id;
    uint64_t rows_total; /* data rows read so far (per layer) */
    uint32_t n_rows, n_prefill, cap_rows;
    float *probs; /* [cap_rows][L][J] */
    char **cols;  /* scratch: column starts of one line */
    double *vals; /* scratch: one row of J values */
    uint64_t short_seqs; /* --prompt-len: requests with no more rows than P */
    ms_import_report rep;
} dc_state;

/* Finds the layer files (pattern, --layer-base), reads and checks every
 * header and sorts the columns; notes what it renumbered or ignored. */
int dc_open_files(dc_state *s, ms_err *err);
/* Splits line in place at ','; returns the number of columns (at most cap + 1). */
uint32_t dc_split_csv(char *line, char **cols, uint32_t cap);

#endif
