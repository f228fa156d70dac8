/* dense-csv importer: one CSV of tokens x experts probabilities per layer;
 * see traces/import/import.h for the layout and the mapping.
 *
 * All L files are read in lock-step, one token row at a time; the rows of
 * the current request are buffered ([rows][L][J] floats) and written when
 * the request id changes, so memory is one request. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import/import.h"
#include "sim/core/params.h"

#define DC_SUM_TOL 1e-3
#define DC_MAX_LAYERS 4096u
#define DC_MAX_ROWS (1u << 20) /* token rows per request */

typedef struct {
    const char *dir;
    char prefix[128], suffix[128];
    uint32_t L;
    char **paths; /* [L] */
    ms_lines *in; /* [L] */
    char *header; /* column line of layer 0 */
    int has_request, has_phase;
    uint32_t n_cols, J;
    ms_import_dims d;
    ms_trace_meta meta;
    /* current request */
    int in_req;
    uint64_t req_id;
    uint32_t n_rows, n_prefill, cap_rows;
    float *probs; /* [cap_rows][L][J] */
    char **cols;  /* scratch: column starts of one line */
    double *vals; /* scratch: one row of J values */
    ms_import_report rep;
} dc_state;

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

/* Finds layer files 0..L-1 (no gaps, no duplicates). */
static int find_layer_files(dc_state *s, ms_err *err)
{
    DIR *dir = opendir(s->dir);
    if (!dir)
        return ms_fail(err, "%s: cannot open directory: %s", s->dir, strerror(errno));
    char **by_layer = ms_xcalloc(DC_MAX_LAYERS + 1, sizeof *by_layer);
    long max = -1;
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
    }
    closedir(dir);
    if (rc == 0 && max < 0)
        rc = ms_fail(err, "%s: no files named %s*%s", s->dir, s->prefix, s->suffix);
    for (long l = 0; rc == 0 && l <= max; l++)
        if (!by_layer[l])
            rc = ms_fail(err, "%s: layer gap: no file %s%ld%s (layers found up to %ld)", s->dir, s->prefix, l,
                         s->suffix, max);
    if (rc == 0) {
        s->L = (uint32_t)max + 1;
        s->paths = ms_xcalloc(s->L, sizeof *s->paths);
        for (uint32_t l = 0; l < s->L; l++) {
            size_t n = strlen(s->dir) + strlen(by_layer[l]) + 2;
            s->paths[l] = ms_xcalloc(n, 1);
            snprintf(s->paths[l], n, "%s/%s", s->dir, by_layer[l]);
        }
    }
    for (long l = 0; l <= DC_MAX_LAYERS; l++)
        free(by_layer[l]);
    free(by_layer);
    return rc;
}

/* Splits line in place at ','; returns the number of columns (at most cap + 1). */
static uint32_t split_csv(char *line, char **cols, uint32_t cap)
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
    split_csv(h, cols, n);
    s->has_request = !strcmp(cols[0], "request");
    s->has_phase = n > (uint32_t)s->has_request && !strcmp(cols[s->has_request], "phase");
    free(cols);
    free(h);
    s->n_cols = n;
    uint32_t lead = (uint32_t)(s->has_request + s->has_phase);
    if (n <= lead)
        return ms_fail(err, "%s:1: header '%.60s' has no expert columns", s->paths[0], s->header);
    s->J = n - lead;
    return 0;
}

static int parse_phase(const char *path, uint64_t ln, const char *v, int *prefill, ms_err *err)
{
    if (!strcmp(v, "prefill") || !strcmp(v, "0"))
        *prefill = 1;
    else if (!strcmp(v, "decode") || !strcmp(v, "1"))
        *prefill = 0;
    else
        return ms_fail(err, "%s:%llu: column phase: '%.40s' is not prefill/decode/0/1", path, (unsigned long long)ln, v);
    return 0;
}

/* Parses row values of layer l into s->vals; returns request id / phase. */
static int parse_row(dc_state *s, uint32_t l, uint64_t *req, int *prefill, ms_err *err)
{
    ms_lines *r = &s->in[l];
    unsigned long long ln = (unsigned long long)r->lineno;
    uint32_t n = split_csv(r->buf, s->cols, s->n_cols);
    if (n != s->n_cols)
        return ms_fail(err, "%s:%llu: %s%u columns, expected %u", r->path, ln, n > s->n_cols ? "more than " : "",
                       n > s->n_cols ? s->n_cols : n, s->n_cols);
    uint32_t c = 0;
    *req = 0;
    *prefill = 1;
    if (s->has_request) {
        unsigned long long v;
        if (ms_parse_u64(s->cols[c], &v))
            return ms_fail(err, "%s:%llu: column request: '%.40s' is not a non-negative integer", r->path, ln,
                           s->cols[c]);
        *req = v;
        c++;
    }
    if (s->has_phase && parse_phase(r->path, ln, s->cols[c++], prefill, err))
        return -1;
    double sum = 0;
    for (uint32_t j = 0; j < s->J; j++, c++) {
        double v;
        if (ms_parse_double(s->cols[c], &v) || !isfinite(v) || v < 0)
            return ms_fail(err, "%s:%llu: column %u (expert %u): '%.40s' is not a finite number >= 0", r->path, ln,
                           c + 1, j, s->cols[c]);
        s->vals[j] = v;
        sum += v;
    }
    if (fabs(sum - 1) > DC_SUM_TOL)
        return ms_fail(err, "%s:%llu: probabilities sum to %.6g, expected 1 (raw softmax, not renormalised)", r->path,
                       ln, sum);
    return 0;
}

/* K largest of p[0..J) (ties to the lower id), descending. */
static void topk_of(const float *p, uint32_t J, uint32_t K, int32_t *ids, float *w)
{
    for (uint32_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (uint32_t j = 0; j < J; j++) {
            int taken = 0;
            for (uint32_t q = 0; q < k; q++)
                taken |= ids[q] == (int32_t)j;
            if (!taken && (best < 0 || p[j] > p[best]))
                best = (int32_t)j;
        }
        ids[k] = best;
        w[k] = p[best];
    }
}

static int flush_request(dc_state *s, ms_trace_writer *w, ms_err *err)
{
    const ms_trace_meta *m = &s->meta;
    ms_request req;
    memset(&req, 0, sizeof req);
    req.id = s->req_id;
    req.prompt_len = s->n_prefill;
    req.output_len = s->n_rows - s->n_prefill;
    req.n_iters = 1 + req.output_len;
    req.n_rows = s->n_rows;
    ms_request_alloc(&req, m);
    req.iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, s->n_prefill};
    for (uint32_t t = s->n_prefill; t < s->n_rows; t++)
        req.iters[1 + t - s->n_prefill] = (ms_iteration){MS_PHASE_DECODE, t, 1};
    memcpy(req.probs, s->probs, (size_t)s->n_rows * m->L * m->J * sizeof *req.probs);
    for (uint32_t t = 0; t < s->n_rows; t++)
        for (uint32_t l = 0; l < m->L; l++)
            topk_of(&req.probs[ms_probs_index(m, t, l)], m->J, m->K, &req.topk_ids[ms_topk_index(m, t, l)],
                    &req.topk_w[ms_topk_index(m, t, l)]);
    int rc = ms_request_check(m, &req, s->dir, err);
    if (rc == 0)
        rc = ms_writer_add(w, &req, err);
    ms_request_free(&req);
    s->rep.requests++;
    s->rep.prefill_iters++;
    s->rep.prefill_rows += s->n_prefill;
    s->rep.decode_iters += s->n_rows - s->n_prefill;
    s->rep.prefill_cells += (uint64_t)s->n_prefill * m->L * m->K;
    s->rep.decode_cells += (uint64_t)(s->n_rows - s->n_prefill) * m->L * m->K;
    s->in_req = 0;
    return rc;
}

/* Adds token row (all layers read into probs by the caller) to the request. */
static int start_or_check_request(dc_state *s, uint64_t req, int prefill, ms_trace_writer *w, ms_err *err)
{
    const char *p0 = s->in[0].path;
    unsigned long long ln = (unsigned long long)s->in[0].lineno;
    if (s->in_req && req != s->req_id) {
        if (req < s->req_id)
            return ms_fail(err, "%s:%llu: column request: %llu after request %llu (requests must increase)", p0, ln,
                           (unsigned long long)req, (unsigned long long)s->req_id);
        if (flush_request(s, w, err))
            return -1;
    }
    if (!s->in_req) {
        if (!prefill)
            return ms_fail(err, "%s:%llu: column phase: request %llu starts with a decode row", p0, ln,
                           (unsigned long long)req);
        s->in_req = 1;
        s->req_id = req;
        s->n_rows = s->n_prefill = 0;
    }
    if (prefill && s->n_rows > s->n_prefill)
        return ms_fail(err, "%s:%llu: column phase: prefill row after decode rows of request %llu", p0, ln,
                       (unsigned long long)req);
    if (s->n_rows >= DC_MAX_ROWS)
        return ms_fail(err, "%s:%llu: request %llu has more than %u rows", p0, ln, (unsigned long long)req, DC_MAX_ROWS);
    if (s->n_rows == s->cap_rows) {
        s->cap_rows = s->cap_rows ? 2 * s->cap_rows : 64;
        s->probs = ms_xrealloc(s->probs, (size_t)s->cap_rows * s->L * s->J, sizeof *s->probs);
    }
    return 0;
}

/* Reads one token row from every layer file: 1 row, 0 layer 0 ended, -1 error. */
static int read_token_row(dc_state *s, ms_trace_writer *w, ms_err *err)
{
    uint64_t req0 = 0;
    int prefill0 = 1;
    for (uint32_t l = 0; l < s->L; l++) {
        int got = ms_lines_next(&s->in[l], err);
        if (got < 0)
            return -1;
        if (got == 0 && l == 0)
            return 0;
        if (got == 0)
            return ms_fail(err, "%s: %llu data rows, %s has more", s->in[l].path,
                           (unsigned long long)s->in[l].lineno - 1, ms_import_base_name(s->paths[0]));
        uint64_t req = 0;
        int prefill = 1;
        if (parse_row(s, l, &req, &prefill, err))
            return -1;
        if (l == 0) {
            req0 = req;
            prefill0 = prefill;
            if (start_or_check_request(s, req, prefill, w, err))
                return -1;
        } else if (req != req0 || prefill != prefill0) {
            return ms_fail(err, "%s:%llu: request/phase differ from %s on the same line", s->in[l].path,
                           (unsigned long long)s->in[l].lineno, ms_import_base_name(s->paths[0]));
        }
        float *dst = &s->probs[((size_t)s->n_rows * s->L + l) * s->J];
        for (uint32_t j = 0; j < s->J; j++)
            dst[j] = (float)s->vals[j];
    }
    s->n_rows++;
    s->n_prefill += prefill0;
    return 1;
}

/* Layer 0 ended: every other file must end too. */
static int check_all_ended(dc_state *s, ms_err *err)
{
    for (uint32_t l = 1; l < s->L; l++) {
        int got = ms_lines_next(&s->in[l], err);
        if (got < 0)
            return -1;
        if (got)
            return ms_fail(err, "%s:%llu: more rows than %s", s->in[l].path, (unsigned long long)s->in[l].lineno,
                           ms_import_base_name(s->paths[0]));
    }
    return 0;
}

static void dc_free(dc_state *s)
{
    for (uint32_t l = 0; l < s->L; l++) {
        if (s->in)
            ms_lines_close(&s->in[l]);
        if (s->paths)
            free(s->paths[l]);
    }
    free(s->in);
    free(s->paths);
    free(s->header);
    free(s->probs);
    free(s->cols);
    free(s->vals);
    ms_trace_meta_free(&s->meta);
}

static int setup(dc_state *s, const ms_import_opts *o, ms_err *err)
{
    if (split_pattern(s, o->pattern ? o->pattern : "layer*.csv", err) || find_layer_files(s, err) ||
        read_headers(s, err))
        return -1;
    ms_import_opts oo = *o;
    if (!oo.model && !oo.experts)
        oo.experts = s->J;
    if (ms_import_dims_resolve(&oo, "dense-csv", &s->d, err))
        return -1;
    if (s->d.J != s->J)
        return ms_fail(err, "%s:1: %u expert columns, expected J=%u", s->paths[0], s->J, s->d.J);
    if (s->d.L && s->d.L != s->L)
        return ms_fail(err, "%s: %u layer files, expected L=%u", s->dir, s->L, s->d.L);
    s->d.L = s->L;
    if (!s->d.K)
        return ms_fail(err, "trace import --format dense-csv: K unknown: give --model PROFILE or --topk K");
    char source[MS_SOURCE_MAX];
    snprintf(source, sizeof source, "%.400s (%s)", o->source_name ? o->source_name : ms_import_base_name(s->dir),
             o->source_kind ? o->source_kind : "dense-csv router probabilities");
    ms_import_meta_fill(&s->d, source, MS_PROBS_FULL, &s->meta);
    s->cols = ms_xcalloc(s->n_cols, sizeof *s->cols);
    s->vals = ms_xcalloc(s->J, sizeof *s->vals);
    return 0;
}

int ms_import_densecsv(const char *in_dir, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                       ms_err *err)
{
    dc_state s;
    memset(&s, 0, sizeof s);
    s.dir = in_dir;
    snprintf(s.rep.input, sizeof s.rep.input, "%s", ms_import_base_name(in_dir));
    snprintf(s.rep.row_unit, sizeof s.rep.row_unit, "CSV rows per layer");
    int rc = setup(&s, o, err);
    ms_import_sink sink;
    memset(&sink, 0, sizeof sink);
    if (rc == 0)
        rc = ms_import_sink_open(&sink, in_dir, out_path, &s.meta, err);
    while (rc == 0) {
        int r = read_token_row(&s, sink.w, err);
        if (r < 0)
            rc = -1;
        else if (r == 0) {
            rc = check_all_ended(&s, err);
            break;
        } else
            s.rep.rows++;
    }
    if (rc == 0 && !s.in_req)
        rc = ms_fail(err, "%s: no data rows after the header", s.paths[0]);
    if (rc == 0)
        rc = flush_request(&s, sink.w, err);
    if (sink.w)
        rc = ms_import_sink_finish(&sink, rc, err);
    if (rep)
        *rep = s.rep;
    dc_free(&s);
    return rc;
}
