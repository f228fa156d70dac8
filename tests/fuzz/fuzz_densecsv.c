/* dense-csv importer (traces/import/import_densecsv.c): the input is split into
 * per-layer files of one directory.  Bytes before the first marker line go
 * to layer0.csv; a line "@@@N" (N one digit) starts (or appends to)
 * layerN.csv, so the fuzzer can also make layer gaps.  Then
 * `moesim trace import --format dense-csv --topk 2 --expert-bytes 1 DIR OUT.h5`
 * (J from the header).  The npy importer converts to exactly these files
 * (traces/tools/npy2trace.py) and is covered through this harness. */
#include "fuzz_util.h"
#include "traces/import/import.h"

#define MARK "@@@"

/* Writes the segments of data into DIR/layerN.csv. */
static void split_layers(const fz_dir *d, const uint8_t *data, size_t size)
{
    char name[32] = "layer0.csv";
    size_t start = 0, i = 0;
    char path[PATH_MAX];
    fz_write(d, name, data, 0, path, sizeof path);
    while (i < size) {
        int at_line = i == 0 || data[i - 1] == '\n';
        if (at_line && size - i >= 5 && !memcmp(data + i, MARK, 3) && data[i + 3] >= '0' && data[i + 3] <= '9' &&
            data[i + 4] == '\n') {
            fz_append(d, name, data + start, i - start);
            snprintf(name, sizeof name, "layer%c.csv", data[i + 3]);
            fz_append(d, name, data, 0);
            i += 5;
            start = i;
            continue;
        }
        i++;
    }
    fz_append(d, name, data + start, size - start);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    split_layers(&d, data, size);
    char out[PATH_MAX];
    fz_path(&d, "out.h5", out, sizeof out);
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.topk = 2;
    o.expert_bytes = 1;
    ms_import_report rep;
    ms_err err;
    FZ_CALL(ms_import_densecsv(d.dir, out, &o, &rep, &err));
    fz_dir_remove(&d);
    return 0;
}
