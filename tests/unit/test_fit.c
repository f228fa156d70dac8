/* moesim trace fit: a fitted twin matches its source's statistics.
 *
 * Sources: a synthetic Mixtral-shaped trace made with non-default knobs, and
 * (when ../shared is present) the real gpt-oss route-csv trace imported at
 * test time.  Each is fitted (1 pass, 1 trial seed, to stay fast), the params
 * file is written and read back, a twin is generated from it with the params'
 * own seed (never seen by the search) and both are measured by the stats
 * module.  Tolerances (also in docs/traces.md, "Fitted generator"):
 *   per-layer whole-trace entropy h_trace |twin - source| <= 0.6 bits, each layer
 *     (measured worst: 0.36 synthetic, 0.48 gpt-oss: small traces, sampling noise)
 *   mean h_req over layers                               <= 0.15 bits
 *   mean weighted iteration entropy hw_iter              <= 0.10 bits
 *   mean previous-step reuse reuse_prev                  <= 0.06
 *   mean layer l -> l+1 top-1 MI mi_top1                 <= 0.30 bits
 * and the twin has the source's shape, request count and lengths (one
 * request: exactly its prompt and output lengths). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/synth/fit.h"
#include "traces/synth/gen_params.h"
#include "traces/import/import.h"
#include "check.h"

#define TOL_H_TRACE_LAYER 0.6
#define TOL_H_REQ_MEAN 0.15
#define TOL_HW_ITER 0.10
#define TOL_REUSE 0.06
#define TOL_MI 0.30

static void compare(const char *name, const ms_stats_report *s, const ms_stats_report *t)
{
    CHECK_EQ_INT(t->L, s->L);
    CHECK_EQ_INT(t->J, s->J);
    CHECK_EQ_INT(t->K, s->K);
    CHECK_EQ_INT(t->n_requests, s->n_requests);
    double worst = 0;
    for (uint32_t l = 0; l < s->L; l++) {
        double d = fabs(t->h_trace[l] - s->h_trace[l]);
        worst = d > worst ? d : worst;
        if (d > TOL_H_TRACE_LAYER)
            printf("  layer %u: h_trace %.3f / %.3f\n", l, s->h_trace[l], t->h_trace[l]);
        CHECK_NEAR(t->h_trace[l], s->h_trace[l], TOL_H_TRACE_LAYER);
    }
    printf("%s: h_req %.3f / %.3f (worst layer h_trace %.3f), hw_iter %.3f / %.3f, reuse_prev %.3f / %.3f, "
           "mi_top1 %.3f / %.3f (source / twin)\n",
           name, s->mean.h_req, t->mean.h_req, worst, s->mean.hw_iter, t->mean.hw_iter, s->mean.reuse_prev,
           t->mean.reuse_prev, s->mean.mi_top1, t->mean.mi_top1);
    CHECK_NEAR(t->mean.h_req, s->mean.h_req, TOL_H_REQ_MEAN);
    CHECK_NEAR(t->mean.hw_iter, s->mean.hw_iter, TOL_HW_ITER);
    CHECK_NEAR(t->mean.reuse_prev, s->mean.reuse_prev, TOL_REUSE);
    CHECK_NEAR(t->mean.mi_top1, s->mean.mi_top1, TOL_MI);
}

/* Fits src, writes name.ini, reads it back, generates name-twin.h5. */
static void fit_and_compare(const char *name, const char *src)
{
    ms_err err;
    char ini[256], twin[256];
    snprintf(ini, sizeof ini, "fit_%s.ini", name);
    snprintf(twin, sizeof twin, "fit_%s_twin.h5", name);
    ms_fit_options o;
    ms_fit_default_options(&o);
    o.passes = 1;
    o.trial_seeds = 1;
    ms_fit_result r;
    if (ms_fit_trace(src, &o, &r, &err)) {
        fprintf(stderr, "fit %s: %s\n", name, err.msg);
        CHECK(0);
        return;
    }
    CHECK(r.trials > 4);
    CHECK(ms_fit_write(&r, src, ini, &err) == 0);
    ms_fit_free(&r);

    ms_gen_file f;
    if (ms_gen_file_load(ini, NULL, &f, &err)) {
        fprintf(stderr, "load %s: %s\n", ini, err.msg);
        CHECK(0);
        return;
    }
    CHECK(f.has_model);
    CHECK(f.p.popularity != NULL);
    CHECK_EQ_INT(f.p.seed, 1);
    CHECK(ms_gen_write(&f.p, &f.model, twin, NULL, &err) == 0);
    ms_gen_file_free(&f);

    ms_stats *s = ms_fit_stats_of_trace(src, &err), *t = ms_fit_stats_of_trace(twin, &err);
    CHECK(s && t);
    if (s && t)
        compare(name, ms_stats_report_get(s), ms_stats_report_get(t));
    ms_stats_free(s);
    ms_stats_free(t);

    /* lengths: one request gives exactly its lengths back */
    ms_trace_reader *a = ms_reader_open(src, &err), *b = ms_reader_open(twin, &err);
    CHECK(a && b);
    if (a && b && ms_reader_meta(a)->n_requests == 1) {
        CHECK_EQ_INT(ms_reader_meta(b)->req_prompt_len[0], ms_reader_meta(a)->req_prompt_len[0]);
        CHECK_EQ_INT(ms_reader_meta(b)->req_output_len[0], ms_reader_meta(a)->req_output_len[0]);
        CHECK_EQ_INT(ms_reader_meta(b)->expert_bytes[0], ms_reader_meta(a)->expert_bytes[0]);
        CHECK_EQ_INT(ms_reader_meta(b)->dense_bytes[4], ms_reader_meta(a)->dense_bytes[4]);
    }
    if (a)
        ms_reader_close(a);
    if (b)
        ms_reader_close(b);
    remove(ini);
    remove(twin);
}

static void synthetic_source(void)
{
    ms_err err;
    ms_model m;
    CHECK(ms_model_load("mixtral-8x7b", &m, &err) == 0);
    ms_gen_params p;
    ms_gen_defaults(&p);
    const char *set[][2] = {{"requests", "12"},     {"prompt_median", "16"}, {"output_median", "40"},
                            {"gate_alpha", "0.3"},  {"decode_reuse", "0.5"}, {"layer_corr", "0.8"},
                            {"pref_alpha", "0.15"}, {"seed", "5"},           {"embed_dim", "0"}};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        CHECK(ms_gen_set(&p, set[i][0], set[i][1], &err) == 0);
    CHECK(ms_gen_write(&p, &m, "fit_src_synth.h5", NULL, &err) == 0);
    fit_and_compare("synthetic", "fit_src_synth.h5");
    remove("fit_src_synth.h5");
}

static void real_source(void)
{
    const char *csv = MS_TEST_SHARED "/traces/bigmoeonedge/gptoss.route.csv";
    FILE *f = fopen(csv, "r");
    if (!f) {
        printf("skipping the real trace: %s not found\n", csv);
        return;
    }
    fclose(f);
    ms_err err;
    ms_import_report rep;
    CHECK(ms_import_routecsv(csv, "fit_src_gptoss.h5", &rep, &err) == 0);
    fit_and_compare("gptoss", "fit_src_gptoss.h5");
    remove("fit_src_gptoss.h5");
}

int main(void)
{
    synthetic_source();
    real_source();
    CHECK_DONE();
}
