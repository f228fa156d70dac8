/* One iteration, layer by layer: activated sets, hits/late/misses,
 * CPU-or-GPU placement (the scheduler), expert compute, and counting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/lib/gate.h"
#include "sim/engine/actsets.h"
#include "sim/engine/state.h"

/* one iteration */

/* Union of top-k over the batch's rows, per layer, in order of first
 * appearance (row, then slot): counted row by row (actsets.h), or recalled
 * from the trace cache's memo when an earlier run built them (actsets_memo.c). */
void eng_build_activated_sets(ms_view *v)
{
    if (eng_actsets_recall(v))
        return;
    const ms_batcher *b = v->batch;
    eng_actsets s = {.L = v->L, .J = v->J, .K = v->K, .tok = v->act_tok, .wsum = v->act_wsum, .acts = v->acts,
                     .n = v->n_acts};
    eng_actsets_begin(&s);
    for (uint32_t i = 0; i < b->n_items; i++) {
        const ms_request *r = &b->slots[b->items[i]].req;
        const ms_iteration *it = ms_batcher_iter(b, b->items[i]);
        size_t base = ms_topk_index(v->meta, it->row0, 0);
        /* weights are read when the step order or a policy uses them (eng_replay_parts) */
        eng_actsets_add_rows(&s, r->topk_ids + base, r->topk_w ? r->topk_w + base : NULL, it->n_rows);
    }
    eng_actsets_finish(&s, v->mark, v->iter + 1, v->act_pos);
    eng_actsets_remember(v);
}

/* The three counter sets every layer-step updates: run, phase, layer. */
static void counts_of(ms_view *v, uint32_t l, ms_counts *c[3])
{
    c[0] = &v->m->total;
    c[1] = &v->m->phase[v->phase];
    c[2] = &v->m->layer[l];
}

static void count_outcome(ms_view *v, int outcome, int on_cpu)
{
    ms_counts *c[3];
    counts_of(v, v->layer, c);
    for (int i = 0; i < 3; i++) {
        if (outcome == OUT_HIT)
            c[i]->hits++;
        else if (outcome == OUT_LATE)
            c[i]->late++;
        else
            c[i]->misses++;
        if (on_cpu)
            c[i]->on_cpu++;
    }
}

/* Compares the recording engine's residency with ours, cell by cell
 * (route-csv traces); decode and prefill rows are counted apart. */
static void compare_recorded(ms_view *v)
{
    if (!v->meta->has_recorded_hits)
        return;
    int decode = v->phase == MS_PHASE_DECODE;
    uint64_t *rows = decode ? &v->m->recorded_rows : &v->m->recorded_prefill_rows;
    uint64_t *agree = decode ? &v->m->recorded_agree : &v->m->recorded_prefill_agree;
    const ms_batcher *b = v->batch;
    for (uint32_t i = 0; i < b->n_items; i++) {
        const ms_request *r = &b->slots[b->items[i]].req;
        const ms_iteration *it = ms_batcher_iter(b, b->items[i]);
        for (uint32_t row = it->row0; row < it->row0 + it->n_rows; row++) {
            size_t base = ms_topk_index(v->meta, row, v->layer);
            for (uint32_t k = 0; k < v->K; k++) {
                int32_t e = r->topk_ids[base + k];
                int8_t rec = r->recorded_hit ? r->recorded_hit[base + k] : -1;
                if (e < 0 || rec < 0)
                    continue;
                int ours = v->outcome[v->layer * v->J + (uint32_t)e] == OUT_HIT;
                (*rows)++;
                *agree += (ours == rec);
            }
        }
    }
}

/* The cache took (l, e) again, or for the first time as a hit: on_access,
 * unless the step already evicted it or the policy does not touch experts
 * that run on the CPU (ms_step_rules). */
static void access_again(ms_view *v, uint32_t l, uint32_t e, int on_cpu)
{
    if (v->cached[l * v->J + e] && !(on_cpu && v->rules.cpu_hits_untouched) && v->cache->cache->on_access)
        v->cache->cache->on_access(v->cache_st, v, l, e);
}

/* A demand load found no victim (one GPU: with several, eng_gpu_streams
 * took it): the policy may take it over the budget (ms_cache_ops.overflow:
 * returns 0, x is then cached); else a framework with surplus = stream
 * copies it through a transient buffer (returns 1: copied, run, released; a
 * demand copy like any other); otherwise the run fails. */
static int demand_without_room(ms_view *v, uint32_t x, uint32_t n)
{
    uint32_t l = x / v->J;
    if (v->cache->cache->overflow && !v->failed && v->cache->cache->overflow(v->cache_st, v, l, x % v->J))
        return 0;
    if (v->surplus_stream && !v->failed)
        return 1;
    if (!v->failed)
        ms_fail(v->err,
                "GPU expert cache (%g %s) has no room for layer %u's %u activated experts in "
                "iteration %llu: cache policy '%s' found no victim; raise the cache size",
                v->cfg->cap_value, v->cfg->cap_kind == MS_CAP_BYTES ? "bytes" : "experts", l, n,
                (unsigned long long)v->iter, v->cache->name);
    v->failed = 1;
    return -1;
}

/* A demand miss x takes a cache slot, or a transient buffer when the cache
 * does not admit it, its GPU streams it, or no room can be made (above).
 * Returns -1 when the run fails. */
static int place_demand(ms_view *v, uint32_t x, uint32_t n)
{
    if (!eng_cache_admits(v, x) || eng_gpu_streams(v, x)) {
        v->transient[x] = 1;
        return 0;
    }
    int r = eng_make_room(v, x) ? demand_without_room(v, x, n) : 0;
    if (r < 0)
        return -1;
    if (r > 0)
        v->transient[x] = 1;
    else
        eng_occupy(v, x);
    return 0;
}

/* x's outcome from the cache as it is now. */
static void classify(ms_view *v, uint32_t x)
{
    if (v->cached[x])
        v->outcome[x] = v->ready_t[x] <= v->now ? OUT_HIT : OUT_LATE;
    else
        v->outcome[x] = OUT_MISS;
}

/* rules.lookup_at_turn: x is looked up again when its turn comes; an
 * earlier load of the step may have evicted it since the gate (a landed
 * one only: eng_step_evictable), and it is then a miss (the per-GPU counts
 * the gate made move with it). */
static void look_up_at_turn(ms_view *v, uint32_t x)
{
    int was = v->outcome[x];
    classify(v, x);
    if (v->outcome[x] == was || v->G == 1)
        return;
    ms_gpu_metrics *gm = &v->m->gpu[v->gpu_of[x]];
    gm->hits -= was == OUT_HIT;
    gm->late -= was == OUT_LATE;
    gm->misses++;
}

/* Classifies every activated expert and queues on-demand loads, visiting
 * them in the order the cache policy declares (step_order.c).  Returns -1
 * when the cache cannot hold the layer's experts. */
static int serve_layer_experts(ms_view *v, const ms_act *acts, uint32_t n, uint8_t *on_cpu)
{
    uint32_t l = v->layer;
    uint8_t *cached = v->step_cached; /* [J] >= n */
    v->step_turns = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = l * v->J + acts[i].expert;
        v->protect[x] = v->stamp;
        cached[i] = v->cached[x];
        classify(v, x);
    }
    if (v->sched->sched->place) { /* only place writes on_cpu: without it, all 0 from the start */
        memset(on_cpu, 0, n);
        v->sched->sched->place(v->sched_st, v, l, n, acts, cached, on_cpu);
    }
    const uint32_t *visit;
    uint32_t nv = eng_step_visits(v, l, n, &visit);
    for (uint32_t j = 0; j < nv; j++) {
        uint32_t i = visit[j] & ~ENG_VISIT_REPEAT;
        if (visit[j] & ENG_VISIT_REPEAT) {
            access_again(v, l, acts[i].expert, on_cpu[i]);
            continue;
        }
        uint32_t x = l * v->J + acts[i].expert;
        if (v->rules.lookup_at_turn)
            look_up_at_turn(v, x);
        v->step_turns = i + 1;
        int out = v->outcome[x];
        count_outcome(v, out, on_cpu[i]);
        if (out != OUT_MISS && v->from_prefetch[x]) {
            v->from_prefetch[x] = 0;
            v->m->prefetch_useful++;
            v->m->pcie_bytes_useful += v->layer_bytes[l];
            if (out == OUT_LATE)
                v->m->prefetch_late++;
        }
        eng_event(v, out == OUT_HIT ? "hit" : out == OUT_LATE ? "late" : "miss", v->now, v->now, x, 0);
        if (out == OUT_MISS && !on_cpu[i]) {
            if (v->queued[x])
                eng_dequeue_prefetch(v, x);
            if (place_demand(v, x, n))
                return -1;
            v->ready_t[x] = INFINITY;
            eng_queue_request(v, (qentry){.x = x, .demand = 1, .prio = 0.0, .issue_t = v->now, .seq = v->seq++});
        } else if (out != OUT_MISS) {
            access_again(v, l, acts[i].expert, on_cpu[i]);
        }
    }
    compare_recorded(v);
    return 0;
}

/* Insertion sort of indices by ready time: stable, so ties keep activation
 * order (n is at most J). */
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

/* Expert compute: GPU experts in order of weight readiness on the compute
 * stream, CPU experts one after another on the host.  Returns layer end. */
static double compute_layer_experts(ms_view *v, const ms_act *acts, uint32_t n, const uint8_t *on_cpu, double t_start)
{
    uint32_t l = v->layer;
    uint32_t *order = v->step_order; /* [J] >= n */
    double *ready = v->step_ready;
    for (uint32_t i = 0; i < n; i++)
        ready[i] = on_cpu[i] ? INFINITY : ms_fmax(v->ready_t[l * v->J + acts[i].expert], 0.0);
    order_by_ready(order, ready, n);
    double gpu = t_start, cpu = t_start, stall = 0;
    for (uint32_t j = 0; j < n && !v->failed; j++) {
        uint32_t i = order[j];
        uint32_t x = l * v->J + acts[i].expert;
        ms_op op = eng_expert_op(v, on_cpu[i] ? MS_OP_EXPERT_CPU : MS_OP_EXPERT_GPU, x);
        op.tokens = acts[i].tokens;
        op.issue_s = op.not_before_s = t_start;
        double start, end;
        if (eng_exec_run(v, &op, &start, &end))
            break;
        if (on_cpu[i]) {
            eng_event(v, "compute_cpu", start, end, x, 0);
            cpu = end;
            if (v->transient[x]) /* evicted during its step (ms_step_protect) */
                eng_release_slot(v, x);
            v->transient[x] = 0;
            continue;
        }
        if (v->outcome[x] == OUT_LATE && start <= gpu)
            eng_count_late_in_time(v, x);
        stall += start - gpu;
        eng_event(v, "compute_gpu", start, end, x, 0);
        gpu = end;
        if (v->transient[x])
            eng_release_slot(v, x);
        v->transient[x] = 0;
    }
    ms_counts *c[3];
    counts_of(v, l, c);
    for (int i = 0; i < 3; i++)
        c[i]->stall_s += stall;
    return ms_fmax(gpu, cpu);
}

/* Layer l runs: the queued prefetches of its experts it does not activate
 * expire (listed in gone, dequeued together; not those of a whole-layer
 * prefetcher, whole_layer.c), and the prefetched
 * ones it does not activate had their target. */
static inline void expire_prefetch(ms_view *v, uint32_t x, uint32_t *gone, uint32_t *n_gone)
{
    if (v->queued[x] && v->mark[x] != v->iter + 1 && !v->pf->whole_layer) {
        gone[(*n_gone)++] = x;
        v->m->prefetch_cancelled++;
    }
    if (v->from_prefetch[x] == PF_AHEAD && v->mark[x] != v->iter + 1) {
        v->from_prefetch[x] = PF_PASSED;
        v->m->prefetch_target_passed++;
    }
}

/* In ascending expert order; 8 experts none of which is queued or
 * PF_AHEAD (bit 0: PF_PASSED is 2) have nothing to expire (one test of
 * two words). */
static void expire_prefetches_of_layer(ms_view *v, uint32_t l)
{
    uint32_t x0 = l * v->J, e = 0, *gone = v->burst_x, n_gone = 0;
    for (; e + 8 <= v->J; e += 8) {
        uint64_t q, f;
        memcpy(&q, v->queued + x0 + e, sizeof q);
        memcpy(&f, v->from_prefetch + x0 + e, sizeof f);
        if (q | (f & 0x0101010101010101u))
            for (uint32_t i = 0; i < 8; i++)
                expire_prefetch(v, x0 + e + i, gone, &n_gone);
    }
    for (; e < v->J; e++)
        expire_prefetch(v, x0 + e, gone, &n_gone);
    eng_dequeue_prefetches(v, gone, n_gone);
}

static int run_layer(ms_view *v, uint32_t l)
{
    double t0 = v->now;
    eng_advance(v, t0);
    v->layer = l;
    v->stamp++;
    v->clock = v->now;
    eng_begin_hook(v, t0);
    if (v->pf->prefetch->on_layer_start)
        v->pf->prefetch->on_layer_start(v->pf_st, v, l);
    ms_op dense = {.kind = MS_OP_DENSE, .layer = l, .expert = UINT32_MAX, .tokens = v->batch_rows,
                   .bytes = v->dense_bytes[l], .params = v->dense_params[l], .after = MS_NO_EVENT};
    dense.issue_s = dense.not_before_s = t0 + v->sync_delay + v->fw_layer_s; /* framework: 0 unless given */
    double dense_start, t_gate;
    if (eng_exec_run(v, &dense, &dense_start, &t_gate))
        return -1;
    eng_event_layer(v, "dense", dense_start, t_gate);
    eng_advance(v, t_gate);
    v->now = v->clock = t_gate;
    if (v->failed)
        return -1;
    expire_prefetches_of_layer(v, l);

    eng_order_step(v, l);
    v->step_open = 1;
    if (v->cache->cache->on_gate)
        v->cache->cache->on_gate(v->cache_st, v, l);
    double pre_sync = 0;
    if (v->pf->prefetch->before_loads) {
        eng_begin_hook(v, t_gate);
        v->pf->prefetch->before_loads(v->pf_st, v, l);
        pre_sync = v->sync_delay;
    }
    uint32_t n;
    const ms_act *acts = ms_view_activated(v, l, &n);
    uint8_t *on_cpu = v->step_on_cpu; /* [J] >= n */
    eng_count_gate(v, acts, n);
    if (serve_layer_experts(v, acts, n, on_cpu)) {
        v->step_open = 0;
        return -1;
    }
    eng_start_demands(v);
    eng_begin_hook(v, t_gate);
    if (v->pf->prefetch->on_gate)
        v->pf->prefetch->on_gate(v->pf_st, v, l);
    double t_exp = t_gate + pre_sync + v->sync_delay;
    if (v->pf->whole_layer && eng_whole_layer_wait(v, l, &t_exp)) {
        v->step_open = 0;
        return -1;
    }
    double end = v->G > 1 ? eng_gpus_compute_layer(v, acts, n, on_cpu, t_exp) : compute_layer_experts(v, acts, n, on_cpu, t_exp);
    v->step_open = 0;
    eng_event_layer(v, "layer", t0, end);
    ms_counts *c[3];
    counts_of(v, l, c);
    for (int i = 0; i < 3; i++) {
        c[i]->layer_steps++;
        c[i]->busy_s += end - t0;
    }
    eng_advance(v, end);
    v->now = v->clock = end;
    return v->failed ? -1 : 0;
}

void eng_policy_stats_now(const ms_view *v, ms_policy_stats *st)
{
    *st = (ms_policy_stats){0};
    if (v->pf->prefetch->stats)
        v->pf->prefetch->stats(v->pf_st, st);
}

/* One row of cfg->iterations_path: the iteration's counts and the mean
 * similarity score of the searches made during it (difference of totals). */
static void write_iteration_row(ms_view *v, const ms_counts *before, const ms_policy_stats *st0)
{
    ms_policy_stats st1;
    eng_policy_stats_now(v, &st1);
    uint64_t h = v->m->total.hits - before->hits, la = v->m->total.late - before->late;
    uint64_t mi = v->m->total.misses - before->misses, cpu = v->m->total.on_cpu - before->on_cpu;
    uint64_t act = h + la + mi + cpu;
    fprintf(v->iter_csv, "%llu,%s,%llu,%llu,%llu,%.6f,", (unsigned long long)v->iter,
            v->phase == MS_PHASE_PREFILL ? "prefill" : "decode", (unsigned long long)h, (unsigned long long)la,
            (unsigned long long)mi, act ? (double)h / (double)act : 0.0);
    if (st1.sem_n > st0->sem_n)
        fprintf(v->iter_csv, "%.6f", (st1.sem_sum - st0->sem_sum) / (double)(st1.sem_n - st0->sem_n));
    fputc(',', v->iter_csv);
    if (st1.traj_n > st0->traj_n)
        fprintf(v->iter_csv, "%.6f", (st1.traj_sum - st0->traj_sum) / (double)(st1.traj_n - st0->traj_n));
    fputc('\n', v->iter_csv);
}

int eng_run_iteration(ms_view *v)
{
    ms_counts before = v->m->total;
    ms_policy_stats st0;
    if (v->iter_csv)
        eng_policy_stats_now(v, &st0);
    v->phase = v->batch->phase;
    v->batch_rows = v->batch->rows;
    eng_build_activated_sets(v);
    /* an encoder-decoder model's decode step runs its decoder only */
    uint32_t first = v->phase == MS_PHASE_DECODE ? v->enc_layers : 0;
    v->layer = first;
    v->now += v->fw_iteration_s; /* the framework's host work per iteration (0 unless given) */
    eng_begin_hook(v, v->now);
    if (v->pf->prefetch->on_iteration)
        v->pf->prefetch->on_iteration(v->pf_st, v);
    v->now += v->sync_delay;
    for (uint32_t l = first; l < v->L; l++)
        if (run_layer(v, l))
            return -1;
    eng_begin_hook(v, v->now);
    if (v->pf->prefetch->on_iteration_end)
        v->pf->prefetch->on_iteration_end(v->pf_st, v);
    v->now += v->sync_delay; /* a synchronous cost here delays the next iteration */
    if (v->iter_csv)
        write_iteration_row(v, &before, &st0);
    v->m->total.iterations++;
    v->m->phase[v->phase].iterations++;
    return 0;
}
