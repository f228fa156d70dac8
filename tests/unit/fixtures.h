/* Trace fixtures shared by the unit tests: the real route-csv traces of
 * ../shared imported, and seeded synthetic traces.  Both exit on failure. */
#ifndef MS_TEST_FIXTURES_H
#define MS_TEST_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>

#include "sim/profile.h"
#include "traces/gen.h"
#include "traces/import.h"

/* Imports ../shared/traces/bigmoeonedge/<name>.route.csv into `out`. */
static inline void ms_fixture_import_real(const char *name, const char *out)
{
    char in[1024];
    snprintf(in, sizeof in, "%s/traces/bigmoeonedge/%s.route.csv", MS_TEST_SHARED, name);
    ms_err err;
    if (ms_import_routecsv(in, out, NULL, &err)) {
        fprintf(stderr, "import %s: %s\n", in, err.msg);
        exit(1);
    }
}

/* A synthetic trace shaped like `model_name` with the generator's defaults. */
static inline void ms_fixture_gen(const char *model_name, const char *out, uint64_t seed, uint64_t requests)
{
    ms_model model;
    ms_gen_params p;
    ms_err err;
    ms_gen_defaults(&p);
    p.seed = seed;
    p.requests = requests;
    if (ms_model_load(model_name, &model, &err) || ms_gen_write(&p, &model, out, NULL, &err)) {
        fprintf(stderr, "gen %s: %s\n", model_name, err.msg);
        exit(1);
    }
}

#endif
