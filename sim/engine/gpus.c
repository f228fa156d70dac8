/* Several GPUs (docs/engine.md "Several GPUs"): the placement of experts,
 * one expert cache per GPU, a layer's experts computed on their GPUs at
 * once with token dispatch and combine over the interconnect, and per-GPU
 * results.  With one GPU only the accounting helpers run, and they change
 * nothing (every result as before). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/gate.h"
#include "sim/engine/placement.h"
#include "sim/engine/state.h"

/* ---- set-up ---- */

typedef struct {
    uint64_t *load;
    const ms_trace_meta *m;
} load_ctx;

static int count_load(void *ctx, uint64_t req_index, const ms_request *r, uint32_t it, ms_err *err)
{
    (void)req_index;
    (void)err;
    load_ctx *c = ctx;
    const ms_iteration *iter = &r->iters[it];
    for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++)
        for (uint32_t l = 0; l < c->m->L; l++)
            for (uint32_t k = 0; k < c->m->K; k++) {
                int32_t e = r->topk_ids[ms_topk_index(c->m, row, l) + k];
                if (e >= 0)
                    c->load[(size_t)l * c->m->J + (uint32_t)e]++;
            }
    return 0;
}

static int place_experts(ms_view *v)
{
    const char *spec = v->cfg->placement;
    ms_place_kind kind = ms_placement_kind(spec);
    if (kind == MS_PLACE_FILE)
        return ms_placement_read(spec, v->L, v->J, v->G, v->gpu_of, v->err);
    uint64_t *load = NULL;
    if (kind == MS_PLACE_BALANCED) {
        load = ms_xcalloc(v->NX, sizeof *load);
        ms_policy_env counted = v->env;
        if (counted.split.frac == 0) /* no split: the whole trace's load */
            counted.split = (ms_split){.frac = 1, .train_requests = v->meta->n_requests};
        load_ctx c = {load, v->meta};
        if (ms_train_foreach(&counted, 0, count_load, &c, v->err)) {
            free(load);
            return -1;
        }
    }
    ms_placement_fill(kind, v->L, v->J, v->G, load, v->gpu_of);
    free(load);
    return 0;
}

/* The most experts of one layer a token batch can need on GPU g at once,
 * in cache units: min(K, experts of the layer placed on g), over layers. */
static double layer_need(const ms_view *v, uint32_t g, uint32_t *at)
{
    double need = 0;
    for (uint32_t l = 0; l < v->L; l++) {
        uint32_t placed = 0;
        for (uint32_t e = 0; e < v->J; e++)
            placed += v->gpu_of[l * v->J + e] == g;
        double n = (placed < v->K ? placed : v->K) * eng_unit_of(v, l * v->J);
        if (n > need) {
            need = n;
            *at = l;
        }
    }
    return need;
}

static int split_caches(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    int bytes = c->cap_kind == MS_CAP_BYTES;
    double max_bytes = 0, total = 0;
    for (uint32_t l = 0; l < v->L; l++)
        max_bytes = ms_fmax(max_bytes, v->layer_bytes[l]);
    for (uint32_t g = 0; g < v->G; g++) {
        double cap = c->cache_per_gpu ? c->cap_value
                     : bytes          ? c->cap_value / v->G
                                      : floor(c->cap_value / v->G) + (g < fmod(c->cap_value, v->G) ? 1 : 0);
        uint32_t at = 0;
        double need = layer_need(v, g, &at);
        if (cap + 1e-9 < need)
            return ms_fail(v->err,
                           "GPU %u's expert cache (%g %s of %s%g) is smaller than the %g %s layer %u places on it "
                           "can need at once (min(top-k, experts placed)); raise the cache or change the placement",
                           g, cap, bytes ? "bytes" : "experts", c->cache_per_gpu ? "" : "a total ", c->cap_value,
                           need, bytes ? "bytes of experts" : "experts", at);
        double cap_bytes = bytes ? cap : cap * max_bytes;
        if (c->platform->gpu_mem_bytes > 0 && cap_bytes > c->platform->gpu_mem_bytes)
            return ms_fail(v->err, "GPU %u's expert cache of %.0f bytes exceeds %s's GPU memory of %.0f bytes", g,
                           cap_bytes, c->platform->name, c->platform->gpu_mem_bytes);
        v->gcap[g] = cap;
        v->m->gpu[g].cache_capacity = cap;
        total += cap;
    }
    v->cap_units = total;
    v->m->gpu_cache_capacity_bytes = bytes ? total : total * max_bytes;
    return 0;
}

static int check_multi_gpu(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    const ms_platform *p = c->platform;
    if (c->exec)
        return ms_fail(v->err, "%u GPUs run on the simulated timeline only (real backends and validate drive one GPU)",
                       v->G);
    if (p->copy_contention > 0 || p->compute_contention > 0)
        return ms_fail(v->err, "platform %s: [contention] is not modelled with several GPUs (%u)", p->name, v->G);
    if (!(p->peer_bw > 0))
        return ms_fail(v->err, "%u GPUs need an [interconnect] peer_bw for token dispatch; platform %s has none", v->G,
                       p->name);
    uint32_t hidden = c->model ? c->model->hidden : v->meta->hidden_size;
    if (!hidden)
        return ms_fail(v->err, "%u GPUs need the hidden size for token dispatch: give --model (%s has none)", v->G,
                       c->trace_path);
    v->token_bytes = (double)hidden * (c->model && !strcmp(c->model->dtype, "fp32") ? 4.0 : 2.0);
    return 0;
}

int eng_gpus_setup(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    v->gpu_of = ms_xcalloc(v->NX, 1);
    v->asked = ms_xcalloc(v->NX, 1);
    v->fw = c->framework ? c->framework : c->platform->framework[0] ? &c->platform->framework_profile : NULL;
    v->fw_layer_s = v->fw ? v->fw->layer_s : 0;
    v->fw_iteration_s = v->fw ? v->fw->iteration_s : 0;
    v->m->gpus = v->G;
    if (v->G == 1)
        return ms_placement_kind(c->placement) == MS_PLACE_FILE ? place_experts(v) : 0;
    v->m->gpu = ms_xcalloc(v->G, sizeof *v->m->gpu);
    v->gcap = ms_xcalloc(v->G, sizeof *v->gcap);
    v->gused = ms_xcalloc(v->G, sizeof *v->gused);
    v->gused_bytes = ms_xcalloc(v->G, sizeof *v->gused_bytes);
    v->links = ms_xcalloc(v->G, sizeof *v->links);
    for (uint32_t g = 0; g < v->G; g++)
        eng_qset_init(&v->links[g].q, v->NX); /* x's requests go to its GPU's link only */
    v->step_lanes = ms_xcalloc((size_t)4 * v->G, sizeof *v->step_lanes);
    v->ceiling = c->platform->host_ceiling_bw > 0 ? c->platform->host_ceiling_bw : INFINITY;
    if (check_multi_gpu(v) || place_experts(v))
        return -1;
    for (uint32_t x = 0; x < v->NX; x++)
        v->m->gpu[v->gpu_of[x]].experts++;
    return split_caches(v);
}

void eng_gpus_free(ms_view *v)
{
    if (v->links)
        for (uint32_t g = 0; g < v->G; g++)
            eng_qset_free(&v->links[g].q);
    void *arrays[] = {v->gpu_of, v->asked, v->gcap, v->gused, v->gused_bytes, v->links};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
}

/* ---- per-GPU caches ---- */

int eng_over_capacity_gpu(const ms_view *v, uint32_t x, double need)
{
    uint32_t g = v->gpu_of[x];
    return v->gused[g] + need > v->gcap[g] + 1e-9;
}

void eng_gpu_account_gpu(ms_view *v, uint32_t x, int sign)
{
    uint32_t g = v->gpu_of[x];
    v->gused[g] += sign * eng_unit_of(v, x);
    v->gused_bytes[g] += sign * v->layer_bytes[x / v->J];
    if (v->gused_bytes[g] > v->m->gpu[g].cache_peak_bytes)
        v->m->gpu[g].cache_peak_bytes = v->gused_bytes[g];
}

/* With several GPUs, a demand load whose GPU cannot make room (its few
 * slots hold this layer's experts or copies in flight) is streamed through
 * a transient buffer for this layer instead of failing the run (one GPU:
 * the run fails, as before).  Returns 1 when x is streamed. */
int eng_gpu_streams(ms_view *v, uint32_t x)
{
    if (v->G == 1 || !eng_make_room(v, x))
        return 0;
    v->m->gpu[v->gpu_of[x]].streamed++;
    return 1;
}

/* ---- the papers' hit definitions, counted at the gate ---- */

/* Before the layer's experts are served: those queued for prefetch and
 * those a prefetch request covered (docs/metrics.md), per-GPU outcomes;
 * then the layer's requests are forgotten (its next run starts afresh). */
void eng_count_gate(ms_view *v, const ms_act *acts, uint32_t n)
{
    uint32_t l = v->layer;
    ms_metrics *m = v->m;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = l * v->J + acts[i].expert;
        int ready = v->cached[x] && v->ready_t[x] <= v->now;
        if (!v->cached[x] && v->queued[x]) {
            m->queued_at_gate++;
            m->queued_at_gate_phase[v->phase]++;
        }
        if (ready && v->asked[x]) {
            m->prefetch_covered++;
            m->prefetch_covered_phase[v->phase]++;
        }
        if (v->G > 1) {
            ms_gpu_metrics *gm = &m->gpu[v->gpu_of[x]];
            gm->hits += ready;
            gm->late += v->cached[x] && !ready;
            gm->misses += !v->cached[x];
        }
    }
    memset(v->asked + (size_t)l * v->J, 0, v->J);
}

void eng_count_late_in_time(ms_view *v, uint32_t x)
{
    (void)x;
    v->m->late_in_time++;
    v->m->late_in_time_phase[v->phase]++;
}

/* ---- a layer's experts on their GPUs ---- */

/* Dispatch (or combine) of `tokens` token rows between the home GPU and
 * GPU g over the interconnect: latency + bytes / peer bandwidth; 0 at home
 * or without tokens. */
static double peer_time(const ms_view *v, uint32_t g, double tokens)
{
    if (g == 0 || tokens <= 0)
        return 0;
    const ms_platform *p = v->cfg->platform;
    return p->peer_latency_s + tokens * v->token_bytes / p->peer_bw;
}

/* Stable insertion sort of indices by ready time (ties: activation order). */
static void order_by_ready(uint32_t *order, const double *ready, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i;
        while (j > 0 && ready[order[j - 1]] > ready[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

typedef struct {
    double *tokens, *free, *stall, *dispatch;
} gpu_lanes;

static void run_expert(ms_view *v, const ms_act *a, int on_cpu, double t_start, gpu_lanes *g, double *cpu)
{
    uint32_t x = v->layer * v->J + a->expert, gi = v->gpu_of[x];
    ms_op op = eng_expert_op(v, on_cpu ? MS_OP_EXPERT_CPU : MS_OP_EXPERT_GPU, x);
    op.tokens = a->tokens;
    op.issue_s = op.not_before_s = t_start;
    if (!on_cpu) {
        op.gpu = gi;
        op.not_before_s = ms_fmax(t_start + g->dispatch[gi], v->ready_t[x]); /* copies bypass the executor */
    }
    double start, end;
    if (eng_exec_run(v, &op, &start, &end))
        return;
    if (on_cpu) {
        eng_event(v, "compute_cpu", start, end, x, 0);
        *cpu = end;
        return;
    }
    g->stall[gi] += start - g->free[gi];
    if (v->outcome[x] == OUT_LATE && start <= g->free[gi])
        eng_count_late_in_time(v, x);
    eng_event(v, "compute_gpu", start, end, x, 0);
    v->m->gpu[gi].compute_busy_s += end - start;
    g->free[gi] = end;
    if (v->transient[x])
        eng_release_slot(v, x);
    v->transient[x] = 0;
}

/* Every GPU computes its experts of the running layer in order of weight
 * readiness, after the dispatch of their tokens; a remote GPU's outputs are
 * combined back on the home GPU; CPU experts run on the host.  Returns the
 * layer's end: the last GPU's combine (or the host). */
double eng_gpus_compute_layer(ms_view *v, const ms_act *acts, uint32_t n, const uint8_t *on_cpu, double t_start)
{
    eng_links_settle(v, acts, n, on_cpu);
    double *lanes = v->step_lanes; /* [4 G], zeroed per step */
    memset(lanes, 0, (size_t)4 * v->G * sizeof *lanes);
    gpu_lanes g = {lanes, lanes + v->G, lanes + 2 * (size_t)v->G, lanes + 3 * (size_t)v->G};
    uint32_t *order = v->step_order; /* [J] >= n */
    double *ready = v->step_ready;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = v->layer * v->J + acts[i].expert;
        ready[i] = on_cpu[i] ? INFINITY : ms_fmax(v->ready_t[x], 0.0);
        if (!on_cpu[i])
            g.tokens[v->gpu_of[x]] += acts[i].tokens;
    }
    for (uint32_t k = 0; k < v->G; k++) {
        g.dispatch[k] = peer_time(v, k, g.tokens[k]);
        g.free[k] = t_start + g.dispatch[k];
        if (g.dispatch[k] > 0)
            eng_event_gpu(v, "dispatch", t_start, g.free[k], k, g.tokens[k] * v->token_bytes);
    }
    order_by_ready(order, ready, n);
    double cpu = t_start, end = t_start, stall = 0;
    for (uint32_t j = 0; j < n && !v->failed; j++)
        run_expert(v, &acts[order[j]], on_cpu[order[j]], t_start, &g, &cpu);
    for (uint32_t k = 0; k < v->G; k++) {
        double combine = peer_time(v, k, g.tokens[k]);
        if (combine > 0)
            eng_event_gpu(v, "combine", g.free[k], g.free[k] + combine, k, g.tokens[k] * v->token_bytes);
        end = ms_fmax(end, g.free[k] + combine);
        v->m->gpu[k].dispatch_s += g.dispatch[k] + combine;
        v->m->gpu[k].stall_s += g.stall[k];
        stall += g.stall[k];
    }
    end = ms_fmax(end, cpu);
    ms_counts *c[3] = {&v->m->total, &v->m->phase[v->phase], &v->m->layer[v->layer]};
    for (int i = 0; i < 3; i++)
        c[i]->stall_s += stall;
    return end;
}
