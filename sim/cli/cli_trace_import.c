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
    /* several inputs into one trace; NULL = one input only */
    int (*import_many)(const char *const *in, size_t n, const char *out, const ms_import_opts *o,
                       ms_import_report *rep, ms_err *err);
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
    {"route-csv", import_routecsv, NULL, "route_trace v1 CSV (BigMoeOnEdge llama.cpp recorder)", 1.0},
    {"jsonl", ms_import_jsonl, ms_import_jsonl_files,
     "one JSON object per (request, token, layer) with top-k ids + weights (IN... : several files)", 1.0},
    {"dense-csv", ms_import_densecsv, NULL, "directory of layer<N>.csv, tokens x experts softmax probabilities", 2.0},
    {"npy", ms_import_npy, NULL, "NumPy array [tokens, layers, experts] of probabilities (Python converter)", 1.5},
    {"sglang", ms_import_sglang, NULL, "SGLang API responses with routed_experts (--enable-return-routed-experts)", 1.5},
    {"vllm", ms_import_vllm, NULL, "vLLM API responses with choices[].routed_experts, or its .npy", 4.0},
    {"hf-logits", ms_import_hf_logits, NULL, "HF output_router_logits: torch.save (.pt), .npy or .npz (Python converter)",
     4.0},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

/* "route-csv, jsonl, dense-csv, npy) or engine outputs (sglang, vllm,
 * hf-logits": dumps first, then the serving engines' outputs (formats[]
 * from FIRST_ENGINE on); callers wrap it in parentheses. */
#define FIRST_ENGINE 4
static void known_formats(char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; i < N_FORMATS; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", i == FIRST_ENGINE ? ") or engine outputs (" : i ? ", " : "",
                 formats[i].name);
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
          "options (every format but route-csv, which reads them from its header; an option\n"
          "a format does not take is an error):\n"
          "  --model PROFILE     L, J, K, expert and dense bytes from a model profile\n"
          "  --experts J         routed experts per layer (without --model; dense-csv: from the header)\n"
          "  --layers L          MoE layers (default: from the data)\n"
          "  --topk K            experts per token (jsonl default: the first line's list length)\n"
          "  --expert-bytes B    bytes of one routed expert (required without --model)\n"
          "  --dense-bytes B     non-expert bytes per layer (default 0 without --model)\n"
          "jsonl (IN... : several files into one trace, requests kept apart per file):\n"
          "  --fields K=N,...    field names; keys request, token, layer, experts, weights, phase,\n"
          "                      prompt_len (defaults request_id, token_idx, layer, topk_ids,\n"
          "                      topk_weights, is_prompt; prompt_len is read only when named)\n"
          "  --request-key F,... fields whose values together name a request (ids then 0, 1, ...)\n"
          "  --token-pos MODE    absolute (default: position in the request, prompt first),\n"
          "                      per-request (a request starting with decode counts from its first\n"
          "                      generated token) or per-step (restarts every step; file order)\n"
          "  --prompt-len P      tokens < P are the prompt (the phase field is then not read);\n"
          "                      with --token-pos per-step: the first P steps are the prompt\n"
          "  --phase decode      every line is a generated token (a decode-only dump without a phase\n"
          "                      field; the prompt is not in the dump: see docs/traces.md)\n"
          "  --probs-kind KIND   topk_renorm (default; weights sum to 1), topk_raw, or topk_ids (expert\n"
          "                      ids only, no weights field: 1/K placeholders) (--probs too)\n"
          "dense-csv:\n"
          "  --pattern GLOB      layer file names, '*' = layer number (default layer*.csv)\n"
          "  --layer-base N      file number of layer 0 (default: the lowest, renumbered)\n"
          "  --id-columns C,...  columns that are not experts (also detected by name: token_id, ...)\n"
          "  --seq-column C      column naming the sequence (default: `request` if present)\n"
          "  --tokens-per-seq N  every N rows are one request\n"
          "  --prompt-len P      the first P rows of a request are its prompt, later rows decode steps\n"
          "  --probs-kind KIND   full (default: raw softmax over all experts), topk_raw (raw softmax\n"
          "                      kept only at the top-k, other cells 0 or empty) or topk_renorm\n"
          "sglang, vllm (expert ids only: probs_kind topk_ids):\n"
          "  --engine-layers N   layers of the engine's array, dense ones included (default: L);\n"
          "                      layers whose cells are all 0 are dropped as dense\n"
          "  --start-len S       the requests' routed_experts_start_len / routed_experts_prompt_start\n"
          "  --prompt-len P      prompt length when the response has no usage.prompt_tokens\n"
          "hf-logits:\n"
          "  --layout LTJ|TLJ    axis order of a .npy (default LTJ = [layers, tokens, experts])\n"
          "  --prompt-len P      rows < P are the prompt, later rows decode steps\n"
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

/* Model / format options and the formats that take them (bit i = formats[i]). */
enum { FM_ROUTECSV = 1, FM_JSONL = 2, FM_DENSE = 4, FM_NPY = 8, FM_SGLANG = 16, FM_VLLM = 32, FM_HF = 64 };
#define FM_MODEL (FM_JSONL | FM_DENSE | FM_NPY | FM_SGLANG | FM_VLLM | FM_HF)
#define FM_ENGINE (FM_SGLANG | FM_VLLM)
static const struct {
    const char *name;
    unsigned formats;
} opt_table[] = {
    {"--model", FM_MODEL},          {"--experts", FM_MODEL},        {"--layers", FM_MODEL},
    {"--topk", FM_MODEL},           {"--expert-bytes", FM_MODEL},   {"--dense-bytes", FM_MODEL},
    {"--fields", FM_JSONL},         {"--prompt-len", FM_JSONL | FM_DENSE | FM_ENGINE | FM_HF},
    {"--pattern", FM_DENSE},        {"--probs-kind", FM_JSONL | FM_DENSE},
    {"--probs", FM_JSONL | FM_DENSE}, {"--request-key", FM_JSONL},  {"--token-pos", FM_JSONL},
    {"--layer-base", FM_DENSE},     {"--id-columns", FM_DENSE},     {"--seq-column", FM_DENSE},
    {"--tokens-per-seq", FM_DENSE}, {"--engine-layers", FM_ENGINE}, {"--start-len", FM_ENGINE},
    {"--layout", FM_HF},            {"--phase", FM_JSONL},
};
#define N_OPTS (sizeof opt_table / sizeof opt_table[0])

/* Handles one model / format option at argv[*i]; 1 handled, 0 not an
 * option of this kind, 2 usage error (already printed).  *given gets the
 * option's bit (checked against the format once it is known). */
static int parse_opt(int argc, char **argv, int *i, ms_import_opts *o, uint32_t *given)
{
    const char *a = argv[*i];
    size_t k = 0;
    while (k < N_OPTS && strcmp(a, opt_table[k].name))
        k++;
    if (k == N_OPTS)
        return 0;
    if (*i + 1 >= argc)
        return ms_cli_usage("trace import: %s needs a value", a);
    const char *v = argv[++*i];
    *given |= 1u << k;
    int rc = 0;
    uint32_t u = 0;
    switch (k) {
    case 0: o->model = v; break;
    case 1: rc = parse_u32_flag(a, v, 1, &o->experts); break;
    case 2: rc = parse_u32_flag(a, v, 1, &o->layers); break;
    case 3: rc = parse_u32_flag(a, v, 1, &o->topk); break;
    case 4: rc = parse_bytes_flag(a, v, 1, &o->expert_bytes); break;
    case 5: rc = parse_bytes_flag(a, v, 0, &o->dense_bytes); o->have_dense_bytes = 1; break;
    case 6: o->fields = v; break;
    case 7:
        if (!strcmp(v, "0"))
            return ms_cli_usage("trace import: --prompt-len 0: a prompt has at least one token (a jsonl dump with no "
                                "prompt lines: --phase decode)");
        rc = parse_u32_flag(a, v, 1, &o->prompt_len);
        break;
    case 8: o->pattern = v; break;
    case 9:
    case 10: {
        ms_probs_kind pk;
        if (ms_probs_kind_parse(v, &pk))
            return ms_cli_usage("trace import: %s: '%s' is not full, topk_renorm, topk_raw or topk_ids", a, v);
        o->probs_kind = (int)pk;
        break;
    }
    case 11: o->request_key = v; break;
    case 12: {
        ms_token_pos tp;
        if (ms_token_pos_parse(v, &tp))
            return ms_cli_usage("trace import: --token-pos: '%s' is not absolute, per-request or per-step", v);
        o->token_pos = (int)tp;
        break;
    }
    case 13: rc = parse_u32_flag(a, v, 0, &u); o->layer_base = (long)u; break;
    case 14: o->id_columns = v; break;
    case 15: o->seq_column = v; break;
    case 16: rc = parse_u32_flag(a, v, 1, &o->tokens_per_seq); break;
    case 17: rc = parse_u32_flag(a, v, 1, &o->engine_layers); break;
    case 18: rc = parse_u32_flag(a, v, 0, &o->start_len); break;
    case 20:
        if (strcmp(v, "decode"))
            return ms_cli_usage("trace import: --phase: '%s' is not decode (without --phase the phase field, or "
                                "--prompt-len, says which lines are the prompt)",
                                v);
        o->all_decode = 1;
        break;
    default:
        if (strcmp(v, "LTJ") && strcmp(v, "TLJ"))
            return ms_cli_usage("trace import: --layout: '%s' is not LTJ or TLJ", v);
        o->layout = v;
    }
    return rc ? 2 : 1;
}

/* Every option given must apply to the format (bit f of opt_table). */
static int check_opts_apply(uint32_t given, size_t f, const char *format)
{
    for (size_t k = 0; k < N_OPTS; k++) {
        if (!(given & (1u << k)) || (opt_table[k].formats & (1u << f)))
            continue;
        char fl[128] = "";
        for (size_t i = 0; i < N_FORMATS; i++)
            if (opt_table[k].formats & (1u << i)) {
                size_t n = strlen(fl);
                snprintf(fl + n, sizeof fl - n, "%s%s", n ? ", " : "", formats[i].name);
            }
        if (f == 0)
            return ms_cli_usage("trace import: --format route-csv takes no model or field options (its header has "
                                "them): %s",
                                opt_table[k].name);
        return ms_cli_usage("trace import: %s does not apply to --format %s (only %s)", opt_table[k].name, format, fl);
    }
    return 0;
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

#define MAX_INPUTS 256

int ms_cli_trace_import(int argc, char **argv)
{
    const char *format = NULL, *pos[MAX_INPUTS + 1];
    int n_pos = 0, force = 0;
    uint32_t given = 0;
    char known[256];
    known_formats(known, sizeof known);
    ms_import_opts opts;
    ms_import_opts_init(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = parse_opt(argc, argv, &i, &opts, &given);
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
        } else if (n_pos < MAX_INPUTS + 1) {
            pos[n_pos++] = a;
        } else {
            return ms_cli_usage("trace import: more than %d inputs", MAX_INPUTS);
        }
    }
    if (!format)
        return ms_cli_usage("trace import: --format is required (%s)", known);
    if (n_pos < 2)
        return ms_cli_usage("trace import: missing %s (usage: moesim trace import --format FORMAT [options] IN OUT.h5)",
                            n_pos == 0 ? "IN and OUT.h5" : "OUT.h5");
    size_t fi = 0;
    while (fi < N_FORMATS && strcmp(formats[fi].name, format))
        fi++;
    if (fi == N_FORMATS)
        return ms_cli_usage("trace import: unknown format '%s' (known formats: %s)", format, known);
    const import_format *fmt = &formats[fi];
    if (n_pos > 2 && !fmt->import_many)
        return ms_cli_usage("trace import: unexpected argument '%s' (usage: moesim trace import --format FORMAT "
                            "[options] IN OUT.h5; several inputs: jsonl only)",
                            pos[2]);
    if (check_opts_apply(given, fi, format))
        return 2;
    const char *out = pos[n_pos - 1];
    int n_in = n_pos - 1;

    ms_err err = {{0}};
    uint64_t in_bytes = 0;
    for (int i = 0; i < n_in; i++) {
        ms_out_input(pos[i]);
        in_bytes += input_bytes(pos[i]);
    }
    ms_out_input(opts.model);
    if (ms_out_check("OUT", out, &err))
        return ms_cli_error(err.msg);
    char basis[96];
    snprintf(basis, sizeof basis, "at most, from the input's %.1f MiB", (double)in_bytes / 1048576.0);
    if (ms_trace_cli_space("OUT", out, (uint64_t)((double)in_bytes * fmt->out_per_in) + (64u << 10), basis, force,
                           &err))
        return ms_cli_error(err.msg);
    ms_import_report rep;
    ms_trace_cli_progress_begin("trace import", 0);
    int rc = n_in > 1 ? fmt->import_many(pos, (size_t)n_in, out, &opts, &rep, &err)
                      : fmt->import(pos[0], out, &opts, &rep, &err);
    ms_trace_cli_progress_end();
    if (rc != 0)
        return ms_cli_error(err.msg);
    char line[2048];
    ms_import_report_format(&rep, line, sizeof line);
    printf("%s\nwrote %s\n", line, out);
    return 0;
}
