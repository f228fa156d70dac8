/* Process-level in-memory trace cache: see trace_cache.h. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "traces/format/trace_cache.h"

/* What a file is known by: its stat, and for a v2 trace its stored
 * content digest ("" for any other file), which tells a rewrite in place
 * that kept size and mtime (coarse timestamps, `rsync --inplace -t`). */
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char digest[MS_DIGEST_HEX];
} file_identity;

struct ms_trace_snapshot {
    char *path;
    file_identity id;
    ms_trace_meta meta;
    ms_request *req;   /* [meta.n_requests] */
    uint64_t bytes;    /* decoded bytes held */
    uint64_t last_use; /* for least-recently-opened eviction */
    int users;
    int uncacheable;   /* too big or failed to load: stream it */
    ms_memo memo;      /* data derived from this trace (ms_trace_memo_put) */
    ms_trace_digest named; /* the digest that names what was loaded, taken at the load */
    ms_trace_snapshot *next;
};

static struct {
    uint64_t max_bytes, bytes, loads, clock;
    uint64_t memo_bytes; /* of bytes, the memos' */
    ms_trace_snapshot *head;
} cache;

static void *dup_array(const void *src, size_t n, size_t size)
{
    if (!src)
        return NULL;
    void *p = ms_xcalloc(n ? n : 1, size);
    memcpy(p, src, n * size);
    return p;
}

void ms_trace_meta_copy(ms_trace_meta *dst, const ms_trace_meta *src)
{
    *dst = *src;
    uint64_t n = src->n_requests;
    dst->expert_bytes = dup_array(src->expert_bytes, src->L, sizeof *src->expert_bytes);
    dst->dense_bytes = dup_array(src->dense_bytes, src->L, sizeof *src->dense_bytes);
    dst->req_id = dup_array(src->req_id, n, sizeof *src->req_id);
    dst->req_arrival_s = dup_array(src->req_arrival_s, n, sizeof *src->req_arrival_s);
    dst->req_prompt_len = dup_array(src->req_prompt_len, n, sizeof *src->req_prompt_len);
    dst->req_output_len = dup_array(src->req_output_len, n, sizeof *src->req_output_len);
    dst->req_n_iters = dup_array(src->req_n_iters, n, sizeof *src->req_n_iters);
    dst->req_n_rows = dup_array(src->req_n_rows, n, sizeof *src->req_n_rows);
}

void ms_request_copy(ms_request *dst, const ms_request *src, const ms_trace_meta *m)
{
    size_t cells = (size_t)src->n_rows * m->L * m->K;
    *dst = *src;
    dst->iters = dup_array(src->iters, src->n_iters, sizeof *src->iters);
    dst->topk_ids = dup_array(src->topk_ids, cells, sizeof *src->topk_ids);
    dst->topk_w = dup_array(src->topk_w, cells, sizeof *src->topk_w);
    dst->probs = dup_array(src->probs, (size_t)src->n_rows * m->L * m->J, sizeof *src->probs);
    dst->embedding = dup_array(src->embedding, (size_t)src->n_iters * m->embed_dim, sizeof *src->embedding);
    dst->spec_ids = dup_array(src->spec_ids, cells * m->spec_depth, sizeof *src->spec_ids);
    dst->spec_w = dup_array(src->spec_w, cells * m->spec_depth, sizeof *src->spec_w);
    dst->recorded_hit = dup_array(src->recorded_hit, cells, sizeof *src->recorded_hit);
    dst->token_ids = dup_array(src->token_ids, src->n_tokens, sizeof *src->token_ids);
    dst->text = src->text ? ms_xstrdup(src->text) : NULL;
}

static uint64_t request_bytes(const ms_request *r, const ms_trace_meta *m)
{
    uint64_t cells = (uint64_t)r->n_rows * m->L * m->K;
    uint64_t b = sizeof *r + (uint64_t)r->n_iters * sizeof *r->iters + cells * (sizeof(int32_t) + sizeof(float));
    if (r->probs)
        b += (uint64_t)r->n_rows * m->L * m->J * sizeof(float);
    if (r->embedding)
        b += (uint64_t)r->n_iters * m->embed_dim * sizeof(float);
    if (r->spec_ids)
        b += cells * m->spec_depth * (sizeof(int32_t) + sizeof(float));
    if (r->recorded_hit)
        b += cells;
    if (r->token_ids)
        b += (uint64_t)r->n_tokens * sizeof(int32_t);
    if (r->text)
        b += strlen(r->text) + 1;
    return b;
}

static void snapshot_free_data(ms_trace_snapshot *s)
{
    for (uint64_t i = 0; s->req && i < s->meta.n_requests; i++)
        ms_request_free(&s->req[i]);
    free(s->req);
    s->req = NULL;
    ms_trace_meta_free(&s->meta);
    cache.bytes -= s->bytes + s->memo.bytes;
    cache.memo_bytes -= s->memo.bytes;
    s->bytes = 0;
    ms_memo_free(&s->memo);
}

static void snapshot_unlink_free(ms_trace_snapshot *s)
{
    for (ms_trace_snapshot **p = &cache.head; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    snapshot_free_data(s);
    free(s->path);
    free(s);
}

/* Drops unused snapshots, least recently opened first, until `need` more
 * bytes fit under the limit (or nothing more can be dropped). */
static void make_room(uint64_t need)
{
    while (cache.bytes + need > cache.max_bytes) {
        ms_trace_snapshot *victim = NULL;
        for (ms_trace_snapshot *s = cache.head; s; s = s->next)
            if (!s->users && !s->uncacheable && s->bytes && (!victim || s->last_use < victim->last_use))
                victim = s;
        if (!victim)
            return;
        snapshot_unlink_free(victim);
    }
}

/* Drops the snapshots no reader uses: of path only (NULL: of every file). */
static void drop_unused(const char *path)
{
    ms_trace_snapshot *s = cache.head, *next;
    for (; s; s = next) {
        next = s->next;
        if (!s->users && (!path || !strcmp(s->path, path)))
            snapshot_unlink_free(s);
    }
}

void ms_trace_cache_enable(uint64_t max_bytes)
{
    cache.max_bytes = max_bytes;
    if (max_bytes == 0)
        drop_unused(NULL);
}

uint64_t ms_trace_cache_loads(void)
{
    return cache.loads;
}

uint64_t ms_trace_cache_bytes(void)
{
    return cache.bytes;
}

uint64_t ms_trace_cache_memo_bytes(void)
{
    return cache.memo_bytes;
}

/* path's identity now: a stat and an attribute read, no pass over the
 * data; -1 when the file cannot be stat'ed. */
static int read_identity(const char *path, file_identity *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    memset(id, 0, sizeof *id);
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
    ms_trace_stored_digest(path, id->digest);
    return 0;
}

static int same_file(const ms_trace_snapshot *s, const char *path, const file_identity *id)
{
    return !strcmp(s->path, path) && s->id.dev == id->dev && s->id.ino == id->ino && s->id.size == id->size &&
           s->id.mtime.tv_sec == id->mtime.tv_sec && s->id.mtime.tv_nsec == id->mtime.tv_nsec &&
           !strcmp(s->id.digest, id->digest);
}

/* Streams the whole trace into s; -1 when it fails or outgrows the limit. */
static int snapshot_load(ms_trace_snapshot *s)
{
    ms_err err;
    ms_trace_reader *rd = ms_reader_open_stream(s->path, &err);
    if (!rd)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(rd);
    ms_trace_meta_copy(&s->meta, m);
    s->req = ms_xcalloc(m->n_requests ? m->n_requests : 1, sizeof *s->req);
    uint64_t bytes = sizeof *s + (uint64_t)m->n_requests * 48;
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < m->n_requests; i++) {
        if (ms_reader_read(rd, i, &s->req[i], &err) != 1)
            rc = -1;
        else if ((bytes += request_bytes(&s->req[i], m)) > cache.max_bytes)
            rc = -1;
    }
    ms_reader_close(rd);
    s->bytes = bytes;
    cache.bytes += bytes;
    return rc;
}

/* The digest results name the snapshot by, taken now, at its load: a v2
 * trace's stored digest as loaded with the data; for a v1 trace the SHA-256
 * of the file's bytes (known, like the snapshot, by the file's stat). */
static void name_loaded(ms_trace_snapshot *s)
{
    ms_err err;
    if (s->id.digest[0]) {
        s->named.content = 1;
        memcpy(s->named.hex, s->id.digest, MS_DIGEST_HEX);
    } else if (ms_digest_file_cached(s->path, s->named.hex, &err) == 0) {
        s->named.content = 0;
    } else {
        s->named.hex[0] = '\0'; /* unreadable now: results digest the file when they are written */
    }
}

ms_trace_snapshot *ms_trace_cache_acquire(const char *path)
{
    file_identity id;
    if (cache.max_bytes == 0 || read_identity(path, &id) != 0)
        return NULL;
    ms_trace_snapshot *s = cache.head;
    while (s && !same_file(s, path, &id))
        s = s->next;
    if (!s) {
        drop_unused(path); /* earlier versions of the file: this path no longer names them */
        s = ms_xcalloc(1, sizeof *s);
        s->path = ms_xstrdup(path);
        s->id = id;
        s->next = cache.head;
        cache.head = s;
        s->users = 1; /* not a victim of its own make_room (it has never been used: the oldest) */
        int loaded = snapshot_load(s);
        cache.loads++;
        if (loaded < 0) {
            snapshot_free_data(s);
            s->uncacheable = 1;
        } else {
            /* the digest of what was read: the file may have been replaced since read_identity */
            memcpy(s->id.digest, s->meta.content_sha256, MS_DIGEST_HEX);
            name_loaded(s);
            cache.bytes -= s->bytes;
            make_room(s->bytes);
            cache.bytes += s->bytes;
        }
        s->users = 0;
    }
    if (s->uncacheable)
        return NULL;
    s->users++;
    s->last_use = ++cache.clock;
    return s;
}

void ms_trace_cache_hold(ms_trace_snapshot *s)
{
    s->users++;
    s->last_use = ++cache.clock;
}

void ms_trace_cache_release(ms_trace_snapshot *s)
{
    if (s && s->users > 0)
        s->users--;
    if (s && !s->users && cache.bytes > cache.max_bytes)
        make_room(0);
}

ms_trace_snapshot *ms_trace_cache_find(const char *path)
{
    file_identity id;
    if (cache.max_bytes == 0 || read_identity(path, &id) != 0)
        return NULL;
    for (ms_trace_snapshot *s = cache.head; s; s = s->next)
        if (same_file(s, path, &id))
            return s->uncacheable ? NULL : s;
    return NULL;
}

const void *ms_trace_memo_get(const ms_trace_snapshot *s, const void *key, size_t klen, size_t *len)
{
    return ms_memo_get(&s->memo, key, klen, len);
}

int ms_trace_memo_put(ms_trace_snapshot *s, const void *key, size_t klen, const void *val, size_t len)
{
    uint64_t cost = ms_memo_put_cost(&s->memo, klen, len);
    if (cache.memo_bytes + cost > cache.max_bytes / MS_TRACE_MEMO_SHARE)
        return 0;
    s->users++; /* not a victim of its own make_room */
    make_room(cost);
    s->users--;
    if (cache.bytes + cost > cache.max_bytes)
        return 0;
    uint64_t before = s->memo.bytes;
    ms_memo_put(&s->memo, key, klen, val, len);
    cache.bytes += s->memo.bytes - before;
    cache.memo_bytes += s->memo.bytes - before;
    return 1;
}

const ms_trace_meta *ms_trace_snapshot_meta(const ms_trace_snapshot *s)
{
    return &s->meta;
}

const ms_trace_digest *ms_trace_snapshot_digest(const ms_trace_snapshot *s)
{
    return &s->named;
}

const ms_request *ms_trace_snapshot_request(const ms_trace_snapshot *s, uint64_t i)
{
    return &s->req[i];
}
