/* One-line error reporting shared by every module.
 *
 * Functions that can fail take an `ms_err *` and return -1 (or NULL) after
 * filling it with one line naming the file, field and value at fault.  The CLI
 * prints "moesim: <msg>" and exits 1; nothing below the CLI prints or exits. */
#ifndef MS_ERR_H
#define MS_ERR_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ms_err {
    char msg[1024];
} ms_err;

/* printf-style; always returns -1 so callers can `return ms_fail(err, ...)`.
 * Control characters in the result (newline, tab, ESC, ...) become '?'. */
int ms_fail(ms_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix an existing message ("ctx: old message"); returns -1. */
int ms_fail_prefix(ms_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation that cannot return NULL: aborts with a message on exhaustion. */
void *ms_xcalloc(size_t n, size_t size);
void *ms_xrealloc(void *p, size_t n, size_t size);
char *ms_xstrdup(const char *s);

#endif
