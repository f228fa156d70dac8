/* Model and platform profiles: INI files parsed with inih (libinih-dev).
 *
 * Both kinds are described by one table of fields (section, key, how to
 * parse, where to store, allowed range, which [source] entry cites it); a
 * single inih handler fills the struct from that table and stops at the
 * first error.  Cross-field checks (top_k <= experts, expert bytes matching
 * the parameter count, ...) run once the whole file is read.
 *
 * This file finds, loads, overrides and lists profiles and builds their
 * source text; profile_schema.c holds the field tables, profile_values.c the
 * parsing and checks (profile_parts.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


#include "sim/core/digest.h"
#include "sim/core/ini.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"
#include "sim/core/profile.h"

#include "sim/core/profile_parts.h"

/* ---- source text ---- */

/* Copies src into dst (capacity cap) without splitting a UTF-8 sequence,
 * ending in "..." when it had to cut. */
static void copy_truncated(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n < cap) {
        memcpy(dst, src, n + 1);
        return;
    }
    if (cap < 4) {
        dst[0] = '\0';
        return;
    }
    size_t keep = cap - 4;
    while (keep > 0 && ((unsigned char)src[keep] & 0xC0) == 0x80)
        keep--;
    memcpy(dst, src, keep);
    memcpy(dst + keep, "...", 4);
}

static void format_source_line(const parse_ctx *c, int g, char *line, size_t cap)
{
    const char *text = c->group_text[g];
    int f = -1;
    for (int i = 0; c->schema->cite_with_value && i < c->schema->nfields; i++)
        if (!strcmp(c->schema->fields[i].key, c->groups[g]))
            f = i;
    if (f < 0) {
        snprintf(line, cap, "%s: %s", c->groups[g], text);
        return;
    }
    size_t n = strcspn(text, " \t");
    const char *rest = text + n + strspn(text + n, " \t");
    snprintf(line, cap, "%s: %s (%.*s) %s", c->groups[g], c->raw[f], (int)n, text, rest);
}

/* Largest line length (with its '\n') that lets all lines fit in budget:
 * lines shorter than the share keep their length and leave the rest of
 * their share to the longer ones. */
static size_t fair_share(const size_t *len, int n, size_t budget)
{
    unsigned char fits[MAX_GROUPS] = {0};
    int nlong = n;
    size_t share = budget;
    for (int changed = 1; changed && nlong > 0;) {
        changed = 0;
        share = budget / (size_t)nlong;
        for (int i = 0; i < n; i++)
            if (!fits[i] && len[i] <= share) {
                fits[i] = 1;
                budget -= len[i];
                nlong--;
                changed = 1;
            }
    }
    return share;
}

/* One "key: ..." line per [source] entry.  When they do not all fit, the
 * longest citations are shortened so that every figure keeps its line. */
static void build_source(const parse_ctx *c, char *dst, size_t cap)
{
    char lines[MAX_GROUPS][SOURCE_TEXT_CAP + 96];
    size_t len[MAX_GROUPS];
    for (int g = 0; g < c->ngroups; g++) {
        lines[g][0] = '\0';
        if (c->group_seen[g])
            format_source_line(c, g, lines[g], sizeof lines[g]);
        len[g] = c->group_seen[g] ? strlen(lines[g]) + 1 : 0; /* with its '\n' */
    }
    size_t share = fair_share(len, c->ngroups, cap - 1);
    size_t used = 0;
    dst[0] = '\0';
    for (int g = 0; g < c->ngroups; g++) {
        if (!c->group_seen[g])
            continue;
        size_t room = cap - used;
        size_t lim = share < room ? share : room;
        if (lim < 2)
            break;
        copy_truncated(dst + used, lim, lines[g]); /* at most lim-1 chars: room for '\n' */
        used += strlen(dst + used);
        if (used + 1 >= cap)
            break;
        dst[used++] = '\n';
        dst[used] = '\0';
    }
    if (used && dst[used - 1] == '\n')
        dst[used - 1] = '\0'; /* no trailing newline */
}

/* ---- locating a profile (folder: ms_path_profiles, sim/core/paths.h) ---- */

static int is_path_spec(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n >= 4 && !strcmp(s + n - 4, ".ini"));
}

static int unknown_name_error(const profile_schema *s, const char *name, ms_err *err)
{
    char **names;
    int n;
    ms_err list_err;
    if (ms_profile_list(s->subdir, &names, &n, &list_err))
        return ms_fail(err, "unknown %s '%s': %s", s->kind, name, list_err.msg);
    char known[768] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof known; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", names[i]);
    ms_profile_list_free(names, n);
    if (!n) {
        char dir[4096] = "?";
        ms_path_profiles(dir, sizeof dir, &list_err); /* found a moment ago by ms_profile_list */
        return ms_fail(err, "unknown %s '%s' (no profiles in %s/%s)", s->kind, name, dir, s->subdir);
    }
    return ms_fail(err, "unknown %s '%s' (known: %s)", s->kind, name, known);
}

/* Opens the profile file; by_name tells whether it was looked up by name. */
static FILE *open_profile(const profile_schema *s, const char *name_or_path, char *path, size_t cap, int *by_name,
                          ms_err *err)
{
    *by_name = !is_path_spec(name_or_path);
    if (*by_name) {
        if (!pf_is_plain_name(name_or_path)) {
            ms_fail(err, "invalid %s name '%s' (letters, digits, '.', '-', '_'; or a path ending in .ini)", s->kind,
                    name_or_path);
            return NULL;
        }
        char dir[4096];
        if (ms_path_profiles(dir, sizeof dir, err))
            return NULL;
        if (snprintf(path, cap, "%s/%s/%s.ini", dir, s->subdir, name_or_path) >= (int)cap) {
            ms_fail(err, "%s profile path too long for '%s'", s->kind, name_or_path);
            return NULL;
        }
    } else if (snprintf(path, cap, "%s", name_or_path) >= (int)cap) {
        ms_fail(err, "%s profile path too long: '%s'", s->kind, name_or_path);
        return NULL;
    }
    FILE *fp = fopen(path, "r");
    if (!fp) {
        if (*by_name && errno == ENOENT)
            unknown_name_error(s, name_or_path, err);
        else
            ms_fail(err, "%s: cannot open %s profile: %s", path, s->kind, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode)) {
        ms_fail(err, "%s: %s profile is not a regular file", path, s->kind);
        fclose(fp);
        return NULL;
    }
    return fp;
}

/* Applies --set KIND.KEY=VALUE overrides after the file: each is validated
 * like the file's value (type, range, and the whole-profile checks that
 * follow), and its [source] line says it was overridden. */
static int apply_sets(parse_ctx *c, const ms_profile_set *sets, int n)
{
    const char *file = c->path;
    for (int k = 0; k < n && !c->failed; k++) {
        char where[600];
        if (sets[k].where)
            snprintf(where, sizeof where, "%s", sets[k].where);
        else
            snprintf(where, sizeof where, "--set %s.%s=%s", c->schema->kind, sets[k].key, sets[k].value);
        c->path = where;
        c->line = 0;
        int i = -1;
        for (int j = 0; j < c->schema->nfields && i < 0; j++)
            if (!strcmp(c->schema->fields[j].key, sets[k].key))
                i = j;
        if (i < 0 || !strcmp(sets[k].key, "name")) {
            char known[1024] = "";
            size_t used = 0;
            for (int j = 0; j < c->schema->nfields && used < sizeof known; j++)
                if (strcmp(c->schema->fields[j].key, "name"))
                    used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "",
                                             c->schema->fields[j].key);
            pf_ctx_fail(c, "unknown %s key '%s' (known: %s)", c->schema->kind, sets[k].key, known);
            break;
        }
        const field_spec *f = &c->schema->fields[i];
        int rc = (f->kind == K_NAME || f->kind == K_TEXT || f->kind == K_DTYPE) ? pf_store_text(c, f, sets[k].value)
                                                                               : pf_store_number(c, f, sets[k].value);
        if (rc)
            break;
        c->seen[i] = 1;
        snprintf(c->raw[i], sizeof c->raw[i], "%s", sets[k].value);
        int g = f->cite ? pf_find_group(c, f->cite) : -1;
        if (g >= 0) {
            char text[700]; /* cut to the source line's room */
            snprintf(text, sizeof text, "override %s (the file's value replaced)", where);
            size_t n = strnlen(text, sizeof c->group_text[g] - 1);
            memcpy(c->group_text[g], text, n);
            c->group_text[g][n] = 0;
            c->group_seen[g] = 1;
        }
    }
    c->path = file;
    return c->failed ? -1 : 0;
}

/* Reads and validates one profile into out (a zeroed struct of the schema's
 * type); name_off/source_off/source_cap locate the name and source members. */
static int load_profile(const profile_schema *s, const char *name_or_path, void *out, size_t name_off,
                        size_t source_off, size_t source_cap, char *file, size_t file_cap,
                        const ms_profile_set *sets, int nsets, ms_err *err)
{
    if (!name_or_path || !*name_or_path)
        return ms_fail(err, "empty %s name", s->kind);
    char path[4096];
    int by_name;
    parse_ctx *c = ms_xcalloc(1, sizeof *c);
    c->fp = open_profile(s, name_or_path, path, sizeof path, &by_name, err);
    if (!c->fp) {
        free(c);
        return -1;
    }
    fclose(c->fp);
    c->fp = NULL;
    c->schema = s;
    c->path = path;
    c->out = out;
    c->err = err;
    pf_collect_groups(c);
    char what[64];
    snprintf(what, sizeof what, "%s profile", s->kind);
    ms_ini_spec spec = {.what = what, .sections = s->sections, .on_value = pf_on_value, .user = c};
    if (ms_ini_parse(path, &spec, err))
        c->failed = 1;
    c->line = 0;
    char with[6000];
    if (!c->failed && nsets && !apply_sets(c, sets, nsets)) {
        /* the whole-profile checks below name the overrides too */
        size_t used = (size_t)snprintf(with, sizeof with, "%.4000s with", path);
        for (int k = 0; k < nsets && used < sizeof with; k++)
            used += (size_t)snprintf(with + used, sizeof with - used, " --set %s.%s=%s", s->kind, sets[k].key,
                                     sets[k].value);
        c->path = with;
    }
    if (!c->failed && !pf_check_required(c) && s == &pf_model_schema)
        pf_check_model(c, out);
    if (!c->failed && by_name) {
        const char *name = (const char *)out + name_off;
        if (strcmp(name, name_or_path))
            pf_ctx_fail(c, "name = '%s' does not match the file name '%s'", name, name_or_path);
    }
    if (!c->failed)
        build_source(c, (char *)out + source_off, source_cap);
    if (!c->failed && snprintf(file, file_cap, "%s", path) >= (int)file_cap)
        pf_ctx_fail(c, "path longer than %zu bytes", file_cap - 1);
    int failed = c->failed;
    free(c);
    return failed ? -1 : 0;
}

int ms_model_load_set(const char *name_or_path, const ms_profile_set *sets, int nsets, ms_model *out, ms_err *err)
{
    ms_model m;
    memset(&m, 0, sizeof m);
    if (load_profile(&pf_model_schema, name_or_path, &m, offsetof(ms_model, name), offsetof(ms_model, source),
                     sizeof m.source, m.file, sizeof m.file, sets, nsets, err) ||
        ms_digest_file(m.file, m.sha256, err))
        return -1;
    ms_out_input(m.file);
    *out = m;
    return 0;
}

int ms_model_load(const char *name_or_path, ms_model *out, ms_err *err)
{
    return ms_model_load_set(name_or_path, NULL, 0, out, err);
}

int ms_platform_load_set(const char *name_or_path, const ms_profile_set *sets, int nsets, ms_platform *out,
                         ms_err *err)
{
    ms_platform p;
    memset(&p, 0, sizeof p);
    ms_framework_defaults(&p.framework_profile, "");
    if (load_profile(&pf_platform_schema, name_or_path, &p, offsetof(ms_platform, name),
                     offsetof(ms_platform, source), sizeof p.source, p.file, sizeof p.file, sets, nsets, err) ||
        ms_digest_file(p.file, p.sha256, err))
        return -1;
    if (p.framework[0] && ms_framework_load(p.framework, &p.framework_profile, err))
        return ms_fail_prefix(err, "%s: [platform] framework = %s", p.file, p.framework);
    ms_out_input(p.file);
    *out = p;
    return 0;
}

int ms_platform_load(const char *name_or_path, ms_platform *out, ms_err *err)
{
    return ms_platform_load_set(name_or_path, NULL, 0, out, err);
}

void ms_framework_defaults(ms_framework *f, const char *name)
{
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->copies_per_expert = 1;
    snprintf(f->copies, sizeof f->copies, "overlapped");
    snprintf(f->host_memory, sizeof f->host_memory, "pinned");
    snprintf(f->surplus, sizeof f->surplus, "fail");
}

int ms_framework_sync_copies(const ms_framework *f)
{
    return f && !strcmp(f->copies, "sync");
}

int ms_framework_pageable(const ms_framework *f)
{
    return f && !strcmp(f->host_memory, "pageable");
}

int ms_framework_surplus_streams(const ms_framework *f)
{
    return f && !strcmp(f->surplus, "stream");
}

/* The keys with a set of words: one line naming file, key and value. */
static int check_framework_words(const ms_framework *f, ms_err *err)
{
    if (strcmp(f->copies, "overlapped") && strcmp(f->copies, "sync"))
        return ms_fail(err, "%s: [framework] copies = %s: expected overlapped or sync", f->file, f->copies);
    if (strcmp(f->host_memory, "pinned") && strcmp(f->host_memory, "pageable"))
        return ms_fail(err, "%s: [framework] host_memory = %s: expected pinned or pageable", f->file,
                       f->host_memory);
    if (strcmp(f->surplus, "fail") && strcmp(f->surplus, "stream"))
        return ms_fail(err, "%s: [framework] surplus = %s: expected fail or stream", f->file, f->surplus);
    return 0;
}

int ms_framework_load(const char *name_or_path, ms_framework *out, ms_err *err)
{
    ms_framework f;
    ms_framework_defaults(&f, "");
    if (load_profile(&pf_framework_schema, name_or_path, &f, offsetof(ms_framework, name),
                     offsetof(ms_framework, source), sizeof f.source, f.file, sizeof f.file, NULL, 0, err) ||
        check_framework_words(&f, err) || ms_digest_file(f.file, f.sha256, err))
        return -1;
    if (f.copies_per_expert == 0) /* the key's 0: one call per matrix of the model */
        f.copies_per_expert = MS_COPIES_PER_MATRIX;
    ms_out_input(f.file);
    *out = f;
    return 0;
}

int ms_framework_resolve(const char *name, ms_framework *out, int *have, ms_err *err)
{
    *have = 0;
    if (!name || !*name)
        return 0;
    if (!strcmp(name, "none")) {
        ms_framework_defaults(out, "none");
    } else if (ms_framework_load(name, out, err)) {
        return -1;
    }
    *have = 1;
    return 0;
}

/* ---- listing ---- */

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int ms_profile_list(const char *kind, char ***names, int *n, ms_err *err)
{
    *names = NULL;
    *n = 0;
    if (!kind || (strcmp(kind, "models") && strcmp(kind, "platforms") && strcmp(kind, "frameworks")))
        return ms_fail(err, "profile kind '%s' is not 'models', 'platforms' or 'frameworks'", kind ? kind : "(null)");
    char base[4096], dir[4096];
    if (ms_path_profiles(base, sizeof base, err))
        return -1;
    if (snprintf(dir, sizeof dir, "%s/%s", base, kind) >= (int)sizeof dir)
        return ms_fail(err, "profile directory path too long: '%s'", base);
    DIR *d = opendir(dir);
    if (!d)
        return ms_fail(err, "%s: cannot open profile directory: %s", dir, strerror(errno));
    char **list = NULL;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 4 || strcmp(e->d_name + len - 4, ".ini"))
            continue;
        list = ms_xrealloc(list, (size_t)count + 1, sizeof *list);
        list[count] = ms_xstrdup(e->d_name);
        list[count][len - 4] = '\0';
        count++;
    }
    closedir(d);
    if (count)
        qsort(list, (size_t)count, sizeof *list, compare_names);
    *names = list;
    *n = count;
    return 0;
}

void ms_profile_list_free(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
