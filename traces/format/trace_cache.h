/* Process-level in-memory trace cache (used by `moesim sweep` workers).
 *
 * Off by default.  When enabled with a byte limit, ms_reader_open() on a
 * trace file serves it from memory: the first open in the process streams and
 * validates the whole trace once (every chunk decompressed once) into a
 * snapshot; later opens of the same file copy requests out of that snapshot
 * and read no data from HDF5 again.  The same file is the same path,
 * device, inode, size and mtime and, for a format v2 trace, the same stored
 * content digest (root attribute content_sha256, read at every open: one
 * attribute read, no pass over the data), so a v2 trace rewritten in place
 * with the same size and mtime (coarse timestamps, `rsync --inplace -t`,
 * `touch -d` after a write) is loaded again.  A v1 trace has no stored
 * digest: it is known by its stat alone, and such a rewrite of it goes
 * unseen.
 * Readers behave exactly as streaming readers (same metadata, same requests,
 * same order), so ms_run gives identical results with and without the cache.
 *
 * The limit counts the decoded bytes of the cached traces.  A trace larger
 * than the limit, or one that fails to load whole (a corrupt request), is
 * not cached: it streams as usual, and its errors surface where they would
 * without the cache.  When a new trace does not fit beside the cached ones,
 * the least recently opened snapshots not in use are dropped first.
 *
 * Not thread-safe (nor is Debian's HDF5): one cache per process. */
#ifndef MS_TRACE_CACHE_H
#define MS_TRACE_CACHE_H

#include <stdint.h>

#include "traces/format/memo.h"
#include "traces/format/trace.h"

/* Default limit `moesim sweep` uses (trace_cache in a sweep spec). */
#define MS_TRACE_CACHE_DEFAULT_BYTES ((uint64_t)2 << 30)

/* Enables the cache with a limit of max_bytes decoded bytes; 0 disables it
 * and frees every snapshot not in use. */
void ms_trace_cache_enable(uint64_t max_bytes);
/* Traces decoded into memory by this process so far (a counter for tests
 * and benchmarks). */
uint64_t ms_trace_cache_loads(void);
/* Decoded bytes now held (memos included). */
uint64_t ms_trace_cache_bytes(void);
/* Of those, the memos'. */
uint64_t ms_trace_cache_memo_bytes(void);

typedef struct ms_trace_snapshot ms_trace_snapshot;

/* ---- memos: data derived from a cached trace alone ----
 * Each snapshot keeps a memo (memo.h): values a run derives from the trace
 * and would derive again in the next run of the sweep.  The snapshot is the
 * trace's identity (path, device, inode, size, mtime, v2 stored digest:
 * above), so a key names only
 * what else the value depends on; a reloaded trace starts with an empty
 * memo.  A memo goes with its snapshot.  The memos' bytes count in the
 * limit, and all memos together hold at most 1/MS_TRACE_MEMO_SHARE of it:
 * a put beyond that, or beyond the limit once the unused snapshots are
 * dropped, is refused (0) and the caller derives the value itself. */
#define MS_TRACE_MEMO_SHARE 4
/* The snapshot r serves from; NULL when r streams (no cache). */
ms_trace_snapshot *ms_reader_snapshot(const ms_trace_reader *r);
/* The snapshot of path when the cache holds it now (nothing is loaded). */
ms_trace_snapshot *ms_trace_cache_find(const char *path);
/* The value under key, NULL when none; valid while the snapshot is held. */
const void *ms_trace_memo_get(const ms_trace_snapshot *s, const void *key, size_t klen, size_t *len);
/* Copies a value in under key (a key already there keeps its value);
 * 1 when stored, 0 when refused. */
int ms_trace_memo_put(ms_trace_snapshot *s, const void *key, size_t klen, const void *val, size_t len);

/* ---- for traces/format/trace_h5.c ---- */
/* The snapshot of path, loading it when needed (its use count is raised:
 * release with ms_trace_cache_release); NULL when the cache is off or the
 * trace is not cacheable (the caller then streams). */
ms_trace_snapshot *ms_trace_cache_acquire(const char *path);
void ms_trace_cache_release(ms_trace_snapshot *s);
/* One more use of a snapshot already held (release it as an acquired one). */
void ms_trace_cache_hold(ms_trace_snapshot *s);
const ms_trace_meta *ms_trace_snapshot_meta(const ms_trace_snapshot *s);
/* The digest that names the snapshot's content in results, taken at its
 * load (trace.h ms_reader_trace_digest); hex "" when the file could not be
 * digested then. */
const ms_trace_digest *ms_trace_snapshot_digest(const ms_trace_snapshot *s);
const ms_request *ms_trace_snapshot_request(const ms_trace_snapshot *s, uint64_t i);
/* The uncached reader (ms_reader_open without the cache). */
ms_trace_reader *ms_reader_open_stream(const char *path, ms_err *err);
/* Deep copies. */
void ms_trace_meta_copy(ms_trace_meta *dst, const ms_trace_meta *src);
void ms_request_copy(ms_request *dst, const ms_request *src, const ms_trace_meta *m);

#endif
