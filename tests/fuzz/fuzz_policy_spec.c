/* Policy specs `name:k=v,...` (sim/core/params.c, policies/registry.c): the
 * input (a C string up to its first NUL) is split with ms_spec_split; the
 * name is looked up as a prefetcher, a cache and a scheduler, and the
 * k=v text parsed against each found policy's parameter table.  The
 * strict number parsers of flags and INI values run on it too. */
#include "fuzz_util.h"
#include "policies/policy.h"
#include "sim/core/params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fz_cstr(data, size);
    ms_err err;
    char name[64];
    const char *kv = NULL;
    err.msg[0] = '\0';
    if (ms_spec_split(s, name, sizeof name, &kv, &err) != 0) {
        fz_check_err(&err);
    } else {
        for (int k = MS_KIND_PREFETCH; k <= MS_KIND_SCHED; k++) {
            const ms_policy_desc *desc = ms_policy_find((ms_policy_kind)k, name);
            if (!desc)
                continue;
            ms_params p;
            err.msg[0] = '\0';
            if (ms_params_parse(desc->params, kv, name, &p, &err) != 0)
                fz_check_err(&err);
            else if (desc->learns)
                (void)desc->learns(&p);
        }
    }
    double x;
    unsigned long long u;
    (void)ms_parse_double(s, &x);
    (void)ms_parse_u64(s, &u);
    (void)ms_parse_bytes(s, &x);
    free(s);
    return 0;
}
