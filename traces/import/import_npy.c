/* npy and hf-logits importers: run a Python converter of traces/tools
 * (npy2trace.py: a NumPy array [tokens, layers, experts] of probabilities;
 * logits2trace.py: HF output_router_logits) that writes dense-csv files into
 * a temporary directory, then import those (traces/import/import.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "traces/import/import.h"
#include "sim/core/paths.h"

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            remove(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Last non-empty line of text, without a leading "moesim: ". */
static void last_line(char *text, char *out, size_t cap)
{
    char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        *--end = '\0';
    char *start = strrchr(text, '\n');
    start = start ? start + 1 : text;
    if (!strncmp(start, "moesim: ", 8))
        start += 8;
    snprintf(out, cap, "%s", start);
}

/* Runs python SCRIPT IN OUT_DIR [extra...] (at most 4 extra arguments);
 * stdout + stderr captured, the last line is the error. */
static int run_converter(const char *name, const char *in_path, const char *out_dir, const char *const *extra,
                         ms_err *err)
{
    const char *py = ms_path_python();
    char tools[4096], script[4200];
    if (ms_path_tools(tools, sizeof tools, err))
        return ms_fail_prefix(err, "%s: the converter %s", in_path, name);
    snprintf(script, sizeof script, "%s/%s", tools, name);
    const char *argv[10] = {py, script, in_path, out_dir};
    for (int i = 0; extra && extra[i] && i < 4; i++)
        argv[4 + i] = extra[i];
    int fd[2];
    if (pipe(fd) != 0)
        return ms_fail(err, "%s: pipe: %s", in_path, strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return ms_fail(err, "%s: fork: %s", in_path, strerror(errno));
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        execvp(py, (char *const *)argv);
        fprintf(stderr, "moesim: %s: cannot run the converter %s with %s: %s (set MOESIM_PYTHON)\n", in_path, name,
                py, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char text[8192];
    size_t n = 0;
    for (;;) {
        char chunk[1024];
        ssize_t got = read(fd[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) { /* keep the tail */
            if (n + 1 >= sizeof text) {
                memmove(text, text + sizeof text / 2, n - sizeof text / 2);
                n -= sizeof text / 2;
            }
            text[n++] = chunk[i] ? chunk[i] : ' ';
        }
    }
    text[n] = '\0';
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char line[900];
    last_line(text, line, sizeof line);
    if (!*line)
        return ms_fail(err, "%s: converter %s (%s) failed with status %d", in_path, name, py, status);
    return ms_fail(err, "%s", line);
}

/* Converts in_path into dense-csv files in a temporary directory beside
 * out_path and imports them with opts oo (source and report named after
 * the input). */
static int import_converted(const char *script, const char *const *extra, const char *kind, const char *unit,
                            const char *in_path, const char *out_path, ms_import_opts *oo, ms_import_report *rep,
                            ms_err *err)
{
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (access(in_path, R_OK) != 0)
        return ms_fail(err, "%s: cannot open: %s", in_path, strerror(errno));
    size_t n = strlen(out_path) + sizeof ".npy-XXXXXX";
    char *dir = ms_xcalloc(n, 1);
    snprintf(dir, n, "%s.npy-XXXXXX", out_path);
    if (!mkdtemp(dir)) {
        int e = errno;
        free(dir);
        return ms_fail(err, "%s: cannot make a temporary directory next to it: %s", out_path, strerror(e));
    }
    int rc = run_converter(script, in_path, dir, extra, err);
    if (rc == 0) {
        oo->pattern = "layer*.csv";
        oo->source_name = ms_import_base_name(in_path);
        oo->source_kind = kind;
        rc = ms_import_densecsv(dir, out_path, oo, rep, err);
        if (rep) {
            snprintf(rep->input, sizeof rep->input, "%s", ms_import_base_name(in_path));
            snprintf(rep->row_unit, sizeof rep->row_unit, "%s", unit);
        }
    }
    remove_dir(dir);
    free(dir);
    return rc;
}

int ms_import_npy(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                  ms_err *err)
{
    ms_import_opts oo = *o;
    return import_converted("npy2trace.py", NULL, "npy router probabilities", "array rows (tokens)", in_path,
                            out_path, &oo, rep, err);
}

int ms_import_hf_logits(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                        ms_err *err)
{
    char plen[32];
    snprintf(plen, sizeof plen, "%u", o->prompt_len);
    const char *extra[5] = {"--layout", o->layout ? o->layout : "LTJ", NULL, NULL, NULL};
    if (o->prompt_len) {
        extra[2] = "--prompt-len";
        extra[3] = plen;
    }
    ms_import_opts oo = *o;
    oo.prompt_len = 0; /* the converter wrote the phase column */
    int rc = import_converted("logits2trace.py", extra, "HF output_router_logits, softmax", "token rows", in_path,
                              out_path, &oo, rep, err);
    if (rc == 0 && rep)
        ms_import_note(rep, "router probabilities = softmax of the logits (float64); top-k = the K largest%s",
                       o->prompt_len ? "" : "; no --prompt-len: every row a prompt token (prefill only)");
    return rc;
}
