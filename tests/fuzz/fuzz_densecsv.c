/* dense-csv importer (traces/import/import_densecsv.c): the input is split into
 * per-layer files of one directory.  Bytes before the first marker line go
 * to layer0.csv; a line "@@@N" (N one digit) starts (or appends to)
 * layerN.csv, so the fuzzer can also make layer gaps.  Then
 * `moesim trace import --format dense-csv --topk 2 --expert-bytes 1 DIR OUT.h5`
 * (J from the header).  The npy importer converts to exactly these files
 * (traces/tools/npy2trace.py) and is covered through this harness.  The
 * split is fz_split_layers (fuzz_util.h). */
#include "fuzz_util.h"
#include "traces/import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    fz_split_layers(&d, data, size);
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
