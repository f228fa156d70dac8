/* Every model with published locality targets (sim/profiles/targets/) meets
 * them on its default generated trace (ms_gen_model_defaults: the profile's
 * [routing] knobs, default seed, request count and lengths; generated in
 * memory, the routing `moesim trace gen --model M` writes), and moving a
 * fitted knob off its value misses a target (docs/generator.md "Per-model
 * routing").  Usage: test_routing_targets [MODEL] (one model: ctest runs
 * them in parallel). */
#include "check.h"
#include "traces/stats/targets.h"
#include "traces/synth/fit.h"
#include "traces/synth/gen.h"

static const char *const models[] = {"mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b"};

/* Targets met by the trace of knobs p; prints each row. */
static int met_count(const ms_model *m, const ms_targets *ts, const ms_gen_params *p, const char *label)
{
    ms_err err;
    ms_stats *s = ms_fit_stats_of_gen(p, m, &err);
    CHECK(s != NULL);
    if (!s) {
        fprintf(stderr, "%s: %s\n", m->name, err.msg);
        return -1;
    }
    int met = 0;
    for (int i = 0; i < ts->n; i++) {
        double v = ms_target_measure(&ts->t[i], s);
        int ok = ms_target_met(&ts->t[i], v);
        met += ok;
        printf("%s %s %-18s target %.3f trace %.3f %s\n", m->name, label, ts->t[i].name, ts->t[i].value, v,
               ok ? "ok" : "MISS");
    }
    ms_stats_free(s);
    return met;
}

static void check_model(const char *name)
{
    ms_model m;
    ms_targets ts;
    ms_gen_params p;
    ms_err err;
    if (ms_model_load(name, &m, &err) || ms_targets_load(name, &ts, &err) || ms_gen_model_defaults(&p, &m, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        CHECK(0);
        return;
    }
    CHECK(m.n_routing > 0);
    CHECK_EQ_INT(met_count(&m, &ts, &p, "default"), ts.n);
    if (strcmp(name, "mixtral-8x7b"))
        return;
    /* each fitted knob moved well off (two targets pin recall loosely: 0.4 still meets them) */
    struct { const char *knob, *value; } moved[] = {{"pref_alpha", "1"}, {"decode_reuse", "0.3"}, {"decode_recall", "0.8"}};
    for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++) {
        ms_gen_params q = p;
        CHECK_EQ_INT(ms_gen_set(&q, moved[i].knob, moved[i].value, &err), 0);
        CHECK(met_count(&m, &ts, &q, moved[i].knob) < ts.n);
    }
}

int main(int argc, char **argv)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (argc < 2 || !strcmp(argv[1], models[i]))
            check_model(models[i]);
    CHECK_DONE();
}
