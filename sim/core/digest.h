/* SHA-256 digests (OpenSSL's libcrypto): of whole files, for the provenance
 * of results (model and platform files, v1 traces; a v2 trace is named by
 * its stored content digest: trace.h ms_trace_digest_of), and of streamed
 * bytes, for a trace's content digest.  Hex strings are 64 lowercase digits
 * plus the NUL. */
#ifndef MS_DIGEST_H
#define MS_DIGEST_H

#include <stddef.h>

#include "sim/core/err.h"

#define MS_DIGEST_HEX 65

/* The SHA-256 of a file's bytes as hex; -1 with one line naming the file
 * when it cannot be read. */
int ms_digest_file(const char *path, char hex[MS_DIGEST_HEX], ms_err *err);

/* The same, remembered per file (device, inode, size, modification time)
 * for the life of the process: a sweep digests each model, platform and v1
 * trace file once.  A rewrite in place that keeps size and mtime is not
 * seen (v2 traces are named by their stored digest instead: trace.h
 * ms_trace_digest_of). */
int ms_digest_file_cached(const char *path, char hex[MS_DIGEST_HEX], ms_err *err);

typedef struct ms_digest ms_digest;
ms_digest *ms_digest_new(void);
void ms_digest_update(ms_digest *d, const void *data, size_t n);
/* Writes the hex digest and frees d. */
void ms_digest_final(ms_digest *d, char hex[MS_DIGEST_HEX]);
/* Frees d without a result (NULL is a no-op). */
void ms_digest_free(ms_digest *d);

#endif
