/* Policies built outside the tree as shared libraries (docs/python.md
 * "Out-of-tree C policies"): `--cache plugin:path=./mine.so[,k=v,...]` (and
 * --prefetch, --sched; sweep specs and moesim.run take the same spec).
 *
 * A plugin is one C file that includes this header and defines its one
 * descriptor as a policy in policies/ does, but named by the macro:
 *     MS_POLICY_PLUGIN = {.name = "mine", .kind = MS_KIND_CACHE, ...};
 * which exports it as `ms_policy_plugin`, beside `ms_policy_abi`, the
 * policy ABI version the file was built against.  The loader
 * (policies/plugin.c) refuses, with one line, a file that does not load,
 * lacks either symbol, was built for another ABI version or holds a policy
 * of another kind.  The hooks may call the view's functions (view.h: inline
 * calls through the engine's table), the helpers below and the C library;
 * nothing else of moesim is linked into a plugin. */
#ifndef MS_PLUGIN_H
#define MS_PLUGIN_H

#include <string.h>

#include "policies/policy.h"

/* Bumped whenever ms_policy_desc, the ops tables, ms_view_ops, ms_params or
 * a type they hold changes layout. */
#define MS_POLICY_ABI 2

#define MS_POLICY_PLUGIN                                                                    \
    __attribute__((visibility("default"))) extern const unsigned ms_policy_abi;             \
    __attribute__((visibility("default"))) const unsigned ms_policy_abi = MS_POLICY_ABI;    \
    __attribute__((visibility("default"))) extern const ms_policy_desc ms_policy_plugin;    \
    __attribute__((visibility("default"))) const ms_policy_desc ms_policy_plugin

/* A parameter's value (ms_params holds every declared one, defaults
 * included); dflt when the name is not declared. */
static inline double ms_plugin_param(const ms_params *p, const char *name, double dflt)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->spec[i]->name, name))
            return p->num[i];
    return dflt;
}
static inline const char *ms_plugin_param_str(const ms_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->spec[i]->name, name))
            return p->str[i];
    return NULL;
}

#endif
