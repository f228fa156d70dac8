/* The `threads` parameter of the schedulers that run experts on the host
 * CPU (fiddler, hybrid, cpu-layers, cpu-all): how many cores the CPU expert
 * stream uses.  0 (the default) = the platform's cpu_cores. */
#ifndef MS_CPU_THREADS_H
#define MS_CPU_THREADS_H

#include "policies/policy.h"

/* The parameter's table entry (a scheduler lists it in its params). */
#define MS_CPU_THREADS_PARAM                                                                                    \
    {"threads", MS_PARAM_INT, "0", 0, 65536, NULL,                                                             \
     "threads of the CPU expert compute (0 = the platform's cpu_cores)"}

/* Reads `threads` into *out (0 stays 0); -1 with one line in err naming
 * the value when it exceeds the platform's cpu_cores. */
int ms_cpu_threads_read(const ms_params *p, const ms_policy_env *env, uint32_t *out, ms_err *err);

#endif
