/* dense-csv importer with the issue-17 options (traces/import/import_densecsv*.c):
 * the first input byte picks the options, the rest is split into layer files
 * as by fuzz_densecsv (fz_split_layers: "@@@N" lines start layerN.csv):
 *   bit 0-1  probs kind: full, topk_raw, topk_renorm, full
 *   bit 2    --tokens-per-seq 2 (else sequences from the request column)
 *   bit 3    --prompt-len 1
 *   bit 4    --layer-base 1 (else renumbered from the first file)
 *   bit 5    --id-columns tok
 *   bit 6    --seq-column seq */
#include "fuzz_util.h"
#include "traces/import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t m = data[0];
    fz_dir d;
    fz_dir_make(&d);
    fz_split_layers(&d, data + 1, size - 1);
    char out[PATH_MAX];
    fz_path(&d, "out.h5", out, sizeof out);
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.topk = 2;
    o.expert_bytes = 1;
    static const int kinds[4] = {MS_PROBS_FULL, MS_PROBS_TOPK_RAW, MS_PROBS_TOPK_RENORM, MS_PROBS_FULL};
    o.probs_kind = kinds[m & 3];
    o.tokens_per_seq = m & 4 ? 2 : 0;
    o.prompt_len = m & 8 ? 1 : 0;
    o.layer_base = m & 16 ? 1 : -1;
    o.id_columns = m & 32 ? "tok" : NULL;
    o.seq_column = m & 64 ? "seq" : NULL;
    ms_import_report rep;
    ms_err err;
    FZ_CALL(ms_import_densecsv(d.dir, out, &o, &rep, &err));
    fz_dir_remove(&d);
    return 0;
}
