/* Model and platform profiles (sim/core/profile*.c): the input is loaded as a
 * model profile and as a platform profile, both given as a path ending in
 * .ini (what `--model FILE.ini` / `--platform FILE.ini` do); a model that
 * loads has its [routing] knobs applied as trace gen does
 * (ms_gen_model_defaults). */
#include "fuzz_util.h"
#include "sim/core/profile.h"
#include "traces/synth/gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "p.ini", data, size, path, sizeof path);
    ms_err err;
    ms_model m;
    memset(&m, 0, sizeof m);
    err.msg[0] = '\0';
    if (ms_model_load(path, &m, &err) != 0) {
        fz_check_err(&err);
    } else {
        ms_gen_params g;
        FZ_CALL(ms_gen_model_defaults(&g, &m, &err));
    }
    ms_platform p;
    memset(&p, 0, sizeof p);
    FZ_CALL(ms_platform_load(path, &p, &err));
    fz_dir_remove(&d);
    return 0;
}
