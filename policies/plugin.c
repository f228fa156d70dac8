/* Loading out-of-tree policies (policies/plugin.h) and the one lookup of a
 * policy spec (policy.h ms_policy_lookup). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/plugin.h"

#define MAX_PLUGINS 32

/* Loaded plugins stay loaded for the process (runs keep their descriptors). */
static struct {
    char *path;
    const ms_policy_desc *desc;
} loaded[MAX_PLUGINS];
static int n_loaded;

static const char *kind_ops_missing(const ms_policy_desc *d)
{
    if (d->kind == MS_KIND_PREFETCH && !d->prefetch)
        return "prefetch";
    if (d->kind == MS_KIND_CACHE && (!d->cache || !d->cache->victim))
        return "cache (with a victim hook)";
    if (d->kind == MS_KIND_SCHED && (!d->sched || !d->sched->place))
        return "sched (with a place hook)";
    return NULL;
}

const ms_policy_desc *ms_plugin_load(ms_policy_kind kind, const char *path, ms_err *err)
{
    for (int i = 0; i < n_loaded; i++)
        if (!strcmp(loaded[i].path, path))
            return loaded[i].desc->kind == kind ? loaded[i].desc
                                                : (ms_fail(err, "plugin %s: a %s policy, not a %s policy", path,
                                                           ms_policy_kind_name(loaded[i].desc->kind),
                                                           ms_policy_kind_name(kind)),
                                                   NULL);
    if (n_loaded == MAX_PLUGINS)
        return ms_fail(err, "plugin %s: more than %d plugins in one process", path, MAX_PLUGINS), NULL;
    /* a name without '/' would be searched on the library path: the user means the file */
    char file[4096];
    snprintf(file, sizeof file, "%s%s", strchr(path, '/') ? "" : "./", path);
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return ms_fail(err, "plugin %s: cannot load it: %s", path, dlerror()), NULL;
    const unsigned *abi = dlsym(h, "ms_policy_abi");
    const ms_policy_desc *d = dlsym(h, "ms_policy_plugin");
    const char *missing = NULL;
    if (!abi || !d) {
        ms_fail(err, "plugin %s: no symbol %s (define the descriptor with MS_POLICY_PLUGIN of policies/plugin.h)",
                path, !abi ? "ms_policy_abi" : "ms_policy_plugin");
    } else if (*abi != MS_POLICY_ABI) {
        ms_fail(err, "plugin %s: built for policy ABI version %u, this moesim has version %u: rebuild it "
                     "against this moesim's headers", path, *abi, MS_POLICY_ABI);
    } else if (!d->name || !d->name[0] || strlen(d->name) >= 64 || strpbrk(d->name, ":,= ")) {
        ms_fail(err, "plugin %s: the descriptor's name must be 1 to 63 characters without ':', ',', '=', ' '", path);
    } else if ((unsigned)d->kind > MS_KIND_SCHED || (missing = kind_ops_missing(d))) {
        ms_fail(err, "plugin %s: the descriptor's kind and ops disagree (%s ops missing)", path,
                missing ? missing : "no kind");
    } else if (d->kind != kind) {
        ms_fail(err, "plugin %s: a %s policy, not a %s policy", path, ms_policy_kind_name(d->kind),
                ms_policy_kind_name(kind));
    } else {
        loaded[n_loaded].path = ms_xstrdup(path);
        loaded[n_loaded++].desc = d;
        return d;
    }
    dlclose(h);
    return NULL;
}

const ms_policy_desc *ms_policy_lookup(ms_policy_kind kind, const char *spec, char *name, size_t cap,
                                       const char **kv, ms_err *err)
{
    err->msg[0] = '\0';
    if (ms_spec_split(spec, name, cap, kv, err))
        return NULL;
    if (strcmp(name, "plugin"))
        return ms_policy_find(kind, name);
    const char *k = *kv ? *kv : "";
    if (strncmp(k, "path=", 5) || !k[5] || k[5] == ',')
        return ms_fail(err, "%s policy '%s': expected plugin:path=FILE.so[,k=v,...]", ms_policy_kind_name(kind),
                       spec), NULL;
    char path[4096];
    size_t n = strcspn(k + 5, ",");
    if (n >= sizeof path)
        return ms_fail(err, "%s policy '%s': path too long", ms_policy_kind_name(kind), spec), NULL;
    memcpy(path, k + 5, n);
    path[n] = '\0';
    const ms_policy_desc *d = ms_plugin_load(kind, path, err);
    if (!d)
        return NULL;
    *kv = k[5 + n] == ',' ? k + 5 + n + 1 : "";
    snprintf(name, cap, "%s", d->name);
    return d;
}
