/* The one INI reader (ini.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <ini.h>

#include "sim/core/ini.h"

struct ms_ini {
    const ms_ini_spec *spec;
    const char *path;
    FILE *fp;
    ms_err *err;
    int line;
    int failed;
    int continuation;
    char section[128];
};

int ms_ini_vfail_at(ms_err *err, const char *path, int line, const char *fmt, va_list ap)
{
    char msg[900];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (line > 0)
        return ms_fail(err, "%s:%d: %s", path, line, msg);
    return ms_fail(err, "%s: %s", path, msg);
}

int ms_ini_fail(ms_ini *ini, const char *fmt, ...)
{
    if (ini->failed)
        return -1;
    ini->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    ms_ini_vfail_at(ini->err, ini->path, ini->line, fmt, ap);
    va_end(ap);
    return -1;
}

int ms_ini_fail_file(ms_err *err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ms_ini_vfail_at(err, path, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int ms_ini_line(const ms_ini *ini)
{
    return ini->line;
}

int ms_ini_continuation(const ms_ini *ini)
{
    return ini->continuation;
}

int ms_ini_failed(const ms_ini *ini)
{
    return ini->failed;
}

const char *ms_ini_path(const ms_ini *ini)
{
    return ini->path;
}

/* A [section] line: its name must be known; then the caller hears of it. */
static int section_line(ms_ini *ini, const char *s)
{
    const char *end = strchr(s, ']');
    if (!end)
        return ms_ini_fail(ini, "malformed section header (no ']')");
    size_t n = (size_t)(end - s - 1);
    if (n >= sizeof ini->section)
        return ms_ini_fail(ini, "section name longer than %zu characters", sizeof ini->section - 1);
    memcpy(ini->section, s + 1, n);
    ini->section[n] = '\0';
    const char *const *known = ini->spec->sections;
    if (known) {
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++)
            ok = !strcmp(known[i], ini->section);
        if (!ok) {
            char list[400] = "";
            size_t used = 0;
            for (int i = 0; known[i] && used < sizeof list; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
            return ms_ini_fail(ini, "unknown section [%s] (known: %s)", ini->section, list);
        }
    }
    if (ini->spec->on_section && ini->spec->on_section(ini, ini->spec->user, ini->section) != 0) {
        ini->failed = 1; /* the handler has filled err */
        return -1;
    }
    return 0;
}

/* fgets for ini_parse_stream: counts lines, refuses over-long ones, notes
 * continuation lines, checks section lines, stops after the first error. */
/* fgets that also reports a NUL byte (-2; strlen would end the line there
 * and drop the rest of it unseen): the line's length, or -1 at the end. */
static long get_line(char *str, int num, FILE *fp)
{
    long n = 0;
    int c = EOF;
    while (n < num - 1 && (c = getc(fp)) != EOF) {
        if (c == '\0')
            return -2;
        str[n++] = (char)c;
        if (c == '\n')
            break;
    }
    str[n] = '\0';
    return n == 0 && c == EOF ? -1 : n;
}

static char *read_line(char *str, int num, void *stream)
{
    ms_ini *ini = stream;
    if (ini->failed)
        return NULL;
    long got = get_line(str, num, ini->fp);
    if (got == -1)
        return NULL;
    ini->line++;
    if (got == -2) {
        ms_ini_fail(ini, "a NUL byte in the line (is this a text file?)");
        return NULL;
    }
    size_t n = (size_t)got;
    if (n > 0 && n == (size_t)num - 1 && str[n - 1] != '\n' && !feof(ini->fp)) {
        ms_ini_fail(ini, "line longer than %d characters (continue a list on indented lines)", num - 2);
        return NULL;
    }
    const char *s = str + strspn(str, " \t");
    ini->continuation = s > str && *s && !strchr("\r\n;#", *s);
    if (!ini->continuation && *s == '[' && section_line(ini, s))
        return NULL;
    return str;
}

static int on_value(void *user, const char *section, const char *key, const char *value)
{
    ms_ini *ini = user;
    if (ini->failed)
        return 0;
    if (ini->spec->on_value(ini, ini->spec->user, section, key, value) != 0)
        ini->failed = 1; /* the handler has filled err */
    return !ini->failed;
}

int ms_ini_parse(const char *path, const ms_ini_spec *spec, ms_err *err)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return ms_fail(err, "%s: cannot open %s: %s", path, spec->what, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return ms_fail(err, "%s: %s is not a regular file", path, spec->what);
    }
    ms_ini ini = {.spec = spec, .path = path, .fp = fp, .err = err};
    int rc = ini_parse_stream(read_line, &ini, on_value, &ini);
    if (!ini.failed && ferror(fp))
        ms_ini_fail(&ini, "read error: %s", strerror(errno));
    fclose(fp);
    if (!ini.failed && rc > 0) {
        ini.line = rc;
        ms_ini_fail(&ini, "syntax error (expected [section], key = value, or a ; or # comment)");
    } else if (!ini.failed && rc < 0) {
        ini.line = 0;
        ms_ini_fail(&ini, "inih failed (%d)", rc);
    }
    return ini.failed ? -1 : 0;
}
