/* Golden files of `moesim regress` (sim/apps/golden.c): ms_golden_load on the
 * input, strict and with empty results allowed (--update). */
#include "fuzz_util.h"
#include "sim/apps/golden.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "golden.csv", data, size, path, sizeof path);
    ms_err err;
    for (int allow_empty = 0; allow_empty <= 1; allow_empty++) {
        ms_golden g;
        FZ_CALL(ms_golden_load(path, allow_empty, &g, &err));
        ms_golden_free(&g);
    }
    fz_dir_remove(&d);
    return 0;
}
