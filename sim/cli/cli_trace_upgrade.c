/* `moesim trace upgrade IN.h5 OUT.h5 [--force]`: rewrites a trace (format v1
 * or v2) as format v2, value for value: every request goes through the
 * reader (every value checked; a v2 input's checksums and content digest
 * too) and the writer. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/cli/cli.h"
#include "sim/core/out.h"
#include "sim/cli/cli_trace_common.h"
#include "traces/format/trace.h"

static const char upgrade_usage[] =
    "usage: moesim trace upgrade IN.h5 OUT.h5 [--force]\n"
    "\n"
    "Rewrites the trace IN.h5 as trace format v2 (docs/trace-format.md): every chunk\n"
    "checksummed (Fletcher32), HDF5's metadata checksummed, fixed-length strings,\n"
    "the prompt text in /text/utf8 and a content digest (content_sha256) over\n"
    "all values.  The values stay identical: every request is read (and checked,\n"
    "as by `moesim trace validate`) and written as it is; a v1 trace that stores\n"
    "only /rows/probs gets the top-k the reader derives from them.  A v2 IN is\n"
    "verified (checksums, content digest) and rewritten.  Prints the content\n"
    "digest, which `moesim trace info OUT.h5` shows too.\n"
    "\n"
    "OUT.h5 is written through a temporary file beside it and renamed into place\n"
    "at the end; it must not be IN.h5 (also through a link), a device or a folder.\n"
    "\n"
    "  --force   write even when OUT's file system has less free space than IN's size\n";

static int upgrade(const char *in, const char *out, ms_err *err)
{
    ms_trace_reader *r = ms_reader_open(in, err);
    if (!r)
        return -1;
    const ms_trace_meta *m = ms_reader_meta(r);
    uint32_t version = m->version;
    ms_trace_writer *w = ms_writer_open(out, m, err);
    if (!w) {
        ms_reader_close(r);
        return -1;
    }
    ms_trace_cli_progress_begin("trace upgrade", m->n_requests);
    ms_reader_digest_begin(r);
    ms_request q;
    memset(&q, 0, sizeof q);
    int got;
    while ((got = ms_reader_next(r, &q, err)) == 1)
        if (ms_writer_add(w, &q, err) < 0) {
            got = -1;
            break;
        }
    ms_request_free(&q);
    char hex[MS_DIGEST_HEX];
    int rc = got < 0 || ms_reader_digest_check(r, hex, err) < 0 ? -1 : 0;
    if (rc == 0)
        rc = ms_writer_close(w, err);
    else
        ms_writer_abort(w);
    ms_trace_cli_progress_end();
    uint64_t n = m->n_requests, iters = m->n_iterations, rows = m->n_rows;
    ms_reader_close(r);
    if (rc < 0)
        return -1;
    /* the new file's digest, as a reader sees it (for a v1 FULL trace without
     * a stored top-k it differs from the input's: the output stores the top-k) */
    r = ms_reader_open(out, err);
    if (!r)
        return -1;
    printf("upgraded %s (format v%u) to %s (format v%d): %" PRIu64 " requests, %" PRIu64 " iterations, %" PRIu64
           " rows; content_sha256 %s\n", in, version, out, MS_TRACE_FORMAT_VERSION, n, iters, rows,
           ms_reader_meta(r)->content_sha256);
    ms_reader_close(r);
    return 0;
}

int ms_cli_trace_upgrade(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(upgrade_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--force"))
            force = 1;
        else if (a[0] == '-' && a[1])
            return ms_cli_usage("trace upgrade: unknown option '%s' (see `moesim trace upgrade --help`)", a);
        else if (n_pos < 2)
            pos[n_pos++] = a;
        else
            return ms_cli_usage("trace upgrade: unexpected argument '%s' (usage: moesim trace upgrade IN.h5 OUT.h5)", a);
    }
    if (n_pos < 2)
        return ms_cli_usage("trace upgrade: missing %s (usage: moesim trace upgrade IN.h5 OUT.h5)",
                            n_pos ? "OUT.h5" : "IN.h5 and OUT.h5");
    ms_err err = {{0}};
    ms_out_input(pos[0]);
    if (ms_out_check("OUT", pos[1], &err))
        return ms_cli_error(err.msg);
    struct stat st;
    uint64_t in_bytes = stat(pos[0], &st) == 0 ? (uint64_t)st.st_size : 0;
    if (ms_trace_cli_space("OUT", pos[1], in_bytes + ((uint64_t)1 << 20), "about IN's size", force, &err))
        return ms_cli_error(err.msg);
    return upgrade(pos[0], pos[1], &err) ? ms_cli_error(err.msg) : 0;
}
