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

/* ms_fit_coverage_smooth: counts {2, 2, 0, 0} saw 2 experts in 4 draws, but 4
 * draws from (0.5, 0.5, 0, 0) touch 2 (1 - 0.5^4) = 1.875 on average, so
 * a > 0 and then E[distinct] = sum 1 - (1 - p)^4 = 2 (reachable: uniform gives
 * 4 (1 - 0.75^4) = 2.73); {4, 0, 0, 0} needs no smoothing. */
static void coverage_smoothing(void)
{
    double c[4] = {2, 2, 0, 0}, p[4];
    double a = ms_fit_coverage_smooth(c, 4, p);
    CHECK(a > 0);
    double d = 0, sum = 0;
    for (int j = 0; j < 4; j++) {
        d += 1 - pow(1 - p[j], 4);
        sum += p[j];
    }
    CHECK_NEAR(d, 2.0, 1e-6);
    CHECK_NEAR(sum, 1.0, 1e-12);
    CHECK_NEAR(p[0], p[1], 1e-12);
    double c1[4] = {4, 0, 0, 0};
    CHECK(ms_fit_coverage_smooth(c1, 4, p) == 0);
    CHECK_NEAR(p[0], 1.0, 1e-12);
}

/* The generator's phase popularities and length list (data/fit/good_phases.ini):
 * with no locality (decode_reuse = decode_mix = decode_recall = 0) a decode
 * row's preference at layer 0 is the request's (popularity 1 1 1 1: uniform
 * over experts) times decode / popularity, 0 on experts 0 and 1 in the first
 * half of the decode steps ([decode_popularity] 0 0 1 1) and on 2 and 3 in the
 * second ([late_decode_popularity] 1 1 0 0): top-2 = {2, 3}, then {0, 1}.
 * Lengths: (3, 7), (5, 0), (3, 7) in turn. */
/* The trace of params file INI (under data/fit) with no decode locality
 * (decode_reuse = decode_mix = decode_recall = 0), written to H5 and opened;
 * NULL after a failed check.  When phases > 0, the file must have that many
 * decode phases. */
static ms_trace_reader *open_without_locality(const char *ini, uint32_t phases, const char *h5, ms_err *err)
{
    ms_gen_file f;
    if (ms_gen_file_load(ini, NULL, &f, err)) {
        fprintf(stderr, "%s\n", err->msg);
        CHECK(0);
        return NULL;
    }
    if (phases)
        CHECK_EQ_INT(f.p.decode_phases, phases);
    CHECK(ms_gen_set(&f.p, "decode_recall", "0", err) == 0 && ms_gen_set(&f.p, "decode_mix", "0", err) == 0 &&
          ms_gen_set(&f.p, "decode_reuse", "0", err) == 0);
    CHECK(ms_gen_write(&f.p, &f.model, h5, NULL, err) == 0);
    ms_gen_file_free(&f);
    ms_trace_reader *rd = ms_reader_open(h5, err);
    CHECK(rd != NULL);
    return rd;
}

static void phases_and_lengths(void)
{
    ms_err err;
    ms_trace_reader *rd = open_without_locality(MS_TEST_DATA "/fit/good_phases.ini", 0, "fit_phases.h5", &err);
    if (!rd)
        return;
    const ms_trace_meta *m = ms_reader_meta(rd);
    const uint32_t want_p[3] = {3, 5, 3}, want_o[3] = {7, 0, 7};
    ms_request req;
    memset(&req, 0, sizeof req);
    int n = 0, bad = 0;
    while (ms_reader_next(rd, &req, &err) == 1 && n < 3) {
        CHECK_EQ_INT(req.prompt_len, want_p[n]);
        CHECK_EQ_INT(req.output_len, want_o[n]);
        for (uint32_t t = 1; t <= req.output_len; t++) {
            const int32_t *ids = req.topk_ids + ms_topk_index(m, req.prompt_len + t - 1, 0);
            int late = t > req.output_len / 2;
            for (uint32_t k = 0; k < 2; k++)
                bad += late ? ids[k] > 1 : ids[k] < 2;
        }
        n++;
    }
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(bad, 0);
    ms_request_free(&req);
    ms_reader_close(rd);
    remove("fit_phases.h5");
}

/* ms_gen_decode_phase: two phases are the halves (t > n/2 of n); three
 * phases of 7 steps put the boundaries at 7/3 = 2 and 14/3 = 4, so steps
 * 1-2, 3-4 and 5-7; one phase is phase 0. */
static void decode_phase_rule(void)
{
    for (uint32_t n = 1; n <= 50; n++)
        for (uint32_t t = 1; t <= n; t++) {
            CHECK_EQ_INT(ms_gen_decode_phase(t, n, 2), t > n / 2);
            CHECK_EQ_INT(ms_gen_decode_phase(t, n, 1), 0);
        }
    const uint32_t want[7] = {0, 0, 1, 1, 2, 2, 2};
    for (uint32_t t = 1; t <= 7; t++)
        CHECK_EQ_INT(ms_gen_decode_phase(t, 7, 3), want[t - 1]);
    CHECK_EQ_INT(ms_gen_decode_phase(16, 16, 16), 15);
}

/* Three decode phases (data/fit/good_phases3.ini, output 7: steps 1-2, 3-4,
 * 5-7).  With no locality and a uniform request preference, a decode row's
 * preference is its phase's popularity, which puts weight on exactly two
 * experts per layer, so the top-2 is that pair: layer 0 {2,3}, {0,1}, {0,2};
 * layer 1 {1,3}, {0,2}, {1,2}.  Both requests. */
static void three_phases(void)
{
    ms_err err;
    ms_trace_reader *rd = open_without_locality(MS_TEST_DATA "/fit/good_phases3.ini", 3, "fit_phases3.h5", &err);
    if (!rd)
        return;
    const ms_trace_meta *m = ms_reader_meta(rd);
    const int32_t pair[3][2][2] = {{{2, 3}, {1, 3}}, {{0, 1}, {0, 2}}, {{0, 2}, {1, 2}}};
    ms_request req;
    memset(&req, 0, sizeof req);
    int n = 0, bad = 0, cells = 0;
    while (ms_reader_next(rd, &req, &err) == 1) {
        CHECK_EQ_INT(req.output_len, 7);
        for (uint32_t t = 1; t <= req.output_len; t++)
            for (uint32_t l = 0; l < 2; l++) {
                const int32_t *ids = req.topk_ids + ms_topk_index(m, req.prompt_len + t - 1, l);
                const int32_t *want = pair[ms_gen_decode_phase(t, 7, 3)][l];
                int lo = ids[0] < ids[1] ? ids[0] : ids[1], hi = ids[0] < ids[1] ? ids[1] : ids[0];
                bad += lo != want[0] || hi != want[1];
                cells++;
            }
        n++;
    }
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(cells, 28);
    CHECK_EQ_INT(bad, 0);
    ms_request_free(&req);
    ms_reader_close(rd);
    remove("fit_phases3.h5");
}

/* decode_recall raises the reuse within 8 decode steps (OLMoE shape, J = 64,
 * K = 8; 16 flat requests of 40 decode steps, no other locality; measured
 * 0.646 at 0 and 0.784 at 0.8, seed 1; asserted: a gain above 0.07). */
static void recall_raises_w8(void)
{
    ms_err err;
    ms_model m;
    CHECK(ms_model_load("olmoe-1b-7b", &m, &err) == 0);
    double w8[2];
    for (int i = 0; i < 2; i++) {
        ms_gen_params p;
        ms_gen_defaults(&p);
        const char *set[][2] = {{"requests", "16"}, {"prompt_median", "8"}, {"output_median", "40"},
                                {"output_sigma", "0"}, {"decode_reuse", "0"}, {"decode_mix", "0"},
                                {"embed_dim", "0"}, {"pref_alpha", "5"}, {"gate_alpha", "0.05"},
                                {"decode_recall", i ? "0.8" : "0"}};
        for (size_t k = 0; k < sizeof set / sizeof set[0]; k++)
            CHECK(ms_gen_set(&p, set[k][0], set[k][1], &err) == 0);
        ms_stats *s = ms_fit_stats_of_gen(&p, &m, &err);
        CHECK(s != NULL);
        w8[i] = s ? ms_stats_report_get(s)->mean.reuse_w8 : NAN;
        ms_stats_free(s);
    }
    printf("reuse_w8: decode_recall 0 -> %.3f, 0.8 -> %.3f\n", w8[0], w8[1]);
    CHECK(w8[1] > w8[0] + 0.07);
}

int main(void)
{
    coverage_smoothing();
    phases_and_lengths();
    decode_phase_rule();
    three_phases();
    recall_raises_w8();
    synthetic_source();
    real_source();
    CHECK_DONE();
}
