/* The backend registry (backend.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/host_backend.h"
#ifdef MS_HAVE_CUDA
#include <dlfcn.h>
#endif

#define NO_CUDA_MSG "moesim was not built with CUDA (nvcc was not found when it was configured)"

#ifdef MS_HAVE_CUDA
/* The CUDA module (libmoesim_cuda.so), opened on first use: beside the
 * executable (a build tree), else <exe_dir>/../lib/moesim/ (an install). */
typedef int (*cuda_create_fn)(const ms_backend_config *, ms_exec *, ms_err *);
static cuda_create_fn cuda_create;

static int load_cuda_module(ms_err *err)
{
    if (cuda_create)
        return 0;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return ms_fail(err, "cuda backend: cannot read /proc/self/exe to find libmoesim_cuda.so");
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    const char *const rel[] = {"libmoesim_cuda.so", "../lib/moesim/libmoesim_cuda.so"};
    char path[2][4200], why[8600] = "";
    for (int i = 0; i < 2; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s", exe, rel[i]);
        if (access(path[i], R_OK) != 0)
            continue;
        void *h = dlopen(path[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(why, sizeof why, "%s", dlerror());
            continue;
        }
        *(void **)&cuda_create = dlsym(h, "ms_cuda_backend_create");
        if (cuda_create)
            return 0;
        snprintf(why, sizeof why, "no ms_cuda_backend_create in %s", path[i]);
        dlclose(h);
    }
    if (why[0])
        return ms_fail(err, "cuda backend: cannot load libmoesim_cuda.so: %s", why);
    return ms_fail(err, "cuda backend: libmoesim_cuda.so is in neither %s nor %s", path[0], path[1]);
}
#endif

int ms_backend_available(const char *name, ms_err *err)
{
    if (!name || !strcmp(name, "") || (strcmp(name, "host") && strcmp(name, "cuda"))) {
        ms_fail(err, "unknown backend '%s' (known: host, cuda)", name ? name : "(null)");
        return 0;
    }
#ifndef MS_HAVE_CUDA
    if (!strcmp(name, "cuda")) {
        ms_fail(err, NO_CUDA_MSG);
        return 0;
    }
#else
    if (!strcmp(name, "cuda") && load_cuda_module(err))
        return 0;
#endif
    return 1;
}

int ms_backend_create(const char *name, const ms_backend_config *c, ms_exec *out, ms_err *err)
{
    if (!ms_backend_available(name, err))
        return -1;
    if (!strcmp(name, "host"))
        return ms_host_backend_create(c, out, err);
#ifdef MS_HAVE_CUDA
    return cuda_create(c, out, err);
#else
    return ms_fail(err, NO_CUDA_MSG);
#endif
}

uint32_t ms_backend_expert_ffn(const ms_backend_config *c)
{
    double f = round((double)c->model->expert_ffn * c->expert_scale);
    return f < 1 ? 1 : (uint32_t)f;
}

double ms_backend_expert_params(const ms_backend_config *c)
{
    return (double)c->model->expert_matrices * c->model->hidden * ms_backend_expert_ffn(c);
}

double ms_backend_expert_bytes(const ms_backend_config *c)
{
    return 2.0 * ms_backend_expert_params(c);
}

int ms_backend_check_config(const char *who, const ms_backend_config *c, ms_err *err)
{
    if (!c || !c->model)
        return ms_fail(err, "%s backend: no model profile given", who);
    if (!c->layers || !c->experts)
        return ms_fail(err, "%s backend: needs at least one layer and expert (got L=%u, J=%u)", who, c->layers,
                       c->experts);
    if (!c->slots)
        return ms_fail(err, "%s backend: needs at least one GPU expert slot", who);
    if (!c->max_tokens)
        return ms_fail(err, "%s backend: max_tokens must be >= 1", who);
    if (!(c->expert_scale > 0 && c->expert_scale <= 1))
        return ms_fail(err, "%s backend: expert scale %g outside (0, 1]", who, c->expert_scale);
    if (!c->cpu_threads)
        return ms_fail(err, "%s backend: cpu_threads must be >= 1", who);
    if (c->model->expert_matrices != 2 && c->model->expert_matrices != 3)
        return ms_fail(err, "%s backend: model '%s' has %u expert matrices (2 or 3 supported)", who,
                       c->model->name, c->model->expert_matrices);
    return 0;
}

static double meminfo_kib(const char *key)
{
    FILE *fp = fopen("/proc/meminfo", "r");
    if (!fp)
        return 0;
    char line[256];
    double kib = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, key, n) && line[n] == ':') {
            sscanf(line + n + 1, "%lf", &kib);
            break;
        }
    fclose(fp);
    return kib;
}

double ms_host_mem_available(void)
{
    double kib = meminfo_kib("MemAvailable");
    if (kib > 0)
        return kib * 1024.0;
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

double ms_host_mem_total(void)
{
    double kib = meminfo_kib("MemTotal");
    if (kib > 0)
        return kib * 1024.0;
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}
