/* A plugin built for another policy ABI version (ctest plugin.bad_abi). */
#include "policies/plugin.h"

static int none(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    (void)st, (void)v, (void)l, (void)e;
    return 0;
}
static const ms_cache_ops ops = {.victim = none};
__attribute__((visibility("default"))) extern const unsigned ms_policy_abi;
__attribute__((visibility("default"))) const unsigned ms_policy_abi = MS_POLICY_ABI + 998;
__attribute__((visibility("default"))) extern const ms_policy_desc ms_policy_plugin;
__attribute__((visibility("default"))) const ms_policy_desc ms_policy_plugin = {
    .name = "bad_abi", .kind = MS_KIND_CACHE, .cache = &ops};
