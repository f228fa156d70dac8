/* `moesim trace import --format FORMAT IN OUT.h5`: converts a routing dump to
 * trace format v1 and prints the import report on stdout. */
#include <stdio.h>
#include <string.h>

#include "import.h"
#include "../sim/cli.h"

typedef struct {
    const char *name;
    int (*import)(const char *in, const char *out, ms_import_report *rep, ms_err *err);
    const char *help;
} import_format;

/* One line per importer; the usage text and error messages list this table. */
static const import_format formats[] = {
    {"route-csv", ms_import_routecsv, "route_trace v1 CSV (BigMoeOnEdge llama.cpp recorder)"},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

static void known_formats(char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; i < N_FORMATS; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", formats[i].name);
    }
}

static void print_usage(FILE *f)
{
    fputs("usage: moesim trace import --format FORMAT IN OUT.h5\n"
          "\n"
          "Converts a routing dump IN to a trace file OUT.h5 (format v1) and prints\n"
          "what was imported, including cells the dump lacks (kept as id -1).\n"
          "\n"
          "formats:\n",
          f);
    for (size_t i = 0; i < N_FORMATS; i++)
        fprintf(f, "  %-12s %s\n", formats[i].name, formats[i].help);
}

int ms_cli_trace_import(int argc, char **argv)
{
    const char *format = NULL, *pos[2] = {NULL, NULL};
    int n_pos = 0;
    char known[256];
    known_formats(known, sizeof known);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--format")) {
            if (i + 1 >= argc)
                return ms_cli_usage("trace import: --format needs a value (%s)", known);
            format = argv[++i];
        } else if (!strncmp(a, "--format=", 9)) {
            format = a + 9;
        } else if (a[0] == '-' && a[1] != '\0') {
            return ms_cli_usage("trace import: unknown option '%s' (see `moesim trace import --help`)", a);
        } else if (n_pos < 2) {
            pos[n_pos++] = a;
        } else {
            return ms_cli_usage("trace import: unexpected argument '%s' (usage: moesim trace import --format FORMAT IN OUT.h5)", a);
        }
    }
    if (!format)
        return ms_cli_usage("trace import: --format is required (%s)", known);
    if (n_pos < 2)
        return ms_cli_usage("trace import: missing %s (usage: moesim trace import --format FORMAT IN OUT.h5)",
                            n_pos == 0 ? "IN and OUT.h5" : "OUT.h5");
    const import_format *fmt = NULL;
    for (size_t i = 0; i < N_FORMATS; i++)
        if (!strcmp(formats[i].name, format))
            fmt = &formats[i];
    if (!fmt)
        return ms_cli_usage("trace import: unknown format '%s' (known formats: %s)", format, known);

    ms_import_report rep;
    ms_err err = {{0}};
    if (fmt->import(pos[0], pos[1], &rep, &err) != 0)
        return ms_cli_error(err.msg);
    char line[2048];
    ms_import_report_format(&rep, line, sizeof line);
    printf("%s\nwrote %s\n", line, pos[1]);
    return 0;
}
