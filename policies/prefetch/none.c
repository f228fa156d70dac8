/* none: on-demand loading only (DeepSpeed-Inference with an expert cache). */
#include <stddef.h>

#include "policies/policy.h"

static const ms_param_spec none_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const ms_prefetch_ops none_ops = {0};
const ms_policy_desc ms_policy_prefetch_none = {
    .name = "none", .kind = MS_KIND_PREFETCH, .params = none_params, .prefetch = &none_ops,
    .summary = "no prefetch: every miss is an on-demand load",
};
