/* jsonl importer with the issue-17 and issue-32 options (traces/import/import_jsonl*.c):
 * the first input byte picks the options, the rest is the dump; a line
 * "@@@" splits it into a second input file (requests namespaced per file):
 *   bit 0-1  --token-pos absolute, per-request, per-step, absolute
 *   bit 2    --request-key ds,request_id
 *   bit 3    --fields prompt_len=plen
 *   bit 4    --prompt-len 2
 *   bit 5    --probs-kind topk_raw
 *   bit 6    --phase decode (issue 32)
 *   bit 7    --probs-kind topk_ids (ids only; wins over bit 5)
 * `--experts 8 --expert-bytes 1`, L and K from the data. */
#include "fuzz_util.h"
#include "traces/import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t m = data[0];
    data++;
    size--;
    size_t cut = size;
    for (size_t i = 0; i + 4 <= size; i++)
        if ((i == 0 || data[i - 1] == '\n') && !memcmp(data + i, "@@@\n", 4)) {
            cut = i;
            break;
        }
    fz_dir d;
    fz_dir_make(&d);
    char in[2][PATH_MAX], out[PATH_MAX];
    fz_write(&d, "a.jsonl", data, cut, in[0], sizeof in[0]);
    size_t n_in = 1;
    if (cut < size) {
        fz_write(&d, "b.jsonl", data + cut + 4, size - cut - 4, in[1], sizeof in[1]);
        n_in = 2;
    }
    fz_path(&d, "out.h5", out, sizeof out);
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.experts = 8;
    o.expert_bytes = 1;
    o.token_pos = (m & 3) == 3 ? MS_TOKEN_POS_ABSOLUTE : (int)(m & 3);
    o.request_key = m & 4 ? "ds,request_id" : NULL;
    o.fields = m & 8 ? "prompt_len=plen" : NULL;
    o.prompt_len = m & 16 ? 2 : 0;
    o.probs_kind = m & 128 ? MS_PROBS_TOPK_IDS : m & 32 ? MS_PROBS_TOPK_RAW : -1;
    o.all_decode = (m & 64) != 0;
    const char *paths[2] = {in[0], in[1]};
    ms_import_report rep;
    ms_err err;
    FZ_CALL(ms_import_jsonl_files(paths, n_in, out, &o, &rep, &err));
    fz_dir_remove(&d);
    return 0;
}
