/* jsonl importer (traces/import/import_jsonl.c): the input is IN of
 * `moesim trace import --format jsonl --experts 8 --expert-bytes 1 IN OUT.h5`
 * (L and K inferred from the data, as without --model); OUT goes to the
 * temporary directory. */
#include "fuzz_util.h"
#include "traces/import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char in[PATH_MAX], out[PATH_MAX];
    fz_write(&d, "in.jsonl", data, size, in, sizeof in);
    fz_path(&d, "out.h5", out, sizeof out);
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.experts = 8;
    o.expert_bytes = 1;
    ms_import_report rep;
    ms_err err;
    FZ_CALL(ms_import_jsonl(in, out, &o, &rep, &err));
    fz_dir_remove(&d);
    return 0;
}
