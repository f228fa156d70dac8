/* Generator parameter files (traces/synth/gen_params.c, `moesim trace gen
 * --params FILE`): ms_gen_file_load on the input twice, without a shape
 * and with mixtral-8x7b's (as `--model mixtral-8x7b` gives). */
#include "fuzz_util.h"
#include "sim/core/profile.h"
#include "traces/synth/gen_params.h"

static ms_model g_shape;
static int g_have_shape;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ms_err err;
    if (!g_have_shape) {
        if (ms_model_load("mixtral-8x7b", &g_shape, &err)) {
            fprintf(stderr, "fuzz harness: %s\n", err.msg);
            abort();
        }
        g_have_shape = 1;
    }
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "g.ini", data, size, path, sizeof path);
    ms_gen_file f;
    for (int with_shape = 0; with_shape <= 1; with_shape++) {
        err.msg[0] = '\0';
        if (ms_gen_file_load(path, with_shape ? &g_shape : NULL, &f, &err) == 0)
            ms_gen_file_free(&f);
        else
            fz_check_err(&err);
    }
    fz_dir_remove(&d);
    return 0;
}
