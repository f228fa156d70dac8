/* dense-csv importer: layer files and header columns (import_densecsv.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "traces/import/import_densecsv.h"

static int split_pattern(dc_state *s, const char *pattern, ms_err *err)
{
    const char *star = strchr(pattern, '*');
    if (!star || strchr(star + 1, '*') || strchr(pattern, '/') || (size_t)(star - pattern) >= sizeof s->prefix ||
        strlen(star + 1) >= sizeof s->suffix)
        return ms_fail(err, "trace import --format dense-csv: --pattern '%s' must be a file name with exactly one '*' "
                            "(the layer number)",
                       pattern);
    snprintf(s->prefix, sizeof s->prefix, "%.*s", (int)(star - pattern), pattern);
    snprintf(s->suffix, sizeof s->suffix, "%s", star + 1);
    return 0;
}

/* Layer number of a matching file name, or -1. */
static long layer_of(const dc_state *s, const char *name)
{
    size_t np = strlen(s->prefix), ns = strlen(s->suffix), n = strlen(name);
    if (n <= np + ns || strncmp(name, s->prefix, np) || strcmp(name + n - ns, s->suffix))
        return -1;
    long v = 0;
    for (size_t i = np; i < n - ns; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (long)DC_MAX_LAYERS)
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

/* The files numbered first..max, without gaps, become layers 0..L-1: first
 * is --layer-base (files below it are ignored), else the lowest number. */
static int pick_layers(dc_state *s, char **by_layer, long min, long max, ms_err *err)
{
    long base = s->o->layer_base;
    if (base >= 0 && (base > max || !by_layer[base]))
        return ms_fail(err, "%s: --layer-base %ld: no file %s%ld%s (files %s%ld%s..%s%ld%s)", s->dir, base, s->prefix,
                       base, s->suffix, s->prefix, min, s->suffix, s->prefix, max, s->suffix);
    long first = base >= 0 ? base : min;
    for (long l = first; l <= max; l++)
        if (!by_layer[l])
            return ms_fail(err, "%s: layer gap: no file %s%ld%s (layers found up to %ld)", s->dir, s->prefix, l,
                           s->suffix, max);
    s->first_file = first;
    s->L = (uint32_t)(max - first + 1);
    s->paths = ms_xcalloc(s->L, sizeof *s->paths);
    for (uint32_t l = 0; l < s->L; l++) {
        size_t n = strlen(s->dir) + strlen(by_layer[first + l]) + 2;
        s->paths[l] = ms_xcalloc(n, 1);
        snprintf(s->paths[l], n, "%s/%s", s->dir, by_layer[first + l]);
    }
    if (first > min)
        ms_import_note(&s->rep, "files below --layer-base %ld ignored: %s%ld%s..%s%ld%s", base, s->prefix, min,
                       s->suffix, s->prefix, first - 1, s->suffix);
    if (first > 0)
        ms_import_note(&s->rep, "layers renumbered from the file names: %s%ld%s..%s%ld%s -> layers 0..%u", s->prefix,
                       first, s->suffix, s->prefix, max, s->suffix, s->L - 1);
    return 0;
}

static int find_layer_files(dc_state *s, ms_err *err)
{
    DIR *dir = opendir(s->dir);
    if (!dir)
        return ms_fail(err, "%s: cannot open directory: %s", s->dir, strerror(errno));
    char **by_layer = ms_xcalloc(DC_MAX_LAYERS + 1, sizeof *by_layer);
    long max = -1, min = DC_MAX_LAYERS;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(dir)) != NULL) {
        long l = layer_of(s, e->d_name);
        if (l < 0)
            continue;
        if (l >= (long)DC_MAX_LAYERS)
            rc = ms_fail(err, "%s/%s: layer %ld out of range [0, %u)", s->dir, e->d_name, l, DC_MAX_LAYERS);
        else if (by_layer[l])
            rc = ms_fail(err, "%s/%s: layer %ld given twice (also %s)", s->dir, e->d_name, l, by_layer[l]);
        else
            by_layer[l] = ms_xstrdup(e->d_name);
        if (l > max)
            max = l;
        if (l < min)
            min = l;
    }
    closedir(dir);
    if (rc == 0 && max < 0)
        rc = ms_fail(err, "%s: no files named %s*%s", s->dir, s->prefix, s->suffix);
    if (rc == 0)
        rc = pick_layers(s, by_layer, min, max, err);
    for (long l = 0; l <= DC_MAX_LAYERS; l++)
        free(by_layer[l]);
    free(by_layer);
    return rc;
}

uint32_t dc_split_csv(char *line, char **cols, uint32_t cap)
{
    uint32_t n = 0;
    char *p = line;
    for (;;) {
        if (n < cap)
            cols[n] = p;
        n++;
        char *c = strchr(p, ',');
        if (!c || n > cap)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

/* Header names that are never experts (case-insensitive). */
static int id_name(const char *c)
{
    static const char *const names[] = {"request", "layer", "layer_id", "layer_idx", "token",  "token_id",  "token_idx",
                                        "token_pos", "position", "pos",  "step",  "row",       "row_id",
                                        "index",  "idx",       "id",    "time",   "timestamp", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcasecmp(c, names[i]))
            return 1;
    return 0;
}

/* Index of column `name`, or -1. */
static long find_col(char **cols, uint32_t n, const char *name, size_t len)
{
    for (uint32_t i = 0; i < n; i++)
        if (strlen(cols[i]) == len && !strncmp(cols[i], name, len))
            return i;
    return -1;
}

static int classify_columns(dc_state *s, char **cols, uint32_t n, ms_err *err)
{
    s->col_kind = ms_xcalloc(n, 1);
    const char *h0 = ms_import_base_name(s->paths[0]);
    long seq = -1;
    if (s->o->seq_column) {
        seq = find_col(cols, n, s->o->seq_column, strlen(s->o->seq_column));
        if (seq < 0)
            return ms_fail(err, "%s:1: --seq-column %s: no such column (header '%.60s')", s->paths[0],
                           s->o->seq_column, s->header);
    } else {
        seq = find_col(cols, n, "request", 7);
        if (seq >= 0 && s->o->tokens_per_seq)
            return ms_fail(err, "%s:1: --tokens-per-seq %u but the files have a request column (give one of them)",
                           s->paths[0], s->o->tokens_per_seq);
    }
    if (seq >= 0) {
        s->col_kind[seq] = COL_SEQ;
        s->has_seq = 1;
    }
    long ph = find_col(cols, n, "phase", 5);
    if (ph >= 0 && s->col_kind[ph] == COL_EXPERT) {
        s->col_kind[ph] = COL_PHASE;
        s->has_phase = 1;
    }
    for (const char *p = s->o->id_columns; p && *p;) { /* --id-columns a,b */
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        long i = len ? find_col(cols, n, p, len) : -1;
        if (i < 0)
            return ms_fail(err, "%s:1: --id-columns: no column '%.*s' (header '%.60s')", s->paths[0], (int)len, p,
                           s->header);
        if (s->col_kind[i] != COL_EXPERT)
            return ms_fail(err, "%s:1: --id-columns: column '%.*s' is the %s column", s->paths[0], (int)len, p,
                           s->col_kind[i] == COL_SEQ ? "sequence" : "phase");
        s->col_kind[i] = COL_IGNORED;
        p = c ? c + 1 : p + len;
    }
    char ignored[400] = "";
    size_t in = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (s->col_kind[i] == COL_EXPERT && id_name(cols[i]))
            s->col_kind[i] = COL_IGNORED;
        if (s->col_kind[i] == COL_IGNORED && in < sizeof ignored)
            in += (size_t)snprintf(ignored + in, sizeof ignored - in, "%s%.40s", in ? ", " : "", cols[i]);
        s->J += s->col_kind[i] == COL_EXPERT;
    }
    if (s->J == 0)
        return ms_fail(err, "%s:1: header '%.60s' has no expert columns", s->paths[0], s->header);
    if (in)
        ms_import_note(&s->rep, "columns ignored (not experts): %s", ignored);
    if (s->o->seq_column)
        ms_import_note(&s->rep, "sequences from column %s of %s", s->o->seq_column, h0);
    return 0;
}

static int read_headers(dc_state *s, ms_err *err)
{
    s->in = ms_xcalloc(s->L, sizeof *s->in);
    for (uint32_t l = 0; l < s->L; l++) {
        ms_lines *r = &s->in[l];
        if (ms_lines_open(r, s->paths[l], err))
            return -1;
        int got = ms_lines_next(r, err);
        if (got < 0)
            return -1;
        if (got == 0)
            return ms_fail(err, "%s: empty file (expected a header line)", r->path);
        if (l == 0) {
            s->header = ms_xstrdup(r->buf);
        } else if (strcmp(r->buf, s->header)) {
            return ms_fail(err, "%s:1: header '%.60s' differs from %s's '%.60s'", r->path, r->buf,
                           ms_import_base_name(s->paths[0]), s->header);
        }
    }
    uint32_t n = 1;
    for (const char *p = s->header; *p; p++)
        n += *p == ',';
    char *h = ms_xstrdup(s->header);
    char **cols = ms_xcalloc(n, sizeof *cols);
    dc_split_csv(h, cols, n);
    s->n_cols = n;
    int rc = classify_columns(s, cols, n, err);
    free(cols);
    free(h);
    return rc;
}

int dc_open_files(dc_state *s, ms_err *err)
{
    const ms_import_opts *o = s->o;
    if (o->tokens_per_seq && o->seq_column)
        return ms_fail(err, "trace import --format dense-csv: give --seq-column or --tokens-per-seq, not both");
    if (split_pattern(s, o->pattern ? o->pattern : "layer*.csv", err) || find_layer_files(s, err) ||
        read_headers(s, err))
        return -1;
    if (s->has_phase && o->prompt_len)
        return ms_fail(err, "%s:1: --prompt-len %u with a phase column: give one of them", s->paths[0], o->prompt_len);
    return 0;
}
