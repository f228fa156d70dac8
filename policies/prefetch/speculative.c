/* speculative: Mixtral-Offloading / ProMoE-style speculative prefetch
 * (docs/policies.md: "at layer l prefetch the top experts of
 * gate_{l+d}(h_l) from the trace's speculative gate outputs").
 *
 * After layer l's gate (its hidden state h_l exists by then), the trace's
 * speculative gate output gate_{l+i}(h_l), averaged over the batch's rows
 * (ms_view_spec_gate), ranks layer l+i's experts; the k best with a positive
 * weight are prefetched with priority = weight / i.
 *   layers=target: i = d only (the table's definition; default).
 *   layers=all:    every i in 1..d, so layers l+1..l+d are all guessed from
 *                  h_l (Mixtral-Offloading guesses l+1 only: layers=all,
 *                  --distance 1 is the same thing).  The 1/i discount orders
 *                  equally confident guesses nearer-first.
 * Layers 0..d-1 (target) or 0 (all) have no earlier hidden state and are
 * never prefetched.  Needs a trace with spec_depth >= d (synthetic `moesim
 * trace gen` traces have them; route-csv imports do not): a one-line error
 * otherwise. */
#include <stdlib.h>
#include <string.h>

#include "policies/lib/base_predict.h"
#include "policies/policy.h"

typedef struct {
    uint32_t k, d, J, L;
    int all;
    float *gate;    /* [J] */
    double *score;  /* [J] */
    uint32_t *top;  /* [J] */
} spec_state;

static int spec_check_trace(const ms_policy_env *env, ms_err *err)
{
    const ms_trace_meta *m = env->meta;
    if (env->distance < 1)
        return ms_fail(err, "speculative needs --distance >= 1");
    if (m->spec_depth == 0)
        return ms_fail(err, "trace %s has no speculative gate outputs (spec_depth 0; route-csv imports never do): "
                            "use a trace with them, e.g. from `moesim trace gen`",
                       env->trace_path);
    if (m->spec_depth < env->distance)
        return ms_fail(err, "trace %s has speculative gates only up to %u layers ahead, --distance %u needs %u",
                       env->trace_path, m->spec_depth, env->distance, env->distance);
    return 0;
}

static void *spec_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    if (spec_check_trace(env, err))
        return NULL;
    spec_state *s = ms_xcalloc(1, sizeof *s);
    s->k = (uint32_t)ms_param_num(p, "k");
    if (s->k == 0)
        s->k = env->meta->K;
    s->d = env->distance;
    s->J = env->meta->J;
    s->L = env->meta->L;
    s->all = !strcmp(ms_param_str(p, "layers"), "all");
    s->gate = ms_xcalloc(s->J, sizeof *s->gate);
    s->score = ms_xcalloc(s->J, sizeof *s->score);
    s->top = ms_xcalloc(s->J, sizeof *s->top);
    return s;
}

static void spec_destroy(void *st)
{
    spec_state *s = st;
    free(s->gate);
    free(s->score);
    free(s->top);
    free(s);
}

/* Prefetches the k best experts of gate_{l+i}(h_l). */
static void prefetch_from_spec_gate(spec_state *s, ms_view *v, uint32_t l, uint32_t i)
{
    if (!ms_view_spec_gate(v, l, i, s->gate))
        return; /* l + i >= L */
    for (uint32_t e = 0; e < s->J; e++)
        s->score[e] = s->gate[e];
    uint32_t n = ms_base_top_positive(s->score, s->J, s->k, s->top);
    for (uint32_t r = 0; r < n; r++)
        ms_view_prefetch(v, l + i, s->top[r], s->score[s->top[r]] / (double)i);
}

static void spec_gate(void *st, ms_view *v, uint32_t l)
{
    spec_state *s = st;
    for (uint32_t i = s->all ? 1 : s->d; i <= s->d; i++)
        prefetch_from_spec_gate(s, v, l, i);
}

static const ms_param_spec spec_params[] = {
    {"k", MS_PARAM_INT, "0", 0, 4096, NULL, "experts prefetched per guessed layer (0 = the trace's K)"},
    {"layers", MS_PARAM_ENUM, "target", 0, 0, "target|all",
     "target: guess layer l+d only; all: guess every layer l+1..l+d from h_l"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};
static const ms_prefetch_ops spec_ops = {
    .create = spec_create, .destroy = spec_destroy, .on_gate = spec_gate,
};
const ms_policy_desc ms_policy_prefetch_speculative = {
    .name = "speculative", .kind = MS_KIND_PREFETCH, .uses_distance = 1, .params = spec_params, .prefetch = &spec_ops,
    .reads = MS_PART_SPEC,
    .summary = "Mixtral-Offloading / ProMoE: top experts of the speculative gate_{l+d}(h_l) from the trace",
};
