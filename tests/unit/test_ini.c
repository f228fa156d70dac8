/* The one INI reader (sim/core/ini.h): line numbers, sections, continuation
 * lines and the error forms "FILE:LINE: message" / "FILE: message"; and the
 * serverless platform loader on top of it. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "sim/core/ini.h"
#include "sim/serverless/serverless_platform.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

typedef struct {
    char seen[8][64];
    int lines[8], cont[8], n, sections;
    int fail_on_line;
} rec;

static int on_section(ms_ini *ini, void *user, const char *section)
{
    (void)ini;
    (void)section;
    ((rec *)user)->sections++;
    return 0;
}

static int on_value(ms_ini *ini, void *user, const char *section, const char *key, const char *value)
{
    rec *r = user;
    if (r->n < 8) {
        snprintf(r->seen[r->n], sizeof r->seen[r->n], "%s.%s=%s", section, key, value);
        r->lines[r->n] = ms_ini_line(ini);
        r->cont[r->n++] = ms_ini_continuation(ini);
    }
    if (ms_ini_line(ini) == r->fail_on_line)
        return ms_ini_fail(ini, "%s = %s: not wanted", key, value);
    return 0;
}

static const char *const known[] = {"a", "b", NULL};

static int parse(const char *path, rec *r, ms_err *err)
{
    ms_ini_spec spec = {.what = "test file", .sections = known, .on_section = on_section, .on_value = on_value,
                        .user = r};
    return ms_ini_parse(path, &spec, err);
}

static void test_values_lines_continuation(void)
{
    /* line 1 comment, 2 [a], 3 x, 4 list start, 5 continuation, 6 blank, 7 [b], 8 y */
    write_file("ini_ok.ini", "; comment\n[a]\nx = 1\nlist = 1,\n  2\n\n[b]\ny = two words\n");
    rec r = {0};
    ms_err err;
    CHECK_EQ_INT(parse("ini_ok.ini", &r, &err), 0);
    CHECK_EQ_INT(r.sections, 2);
    CHECK_EQ_INT(r.n, 4);
    CHECK(!strcmp(r.seen[0], "a.x=1") && r.lines[0] == 3 && !r.cont[0]);
    CHECK(!strcmp(r.seen[1], "a.list=1,") && r.lines[1] == 4 && !r.cont[1]);
    CHECK(!strcmp(r.seen[2], "a.list=2") && r.lines[2] == 5 && r.cont[2]); /* inih repeats the key */
    CHECK(!strcmp(r.seen[3], "b.y=two words") && r.lines[3] == 8 && !r.cont[3]);
}

static void test_errors(void)
{
    ms_err err;
    rec r = {.fail_on_line = 3};
    write_file("ini_fail.ini", "[a]\nx = 1\ny = 2\nz = 3\n");
    CHECK_EQ_INT(parse("ini_fail.ini", &r, &err), -1);
    CHECK(!strcmp(err.msg, "ini_fail.ini:3: y = 2: not wanted"));
    CHECK_EQ_INT(r.n, 2); /* nothing after the first error */

    rec r2 = {0};
    write_file("ini_section.ini", "[a]\nx = 1\n[c]\ny = 2\n");
    CHECK_EQ_INT(parse("ini_section.ini", &r2, &err), -1);
    CHECK(!strcmp(err.msg, "ini_section.ini:3: unknown section [c] (known: a, b)"));

    rec r3 = {0};
    write_file("ini_syntax.ini", "[a]\nx = 1\nthis line has no equals sign\n");
    CHECK_EQ_INT(parse("ini_syntax.ini", &r3, &err), -1);
    CHECK(!strcmp(err.msg, "ini_syntax.ini:3: syntax error (expected [section], key = value, or a ; or # comment)"));

    rec r4 = {0};
    char longline[9000];
    memset(longline, 'v', sizeof longline);
    memcpy(longline, "[a]\nx = ", 8);
    longline[sizeof longline - 2] = '\n';
    longline[sizeof longline - 1] = '\0';
    write_file("ini_long.ini", longline);
    CHECK_EQ_INT(parse("ini_long.ini", &r4, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "ini_long.ini:2: line longer than ");

    /* a NUL byte: an error naming the line, not the rest of the line dropped unseen */
    rec r6 = {0};
    FILE *nf = fopen("ini_nul.ini", "wb");
    fwrite("[a]\nx = 1\nlist = 1\0, 2\n", 1, 23, nf);
    fclose(nf);
    CHECK_EQ_INT(parse("ini_nul.ini", &r6, &err), -1);
    CHECK(!strcmp(err.msg, "ini_nul.ini:3: a NUL byte in the line (is this a text file?)"));

    rec r5 = {0};
    CHECK_EQ_INT(parse("ini_missing.ini", &r5, &err), -1);
    CHECK(!strcmp(err.msg, "ini_missing.ini: cannot open test file: No such file or directory"));
    mkdir("ini_dir.ini", 0777);
    CHECK_EQ_INT(parse("ini_dir.ini", &r5, &err), -1);
    CHECK(!strcmp(err.msg, "ini_dir.ini: test file is not a regular file"));

    CHECK_EQ_INT(ms_ini_fail_file(&err, "f.ini", "missing key '%s'", "k"), -1);
    CHECK(!strcmp(err.msg, "f.ini: missing key 'k'"));
}

static const char sl_ok[] =
    "[serverless]\nname = t\ndescription = test\nmemory_mb = 128, 256\nmb_per_vcpu = 1769\nvcpu_gflops = 10\n"
    "warm_start_ms = 1\nstorage_delay_ms = 1\nstorage_bw_mbps = 100\nfunction_bw_mbps = 100\npayload_mb = 6\n"
    "price_per_gb_s = 0.0000166667\nmax_replicas = 4\nruntime_mb = 100\nact_bytes = 2\nlambdaml_mb = 1024\n"
    "nonmoe_mb = 100\ncluster_price_per_hour = 1\ncluster_vcpus = 8\ncluster_vcpu_gflops = 10\ncluster_billing_s = 60\n";

static void test_serverless_platform(void)
{
    ms_sl_platform p;
    ms_err err;
    write_file("sl_ok.ini", sl_ok);
    CHECK_EQ_INT(ms_sl_platform_load("sl_ok.ini", &p, &err), 0);
    CHECK_EQ_INT(p.n_mem, 2);
    CHECK_NEAR(p.mem_mb[1], 256, 0);
    CHECK_EQ_INT(p.max_replicas, 4);
    CHECK_NEAR(p.warm_start_s, 1e-3, 1e-15);

    char bad[sizeof sl_ok + 64];
    snprintf(bad, sizeof bad, "%s", sl_ok);
    char *m = strstr(bad, "128, 256");
    memcpy(m, "256, 128", 8); /* line 4 */
    write_file("sl_bad.ini", bad);
    CHECK_EQ_INT(ms_sl_platform_load("sl_bad.ini", &p, &err), -1);
    CHECK(!strcmp(err.msg, "sl_bad.ini:4: memory_mb = 256, 128: options must be strictly ascending"));

    write_file("sl_unknown.ini", "[serverless]\nname = t\nspeed = 3\n");
    CHECK_EQ_INT(ms_sl_platform_load("sl_unknown.ini", &p, &err), -1);
    CHECK(!strcmp(err.msg, "sl_unknown.ini:3: speed = 3: unknown key"));

    write_file("sl_missing.ini", "[serverless]\nname = t\n");
    CHECK_EQ_INT(ms_sl_platform_load("sl_missing.ini", &p, &err), -1);
    CHECK(!strcmp(err.msg, "sl_missing.ini: missing required key 'description' in [serverless]"));

    write_file("sl_section.ini", "[lambda]\nname = t\n");
    CHECK_EQ_INT(ms_sl_platform_load("sl_section.ini", &p, &err), -1);
    CHECK(!strcmp(err.msg, "sl_section.ini:1: unknown section [lambda] (known: serverless)"));
}

int main(void)
{
    test_values_lines_continuation();
    test_errors();
    test_serverless_platform();
    CHECK_DONE();
}
