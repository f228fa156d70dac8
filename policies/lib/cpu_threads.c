/* The `threads` parameter of the CPU schedulers (cpu_threads.h). */
#include "policies/lib/cpu_threads.h"

int ms_cpu_threads_read(const ms_params *p, const ms_policy_env *env, uint32_t *out, ms_err *err)
{
    *out = (uint32_t)ms_param_num(p, "threads");
    if (env->platform && *out > env->platform->cpu_cores)
        return ms_fail(err, "threads = %u: more than platform %s's %u cpu_cores", *out, env->platform->name,
                       env->platform->cpu_cores);
    return 0;
}
