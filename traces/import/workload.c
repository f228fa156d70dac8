/* Workloads: Azure LLM trace CSV and Poisson arrivals (traces/import/workload.h). */
#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "traces/import/import.h"
#include "traces/format/trace.h"
#include "traces/import/workload.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"

#define AZ_HEADER "TIMESTAMP,ContextTokens,GeneratedTokens"

const char *ms_workload_azure_path(const char *name, char *buf, size_t cap, ms_err *err)
{
    if (!strcmp(name, "code") || !strcmp(name, "conv")) {
        char dir[4096];
        if (ms_path_workloads(dir, sizeof dir, err)) {
            ms_fail_prefix(err, "--azure %s names the shared Azure 2023 trace (or give the CSV's path)", name);
            return NULL;
        }
        if (snprintf(buf, cap, "%s/azure-llm-2023/AzureLLMInferenceTrace_%s.csv", dir, name) >= (int)cap) {
            ms_fail(err, "--azure %s: path longer than %zu bytes under %s", name, cap - 1, dir);
            return NULL;
        }
        return buf;
    }
    return name;
}

void ms_workload_free(ms_workload *w)
{
    free(w->arrival_s);
    free(w->prompt);
    free(w->output);
    memset(w, 0, sizeof *w);
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static long days_from_civil(long y, long m, long d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int digits(const char *s, int n, long *out)
{
    long v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* "YYYY-MM-DD HH:MM:SS[.f...]" -> seconds since 1970 (UTC-agnostic). */
static int parse_timestamp(const char *s, double *out)
{
    long y, mo, d, h, mi, se;
    if (strlen(s) < 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' ||
        digits(s, 4, &y) || digits(s + 5, 2, &mo) || digits(s + 8, 2, &d) || digits(s + 11, 2, &h) ||
        digits(s + 14, 2, &mi) || digits(s + 17, 2, &se))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
        return -1;
    double frac = 0, scale = 0.1;
    const char *p = s + 19;
    if (*p == '.') {
        if (!p[1])
            return -1;
        for (p++; *p; p++, scale /= 10) {
            if (*p < '0' || *p > '9')
                return -1;
            frac += (*p - '0') * scale;
        }
    } else if (*p) {
        return -1;
    }
    *out = (double)days_from_civil(y, mo, d) * 86400.0 + (double)(h * 3600 + mi * 60 + se) + frac;
    return 0;
}

static int parse_count(const char *path, uint64_t ln, const char *col, const char *v, uint32_t *out, ms_err *err)
{
    unsigned long long x;
    if (ms_parse_u64(v, &x) || x > UINT32_MAX)
        return ms_fail(err, "%s:%llu: column %s: '%.40s' is not a non-negative integer", path, (unsigned long long)ln,
                       col, v);
    *out = (uint32_t)x;
    return 0;
}

/* Parses one data row: t, prompt, output. */
static int parse_azure_row(const char *path, uint64_t ln, char *line, double *t, uint32_t *p, uint32_t *o,
                           ms_err *err)
{
    char *c1 = strchr(line, ',');
    char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c1 || !c2 || strchr(c2 + 1, ','))
        return ms_fail(err, "%s:%llu: expected 3 columns (%s), got '%.60s'", path, (unsigned long long)ln, AZ_HEADER,
                       line);
    *c1 = *c2 = '\0';
    if (parse_timestamp(line, t))
        return ms_fail(err, "%s:%llu: column TIMESTAMP: '%.40s' is not YYYY-MM-DD HH:MM:SS[.fraction]", path,
                       (unsigned long long)ln, line);
    return parse_count(path, ln, "ContextTokens", c1 + 1, p, err) ||
                   parse_count(path, ln, "GeneratedTokens", c2 + 1, o, err)
               ? -1
               : 0;
}

int ms_workload_azure(const char *path, uint64_t start, uint64_t n, double time_scale, ms_workload *w, ms_err *err)
{
    memset(w, 0, sizeof *w);
    if (!(time_scale > 0) || !isfinite(time_scale))
        return ms_fail(err, "--time-scale: %g is not a positive number", time_scale);
    ms_lines r;
    if (ms_lines_open(&r, path, err))
        return -1;
    int got = ms_lines_next(&r, err), rc = 0;
    if (got == 0)
        rc = ms_fail(err, "%s: empty file (expected the header '%s')", path, AZ_HEADER);
    else if (got > 0 && strcmp(r.buf, AZ_HEADER))
        rc = ms_fail(err, "%s:1: header '%.60s', expected '%s'", path, r.buf, AZ_HEADER);
    else if (got < 0)
        rc = -1;
    w->n = n;
    w->arrival_s = ms_xcalloc(n ? n : 1, sizeof *w->arrival_s);
    w->prompt = ms_xcalloc(n ? n : 1, sizeof *w->prompt);
    w->output = ms_xcalloc(n ? n : 1, sizeof *w->output);
    double prev = -INFINITY, t0 = 0;
    uint64_t row = 0;
    while (rc == 0 && (got = ms_lines_next(&r, err)) == 1) {
        double t = 0;
        uint32_t p = 0, o = 0;
        if (parse_azure_row(path, r.lineno, r.buf, &t, &p, &o, err)) {
            rc = -1;
            break;
        }
        if (t < prev) {
            rc = ms_fail(err, "%s:%llu: column TIMESTAMP: '%.40s' is earlier than the row before (timestamps must not "
                              "decrease)",
                         path, (unsigned long long)r.lineno, r.buf);
            break;
        }
        prev = t;
        if (row == start)
            t0 = t;
        if (row >= start && row - start < n) {
            w->arrival_s[row - start] = time_scale * (t - t0);
            w->prompt[row - start] = p;
            w->output[row - start] = o;
        }
        row++;
    }
    if (rc == 0 && got < 0)
        rc = -1;
    ms_lines_close(&r);
    w->rows_total = row;
    if (rc == 0 && row == 0)
        rc = ms_fail(err, "%s: no data rows after the header", path);
    if (rc == 0 && (start >= row || row - start < n))
        rc = ms_fail(err, "%s: %llu data rows from --start %llu, the trace needs %llu", path,
                     (unsigned long long)(start < row ? row - start : 0), (unsigned long long)start,
                     (unsigned long long)n);
    if (rc == 0)
        snprintf(w->what, sizeof w->what, "%.300s rows %llu..%llu, time x%g", ms_import_base_name(path),
                 (unsigned long long)start, (unsigned long long)(start + n - 1), time_scale);
    if (rc)
        ms_workload_free(w);
    return rc;
}

int ms_workload_poisson(uint64_t n, double rate, uint64_t seed, ms_workload *w, ms_err *err)
{
    memset(w, 0, sizeof *w);
    if (!(rate > 0) || !isfinite(rate))
        return ms_fail(err, "--poisson: rate %g is not a positive number of requests per second", rate);
    if (seed > 4294967294ull)
        return ms_fail(err, "--seed: %llu out of range [0, 4294967294]", (unsigned long long)seed);
    w->n = n;
    w->arrival_s = ms_xcalloc(n ? n : 1, sizeof *w->arrival_s);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, (unsigned long)(seed + 1)); /* +1: GSL maps seed 0 to its default seed */
    double t = 0;
    for (uint64_t i = 0; i < n; i++) {
        t += gsl_ran_exponential(rng, 1.0 / rate);
        w->arrival_s[i] = t;
    }
    gsl_rng_free(rng);
    snprintf(w->what, sizeof w->what, "Poisson %g req/s, seed %llu", rate, (unsigned long long)seed);
    return 0;
}

int ms_workload_trace_requests(const char *path, uint64_t *n, ms_err *err)
{
    ms_trace_reader *r = ms_reader_open(path, err);
    if (!r)
        return -1;
    *n = ms_reader_meta(r)->n_requests;
    ms_reader_close(r);
    return 0;
}

int ms_workload_apply(const char *in_path, const char *out_path, ms_workload *w, ms_workload_report *rep,
                      ms_err *err)
{
    memset(rep, 0, sizeof *rep);
    ms_trace_reader *r = ms_reader_open(in_path, err);
    if (!r)
        return -1;
    ms_trace_meta m = *ms_reader_meta(r); /* shallow: arrays stay the reader's */
    if (w->n < m.n_requests) {
        ms_reader_close(r);
        return ms_fail(err, "%s: %llu requests, the workload has %llu arrivals", in_path,
                       (unsigned long long)m.n_requests, (unsigned long long)w->n);
    }
    char src[MS_SOURCE_MAX + sizeof w->what + 16];
    snprintf(src, sizeof src, "%s; arrivals: %s", m.source, w->what);
    snprintf(m.source, sizeof m.source, "%.*s", MS_SOURCE_MAX - 1, src); /* truncated to the format's limit */
    ms_import_sink sink;
    int rc = ms_import_sink_open(&sink, in_path, out_path, &m, err);
    double tp = 0, to = 0, wp = 0, wo = 0;
    for (uint64_t i = 0; rc == 0 && i < m.n_requests; i++) {
        ms_request req;
        memset(&req, 0, sizeof req);
        int got = ms_reader_next(r, &req, err);
        if (got <= 0) {
            rc = got < 0 ? -1 : ms_fail(err, "%s: ends after %llu of %llu requests", in_path, (unsigned long long)i,
                                        (unsigned long long)m.n_requests);
            ms_request_free(&req);
            break;
        }
        req.arrival_s = w->arrival_s[i];
        tp += req.prompt_len;
        to += req.output_len;
        if (w->prompt) {
            wp += w->prompt[i];
            wo += w->output[i];
        }
        rc = ms_writer_add(sink.w, &req, err);
        ms_request_free(&req);
    }
    if (sink.w)
        rc = ms_import_sink_finish(&sink, rc, err);
    uint64_t n = m.n_requests;
    ms_reader_close(r);
    rep->requests = n;
    rep->span_s = n ? w->arrival_s[n - 1] : 0;
    rep->trace_prompt_mean = n ? tp / (double)n : 0;
    rep->trace_output_mean = n ? to / (double)n : 0;
    rep->work_prompt_mean = w->prompt && n ? wp / (double)n : -1;
    rep->work_output_mean = w->prompt && n ? wo / (double)n : -1;
    return rc;
}
