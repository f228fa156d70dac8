/* sim/core/paths.h: the data directory from $MOESIM_DATA_DIR or the executable's
 * location, the sub-folders, the per-kind overrides and their one-line errors.
 * This executable lives in <build>/tests/, so without the environment it must
 * find <build>/share/moesim through rule 3 (<exe_dir>/../share/moesim). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "sim/core/paths.h"

static char tmpdir[64];

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* <folder of this executable's folder>/share/moesim, by hand. */
static void expected_data_dir(char *out, size_t cap)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
    }
    snprintf(out, cap, "%s/share/moesim", exe);
}

static void test_from_exe(void)
{
    char dir[4096], expect[4200], path[4300];
    ms_err err = {{0}};
    expected_data_dir(expect, sizeof expect);
    CHECK(ms_path_data(dir, sizeof dir, &err) == 0);
    CHECK(!strcmp(dir, expect));
    CHECK(ms_path_profiles(dir, sizeof dir, &err) == 0);
    snprintf(expect + strlen(expect), sizeof expect - strlen(expect), "/profiles");
    CHECK(!strcmp(dir, expect));
    snprintf(path, sizeof path, "%s/models/mixtral-8x7b.ini", dir);
    CHECK(exists(path));
    CHECK(ms_path_plots(dir, sizeof dir, &err) == 0);
    snprintf(path, sizeof path, "%s/fig_common.gp", dir);
    CHECK(exists(path));
    CHECK(ms_path_tools(dir, sizeof dir, &err) == 0);
    snprintf(path, sizeof path, "%s/npy2trace.py", dir);
    CHECK(exists(path));
    /* too small a buffer is an error, not a truncated path */
    char tiny[8];
    CHECK(ms_path_data(tiny, sizeof tiny, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "path longer than 7 bytes");
}

static void test_env(void)
{
    char dir[4096], path[4200];
    ms_err err = {{0}};
    snprintf(path, sizeof path, "%s/profiles", tmpdir);
    mkdir(path, 0700);

    setenv("MOESIM_DATA_DIR", tmpdir, 1);
    CHECK(ms_path_data(dir, sizeof dir, &err) == 0);
    CHECK(!strcmp(dir, tmpdir));
    CHECK(ms_path_profiles(dir, sizeof dir, &err) == 0);
    CHECK(!strcmp(dir, path));
    /* an explicit data directory without plots/: no fall-back to the build tree */
    CHECK(ms_path_plots(dir, sizeof dir, &err) == -1);
    snprintf(path, sizeof path, "moesim's data directory %s (MOESIM_DATA_DIR) has no plots/ folder", tmpdir);
    CHECK(!strcmp(err.msg, path));
    CHECK(ms_path_tools(dir, sizeof dir, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "has no tools/ folder");

    /* $MOESIM_PROFILE_DIR wins over the data directory, taken as is */
    setenv("MOESIM_PROFILE_DIR", "/no/such/profiles", 1);
    CHECK(ms_path_profiles(dir, sizeof dir, &err) == 0);
    CHECK(!strcmp(dir, "/no/such/profiles"));
    unsetenv("MOESIM_PROFILE_DIR");

    snprintf(path, sizeof path, "%s/missing", tmpdir);
    setenv("MOESIM_DATA_DIR", path, 1);
    CHECK(ms_path_data(dir, sizeof dir, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "MOESIM_DATA_DIR=");
    CHECK_STR_CONTAINS(err.msg, "/missing is not a directory");
    CHECK(ms_path_profiles(dir, sizeof dir, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "/missing is not a directory");

    /* empty counts as unset: back to the executable's location */
    setenv("MOESIM_DATA_DIR", "", 1);
    char expect[4200];
    expected_data_dir(expect, sizeof expect);
    CHECK(ms_path_data(dir, sizeof dir, &err) == 0);
    CHECK(!strcmp(dir, expect));
    unsetenv("MOESIM_DATA_DIR");
}

static void test_workloads_and_python(void)
{
    char dir[4096];
    ms_err err = {{0}};
    unsetenv("MOESIM_WORKLOAD_DIR");
    CHECK(ms_path_workloads(dir, sizeof dir, &err) == -1);
    CHECK(!strcmp(err.msg, "MOESIM_WORKLOAD_DIR is not set (the shared workloads folder, holding azure-llm-2023/)"));
    setenv("MOESIM_WORKLOAD_DIR", tmpdir, 1);
    CHECK(ms_path_workloads(dir, sizeof dir, &err) == 0);
    CHECK(!strcmp(dir, tmpdir));
    setenv("MOESIM_WORKLOAD_DIR", "/no/such/workloads", 1);
    CHECK(ms_path_workloads(dir, sizeof dir, &err) == -1);
    CHECK(!strcmp(err.msg, "MOESIM_WORKLOAD_DIR=/no/such/workloads is not a directory"));
    unsetenv("MOESIM_WORKLOAD_DIR");

    unsetenv("MOESIM_PYTHON");
    CHECK(!strcmp(ms_path_python(), "python3"));
    setenv("MOESIM_PYTHON", "", 1);
    CHECK(!strcmp(ms_path_python(), "python3"));
    setenv("MOESIM_PYTHON", "/opt/py/bin/python3", 1);
    CHECK(!strcmp(ms_path_python(), "/opt/py/bin/python3"));
    unsetenv("MOESIM_PYTHON");
}

int main(void)
{
    unsetenv("MOESIM_DATA_DIR");
    unsetenv("MOESIM_PROFILE_DIR");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ms_test_paths_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_from_exe();
    test_env();
    test_workloads_and_python();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    CHECK_DONE();
}
