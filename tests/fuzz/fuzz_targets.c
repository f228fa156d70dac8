/* Locality targets files (traces/stats/targets.c): the input is loaded as a
 * path ending in .ini (what `trace stats --against FILE.ini` does); a file
 * that loads has every target described and checked against a NaN. */
#include "fuzz_util.h"
#include "traces/stats/targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "t.ini", data, size, path, sizeof path);
    ms_err err;
    ms_targets *ts = ms_xcalloc(1, sizeof *ts);
    if (ms_targets_load(path, ts, &err) == 0) {
        char buf[128];
        for (int i = 0; i < ts->n; i++) {
            ms_target_describe(&ts->t[i], 32, 8, buf, sizeof buf);
            (void)ms_target_met(&ts->t[i], 0.5);
            (void)ms_target_entries(&ts->t[i], 48, 128);
        }
    }
    free(ts);
    fz_dir_remove(&d);
    return 0;
}
