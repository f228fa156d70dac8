/* k=v policy parameters and strict number / byte-size parsing. */
#include "check.h"
#include "sim/core/params.h"

static const ms_param_spec specs[] = {
    {"k", MS_PARAM_INT, "2", 1, 64, NULL, "experts"},
    {"alpha", MS_PARAM_DOUBLE, "0.5", 0, 1, NULL, "mix"},
    {"mode", MS_PARAM_ENUM, "paper", 0, 0, "paper|code", "variant"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

int main(void)
{
    ms_params p;
    ms_err err;
    CHECK(ms_params_parse(specs, "", "lru", &p, &err) == 0);
    CHECK_EQ_INT(ms_param_num(&p, "k"), 2);
    CHECK_NEAR(ms_param_num(&p, "alpha"), 0.5, 0);
    CHECK(!strcmp(ms_param_str(&p, "mode"), "paper"));

    CHECK(ms_params_parse(specs, "k=8,mode=code,alpha=0.25", "x", &p, &err) == 0);
    CHECK_EQ_INT(ms_param_num(&p, "k"), 8);
    CHECK_NEAR(ms_param_num(&p, "alpha"), 0.25, 0);
    CHECK(!strcmp(ms_param_str(&p, "mode"), "code"));

    CHECK(ms_params_parse(specs, "kk=1", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown parameter 'kk' (known: k, alpha, mode)");
    CHECK(ms_params_parse(specs, "k=1.5", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "k=1.5 is not an integer");
    CHECK(ms_params_parse(specs, "k=65", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "out of range");
    CHECK(ms_params_parse(specs, "alpha=abc", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "alpha=abc is not a number");
    CHECK(ms_params_parse(specs, "mode=fast", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "not one of paper|code");
    CHECK(ms_params_parse(specs, "k=2,k=3", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "given twice");
    CHECK(ms_params_parse(specs, "k=2,", "x", &p, &err) == -1);
    CHECK(ms_params_parse(specs, "k", "x", &p, &err) == -1);
    CHECK(ms_params_parse(specs, "k=nan", "x", &p, &err) == -1);
    /* decimal only: strtod reads hex, moesim refuses it and says why */
    CHECK(ms_params_parse(specs, "k=0x1", "lfu", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "lfu: k=0x1 is not a number (decimal numbers only, no hex)");
    CHECK(ms_params_parse(specs, "alpha=-0X1p-2", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "no hex");
    /* a number a double cannot hold is out of range, not "not a number" */
    CHECK(ms_params_parse(specs, "alpha=1e-400", "mrs", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "mrs: alpha=1e-400 is out of range [0, 1] (beyond what a double holds)");
    CHECK(ms_params_parse(specs, "k=1e400", "x", &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "k=1e400 is out of range [1, 64]");
    double d;
    CHECK_EQ_INT(ms_parse_double("1e400", &d), -2);
    CHECK_EQ_INT(ms_parse_double("0x10", &d), -1);
    CHECK_EQ_INT(ms_parse_double("1e-3", &d), 0);

    char name[32];
    const char *kv;
    CHECK(ms_spec_split("lfu:reset=1", name, sizeof name, &kv, &err) == 0);
    CHECK(!strcmp(name, "lfu") && !strcmp(kv, "reset=1"));
    CHECK(ms_spec_split(":x=1", name, sizeof name, &kv, &err) == -1);

    double b;
    CHECK(ms_parse_bytes("4000MiB", &b) == 0);
    CHECK_NEAR(b, 4000.0 * 1048576.0, 0);
    CHECK(ms_parse_bytes("1.5GB", &b) == 0);
    CHECK_NEAR(b, 1.5e9, 0);
    CHECK(ms_parse_bytes("123", &b) == 0);
    CHECK_NEAR(b, 123, 0);
    CHECK(ms_parse_bytes("12 MB", &b) == -1);
    CHECK(ms_parse_bytes("-5MB", &b) == -1);
    CHECK(ms_parse_bytes("5XB", &b) == -1);
    CHECK(ms_parse_bytes("0x10MiB", &b) == -1);
    unsigned long long u;
    CHECK(ms_parse_u64("42", &u) == 0 && u == 42);
    CHECK(ms_parse_u64("-1", &u) == -1);
    CHECK(ms_parse_u64("4x", &u) == -1);
    CHECK_DONE();
}
