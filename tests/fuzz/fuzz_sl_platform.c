/* Serverless platform profile (sim/serverless/serverless_platform.c):
 * ms_sl_platform_load on the input given as a .ini path. */
#include "fuzz_util.h"
#include "sim/serverless/serverless_platform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "sl.ini", data, size, path, sizeof path);
    ms_err err;
    ms_sl_platform p;
    FZ_CALL(ms_sl_platform_load(path, &p, &err));
    fz_dir_remove(&d);
    return 0;
}
