/* What a trace file is known by (docs/sweeps.md "Trace cache"), and which
 * content a result names.
 *
 * A format v2 trace rewritten in place with other content of the same size,
 * its old mtime put back (as `rsync --inplace -t` or `touch -d` after a
 * write leave it: same path, device, inode, size and mtime), is not served
 * from the old snapshot, digest or memos: the trace cache loads it again,
 * ms_trace_digest_of names its new digest, and runs (their memos filled on
 * the old content first) give the results of the new content streamed.
 *
 * A trace replaced after a run opened it: the run's sweep row, JSON and
 * reader name the content the run read (the digest taken at the open), v2
 * cached or streamed and v1 cached; a training read inside the run reads
 * that content too (cached) or is refused with one line (streamed). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fixtures.h"
#include "sim/engine/engine.h"
#include "policies/lib/gate.h"
#include "sim/apps/sweep_csv.h"
#include "sim/engine/report.h"
#include "traces/format/trace_cache.h"

static unsigned char *file_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = ms_xcalloc(*len ? *len : 1, 1);
    if (fread(b, 1, *len, f) != *len) {
        fprintf(stderr, "short read of %s\n", path);
        exit(1);
    }
    fclose(f);
    return b;
}

static void write_bytes(const char *path, const unsigned char *b, size_t len, int flags)
{
    int fd = open(path, O_WRONLY | flags, 0644);
    size_t done = 0;
    while (fd >= 0 && done < len) {
        ssize_t n = write(fd, b + done, len - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (fd < 0 || done != len || close(fd) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static void copy_file(const char *from, const char *to)
{
    size_t len;
    unsigned char *b = file_bytes(from, &len);
    write_bytes(to, b, len, O_CREAT | O_TRUNC);
    free(b);
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Overwrites path's bytes with from's (the same length) through the same
 * inode, then puts the old mtime back: the stat tuple does not change. */
static void rewrite_in_place_keep_mtime(const char *path, const char *from)
{
    struct stat before, after;
    CHECK(stat(path, &before) == 0);
    size_t len;
    unsigned char *b = file_bytes(from, &len);
    CHECK_EQ_INT(len, before.st_size);
    write_bytes(path, b, len, 0);
    free(b);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    CHECK(utimensat(AT_FDCWD, path, times, 0) == 0);
    CHECK(stat(path, &after) == 0);
    CHECK(after.st_dev == before.st_dev && after.st_ino == before.st_ino && after.st_size == before.st_size &&
          after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
}

/* Two v2 traces of different content and the same size: two seeds, the
 * smaller one padded with zeros past HDF5's end of file (readers ignore
 * bytes after it). */
static void make_same_size_pair(const char *a, const char *b)
{
    ms_fixture_gen("mixtral-8x7b", a, 1, 2);
    ms_fixture_gen("mixtral-8x7b", b, 2, 2);
    off_t sa = file_size(a), sb = file_size(b), size = sa > sb ? sa : sb;
    CHECK(truncate(a, size) == 0 && truncate(b, size) == 0);
    CHECK(file_size(a) == file_size(b));
}

static void stored_digest(const char *path, char hex[MS_DIGEST_HEX])
{
    ms_err err;
    ms_trace_reader *r = ms_reader_open_stream(path, &err);
    CHECK(r != NULL);
    snprintf(hex, MS_DIGEST_HEX, "%s", r ? ms_reader_meta(r)->content_sha256 : "");
    ms_reader_close(r);
}

static char *metrics_json(const char *trace, const ms_model *model, const ms_platform *plat, const char *pf,
                          const char *cache)
{
    ms_run_config cfg = {.trace_path = trace, .model = model, .platform = plat, .prefetch_spec = pf,
                         .cache_spec = cache, .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = 24,
                         .distance = 1, .max_batch = 2, .seed = 1, .train_set = 1, .train_frac = 0.5};
    ms_metrics m;
    ms_err err;
    if (ms_run(&cfg, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return ms_xstrdup("error");
    }
    cJSON *j = ms_report_metrics(&m);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    ms_metrics_free(&m);
    return s;
}

/* The cache API, the digest memo and the snapshot's memo. */
static void check_cache_after_rewrite(const char *a, const char *b, const char *path)
{
    char dig_a[MS_DIGEST_HEX], dig_b[MS_DIGEST_HEX];
    stored_digest(a, dig_a);
    stored_digest(b, dig_b);
    CHECK(strcmp(dig_a, dig_b) != 0);
    copy_file(a, path);
    ms_err err;
    ms_trace_digest d;
    CHECK(ms_trace_digest_of(path, &d, &err) == 0 && d.content && !strcmp(d.hex, dig_a));

    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    uint64_t loads = ms_trace_cache_loads();
    ms_trace_reader *r = ms_reader_open(path, &err);
    ms_trace_snapshot *s = r ? ms_reader_snapshot(r) : NULL;
    CHECK(s && !strcmp(ms_reader_meta(r)->content_sha256, dig_a));
    CHECK(s && ms_trace_memo_put(s, "k", 1, "from a", 6) == 1);
    ms_reader_close(r);
    CHECK(ms_trace_cache_find(path) == s);

    rewrite_in_place_keep_mtime(path, b);
    CHECK(ms_trace_cache_find(path) == NULL); /* the old snapshot is not this file any more */
    CHECK(ms_trace_digest_of(path, &d, &err) == 0 && d.content && !strcmp(d.hex, dig_b));
    r = ms_reader_open(path, &err);
    CHECK_EQ_INT(ms_trace_cache_loads(), loads + 2); /* loaded again */
    ms_trace_snapshot *s2 = r ? ms_reader_snapshot(r) : NULL;
    CHECK(s2 && !strcmp(ms_reader_meta(r)->content_sha256, dig_b));
    size_t len;
    CHECK(s2 && ms_trace_memo_get(s2, "k", 1, &len) == NULL); /* a's memo stays with a's snapshot */
    CHECK_EQ_INT(ms_trace_cache_memo_bytes(), 0); /* ... which went when b's was loaded at its path */
    ms_trace_reader *rb = ms_reader_open_stream(b, &err);
    CHECK(ms_fixture_next_requests_match(r, rb));
    ms_reader_close(rb);
    ms_reader_close(r);
    ms_trace_cache_enable(0);
}

/* Whole runs, their memos (activated sets, next-use lists, what transition
 * learned from the split) filled on the old content first. */
static void check_runs_after_rewrite(const char *a, const char *b, const char *path)
{
    ms_model model;
    ms_platform plat;
    ms_err err;
    CHECK(ms_model_load("mixtral-8x7b", &model, &err) == 0);
    CHECK(ms_platform_load("rtx3090-pcie4", &plat, &err) == 0);
    const char *combos[][2] = {{"none", "lru"}, {"oracle", "belady"}, {"transition", "lru"}};
    enum { N = sizeof combos / sizeof combos[0] };
    char *streamed[N];
    for (int i = 0; i < N; i++)
        streamed[i] = metrics_json(b, &model, &plat, combos[i][0], combos[i][1]);
    copy_file(a, path);
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    for (int i = 0; i < N; i++)
        free(metrics_json(path, &model, &plat, combos[i][0], combos[i][1]));
    CHECK(ms_trace_cache_memo_bytes() > 0);
    rewrite_in_place_keep_mtime(path, b);
    for (int i = 0; i < N; i++) {
        char *cached = metrics_json(path, &model, &plat, combos[i][0], combos[i][1]);
        if (strcmp(cached, streamed[i]))
            fprintf(stderr, "%s+%s on the rewritten trace: not the new content's results\n", combos[i][0],
                    combos[i][1]);
        CHECK(strcmp(cached, "error") != 0 && strcmp(cached, streamed[i]) == 0);
        free(cached);
        free(streamed[i]);
    }
    ms_trace_cache_enable(0);
}

/* path's content is replaced by from's, through a new inode (`mv`). */
static void replace_file(const char *path, const char *from)
{
    copy_file(from, "test_identity_new.h5");
    CHECK(rename("test_identity_new.h5", path) == 0);
}

static ms_run_config run_config(const char *trace, const ms_model *model, const ms_platform *plat, double cap)
{
    return (ms_run_config){.trace_path = trace, .model = model, .platform = plat, .prefetch_spec = "none",
                           .cache_spec = "lru", .sched_spec = "gpu", .cap_kind = MS_CAP_EXPERTS, .cap_value = cap,
                           .distance = 1, .max_batch = 2, .seed = 1, .train_set = 1, .train_frac = 0};
}

static char *sweep_row(const ms_run_config *cfg, const ms_metrics *m, const char *error)
{
    ms_sweep_point pt;
    for (int i = 0; i < MS_SW_NPARAM; i++)
        pt.v[i] = "x";
    pt.h2d_override = 0;
    return ms_sweep_csv_row(0, &pt, cfg, &m->trace, error ? NULL : m, error);
}

/* The row, the JSON and the reader name `named` (content 1: a v2 digest,
 * in trace_content_sha256; 0: the bytes' SHA-256, in trace_sha256) after
 * path was replaced by `next`; a failed run's row too. */
static void check_named_after_replace(const char *first, const char *next, const char *path, int content,
                                      const char *named, const ms_platform *plat, const ms_model *model)
{
    char cells[2 * MS_DIGEST_HEX + 8];
    snprintf(cells, sizeof cells, content ? ",,%s," : ",%s,,", named); /* trace_sha256,trace_content_sha256 */
    copy_file(first, path);
    ms_err err;
    ms_run_config cfg = run_config(path, model, plat, 24), bad = run_config(path, model, plat, 1);
    ms_metrics m, failed;
    CHECK(ms_run(&cfg, &m, &err) == 0);
    CHECK(ms_run(&bad, &failed, &err) != 0); /* a cache smaller than a layer's experts: fails after the open */
    ms_trace_reader *r = ms_reader_open(path, &err);
    replace_file(path, next);

    CHECK(m.trace.content == content && !strcmp(m.trace.hex, named));
    char *row = sweep_row(&cfg, &m, NULL);
    CHECK_STR_CONTAINS(row, cells);
    free(row);
    row = sweep_row(&bad, &failed, err.msg);
    CHECK_STR_CONTAINS(row, cells);
    free(row);
    cJSON *j = ms_report_json(&cfg, &m);
    cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "provenance"), "trace");
    cJSON *h = cJSON_GetObjectItem(t, content ? "content_sha256" : "sha256");
    CHECK(cJSON_IsString(h) && !strcmp(h->valuestring, named));
    cJSON_Delete(j);
    ms_trace_digest d;
    CHECK(r != NULL);
    if (r)
        ms_reader_trace_digest(r, &d);
    CHECK(r && d.content == content && !strcmp(d.hex, named));
    ms_reader_close(r);
    ms_metrics_free(&m);
}

static void check_digest_taken_at_open(const char *a, const char *b, const char *path)
{
    ms_platform plat;
    ms_model model;
    ms_err err;
    CHECK(ms_platform_load("rtx3090-pcie4", &plat, &err) == 0);
    CHECK(ms_model_load("mixtral-8x7b", &model, &err) == 0);
    char dig_a[MS_DIGEST_HEX], sum_v1[MS_DIGEST_HEX];
    stored_digest(a, dig_a);
    for (int cached = 0; cached < 2; cached++) {
        ms_trace_cache_enable(cached ? MS_TRACE_CACHE_DEFAULT_BYTES : 0);
        check_named_after_replace(a, b, path, 1, dig_a, &plat, &model);
    }
    /* v1: no stored digest; the SHA-256 of the bytes, taken at the cache's
     * load, or, streamed, when the run opened the trace */
    const char *v1 = MS_TEST_DATA "/../fuzz/trace_templates/zstd.h5";
    CHECK(ms_digest_file(v1, sum_v1, &err) == 0);
    for (int cached = 0; cached < 2; cached++) {
        ms_trace_cache_enable(cached ? MS_TRACE_CACHE_DEFAULT_BYTES : 0);
        check_named_after_replace(v1, b, "test_identity_v1.h5", 0, sum_v1, &plat, NULL);
    }
    ms_trace_cache_enable(0);
}

static int hash_training(void *ctx, uint64_t req_index, const ms_request *r, uint32_t it, ms_err *err)
{
    (void)req_index, (void)err;
    uint64_t *h = ctx;
    const int32_t *ids = r->topk_ids + (size_t)r->iters[it].row0 * 32 * 2; /* mixtral: L 32, K 2 */
    for (size_t i = 0; i < (size_t)r->iters[it].n_rows * 32 * 2; i++)
        *h = (*h ^ (uint32_t)ids[i]) * 1099511628211ull;
    return 0;
}

static uint64_t training_hash(const ms_policy_env *env, ms_err *err, int *rc)
{
    uint64_t h = 1469598103934665603ull;
    *rc = ms_train_foreach(env, 0, hash_training, &h, err);
    return h;
}

/* A run's training read (ms_train_foreach through env->reader) reads what
 * the run reads: the run's snapshot, or, streamed, nothing when the file
 * was replaced since the run opened it. */
static void check_training_reads_the_run_content(const char *a, const char *b, const char *path)
{
    ms_err err;
    int rc;
    ms_split split = {.frac = 0.5, .train_requests = 1};
    uint64_t want[2];
    const char *files[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        ms_trace_reader *r = ms_reader_open_stream(files[i], &err);
        ms_policy_env env = {.meta = ms_reader_meta(r), .trace_path = files[i], .reader = r, .split = split};
        want[i] = training_hash(&env, &err, &rc);
        CHECK_EQ_INT(rc, 0);
        ms_reader_close(r);
    }
    CHECK(want[0] != want[1]);
    for (int cached = 0; cached < 2; cached++) {
        ms_trace_cache_enable(cached ? MS_TRACE_CACHE_DEFAULT_BYTES : 0);
        copy_file(a, path);
        ms_trace_reader *r = ms_reader_open(path, &err);
        CHECK(r && (ms_reader_snapshot(r) != NULL) == cached);
        replace_file(path, b);
        ms_policy_env env = {.meta = ms_reader_meta(r), .trace_path = path, .reader = r, .split = split};
        err.msg[0] = '\0';
        uint64_t got = training_hash(&env, &err, &rc);
        if (cached) {
            CHECK_EQ_INT(rc, 0);
            CHECK(got == want[0]);
        } else {
            CHECK_EQ_INT(rc, -1);
            CHECK_STR_CONTAINS(err.msg, "test_identity.h5: the trace was replaced while a run read it");
            CHECK(strchr(err.msg, '\n') == NULL);
        }
        ms_reader_close(r);
    }
    ms_trace_cache_enable(0);
}

/* What a run's policy learned goes with the snapshot the run reads
 * (env->reader), not with whatever snapshot the path names later: after
 * the path is replaced and loaded again, the run still finds its memo, and
 * a run of the new content does not. */
static void check_training_memo_follows_the_run(const char *a, const char *b, const char *path)
{
    ms_err err;
    ms_split split = {.frac = 0.5, .train_requests = 1};
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    copy_file(a, path);
    ms_trace_reader *ra = ms_reader_open(path, &err);
    CHECK(ra && ms_reader_snapshot(ra) != NULL);
    ms_policy_env env_a = {.meta = ra ? ms_reader_meta(ra) : NULL, .trace_path = path, .reader = ra, .split = split};
    ms_train_memo_put(&env_a, "learned", "A", 2);
    replace_file(path, b);
    ms_trace_reader *rb = ms_reader_open(path, &err);
    CHECK(rb && ms_reader_snapshot(rb) != NULL && ms_reader_snapshot(rb) != ms_reader_snapshot(ra));
    ms_policy_env env_b = {.meta = rb ? ms_reader_meta(rb) : NULL, .trace_path = path, .reader = rb, .split = split};
    size_t len = 0;
    const char *got = ms_train_memo_get(&env_a, "learned", &len);
    CHECK(got && len == 2 && !strcmp(got, "A"));
    CHECK(ms_train_memo_get(&env_b, "learned", &len) == NULL);
    ms_reader_close(rb);
    ms_reader_close(ra);
    ms_trace_cache_enable(0);
}

/* A v1 trace streamed: named by its bytes at the open; opened again (a
 * training read) only while the file still holds those bytes: a copy of
 * the same bytes is read, another file is refused with one line. */
static void check_v1_open_again(const char *b, const char *path)
{
    const char *v1 = MS_TEST_DATA "/../fuzz/trace_templates/zstd.h5";
    char sum[MS_DIGEST_HEX];
    ms_err err;
    CHECK(ms_digest_file(v1, sum, &err) == 0);
    ms_trace_cache_enable(0);
    copy_file(v1, path);
    ms_trace_reader *r = ms_reader_open(path, &err);
    CHECK(r && ms_reader_snapshot(r) == NULL);
    ms_trace_digest d = {0};
    if (r)
        ms_reader_trace_digest(r, &d);
    CHECK(d.content == 0 && !strcmp(d.hex, sum));
    replace_file(path, v1); /* the same bytes, another inode */
    ms_trace_reader *again = r ? ms_reader_open_again(r, &err) : NULL;
    CHECK(again != NULL);
    ms_reader_close(again);
    replace_file(path, b);
    err.msg[0] = '\0';
    CHECK(r && ms_reader_open_again(r, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "test_identity.h5: the trace was replaced while a run read it (format v1 when the "
                                "run opened it, v2 now)");
    CHECK(strchr(err.msg, '\n') == NULL);
    ms_reader_close(r);
}

int main(void)
{
    const char *a = "test_identity_a.h5", *b = "test_identity_b.h5", *path = "test_identity.h5";
    make_same_size_pair(a, b);
    check_cache_after_rewrite(a, b, path);
    check_runs_after_rewrite(a, b, path);
    check_digest_taken_at_open(a, b, path);
    check_training_reads_the_run_content(a, b, path);
    check_training_memo_follows_the_run(a, b, path);
    check_v1_open_again(b, path);
    CHECK_DONE();
}
