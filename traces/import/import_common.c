/* Helpers shared by the jsonl / dense-csv / npy importers (traces/import/import.h):
 * dimension resolution from --model and flags, a bounded line reader, and
 * the temporary-file output sink. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "traces/import/import.h"
#include "sim/core/profile.h"

void ms_import_opts_init(ms_import_opts *o)
{
    memset(o, 0, sizeof *o);
    o->probs_kind = -1;
    o->layer_base = -1;
}

int ms_token_pos_parse(const char *s, ms_token_pos *out)
{
    static const char *const names[] = {"absolute", "per-request", "per-step"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (ms_token_pos)i;
            return 0;
        }
    return -1;
}

const char *ms_import_base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}

/* A flag that contradicts the profile is an error; else it fills a gap. */
static int merge_u32(const char *fmt, const char *flag, uint32_t given, uint32_t *have, const char *model,
                     ms_err *err)
{
    if (!given)
        return 0;
    if (*have && *have != given)
        return ms_fail(err, "trace import --format %s: --%s %u contradicts model %s (%u)", fmt, flag, given, model,
                       *have);
    *have = given;
    return 0;
}

int ms_import_dims_resolve(const ms_import_opts *o, const char *fmt, ms_import_dims *d, ms_err *err)
{
    memset(d, 0, sizeof *d);
    if (o->model) {
        ms_model m;
        if (ms_model_load(o->model, &m, err))
            return -1;
        snprintf(d->model_name, sizeof d->model_name, "%s", m.name);
        d->L = m.moe_layers;
        d->J = m.experts;
        d->K = m.top_k;
        d->shared_experts = m.shared_experts;
        d->hidden_size = m.hidden;
        d->expert_bytes = m.expert_bytes;
        d->dense_bytes = m.dense_bytes;
        if ((o->expert_bytes && o->expert_bytes != m.expert_bytes) ||
            (o->have_dense_bytes && o->dense_bytes != m.dense_bytes))
            return ms_fail(err, "trace import --format %s: --expert-bytes / --dense-bytes contradict model %s "
                                "(%llu / %llu)",
                           fmt, o->model, (unsigned long long)m.expert_bytes, (unsigned long long)m.dense_bytes);
    } else {
        snprintf(d->model_name, sizeof d->model_name, "unknown");
        d->expert_bytes = o->expert_bytes;
        d->dense_bytes = o->dense_bytes;
    }
    const char *mn = o->model ? o->model : "";
    if (merge_u32(fmt, "layers", o->layers, &d->L, mn, err) || merge_u32(fmt, "experts", o->experts, &d->J, mn, err) ||
        merge_u32(fmt, "topk", o->topk, &d->K, mn, err))
        return -1;
    if (!d->J)
        return ms_fail(err, "trace import --format %s: the number of experts is unknown: give --model PROFILE or "
                            "--experts J",
                       fmt);
    if (!d->expert_bytes)
        return ms_fail(err, "trace import --format %s: expert bytes unknown: give --model PROFILE or --expert-bytes B",
                       fmt);
    if (d->K > d->J)
        return ms_fail(err, "trace import --format %s: --topk %u exceeds the %u experts", fmt, d->K, d->J);
    return 0;
}

void ms_import_meta_fill(const ms_import_dims *d, const char *source, ms_probs_kind pk, ms_trace_meta *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->model_name, sizeof m->model_name, "%s", d->model_name);
    snprintf(m->source, sizeof m->source, "%s", source);
    m->L = d->L;
    m->J = d->J;
    m->K = d->K;
    m->shared_experts = d->shared_experts;
    m->hidden_size = d->hidden_size;
    m->probs_kind = pk;
    ms_trace_meta_alloc_layers(m);
    for (uint32_t l = 0; l < m->L; l++) {
        m->expert_bytes[l] = d->expert_bytes;
        m->dense_bytes[l] = d->dense_bytes;
    }
}

/* ---- bounded line reader ---- */

int ms_lines_open(ms_lines *r, const char *path, ms_err *err)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return ms_fail(err, "%s: is a directory, expected a file", path);
    r->f = fopen(path, "r");
    if (!r->f)
        return ms_fail(err, "%s: cannot open: %s", path, strerror(errno));
    r->cap = 256;
    r->buf = ms_xcalloc(r->cap, 1);
    return 0;
}

int ms_lines_next(ms_lines *r, ms_err *err)
{
    size_t n = 0;
    int c = EOF;
    unsigned long long ln = (unsigned long long)r->lineno + 1;
    while ((c = getc_unlocked(r->f)) != EOF && c != '\n') {
        if (c == '\0')
            return ms_fail(err, "%s:%llu: NUL byte at column %zu (binary data, not text)", r->path, ln, n + 1);
        if (n >= (r->max ? r->max : MS_IMPORT_LINE_MAX))
            return ms_fail(err, "%s:%llu: line longer than %zu bytes (not a text dump?)", r->path, ln,
                           r->max ? r->max : (size_t)MS_IMPORT_LINE_MAX);
        if (n + 1 >= r->cap) {
            r->cap *= 2;
            r->buf = ms_xrealloc(r->buf, r->cap, 1);
        }
        r->buf[n++] = (char)c;
    }
    r->had_newline = c == '\n';
    if (ferror(r->f))
        return ms_fail(err, "%s:%llu: read error: %s", r->path, ln, strerror(errno ? errno : EIO));
    if (c == EOF && n == 0)
        return 0;
    if (n > 0 && r->buf[n - 1] == '\r')
        n--;
    r->buf[n] = '\0';
    r->lineno++;
    return 1;
}

int ms_import_check_cells(const char *path, uint64_t line, uint64_t request, uint64_t rows, uint32_t L, uint32_t K,
                          const char *what, ms_err *err)
{
    unsigned long long cells = (unsigned long long)rows * L * K; /* rows < 2^32, L <= 4096, K <= 1024: no overflow */
    if (cells <= MS_IMPORT_MAX_CELLS)
        return 0;
    return ms_fail(err, "%s:%llu: request %llu: %llu token rows x %u layers x K %u = %llu cells, more than %llu (%s)",
                   path, (unsigned long long)line, (unsigned long long)request, (unsigned long long)rows, L, K, cells,
                   MS_IMPORT_MAX_CELLS, what);
}

void ms_lines_close(ms_lines *r)
{
    if (r->f)
        fclose(r->f);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

/* ---- output sink ---- */

int ms_import_sink_open(ms_import_sink *s, const char *in_path, const char *out_path, const ms_trace_meta *m,
                        ms_err *err)
{
    memset(s, 0, sizeof *s);
    struct stat a, b;
    if (stat(in_path, &a) == 0 && stat(out_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return ms_fail(err, "%s: output is the input file", out_path);
    s->out = out_path;
    s->w = ms_writer_open(out_path, m, err);
    return s->w ? 0 : -1;
}

int ms_import_sink_finish(ms_import_sink *s, int rc, ms_err *err)
{
    if (!s->w)
        return rc ? rc : -1;
    if (rc == 0)
        rc = ms_writer_close(s->w, err);
    else
        ms_writer_abort(s->w);
    s->w = NULL;
    return rc;
}
