/* Run-time data lookup (sim/core/paths.h): environment, then the executable's own
 * location.  Nothing here is compiled in. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/paths.h"

#define PATH_CAP 4096

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int copy_path(char *buf, size_t cap, const char *path, ms_err *err)
{
    if (snprintf(buf, cap, "%s", path) >= (int)cap)
        return ms_fail(err, "path longer than %zu bytes: '%s'", cap - 1, path);
    return 0;
}

/* The folder of the running executable, from /proc/self/exe. */
static int exe_dir(char *dir, size_t cap, ms_err *err)
{
    ssize_t n = readlink("/proc/self/exe", dir, cap);
    if (n < 0)
        return ms_fail(err, "cannot read /proc/self/exe: %s", strerror(errno));
    if ((size_t)n >= cap)
        return ms_fail(err, "the executable's path (/proc/self/exe) is longer than %zu bytes", cap - 1);
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return ms_fail(err, "/proc/self/exe is not an absolute path: '%s'", dir);
    if (slash == dir)
        slash[1] = '\0'; /* the root */
    else
        *slash = '\0';
    return 0;
}

/* dir's parent ("/a/b" -> "/a", "/a" -> "/"), in place. */
static void parent_dir(char *dir)
{
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    else if (slash)
        slash[1] = '\0';
}

int ms_path_data(char *buf, size_t cap, ms_err *err)
{
    const char *env = env_value("MOESIM_DATA_DIR");
    if (env) {
        if (!is_dir(env))
            return ms_fail(err, "MOESIM_DATA_DIR=%s is not a directory (it must hold moesim's profiles/, plots/ and "
                                "tools/)",
                           env);
        return copy_path(buf, cap, env, err);
    }
    char dir[PATH_CAP], build[PATH_CAP + 32], install[PATH_CAP + 32];
    if (exe_dir(dir, sizeof dir, err))
        return ms_fail_prefix(err, "cannot find moesim's data directory (set MOESIM_DATA_DIR)");
    snprintf(build, sizeof build, "%s%sshare/moesim", dir, strcmp(dir, "/") ? "/" : "");
    if (is_dir(build))
        return copy_path(buf, cap, build, err);
    parent_dir(dir);
    snprintf(install, sizeof install, "%s%sshare/moesim", dir, strcmp(dir, "/") ? "/" : "");
    if (is_dir(install))
        return copy_path(buf, cap, install, err);
    return ms_fail(err, "cannot find moesim's data directory: MOESIM_DATA_DIR is not set, and neither %s (build "
                        "tree) nor %s (install) is a directory",
                   build, install);
}

/* <data>/<sub>, which must be a directory. */
static int data_sub(const char *sub, char *buf, size_t cap, ms_err *err)
{
    char data[PATH_CAP], path[PATH_CAP + 32];
    if (ms_path_data(data, sizeof data, err))
        return -1;
    snprintf(path, sizeof path, "%s/%s", data, sub);
    if (!is_dir(path))
        return ms_fail(err, "moesim's data directory %s%s has no %s/ folder", data,
                       env_value("MOESIM_DATA_DIR") ? " (MOESIM_DATA_DIR)" : "", sub);
    return copy_path(buf, cap, path, err);
}

int ms_path_profiles(char *buf, size_t cap, ms_err *err)
{
    const char *env = env_value("MOESIM_PROFILE_DIR");
    if (env)
        return copy_path(buf, cap, env, err);
    return data_sub("profiles", buf, cap, err);
}

int ms_path_plots(char *buf, size_t cap, ms_err *err)
{
    return data_sub("plots", buf, cap, err);
}

int ms_path_tools(char *buf, size_t cap, ms_err *err)
{
    return data_sub("tools", buf, cap, err);
}

int ms_path_workloads(char *buf, size_t cap, ms_err *err)
{
    const char *env = env_value("MOESIM_WORKLOAD_DIR");
    if (!env)
        return ms_fail(err, "MOESIM_WORKLOAD_DIR is not set (the shared workloads folder, holding azure-llm-2023/)");
    if (!is_dir(env))
        return ms_fail(err, "MOESIM_WORKLOAD_DIR=%s is not a directory", env);
    return copy_path(buf, cap, env, err);
}

const char *ms_path_python(void)
{
    const char *env = env_value("MOESIM_PYTHON");
    return env ? env : "python3";
}
