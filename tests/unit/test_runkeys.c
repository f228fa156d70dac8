/* The run configuration's keys (sim/engine/runkeys.h): the spelling rule, the
 * sweep's parameters as the first keys, the golden's capacity columns, and
 * the value checks every reader shares. */
#include <string.h>

#include "check.h"
#include "sim/apps/golden.h"
#include "sim/engine/runkeys.h"
#include "sim/apps/sweep_spec.h"

int main(void)
{
    char buf[64];
    /* the rule: --cache-experts <-> cache_experts, for every key */
    for (int i = 0; i < MS_RK_N; i++) {
        ms_runkey_flag(i, buf, sizeof buf);
        CHECK(!strchr(buf, '_'));
        CHECK_EQ_INT(ms_runkey_find_flag(buf), i);
        CHECK_EQ_INT(ms_runkey_find(ms_runkeys[i].key), i);
        CHECK(ms_runkeys[i].help && *ms_runkeys[i].help);
    }
    CHECK(!strcmp(ms_runkey_flag(MS_RK_CACHE_EXPERTS, buf, sizeof buf), "--cache-experts"));
    CHECK_EQ_INT(ms_runkey_find_flag("--cache_experts"), -1);
    CHECK_EQ_INT(ms_runkey_find_flag("cache-experts"), -1);
    CHECK_EQ_INT(ms_runkey_find("cache-experts"), -1);
    /* the sweep's parameters are the first keys, by name */
    for (int p = 0; p < MS_SW_NPARAM; p++)
        CHECK(!strcmp(ms_sweep_param_names[p], ms_runkeys[p].key));
    /* the golden's capacity columns are keys too */
    CHECK(!strcmp(ms_golden_col_names[MS_GCOL_CACHE_EXPERTS], ms_runkeys[MS_RK_CACHE_EXPERTS].key));
    CHECK(!strcmp(ms_golden_col_names[MS_GCOL_CACHE_BYTES], ms_runkeys[MS_RK_CACHE_BYTES].key));
    CHECK(!strcmp(ms_golden_col_names[MS_GCOL_CACHE_GB], ms_runkeys[MS_RK_CACHE_GB].key));
    CHECK(!strcmp(ms_golden_col_names[MS_GCOL_DISTANCE], ms_runkeys[MS_RK_DISTANCE].key));
    CHECK(!strcmp(ms_golden_col_names[MS_GCOL_TRAIN], ms_runkeys[MS_RK_TRAIN].key));
    /* one check for every reader */
    char why[128];
    double x;
    CHECK_EQ_INT(ms_runkey_check(MS_RK_CACHE_EXPERTS, 0, why, sizeof why), -1);
    CHECK(!strcmp(why, "expected a whole number in [1, 1e+09]"));
    CHECK_EQ_INT(ms_runkey_check(MS_RK_CACHE_EXPERTS, 2.5, why, sizeof why), -1);
    CHECK_EQ_INT(ms_runkey_check(MS_RK_CACHE_EXPERTS, 64, why, sizeof why), 0);
    CHECK_EQ_INT(ms_runkey_check(MS_RK_BATCH, 0, why, sizeof why), -1);
    CHECK_EQ_INT(ms_runkey_check(MS_RK_HOST_BYTES, 0, why, sizeof why), 0); /* 0 = all in host memory */
    CHECK_EQ_INT(ms_runkey_check(MS_RK_CACHE_BYTES, 0, why, sizeof why), -1);
    CHECK(!strcmp(why, "expected a positive size such as 4000MiB"));
    CHECK_EQ_INT(ms_runkey_check(MS_RK_TRAIN, 1, why, sizeof why), -1);
    CHECK(!strcmp(why, "expected auto or a fraction in [0, 1)"));
    CHECK_EQ_INT(ms_runkey_parse(MS_RK_CACHE_BYTES, "4000MiB", &x), 0);
    CHECK_NEAR(x, 4000.0 * 1048576, 0);
    CHECK_EQ_INT(ms_runkey_parse(MS_RK_CACHE_BYTES, "4 GB", &x), -1);
    CHECK_EQ_INT(ms_runkey_check(MS_RK_H2D_GBPS, 0, why, sizeof why), -1);
    CHECK_DONE();
}
