/* Shared helpers of the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 *
 * Every reader of moesim takes a path, so a harness writes the fuzz input
 * into a fresh directory made with mkdtemp under $TMPDIR (default /tmp),
 * runs the reader on it, and removes the directory and everything the
 * reader wrote into it (fz_dir_remove) before returning: a harness never
 * writes outside its temporary directory and leaves nothing behind.
 * Failures of the harness itself (disk full) abort: they are not findings
 * about moesim, and a silent skip would hide them. */
#ifndef MS_FUZZ_UTIL_H
#define MS_FUZZ_UTIL_H

#include <dirent.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/core/err.h"

typedef struct {
    char dir[PATH_MAX];
} fz_dir;

static inline void fz_die(const char *what, const char *path)
{
    fprintf(stderr, "fuzz harness: %s %s failed\n", what, path);
    abort();
}

/* Makes $TMPDIR/moesim-fuzz-XXXXXX. */
static inline void fz_dir_make(fz_dir *d)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof d->dir, "%s/moesim-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->dir))
        fz_die("mkdtemp", d->dir);
}

/* out = dir/name. */
static inline void fz_path(const fz_dir *d, const char *name, char *out, size_t cap)
{
    if ((size_t)snprintf(out, cap, "%s/%s", d->dir, name) >= cap)
        fz_die("path too long:", name);
}

/* Writes data[0..n) to dir/name (created or truncated); out gets the path. */
static inline void fz_write(const fz_dir *d, const char *name, const uint8_t *data, size_t n, char *out, size_t cap)
{
    fz_path(d, name, out, cap);
    FILE *f = fopen(out, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f))
        fz_die("writing", out);
}

/* Appends to dir/name. */
static inline void fz_append(const fz_dir *d, const char *name, const uint8_t *data, size_t n)
{
    char path[PATH_MAX];
    fz_path(d, name, path, sizeof path);
    FILE *f = fopen(path, "ab");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f))
        fz_die("appending to", path);
}

/* Removes every entry of the directory (files only: readers make no
 * sub-directories) and the directory. */
static inline void fz_dir_remove(fz_dir *d)
{
    DIR *dp = opendir(d->dir);
    if (!dp)
        fz_die("opendir", d->dir);
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(dp)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        fz_path(d, e->d_name, path, sizeof path);
        if (unlink(path))
            fz_die("unlink", path);
    }
    closedir(dp);
    if (rmdir(d->dir))
        fz_die("rmdir", d->dir);
}

/* The error contract: a failing reader filled err with one non-empty line
 * of printable text.  Call with err->msg set to "" before the call. */
static inline void fz_check_err(const ms_err *err)
{
    if (!err->msg[0]) {
        fprintf(stderr, "fuzz harness: a reader failed without an error message\n");
        abort();
    }
    for (const char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            fprintf(stderr, "fuzz harness: control byte 0x%02x in the error message: %s\n", (unsigned char)*c,
                    err->msg);
            abort();
        }
}

/* Runs an int-returning reader call (0 ok, non-zero failed) and checks the
 * error contract on failure; needs an `ms_err err` in scope. */
#define FZ_CALL(call)                                                                                                  \
    do {                                                                                                               \
        err.msg[0] = '\0';                                                                                             \
        if ((call) != 0)                                                                                               \
            fz_check_err(&err);                                                                                        \
    } while (0)

/* A NUL-terminated copy of the input (free it). */
static inline char *fz_cstr(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

#define FZ_LAYER_MARK "@@@"

/* dense-csv inputs: bytes before the first marker line go to layer0.csv; a
 * line "@@@N" (N one digit) starts (or appends to) layerN.csv.  Writes the
 * segments of data into DIR/layerN.csv. */
static inline void fz_split_layers(const fz_dir *d, const uint8_t *data, size_t size)
{
    char name[32] = "layer0.csv";
    size_t start = 0, i = 0;
    char path[PATH_MAX];
    fz_write(d, name, data, 0, path, sizeof path);
    while (i < size) {
        int at_line = i == 0 || data[i - 1] == '\n';
        if (at_line && size - i >= 5 && !memcmp(data + i, FZ_LAYER_MARK, 3) && data[i + 3] >= '0' && data[i + 3] <= '9' &&
            data[i + 4] == '\n') {
            fz_append(d, name, data + start, i - start);
            snprintf(name, sizeof name, "layer%c.csv", data[i + 3]);
            fz_append(d, name, data, 0);
            i += 5;
            start = i;
            continue;
        }
        i++;
    }
    fz_append(d, name, data + start, size - start);
}

#endif
