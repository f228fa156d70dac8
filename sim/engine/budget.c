/* The GPU memory budget of the expert cache (budget.h). */
#include <stdio.h>

#include "sim/engine/budget.h"

/* KV bytes per token: the model's figure, else the 16-bit MHA estimate;
 * *estimated says which. */
static double kv_per_token(const ms_model *m, int *estimated)
{
    *estimated = !(m->kv_bytes_per_token > 0);
    return *estimated ? 2.0 * m->layers * m->hidden * 2.0 : m->kv_bytes_per_token;
}

void ms_budget_compute(const ms_budget_in *in, ms_budget *out)
{
    const ms_model *m = in->model;
    out->gpu_mem = in->platform->gpu_mem_bytes;
    out->dense = in->dense_bytes;
    out->embed = 0;
    out->kv = 0;
    out->reserve = in->framework ? in->framework->reserve_bytes : 0;
    int estimated = 0;
    if (m) {
        out->embed = 2.0 * m->vocab * m->hidden * 2.0;
        out->kv = (double)in->batch * in->context_tokens * kv_per_token(m, &estimated);
    }
    out->expert_cache = out->gpu_mem - out->dense - out->embed - out->kv - out->reserve;
    if (!m) {
        snprintf(out->assumed, sizeof out->assumed,
                 "GPU %.4g GB - dense %.4g GB - framework reserve %.4g GB (no model profile: no embeddings or KV "
                 "cache counted) = %.4g GB for experts",
                 out->gpu_mem / 1e9, out->dense / 1e9, out->reserve / 1e9, out->expert_cache / 1e9);
        return;
    }
    snprintf(out->assumed, sizeof out->assumed,
             "GPU %.4g GB - dense %.4g GB - embeddings+lm_head %.4g GB (2 x vocab x hidden x 2 B) - KV %.4g GB "
             "(%u requests x %.0f tokens x %.0f B/token%s) - framework reserve %.4g GB = %.4g GB for experts",
             out->gpu_mem / 1e9, out->dense / 1e9, out->embed / 1e9, out->kv / 1e9, in->batch, in->context_tokens,
             kv_per_token(m, &estimated),
             estimated ? ", estimated 2 x layers x hidden x 2 B: model has no kv_bytes_per_token" : "",
             out->reserve / 1e9, out->expert_cache / 1e9);
}

double ms_budget_cache_room(const ms_budget *b, const ms_model *m)
{
    int kv_estimated = m && !(m->kv_bytes_per_token > 0);
    return b->expert_cache + (kv_estimated ? b->kv : 0);
}
