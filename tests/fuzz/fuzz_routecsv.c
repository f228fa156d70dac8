/* route-csv importer (traces/import/import_routecsv.c): ms_routecsv_parse on the
 * input (the whole file parsed into requests, then freed). */
#include "fuzz_util.h"
#include "traces/import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "in.route.csv", data, size, path, sizeof path);
    ms_routecsv_trace t;
    ms_import_report rep;
    ms_err err;
    FZ_CALL(ms_routecsv_parse(path, &t, &rep, &err));
    ms_routecsv_free(&t);
    fz_dir_remove(&d);
    return 0;
}
