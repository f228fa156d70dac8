/* The memo (traces/format/memo.h) and the trace cache's memos
 * (trace_cache.h): every value put comes back under its key and only its
 * key (keys that differ in one byte, a prefix, the empty key), through the
 * table's growth; a second put keeps the first value; the bytes counted are
 * those ms_memo_put_cost announced.  The trace cache: a memo goes with its
 * snapshot, a streaming reader has none, the memos' share of the limit and
 * the limit itself refuse a put, a reloaded trace starts empty, and a trace
 * loaded where another must go makes that one go, not itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "traces/format/memo.h"
#include "traces/format/trace_cache.h"

enum { N_KEYS = 3000 };

/* key i: "k" and i in decimal, then i % 7 bytes of 0 (lengths vary, and
 * keys 1 and 10 differ by a byte) */
static size_t key_of(uint32_t i, unsigned char *key)
{
    size_t n = (size_t)sprintf((char *)key, "k%u", i);
    memset(key + n, 0, i % 7);
    return n + i % 7;
}

static size_t value_of(uint32_t i, unsigned char *val)
{
    size_t n = i % 50;
    for (size_t j = 0; j < n; j++)
        val[j] = (unsigned char)(i * 31 + j);
    return n;
}

static void check_memo(void)
{
    ms_memo m = {0};
    unsigned char key[64], val[64];
    size_t len;
    CHECK(ms_memo_get(&m, "x", 1, &len) == NULL);
    for (uint32_t i = 0; i < N_KEYS; i++) {
        size_t kl = key_of(i, key), vl = value_of(i, val);
        uint64_t before = m.bytes, cost = ms_memo_put_cost(&m, kl, vl);
        ms_memo_put(&m, key, kl, val, vl);
        CHECK_EQ_INT(m.bytes - before, cost);
    }
    CHECK_EQ_INT(m.n, N_KEYS);
    ms_memo_put(&m, "", 0, "empty", 5);
    int bad = 0;
    for (uint32_t i = 0; i < N_KEYS; i++) {
        size_t kl = key_of(i, key), vl = value_of(i, val);
        const unsigned char *got = ms_memo_get(&m, key, kl, &len);
        bad += !got || len != vl || memcmp(got, val, vl) != 0;
        bad += ms_memo_get(&m, key, kl + 1, &len) != NULL && i % 7 == 6; /* one zero more: no key */
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(ms_memo_get(&m, "k", 1, &len) == NULL); /* a prefix of every key */
    const char *e = ms_memo_get(&m, "", 0, &len);
    CHECK(e && len == 5 && memcmp(e, "empty", 5) == 0);
    /* a second put keeps the first value, adds nothing */
    uint64_t bytes = m.bytes;
    ms_memo_put(&m, "k14", 3, "other", 5); /* key 14: "k14", no zero after */
    CHECK_EQ_INT(m.bytes, bytes);
    CHECK_EQ_INT(m.n, N_KEYS + 1);
    value_of(14, val);
    const unsigned char *v14 = ms_memo_get(&m, "k14", 3, &len);
    CHECK(v14 && len == 14 && memcmp(v14, val, 14) == 0);
    ms_memo_free(&m);
    CHECK_EQ_INT(m.bytes, 0);
    CHECK(ms_memo_get(&m, "k14", 3, &len) == NULL);
}

static void check_trace_memos(void)
{
    const char *trace = "test_memo_mix.h5";
    ms_fixture_gen("mixtral-8x7b", trace, 3, 2);
    ms_err err;
    size_t len;
    /* the cache off: a streaming reader, no snapshot, no memo */
    ms_trace_reader *rd = ms_reader_open(trace, &err);
    CHECK(rd && ms_reader_snapshot(rd) == NULL);
    CHECK(ms_trace_cache_find(trace) == NULL);
    ms_reader_close(rd);

    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    CHECK(ms_trace_cache_find(trace) == NULL); /* find loads nothing */
    rd = ms_reader_open(trace, &err);
    ms_trace_snapshot *s = rd ? ms_reader_snapshot(rd) : NULL;
    CHECK(s != NULL && ms_trace_cache_find(trace) == s);
    uint64_t trace_bytes = ms_trace_cache_bytes();
    CHECK(ms_trace_memo_put(s, "a", 1, "1234", 4) == 1);
    const char *got = ms_trace_memo_get(s, "a", 1, &len);
    CHECK(got && len == 4 && memcmp(got, "1234", 4) == 0);
    CHECK(ms_trace_cache_memo_bytes() > 0);
    CHECK_EQ_INT(ms_trace_cache_bytes(), trace_bytes + ms_trace_cache_memo_bytes());
    /* the memos' share: a value over a quarter of the limit is refused */
    size_t big = (size_t)(MS_TRACE_CACHE_DEFAULT_BYTES / MS_TRACE_MEMO_SHARE);
    char *huge = calloc(big, 1);
    CHECK(ms_trace_memo_put(s, "b", 1, huge, big) == 0);
    CHECK(ms_trace_memo_get(s, "b", 1, &len) == NULL);
    free(huge);
    ms_reader_close(rd);

    /* the limit: just above the trace and memo held so far, a small memo put
     * is refused; the snapshot in use is not dropped to make room */
    ms_trace_cache_enable(ms_trace_cache_bytes() * MS_TRACE_MEMO_SHARE);
    rd = ms_reader_open(trace, &err);
    s = rd ? ms_reader_snapshot(rd) : NULL;
    CHECK(s && ms_trace_memo_put(s, "c", 1, "x", 1) == 1);
    ms_reader_close(rd);
    ms_trace_cache_enable(ms_trace_cache_bytes() + 1);
    rd = ms_reader_open(trace, &err);
    s = rd ? ms_reader_snapshot(rd) : NULL;
    CHECK(s && ms_trace_memo_put(s, "d", 1, "y", 1) == 0);
    CHECK(ms_trace_cache_find(trace) == s);
    ms_reader_close(rd);

    /* a memo goes with its snapshot: reloaded, the trace's memo is empty */
    ms_trace_cache_enable(0);
    CHECK_EQ_INT(ms_trace_cache_bytes(), 0);
    CHECK_EQ_INT(ms_trace_cache_memo_bytes(), 0);
    ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
    rd = ms_reader_open(trace, &err);
    s = rd ? ms_reader_snapshot(rd) : NULL;
    CHECK(s && ms_trace_memo_get(s, "a", 1, &len) == NULL);
    ms_reader_close(rd);
    ms_trace_cache_enable(0);
}

/* Loading a trace that needs another one evicted: the other goes, the new
 * snapshot stays (it was its own first victim once: a use after free). */
static void check_cache_eviction(void)
{
    const char *a = "test_memo_evict_a.h5", *b = "test_memo_evict_b.h5";
    ms_fixture_gen("mixtral-8x7b", a, 3, 2);
    ms_fixture_gen("mixtral-8x7b", b, 3, 3);
    ms_err err;
    uint64_t bytes[2];
    const char *paths[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        ms_trace_cache_enable(MS_TRACE_CACHE_DEFAULT_BYTES);
        ms_trace_reader *rd = ms_reader_open(paths[i], &err);
        CHECK(rd && ms_reader_snapshot(rd));
        bytes[i] = ms_trace_cache_bytes();
        ms_reader_close(rd);
        ms_trace_cache_enable(0);
    }
    ms_trace_cache_enable(bytes[0] + bytes[1] - 1);
    ms_trace_reader *ra = ms_reader_open(a, &err);
    CHECK(ra && ms_reader_snapshot(ra));
    ms_reader_close(ra);
    ms_trace_reader *rb = ms_reader_open(b, &err), *stream = NULL;
    ms_trace_snapshot *s = rb ? ms_reader_snapshot(rb) : NULL;
    CHECK(s && ms_trace_cache_find(b) == s);
    CHECK(ms_trace_cache_find(a) == NULL);
    CHECK_EQ_INT(ms_trace_cache_bytes(), bytes[1]);
    ms_trace_cache_enable(0); /* b's snapshot is in use: it stays until closed */
    stream = ms_reader_open(b, &err);
    CHECK(stream && ms_reader_snapshot(stream) == NULL);
    CHECK(ms_fixture_next_requests_match(rb, stream));
    ms_reader_close(stream);
    ms_reader_close(rb);
    CHECK_EQ_INT(ms_trace_cache_bytes(), 0);
}

int main(void)
{
    check_memo();
    check_trace_memos();
    check_cache_eviction();
    CHECK_DONE();
}
