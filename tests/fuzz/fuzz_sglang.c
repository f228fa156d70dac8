/* sglang importer (traces/import/import_engine*.c, b64npy.c): the input is the
 * API-response file of `moesim trace import --format sglang --layers 2 --topk 2 --experts 4
 * --expert-bytes 1 IN OUT.h5` (JSON document, JSON lines or SSE). */
#include "fuzz_util.h"
#include "traces/import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char in[PATH_MAX], out[PATH_MAX];
    fz_write(&d, "in.json", data, size, in, sizeof in);
    fz_path(&d, "out.h5", out, sizeof out);
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.experts = 4;
    o.expert_bytes = 1;
    o.layers = 2;
    o.topk = 2;
    ms_import_report rep;
    ms_err err;
    FZ_CALL(ms_import_sglang(in, out, &o, &rep, &err));
    fz_dir_remove(&d);
    return 0;
}
