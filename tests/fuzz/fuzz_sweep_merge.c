/* Sweep shard CSVs (sim/apps/sweep_csv.c, `moesim sweep --merge OUT IN...`):
 * the input is split at a line "@@@" into up to 4 shard files, which are
 * merged into OUT in the temporary directory. */
#include "fuzz_util.h"
#include "sim/apps/sweep_csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char paths[4][PATH_MAX], out[PATH_MAX];
    char *inputs[4];
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && n < 4; i++) {
        int mark = i + 4 <= size && (i == 0 || data[i - 1] == '\n') && !memcmp(data + i, "@@@\n", 4);
        if (i == size || (mark && n < 3)) {
            char name[16];
            snprintf(name, sizeof name, "shard%d.csv", n);
            fz_write(&d, name, data + start, i - start, paths[n], sizeof paths[n]);
            inputs[n] = paths[n];
            n++;
            start = i + 4;
            i += 3;
        }
    }
    fz_path(&d, "merged.csv", out, sizeof out);
    ms_err err;
    FZ_CALL(ms_sweep_csv_merge(out, inputs, n, &err));
    fz_dir_remove(&d);
    return 0;
}
