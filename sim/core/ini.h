/* The one INI reader of moesim (inih underneath): model and platform
 * profiles, sweep specs, generator params and serverless platforms all read
 * their files through it, so every INI error has one form:
 *
 *   FILE:LINE: message        (a line's problem; the message says
 *                              "key = value: why" where a value is at fault)
 *   FILE: message             (the whole file's: a missing key, an open error)
 *
 * It opens the file (a regular file only), counts lines, refuses lines
 * longer than MS_INI_LINE_MAX, tells the caller whether a line continues the
 * previous value (inih's multi-line values: it starts with white space),
 * checks [section] lines against a list of known sections, and stops at the
 * first error. */
#ifndef MS_INI_H
#define MS_INI_H

#include <stdarg.h>

#include "sim/core/err.h"

#define MS_INI_LINE_MAX 4096

typedef struct ms_ini ms_ini;

typedef struct {
    const char *what;                 /* "platform profile", "sweep spec", ... (open errors) */
    const char *const *sections;      /* known section names, NULL-terminated; NULL: any */
    /* every [section] line, after the known-name check (may be NULL) */
    int (*on_section)(ms_ini *ini, void *user, const char *section);
    /* every key = value (a continuation line arrives as the same key again,
     * ms_ini_continuation() telling so); 0 to go on, -1 after ms_ini_fail
     * (or after filling err with a message of the same form) */
    int (*on_value)(ms_ini *ini, void *user, const char *section, const char *key, const char *value);
    void *user;
} ms_ini_spec;

/* Parses path; 0, or -1 with the first error in err. */
int ms_ini_parse(const char *path, const ms_ini_spec *spec, ms_err *err);

/* Records the first error as "FILE:LINE: message" ("FILE: message" when
 * called outside a line, e.g. by whole-file checks after the parse, through
 * ms_ini_fail_file); later calls keep the first.  Returns -1. */
int ms_ini_fail(ms_ini *ini, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ms_ini_fail_file(ms_err *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same form for parsers that keep their own first-error state:
 * "PATH:LINE: message" when line > 0, else "PATH: message"; returns -1. */
int ms_ini_vfail_at(ms_err *err, const char *path, int line, const char *fmt, va_list ap);

int ms_ini_line(const ms_ini *ini);          /* 1-based line being read */
int ms_ini_continuation(const ms_ini *ini);  /* the line starts with white space */
int ms_ini_failed(const ms_ini *ini);
const char *ms_ini_path(const ms_ini *ini);

#endif
