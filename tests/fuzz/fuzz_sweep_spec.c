/* Sweep specs (sim/apps/sweep_spec.c): ms_sweep_load on the input, then every
 * point of the expanded grid is read back.  Relative paths in the spec
 * resolve against the temporary directory, which holds the spec and a tiny
 * trace a.h5 (a copy of MS_FUZZ_TRACE: 2 layers, 4 experts, top-2). */
#include "fuzz_util.h"
#include "sim/apps/sweep_spec.h"

static uint8_t *g_trace;
static size_t g_trace_len;

static void load_trace(void)
{
    FILE *f = fopen(MS_FUZZ_TRACE, "rb");
    if (!f)
        fz_die("opening", MS_FUZZ_TRACE);
    g_trace = malloc(1 << 20);
    g_trace_len = g_trace ? fread(g_trace, 1, 1 << 20, f) : 0;
    fclose(f);
    if (!g_trace_len)
        fz_die("reading", MS_FUZZ_TRACE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_trace)
        load_trace();
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "a.h5", g_trace, g_trace_len, path, sizeof path);
    fz_write(&d, "s.ini", data, size, path, sizeof path);
    ms_err err;
    err.msg[0] = '\0';
    ms_sweep_spec *s = ms_sweep_load(path, &err);
    if (!s)
        fz_check_err(&err);
    if (!s && getenv("MS_FUZZ_VERBOSE"))
        fprintf(stderr, "%s\n", err.msg);
    if (s) {
        (void)ms_sweep_output(s);
        uint64_t n = ms_sweep_npoints(s);
        for (uint64_t i = 0; i < n; i++)
            (void)ms_sweep_get(s, i);
        ms_sweep_free(s);
    }
    fz_dir_remove(&d);
    return 0;
}
