/* Placement files of runs with several GPUs (sim/engine/placement.h):
 * ms_placement_parse on the input for a few trace shapes and GPU counts. */
#include "fuzz_util.h"
#include "sim/engine/placement.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t shapes[][3] = {{1, 4, 2}, {2, 4, 2}, {3, 8, 6}, {32, 8, 6}};
    ms_err err;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        uint32_t L = shapes[i][0], J = shapes[i][1], G = shapes[i][2];
        uint8_t *gpu_of = ms_xcalloc((size_t)L * J, 1);
        FZ_CALL(ms_placement_parse((const char *)data, size, "placement.csv", L, J, G, gpu_of, &err));
        if (err.msg[0] == '\0')
            for (size_t x = 0; x < (size_t)L * J; x++)
                if (gpu_of[x] >= G)
                    __builtin_trap(); /* a parsed placement names only GPUs of the run */
        free(gpu_of);
    }
    return 0;
}
