/* A memo: byte strings (values) under byte-string keys, with the bytes it
 * holds counted.  The trace cache keeps one beside each cached trace
 * (trace_cache.h, ms_trace_memo_*) for data derived from that trace alone,
 * which the runs of a sweep would otherwise derive again at every point.
 *
 * A value, once put, never changes and is never removed before the whole
 * memo is freed (a second put of a key keeps the first value), so a pointer
 * ms_memo_get hands out stays valid until ms_memo_free.  Chained hash table
 * over a 64-bit hash of the key; keys are compared whole. */
#ifndef MS_MEMO_H
#define MS_MEMO_H

#include <stddef.h>
#include <stdint.h>

typedef struct ms_memo_entry ms_memo_entry;

typedef struct {
    ms_memo_entry **bucket; /* [n_buckets], a power of two (0 before the first put) */
    size_t n_buckets, n;
    uint64_t bytes; /* keys, values and the table itself */
} ms_memo;

/* An empty memo holds nothing: {0} is one. */
void ms_memo_free(ms_memo *m);
/* The value under key, its length in *len; NULL when there is none. */
const void *ms_memo_get(const ms_memo *m, const void *key, size_t klen, size_t *len);
/* Bytes a put of this key and value would add (entry and a share of the
 * table), for a caller that bounds the memo before it puts. */
uint64_t ms_memo_put_cost(const ms_memo *m, size_t klen, size_t len);
/* Copies the value in under key; a key already there keeps its value. */
void ms_memo_put(ms_memo *m, const void *key, size_t klen, const void *val, size_t len);

#endif
