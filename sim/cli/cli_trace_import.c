/* `moesim trace import --format FORMAT IN OUT.h5`: converts a routing dump to
 * trace format v2 and prints the import report on stdout. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/cli/cli_trace_common.h"
#include "traces/import/import.h"
#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/core/params.h"

typedef struct {
    const char *name;
    int (*import)(const char *in, const char *out, const ms_import_opts *o, ms_import_report *rep, ms_err *err);
    int takes_opts; /* model / dimension flags apply */
    const char *help;
    double out_per_in; /* output bytes per input byte, at most (the size estimate) */
} import_format;

/* route-csv carries its model in its header; it takes no model flags. */
static int import_routecsv(const char *in, const char *out, const ms_import_opts *o, ms_import_report *rep,
                           ms_err *err)
{
    (void)o;
    return ms_import_routecsv(in, out, rep, err);
}

/* One line per importer; the usage text and error messages list this table.
 * out_per_in, for the size estimate: route-csv spends at least 20 text
 * bytes per cell (9 stored), jsonl ~60 per (token, layer) line of K cells
 * (9 K stored), a dense-csv probability at least 2 ("0,") for 4 stored, npy
 * 4 or 8 per probability for 4 (+ the top-k). */
static const import_format formats[] = {
    {"route-csv", import_routecsv, 0, "route_trace v1 CSV (BigMoeOnEdge llama.cpp recorder)", 1.0},
    {"jsonl", ms_import_jsonl, 1, "one JSON object per (request, token, layer) with top-k ids + weights", 1.0},
    {"dense-csv", ms_import_densecsv, 1, "directory of layer<N>.csv, tokens x experts softmax probabilities", 2.0},
    {"npy", ms_import_npy, 1, "NumPy array [tokens, layers, experts] of probabilities (Python converter)", 1.5},
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
    fputs("usage: moesim trace import --format FORMAT [options] [--force] IN OUT.h5\n"
          "\n"
          "Converts a routing dump IN to a trace file OUT.h5 (format v2, checksummed)\n"
          "and prints what was imported, including cells the dump lacks (kept as id -1).\n"
          "OUT.h5 is written through a temporary file beside it, renamed into place\n"
          "only when the whole dump converted; it must not be IN, a device or a folder.\n"
          "\n"
          "formats:\n",
          f);
    for (size_t i = 0; i < N_FORMATS; i++)
        fprintf(f, "  %-12s %s\n", formats[i].name, formats[i].help);
    fputs("\n"
          "options (jsonl, dense-csv, npy; route-csv reads them from its header):\n"
          "  --model PROFILE     L, J, K, expert and dense bytes from a model profile\n"
          "  --experts J         routed experts per layer (without --model; dense-csv: from the header)\n"
          "  --layers L          MoE layers (default: from the data)\n"
          "  --topk K            experts per token (jsonl default: the first line's list length)\n"
          "  --expert-bytes B    bytes of one routed expert (required without --model)\n"
          "  --dense-bytes B     non-expert bytes per layer (default 0 without --model)\n"
          "  --fields K=N,...    jsonl field names; keys request, token, layer, experts, weights, phase\n"
          "                      (defaults request_id, token_idx, layer, topk_ids, topk_weights, is_prompt)\n"
          "  --prompt-len P      jsonl: tokens < P are the prompt (the phase field is then not read)\n"
          "  --probs-kind KIND   jsonl: topk_renorm (default; weights sum to 1) or topk_raw\n"
          "  --pattern GLOB      dense-csv: layer file names, '*' = layer number (default layer*.csv)\n"
          "\n"
          "  --force             write even when the estimated output (from IN's size) is more than\n"
          "                      the free space of OUT's file system (on a terminal the estimate is\n"
          "                      printed first, and a progress line while writing)\n",
          f);
}

static int parse_u32_flag(const char *flag, const char *v, uint32_t lo, uint32_t *out)
{
    unsigned long long x;
    if (ms_parse_u64(v, &x) || x < lo || x > UINT32_MAX)
        return ms_cli_usage("trace import: %s: '%s' is not an integer >= %u", flag, v, lo);
    *out = (uint32_t)x;
    return 0;
}

static int parse_bytes_flag(const char *flag, const char *v, uint64_t lo, uint64_t *out)
{
    double b;
    if (ms_parse_bytes(v, &b) || b < (double)lo || b > 1e18 || b != (double)(uint64_t)b)
        return ms_cli_usage("trace import: %s: '%s' is not a byte count >= %llu", flag, v, (unsigned long long)lo);
    *out = (uint64_t)b;
    return 0;
}

/* Handles one model / format option at argv[*i]; 1 handled, 0 not an
 * option of this kind, 2 usage error (already printed). */
static int parse_opt(int argc, char **argv, int *i, ms_import_opts *o, int *n_opts)
{
    static const char *const names[] = {"--model",   "--experts",   "--layers",     "--topk",    "--expert-bytes",
                                        "--dense-bytes", "--fields", "--prompt-len", "--pattern", "--probs-kind"};
    const char *a = argv[*i];
    size_t k = 0;
    while (k < sizeof names / sizeof names[0] && strcmp(a, names[k]))
        k++;
    if (k == sizeof names / sizeof names[0])
        return 0;
    if (*i + 1 >= argc)
        return ms_cli_usage("trace import: %s needs a value", a);
    const char *v = argv[++*i];
    (*n_opts)++;
    int rc = 0;
    switch (k) {
    case 0: o->model = v; break;
    case 1: rc = parse_u32_flag(a, v, 1, &o->experts); break;
    case 2: rc = parse_u32_flag(a, v, 1, &o->layers); break;
    case 3: rc = parse_u32_flag(a, v, 1, &o->topk); break;
    case 4: rc = parse_bytes_flag(a, v, 1, &o->expert_bytes); break;
    case 5: rc = parse_bytes_flag(a, v, 0, &o->dense_bytes); o->have_dense_bytes = 1; break;
    case 6: o->fields = v; break;
    case 7: rc = parse_u32_flag(a, v, 1, &o->prompt_len); break;
    case 8: o->pattern = v; break;
    default: {
        ms_probs_kind pk;
        if (ms_probs_kind_parse(v, &pk) || pk == MS_PROBS_FULL)
            return ms_cli_usage("trace import: --probs-kind: '%s' is not topk_renorm or topk_raw", v);
        o->probs_kind = (int)pk;
    }
    }
    return rc ? 2 : 1;
}

/* Bytes of IN (a directory: of the regular files in it, which are also
 * recorded as inputs: OUT must not overwrite a layer file). */
static uint64_t input_bytes(const char *in)
{
    struct stat st;
    if (stat(in, &st) != 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    uint64_t total = 0;
    DIR *d = opendir(in);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", in, e->d_name) >= (int)sizeof path)
            continue;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            total += (uint64_t)st.st_size;
            ms_out_input(path);
        }
    }
    if (d)
        closedir(d);
    return total;
}

int ms_cli_trace_import(int argc, char **argv)
{
    const char *format = NULL, *pos[2] = {NULL, NULL};
    int n_pos = 0, n_opts = 0, force = 0;
    char known[256];
    known_formats(known, sizeof known);
    ms_import_opts opts;
    ms_import_opts_init(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = parse_opt(argc, argv, &i, &opts, &n_opts);
        if (r == 2)
            return 2;
        if (r == 1)
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--force")) {
            force = 1;
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
            return ms_cli_usage("trace import: unexpected argument '%s' (usage: moesim trace import --format FORMAT [options] IN OUT.h5)", a);
        }
    }
    if (!format)
        return ms_cli_usage("trace import: --format is required (%s)", known);
    if (n_pos < 2)
        return ms_cli_usage("trace import: missing %s (usage: moesim trace import --format FORMAT [options] IN OUT.h5)",
                            n_pos == 0 ? "IN and OUT.h5" : "OUT.h5");
    const import_format *fmt = NULL;
    for (size_t i = 0; i < N_FORMATS; i++)
        if (!strcmp(formats[i].name, format))
            fmt = &formats[i];
    if (!fmt)
        return ms_cli_usage("trace import: unknown format '%s' (known formats: %s)", format, known);

    if (n_opts && !fmt->takes_opts)
        return ms_cli_usage("trace import: --format %s takes no model or field options (its header has them)",
                            fmt->name);

    ms_err err = {{0}};
    ms_out_input(pos[0]);
    ms_out_input(opts.model);
    uint64_t in_bytes = input_bytes(pos[0]);
    if (ms_out_check("OUT", pos[1], &err))
        return ms_cli_error(err.msg);
    char basis[96];
    snprintf(basis, sizeof basis, "at most, from the input's %.1f MiB", (double)in_bytes / 1048576.0);
    if (ms_trace_cli_space("OUT", pos[1], (uint64_t)((double)in_bytes * fmt->out_per_in) + (64u << 10), basis, force,
                           &err))
        return ms_cli_error(err.msg);
    ms_import_report rep;
    ms_trace_cli_progress_begin("trace import", 0);
    int rc = fmt->import(pos[0], pos[1], &opts, &rep, &err);
    ms_trace_cli_progress_end();
    if (rc != 0)
        return ms_cli_error(err.msg);
    char line[2048];
    ms_import_report_format(&rep, line, sizeof line);
    printf("%s\nwrote %s\n", line, pos[1]);
    return 0;
}
