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

static const char *const models[] = {"mixtral-8x7b",      "deepseek-v2-lite", "qwen3-30b-a3b",  "phi-3.5-moe",
                                     "olmoe-1b-7b",       "qwen1.5-moe-a2.7b", "switch-base-128", "nllb-moe-128"};

/* Targets the generator's knobs cannot reach on the default trace (measured
 * values in docs/generator.md "Locality targets"): each must still be missed,
 * so meeting one after a change makes this list (and the docs) out of date.
 * None at present; the list ends with {NULL, NULL}. */
static const struct { const char *model, *target; } known_misses[] = {
    {NULL, NULL},
};

static int known_miss(const char *model, const char *target)
{
    for (size_t i = 0; known_misses[i].model; i++)
        if (!strcmp(known_misses[i].model, model) && !strcmp(known_misses[i].target, target))
            return 1;
    return 0;
}

/* Targets met by the trace of knobs p; prints each row.  With `strict`, checks
 * every target is met but the known misses, and those are missed. */
static int met_count(const ms_model *m, const ms_targets *ts, const ms_gen_params *p, const char *label, int strict)
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
        int known = known_miss(m->name, ts->t[i].name);
        printf("%s %s %-18s target %.3f trace %.3f %s%s\n", m->name, label, ts->t[i].name, ts->t[i].value, v,
               ok ? "ok" : "MISS", known ? " (known miss)" : "");
        if (strict)
            CHECK_EQ_INT(ok, !known);
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
    int base = met_count(&m, &ts, &p, "default", 1);
    /* each fitted knob moved well off misses a target: the locality knobs on
     * Mixtral (two targets pin recall loosely: 0.4 still meets them), the
     * topic drift on DeepSeek-V2-Lite (the cheaper of the two models that
     * fit it): none keeps SCH at 64 / 256 rows too high, 0.05 (segments of
     * 20 rows) takes SCH at 256 too low */
    static const struct { const char *model, *knob, *value; } moved[] = {
        {"mixtral-8x7b", "pref_alpha", "1"},          {"mixtral-8x7b", "decode_reuse", "0.3"},
        {"mixtral-8x7b", "decode_recall", "0.8"},     {"deepseek-v2-lite", "pref_drift", "0"},
        {"deepseek-v2-lite", "pref_drift", "0.05"},
    };
    for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++) {
        if (strcmp(name, moved[i].model))
            continue;
        ms_gen_params q = p;
        CHECK_EQ_INT(ms_gen_set(&q, moved[i].knob, moved[i].value, &err), 0);
        char label[64];
        snprintf(label, sizeof label, "%s=%s", moved[i].knob, moved[i].value);
        CHECK(met_count(&m, &ts, &q, label, 0) < base);
    }
}

int main(int argc, char **argv)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (argc < 2 || !strcmp(argv[1], models[i]))
            check_model(models[i]);
    CHECK_DONE();
}
