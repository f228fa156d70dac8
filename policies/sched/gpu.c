/* gpu: every activated expert runs on the GPU (the default scheduler). */
#include <stddef.h>

#include "policies/policy.h"

static const ms_param_spec gpu_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const ms_sched_ops gpu_ops = {0};
const ms_policy_desc ms_policy_sched_gpu = {
    .name = "gpu", .kind = MS_KIND_SCHED, .params = gpu_params, .sched = &gpu_ops,
    .summary = "every expert runs on the GPU",
};
