/* The memo of traces/format/memo.h. */
#include <stdlib.h>
#include <string.h>

#include "sim/core/err.h"
#include "traces/format/memo.h"

struct ms_memo_entry {
    ms_memo_entry *next;
    uint64_t hash;
    size_t klen, len;
    unsigned char data[]; /* the key, then the value at an 8-byte boundary */
};

/* FNV-1a, 64 bits */
static uint64_t hash_of(const void *key, size_t klen)
{
    const unsigned char *p = key;
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ p[i]) * 1099511628211u;
    return h;
}

static size_t value_offset(size_t klen) { return (klen + 7) & ~(size_t)7; }

static uint64_t entry_bytes(size_t klen, size_t len)
{
    return sizeof(ms_memo_entry) + value_offset(klen) + len;
}

void ms_memo_free(ms_memo *m)
{
    for (size_t b = 0; b < m->n_buckets; b++)
        for (ms_memo_entry *e = m->bucket[b], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(m->bucket);
    memset(m, 0, sizeof *m);
}

static ms_memo_entry *find(const ms_memo *m, uint64_t h, const void *key, size_t klen)
{
    if (!m->n_buckets)
        return NULL;
    for (ms_memo_entry *e = m->bucket[h & (m->n_buckets - 1)]; e; e = e->next)
        if (e->hash == h && e->klen == klen && !memcmp(e->data, key, klen))
            return e;
    return NULL;
}

const void *ms_memo_get(const ms_memo *m, const void *key, size_t klen, size_t *len)
{
    ms_memo_entry *e = find(m, hash_of(key, klen), key, klen);
    if (!e)
        return NULL;
    *len = e->len;
    return e->data + value_offset(klen);
}

/* the table's size after one more entry: doubled when entries would
 * outnumber buckets */
static size_t buckets_for(const ms_memo *m)
{
    if (m->n + 1 <= m->n_buckets)
        return m->n_buckets;
    return m->n_buckets ? 2 * m->n_buckets : 64;
}

uint64_t ms_memo_put_cost(const ms_memo *m, size_t klen, size_t len)
{
    return entry_bytes(klen, len) + (buckets_for(m) - m->n_buckets) * sizeof *m->bucket;
}

static void grow(ms_memo *m, size_t n_buckets)
{
    ms_memo_entry **bucket = ms_xcalloc(n_buckets, sizeof *bucket);
    for (size_t b = 0; b < m->n_buckets; b++)
        for (ms_memo_entry *e = m->bucket[b], *next; e; e = next) {
            next = e->next;
            ms_memo_entry **slot = &bucket[e->hash & (n_buckets - 1)];
            e->next = *slot;
            *slot = e;
        }
    free(m->bucket);
    m->bytes += (n_buckets - m->n_buckets) * sizeof *bucket;
    m->bucket = bucket;
    m->n_buckets = n_buckets;
}

void ms_memo_put(ms_memo *m, const void *key, size_t klen, const void *val, size_t len)
{
    uint64_t h = hash_of(key, klen);
    if (find(m, h, key, klen))
        return;
    size_t nb = buckets_for(m);
    if (nb != m->n_buckets)
        grow(m, nb);
    ms_memo_entry *e = ms_xcalloc(1, entry_bytes(klen, len));
    e->hash = h;
    e->klen = klen;
    e->len = len;
    memcpy(e->data, key, klen);
    if (len)
        memcpy(e->data + value_offset(klen), val, len);
    ms_memo_entry **slot = &m->bucket[h & (m->n_buckets - 1)];
    e->next = *slot;
    *slot = e;
    m->n++;
    m->bytes += entry_bytes(klen, len);
}
