/* The results CSV of a sweep: see sweep_csv.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "traces/format/trace.h"
#include "sim/engine/metric_list.h"
#include "sim/engine/report.h"
#include "sim/apps/sweep_csv.h"
#include "sim/core/out.h"
#include "sim/core/version.h"

/* ---- text building ---- */

typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = ms_xrealloc(b->s, b->cap, 1);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* One field, quoted when it holds a comma or a quote; newlines become spaces. */
static void sb_field(sbuf *b, const char *s, int first)
{
    if (!first)
        sb_add(b, ",", 1);
    int quote = strpbrk(s, ",\"") != NULL;
    if (quote)
        sb_add(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            sb_add(b, "\"\"", 2);
        else if (*p == '\n' || *p == '\r')
            sb_add(b, " ", 1);
        else
            sb_add(b, p, 1);
    }
    if (quote)
        sb_add(b, "\"", 1);
}

const char *ms_sweep_csv_header(void)
{
    static char *header;
    if (!header) {
        sbuf b = {0};
        sb_str(&b, "point,key");
        for (int p = 0; p < MS_SW_NPARAM; p++)
            sb_field(&b, ms_sweep_param_names[p], 0);
        for (size_t i = 0; i < ms_metric_count; i++)
            if (ms_metric_list[i].in_csv)
                sb_field(&b, ms_metric_list[i].name, 0);
        sb_str(&b, ",moesim_version,moesim_commit,trace_sha256,trace_content_sha256,model_sha256,platform_sha256,error\n");
        header = b.s;
    }
    return header;
}

void ms_sweep_csv_key(const ms_sweep_point *p, char out[17])
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < MS_SW_NPARAM; i++) {
        for (const unsigned char *c = (const unsigned char *)p->v[i]; *c; c++)
            h = (h ^ *c) * 1099511628211ull;
        h = (h ^ 0x1f) * 1099511628211ull; /* separator */
    }
    snprintf(out, 17, "%016" PRIx64, h);
}

/* The provenance cells: moesim's version and commit, the trace's digest in
 * the column of its kind, trace_sha256 (the file's bytes: v1 traces) or
 * trace_content_sha256 (v2), the other empty, and the SHA-256 of the model
 * and platform files (empty when unknown).  The trace's digest is the one
 * the run took when it opened the trace (`trace`), so that a trace replaced
 * since is not named for the row; without one (no run got as far, a v1
 * trace streamed) the file's digest now (trace.h ms_trace_digest_of). */
static void provenance_fields(sbuf *b, const ms_run_config *cfg, const ms_trace_digest *trace)
{
    ms_trace_digest d = {0};
    if (cfg)
        ms_report_trace_digest(cfg->trace_path, trace, &d);
    sb_field(b, ms_version(), 0);
    sb_field(b, ms_commit(), 0);
    sb_field(b, d.content ? "" : d.hex, 0);
    sb_field(b, d.content ? d.hex : "", 0);
    sb_field(b, cfg && cfg->model ? cfg->model->sha256 : "", 0);
    sb_field(b, cfg && cfg->platform ? cfg->platform->sha256 : "", 0);
}

char *ms_sweep_csv_row(uint64_t point, const ms_sweep_point *p, const ms_run_config *cfg,
                       const ms_trace_digest *trace, const ms_metrics *m, const char *error)
{
    sbuf b = {0};
    char num[64], key[17];
    ms_sweep_csv_key(p, key);
    snprintf(num, sizeof num, "%" PRIu64 ",%s", point, key);
    sb_str(&b, num);
    for (int i = 0; i < MS_SW_NPARAM; i++)
        sb_field(&b, p->v[i], 0);
    for (size_t i = 0; i < ms_metric_count; i++) {
        const ms_metric_def *d = &ms_metric_list[i];
        if (!d->in_csv)
            continue;
        double v = m ? d->get(m) : NAN;
        if (isnan(v))
            num[0] = 0; /* no metrics (the point failed), or one without samples */
        else if (d->type == MS_MT_REAL)
            snprintf(num, sizeof num, "%.12g", v);
        else
            snprintf(num, sizeof num, "%.0f", v);
        sb_field(&b, num, 0);
    }
    provenance_fields(&b, cfg, trace);
    sb_field(&b, m ? "" : error, 0);
    sb_add(&b, "\n", 1);
    return b.s;
}

/* ---- appending ---- */

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int ms_sweep_csv_write(int fd, const char *path, const char *line, size_t len, ms_err *err)
{
    if (write_all(fd, line, len))
        return ms_fail(err, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

int ms_sweep_csv_sync(int fd, const char *path, ms_err *err)
{
    if (fsync(fd))
        return ms_fail(err, "%s: fsync failed: %s", path, strerror(errno));
    return 0;
}

int ms_sweep_csv_append(int fd, const char *path, const char *line, size_t len, ms_err *err)
{
    return ms_sweep_csv_write(fd, path, line, len, err) || ms_sweep_csv_sync(fd, path, err) ? -1 : 0;
}

/* ---- resume ---- */

static char *read_whole(const char *path, size_t *len, ms_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ms_fail(err, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    sbuf b = {0};
    char chunk[65536];
    size_t n;
    sb_add(&b, "", 0);
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        sb_add(&b, chunk, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b.s);
        ms_fail(err, "%s: read error", path);
        return NULL;
    }
    *len = b.n;
    return b.s;
}

/* Checks the existing rows against the points this process writes. */
static int check_rows(const char *path, char *text, size_t len, const ms_sweep_spec *s, const uint64_t *points,
                      uint64_t npoints, uint64_t *done, ms_err *err)
{
    const char *header = ms_sweep_csv_header();
    size_t hl = strlen(header);
    if (len < hl || memcmp(text, header, hl))
        return ms_fail(err, "%s: --resume: the header is not that of a moesim sweep CSV of this version%s", path,
                       len >= 10 && !memcmp(text, "point,key,", 10)
                           ? " (another version's columns: resume with that version, or write a new file)"
                           : "");
    uint64_t k = 0;
    for (char *line = text + hl; line < text + len; k++) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        *nl = 0;
        if (k >= npoints)
            return ms_fail(err, "%s: --resume: more rows than this sweep (or shard) has points (%" PRIu64 ")", path,
                           npoints);
        char want[64], key[17];
        ms_sweep_csv_key(ms_sweep_get(s, points[k]), key);
        snprintf(want, sizeof want, "%" PRIu64 ",%s,", points[k], key);
        if (strncmp(line, want, strlen(want)))
            return ms_fail(err, "%s: --resume: row %" PRIu64 " is not point %" PRIu64 " of this spec (expected it to "
                           "start '%s'): the spec changed?", path, k + 1, points[k], want);
        line = nl + 1;
    }
    *done = k;
    return 0;
}

static int resume_existing(int fd, const char *path, const ms_sweep_spec *s, const uint64_t *points,
                           uint64_t npoints, uint64_t *done, ms_err *err)
{
    size_t len;
    char *text = read_whole(path, &len, err);
    if (!text)
        return -1;
    size_t keep = len;
    while (keep && text[keep - 1] != '\n')
        keep--;
    int rc = 0;
    if (keep == 0) { /* empty, or killed while writing the header */
        if (ftruncate(fd, 0))
            rc = ms_fail(err, "%s: cannot truncate: %s", path, strerror(errno));
        else
            rc = ms_sweep_csv_append(fd, path, ms_sweep_csv_header(), strlen(ms_sweep_csv_header()), err);
        *done = 0;
    } else {
        rc = check_rows(path, text, keep, s, points, npoints, done, err);
        if (rc == 0 && keep != len && (ftruncate(fd, (off_t)keep) || fsync(fd)))
            rc = ms_fail(err, "%s: cannot cut the partial last line: %s", path, strerror(errno));
    }
    free(text);
    return rc;
}

static int open_locked(const char *path, int resume, const ms_sweep_spec *s, const uint64_t *points,
                       uint64_t npoints, uint64_t *done, ms_err *err);

int ms_sweep_csv_open(const char *path, int resume, const ms_sweep_spec *s, const uint64_t *points,
                      uint64_t npoints, uint64_t *done, ms_err *err)
{
    *done = 0;
    if (ms_out_lock("sweep: output", path, err))
        return -1;
    int fd = open_locked(path, resume, s, points, npoints, done, err);
    if (fd < 0)
        ms_out_unlock(path);
    return fd;
}

void ms_sweep_csv_close(int fd, const char *path)
{
    close(fd);
    ms_out_unlock(path);
}

/* ms_sweep_csv_open once this process holds the output's lock. */
static int open_locked(const char *path, int resume, const ms_sweep_spec *s, const uint64_t *points,
                       uint64_t npoints, uint64_t *done, ms_err *err)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
        if (!resume)
            return ms_fail(err, "%s exists; use --resume or remove it", path);
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0)
            return ms_fail(err, "%s: cannot open for appending: %s", path, strerror(errno));
        if (resume_existing(fd, path, s, points, npoints, done, err)) {
            close(fd);
            return -1;
        }
        return fd;
    }
    if (fd < 0)
        return ms_fail(err, "%s: cannot create the output: %s", path, strerror(errno));
    if (ms_sweep_csv_append(fd, path, ms_sweep_csv_header(), strlen(ms_sweep_csv_header()), err)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- merge ---- */

typedef struct {
    uint64_t point;
    const char *line; /* without '\n' */
    const char *file;
} merge_row;

static int cmp_rows(const void *a, const void *b)
{
    const merge_row *x = a, *y = b;
    return x->point < y->point ? -1 : x->point > y->point;
}

static int collect_rows(const char *path, char *text, size_t len, merge_row **rows, uint64_t *n, uint64_t *cap,
                        ms_err *err)
{
    const char *header = ms_sweep_csv_header();
    size_t hl = strlen(header);
    if (len < hl || memcmp(text, header, hl))
        return ms_fail(err, "%s: not a moesim sweep CSV (the header differs)", path);
    if (len && text[len - 1] != '\n')
        return ms_fail(err, "%s: the last line is incomplete (resume that shard first)", path);
    for (char *line = text + hl; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        *nl = 0;
        char *end;
        errno = 0;
        unsigned long long p = strtoull(line, &end, 10);
        if (end == line || *end != ',' || errno)
            return ms_fail(err, "%s: row '%.40s' does not start with a point index", path, line);
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            *rows = ms_xrealloc(*rows, *cap, sizeof **rows);
        }
        (*rows)[(*n)++] = (merge_row){p, line, path};
        line = nl + 1;
    }
    return 0;
}

int ms_sweep_csv_merge(const char *out, char **inputs, int n, ms_err *err)
{
    char **texts = ms_xcalloc((size_t)n + 1, sizeof *texts);
    merge_row *rows = NULL;
    uint64_t nrows = 0, cap = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        size_t len;
        texts[i] = read_whole(inputs[i], &len, err);
        rc = texts[i] ? collect_rows(inputs[i], texts[i], len, &rows, &nrows, &cap, err) : -1;
    }
    if (rc == 0)
        qsort(rows, nrows, sizeof *rows, cmp_rows);
    for (uint64_t i = 0; rc == 0 && i < nrows; i++) {
        if (rows[i].point < i)
            rc = ms_fail(err, "point %" PRIu64 " appears twice (%s and %s)", rows[i].point, rows[i - 1].file,
                         rows[i].file);
        else if (rows[i].point > i)
            rc = ms_fail(err, "point %" PRIu64 " is in none of the inputs (a shard missing or unfinished?)", i);
    }
    int fd = -1, locked = rc == 0 && (rc = ms_out_lock("sweep: --merge", out, err)) == 0;
    if (rc == 0) {
        fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            rc = ms_fail(err, "%s: cannot create: %s", out, errno == EEXIST ? "it exists" : strerror(errno));
    }
    if (rc == 0) {
        sbuf b = {0};
        sb_str(&b, ms_sweep_csv_header());
        for (uint64_t i = 0; i < nrows; i++) {
            sb_str(&b, rows[i].line);
            sb_add(&b, "\n", 1);
        }
        rc = ms_sweep_csv_append(fd, out, b.s, b.n, err);
        free(b.s);
    }
    if (fd >= 0)
        close(fd);
    if (locked)
        ms_out_unlock(out);
    for (int i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
    free(rows);
    return rc;
}
