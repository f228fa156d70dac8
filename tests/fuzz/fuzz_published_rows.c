/* Published row files (sim/apps/published_rows.c): the input is read as a
 * row file (ms_pub_rows_read: every key, the system's knobs, the `set`
 * overrides against the shipped model and platform profiles, a trace path
 * relative to the file), and every row read is planned with its preset
 * (ms_pub_preset_setup).  Runs no simulation. */
#include "fuzz_util.h"
#include "sim/apps/published_presets.h"
#include "sim/apps/published_rows.h"
#include "sim/core/out.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "rows.ini", data, size, path, sizeof path);
    ms_err err;
    err.msg[0] = '\0';
    ms_pub_rows rows = {0};
    if (ms_pub_rows_read(path, &rows, &err) != 0)
        fz_check_err(&err);
    for (size_t i = 0; i < rows.n; i++) {
        ms_model m;
        ms_pub_setup s;
        if (ms_model_load(rows.row[i].model, &m, &err) == 0 && ms_pub_preset_setup(&rows.row[i], &m, 20e9, &s, &err) != 0)
            fz_check_err(&err);
    }
    ms_pub_rows_free(&rows);
    ms_out_inputs_clear();
    fz_dir_remove(&d);
    return 0;
}
