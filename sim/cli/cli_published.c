/* `moesim published`: the timing model against published measurements
 * (sim/apps/published.h, docs/published.md). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "sim/apps/published.h"
#include "sim/apps/published_presets.h"
#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"
#include "sim/core/paths.h"

static const char published_usage[] =
    "usage: moesim published [--rows FILE...] [--only SYSTEM] [--json] [--out DIR] [--jobs N] [--fit] [--presets]\n"
    "\n"
    "Runs every row of published measurements (one [row NAME] per published number of a real\n"
    "offloading system: docs/published.md) with its system's preset on its model and platform, and\n"
    "prints measured, predicted and predicted / measured per row, then the median and worst\n"
    "|ln(predicted / measured)| of the calibration and the evaluation rows, and per system.\n"
    "Writes DIR/published.csv, DIR/published.json and DIR/published.png (log-log, predicted vs\n"
    "measured) and the rows' generated workloads DIR/published-*.h5.\n"
    "--rows FILE...  the row files (every argument up to the next flag); default: every\n"
    "                profiles/published/*.ini of the data folder, by file name\n"
    "--only SYSTEM   only the rows of this system\n"
    "--jobs N        runs at once, each in a worker process (default 1); same bytes at any N\n"
    "--fit           fit the framework profiles' layer_s and iteration_s on the calibration rows\n"
    "                (Nelder-Mead on the mean squared ln ratio), write them to DIR/frameworks/NAME.ini\n"
    "                with their provenance, and report every row with the fitted figures\n"
    "--presets       list the systems: policies, framework, knobs\n"
    "Defaults: --out moesim-published --jobs 1.\n";

typedef struct {
    ms_pub_opts o;
    const char **files;
    int nfiles;
    int json, fit, presets;
} pub_flags;

static int parse_flags(int argc, char **argv, pub_flags *f)
{
    f->files = ms_xcalloc((size_t)argc, sizeof *f->files);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(published_usage, stdout);
            exit(0);
        }
        if (!strcmp(a, "--json") || !strcmp(a, "--fit") || !strcmp(a, "--presets")) {
            f->json |= !strcmp(a, "--json");
            f->fit |= !strcmp(a, "--fit");
            f->presets |= !strcmp(a, "--presets");
            continue;
        }
        if (!strcmp(a, "--rows")) {
            int start = f->nfiles;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                f->files[f->nfiles++] = argv[++i];
            if (f->nfiles == start)
                return ms_cli_usage("published: --rows needs at least one FILE");
            continue;
        }
        if (i + 1 >= argc)
            return ms_cli_usage("published: %s needs a value (see moesim published --help)", a);
        const char *val = argv[++i];
        if (!strcmp(a, "--only")) {
            if (!ms_pub_preset_find(val)) {
                char names[512];
                return ms_cli_usage("published: --only %s: no such system (%s)", val,
                                    ms_pub_preset_names(names, sizeof names));
            }
            f->o.only = val;
        } else if (!strcmp(a, "--out")) {
            f->o.out_dir = val;
        } else if (!strcmp(a, "--jobs") || !strcmp(a, "-j")) {
            unsigned long long u;
            if (ms_parse_u64(val, &u) || u < 1 || u > 4096)
                return ms_cli_usage("published: %s %s: expected a whole number in [1, 4096]", a, val);
            f->o.jobs = (int)u;
        } else {
            return ms_cli_usage("published: unknown option '%s' (see moesim published --help)", a);
        }
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The shipped row files: the .ini files of profiles/published, sorted. */
static int default_rows(ms_pub_rows *rows, ms_err *err)
{
    char base[4096], dir[4200];
    if (ms_path_profiles(base, sizeof base, err))
        return -1;
    snprintf(dir, sizeof dir, "%s/published", base);
    DIR *d = opendir(dir);
    if (!d)
        return ms_fail(err, "published: no row files: cannot open %s (give --rows FILE)", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ini") || e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            names = ms_xrealloc(names, cap, sizeof *names);
        }
        names[n++] = ms_xstrdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    int rc = n ? 0 : ms_fail(err, "published: no row files in %s (give --rows FILE)", dir);
    for (size_t i = 0; i < n; i++) {
        char p[4500];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (!rc)
            rc = ms_pub_rows_read(p, rows, err);
        free(names[i]);
    }
    free(names);
    return rc;
}

static void keep_only(ms_pub_rows *rows, const char *system)
{
    size_t m = 0;
    for (size_t i = 0; i < rows->n; i++)
        if (!system || !strcmp(rows->row[i].system, system))
            rows->row[m++] = rows->row[i];
    rows->n = m;
}

static int check_outputs(const pub_flags *f, ms_err *err)
{
    if (ms_out_make_dir("published: --out", f->o.out_dir, err))
        return -1;
    static const char *const outs[] = {"published.csv", "published.json", "published.png"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", f->o.out_dir, outs[i]);
        if (ms_out_check("published", p, err))
            return -1;
    }
    return 0;
}

/* The command as typed, for the fitted profiles' provenance. */
static void command_text(int argc, char **argv, char *buf, size_t n)
{
    size_t u = (size_t)snprintf(buf, n, "moesim published");
    for (int i = 1; i < argc && u < n; i++)
        u += (size_t)snprintf(buf + u, n - u, " %s", argv[i]);
}

int ms_cli_published(int argc, char **argv)
{
    pub_flags f = {.o = {.out_dir = "moesim-published", .jobs = 1}};
    int rc = parse_flags(argc, argv, &f);
    if (rc) {
        free(f.files);
        return rc;
    }
    if (f.presets) {
        ms_pub_presets_list(stdout);
        free(f.files);
        return 0;
    }
    ms_err err;
    ms_pub_rows rows = {0};
    rc = 0;
    for (int i = 0; i < f.nfiles && !rc; i++)
        rc = ms_pub_rows_read(f.files[i], &rows, &err);
    if (!f.nfiles)
        rc = default_rows(&rows, &err);
    free(f.files);
    if (!rc) {
        keep_only(&rows, f.o.only);
        rc = check_outputs(&f, &err);
    }
    if (rc) {
        ms_pub_rows_free(&rows);
        return ms_cli_error(err.msg);
    }
    if (isatty(STDERR_FILENO))
        f.o.progress = stderr;
    ms_pub_fit fit = {0};
    if (f.fit) {
        char cmd[2048];
        command_text(argc, argv, cmd, sizeof cmd);
        if (ms_published_fit(&f.o, &rows, cmd, &fit, f.json ? stderr : stdout, &err) ||
            ms_published_write_frameworks(f.o.out_dir, &fit, &err)) {
            ms_published_fit_free(&fit);
            ms_pub_rows_free(&rows);
            return ms_cli_error(err.msg);
        }
        f.o.frameworks = fit.fw;
        f.o.n_frameworks = fit.n;
    }
    ms_pub_result *res = ms_xcalloc(rows.n ? rows.n : 1, sizeof *res);
    rc = ms_published_run(&f.o, &rows, res, &err) || ms_published_write(&f.o, &rows, res, &err);
    if (!rc) {
        if (f.json) {
            cJSON *j = ms_published_json(&rows, res);
            char *s = cJSON_Print(j);
            puts(s);
            free(s);
            cJSON_Delete(j);
        } else {
            ms_published_table(stdout, &rows, res);
        }
        for (size_t i = 0; i < rows.n; i++)
            if (res[i].error[0])
                rc = 1; /* every row must run: each one that did not says why in the table */
    } else {
        ms_cli_error(err.msg);
    }
    free(res);
    ms_published_fit_free(&fit);
    ms_pub_rows_free(&rows);
    return rc ? 1 : 0;
}
