/* Azure LLM-inference workload CSV reader (traces/import/workload.c):
 * ms_workload_azure on the input, every row checked,
 * the first 4 kept (start 0, n 4, time x1). */
#include "fuzz_util.h"
#include "traces/import/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "azure.csv", data, size, path, sizeof path);
    ms_workload w;
    ms_err err;
    err.msg[0] = '\0';
    if (ms_workload_azure(path, 0, 4, 1.0, &w, &err) == 0)
        ms_workload_free(&w);
    else
        fz_check_err(&err);
    fz_dir_remove(&d);
    return 0;
}
