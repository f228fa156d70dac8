#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/err.h"

/* Messages quote values read from untrusted files: a control byte there (a
 * newline inside a JSON string, an escape sequence in binary garbage) would
 * break the one-line contract or drive the terminal, so each becomes '?'. */
static void make_printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int ms_fail(ms_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    make_printable(err->msg);
    return -1;
}

int ms_fail_prefix(ms_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3)
        n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
    make_printable(err->msg);
    return -1;
}

static void *check_alloc(void *p)
{
    if (!p) {
        fputs("moesim: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *ms_xcalloc(size_t n, size_t size)
{
    return check_alloc(calloc(n ? n : 1, size ? size : 1));
}

void *ms_xrealloc(void *p, size_t n, size_t size)
{
    if (size && n > (size_t)-1 / size)
        return check_alloc(NULL);
    size_t bytes = n * size;
    return check_alloc(realloc(p, bytes ? bytes : 1));
}

char *ms_xstrdup(const char *s)
{
    return check_alloc(strdup(s ? s : ""));
}
