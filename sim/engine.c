/* Discrete-event replay engine: see engine.h and DESIGN.md for the semantics.
 *
 * Expert (l, e) is slot x = l * J + e in every per-expert array.  The GPU
 * compute stream is the engine clock `now`; the H2D copy engine is a
 * priority heap (on-demand loads first, then prefetches by priority, FIFO on
 * ties) served one copy at a time from `link_free`.  advance(T) starts every
 * copy whose start time falls before T, so state changes at T see exactly the
 * copies that began earlier. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "../policies/gate.h"
#include "batcher.h"
#include "dvec.h"
#include "engine.h"
#include "out.h"
#include "report.h"
#include "exec.h"

enum { OUT_HIT = 1, OUT_LATE = 2, OUT_MISS = 3 };
/* from_prefetch: its target layer (the next run of its layer) is still
 * ahead, or it ran without activating the expert */
enum { PF_AHEAD = 1, PF_PASSED = 2 };

typedef struct {
    uint32_t x;
    uint32_t gen;
    uint8_t demand;
    double prio;
    double issue_t;
    uint64_t seq;
} qentry;


struct ms_view {
    const ms_run_config *cfg;
    const ms_trace_meta *meta;
    uint32_t L, J, K, NX;
    ms_policy_env env;
    const ms_policy_desc *pf, *cache, *sched;
    void *pf_st, *cache_st, *sched_st;
    /* per-expert state [NX] */
    uint8_t *cached;        /* holds a GPU slot (ready or in flight) */
    uint8_t *transient;     /* loaded for this layer only (cache declined it) */
    uint8_t *from_prefetch; /* slot filled by a prefetch, not used yet: PF_AHEAD or PF_PASSED */
    uint8_t *queued;        /* a prefetch request waits in the heap */
    uint8_t *outcome;       /* this layer's OUT_* for activated experts */
    uint32_t *qgen;
    double *qissue;         /* issue time of the queued prefetch request of x */
    double *ready_t;
    uint64_t *protect;      /* == stamp: activated by the running layer */
    uint64_t *mark;         /* == iteration + 1: activated in the running iteration */
    uint32_t *act_pos;      /* index of x in its layer's activated list */
    double *score;          /* the prefetcher -> cache score board (NAN: unset) */
    uint32_t incoming;      /* expert make_room works for, UINT32_MAX outside */
    double *layer_bytes, *layer_params, *dense_bytes, *dense_params;
    double cap_units, used_units, used_bytes;
    /* host tier */
    uint8_t *in_host;
    uint64_t *host_used_at;
    double host_cap, host_used;
    uint64_t host_clock;
    /* copy engine */
    qentry *heap;
    size_t hn, hcap;
    size_t n_queued;        /* experts with queued[x] set */
    uint64_t seq;
    double link_free;
    /* clocks and position */
    double now, clock;
    uint64_t iter, stamp;
    uint32_t layer;
    ms_phase phase;
    uint32_t batch_rows;
    ms_batcher *batch;
    /* activated sets of the running iteration, per layer */
    ms_act *acts; /* [L][J] */
    uint32_t *n_acts;
    /* hook cost accounting */
    double hook_t, sync_delay, async_delay;
    /* next-use pre-pass: sorted iteration indices per expert */
    uint32_t **use_it;
    uint32_t *use_n, *use_cap, *use_cur;
    /* the executor every op goes through (sim/exec.h) */
    ms_exec *exec;
    ms_exec own_exec;       /* the simulated timeline, when cfg->exec is NULL */
    /* results */
    ms_metrics *m;
    ms_dvec ttft, tpot, latency;
    FILE *ev;                   /* ms_out_fp(ev_out) */
    struct ms_out *ev_out, *iter_out, *req_out;
    FILE *iter_csv, *req_csv;   /* cfg->iterations_path, requests_path */
    ms_err *err;
    int failed;
};

/* ------------------------------------------------------------------ */
/* small helpers */

static double unit_of(const ms_view *v, uint32_t x)
{
    return v->cfg->cap_kind == MS_CAP_BYTES ? v->layer_bytes[x / v->J] : 1.0;
}

/* `unused_prefetch` is the last column: set on evict rows only. */
static void event_tagged(ms_view *v, const char *kind, double t0, double t1, uint32_t x, double bytes,
                         const char *unused_prefetch)
{
    if (!v->ev)
        return;
    fprintf(v->ev, "%s,%.9f,%.9f,%llu,%u,%u,%s,%.0f,%s\n", kind, t0, t1, (unsigned long long)v->iter,
            x / v->J, x % v->J, v->phase == MS_PHASE_PREFILL ? "prefill" : "decode", bytes, unused_prefetch);
}

static void event(ms_view *v, const char *kind, double t0, double t1, uint32_t x, double bytes)
{
    event_tagged(v, kind, t0, t1, x, bytes, "");
}

static void event_layer(ms_view *v, const char *kind, double t0, double t1)
{
    if (v->ev)
        fprintf(v->ev, "%s,%.9f,%.9f,%llu,%u,,%s,,\n", kind, t0, t1, (unsigned long long)v->iter, v->layer,
                v->phase == MS_PHASE_PREFILL ? "prefill" : "decode");
}

/* ------------------------------------------------------------------ */
/* policy-facing view */

const ms_trace_meta *ms_view_meta(const ms_view *v) { return v->meta; }
double ms_view_now(const ms_view *v) { return v->clock; }
uint64_t ms_view_iteration(const ms_view *v) { return v->iter; }
uint32_t ms_view_layer(const ms_view *v) { return v->layer; }
uint64_t ms_view_step(const ms_view *v) { return v->iter * v->L + v->layer; }
ms_phase ms_view_phase(const ms_view *v) { return v->phase; }
uint32_t ms_view_batch_rows(const ms_view *v) { return v->batch_rows; }

const ms_act *ms_view_activated(const ms_view *v, uint32_t l, uint32_t *n)
{
    if (l >= v->L) {
        *n = 0;
        return NULL;
    }
    *n = v->n_acts[l];
    return v->acts + (size_t)l * v->J;
}

int ms_view_cached(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && v->cached[l * v->J + e];
}

int ms_view_resident(const ms_view *v, uint32_t l, uint32_t e)
{
    return ms_view_cached(v, l, e) && v->ready_t[l * v->J + e] <= v->clock;
}

int ms_view_evictable(const ms_view *v, uint32_t l, uint32_t e)
{
    return ms_view_resident(v, l, e) && v->protect[l * v->J + e] != v->stamp;
}

int ms_view_fits(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && v->used_units + unit_of(v, l * v->J + e) <= v->cap_units + 1e-9;
}

double ms_view_capacity_experts(const ms_view *v, uint32_t l)
{
    return l < v->L ? v->cap_units / unit_of(v, l * v->J) : 0;
}

uint64_t ms_view_next_use(const ms_view *v, uint32_t l, uint32_t e)
{
    if (!v->use_it || l >= v->L || e >= v->J)
        return UINT64_MAX;
    uint32_t x = l * v->J + e;
    uint64_t step = v->iter * v->L + v->layer;
    while (v->use_cur[x] < v->use_n[x] && (uint64_t)v->use_it[x][v->use_cur[x]] * v->L + l <= step)
        v->use_cur[x]++;
    if (v->use_cur[x] == v->use_n[x])
        return UINT64_MAX;
    return (uint64_t)v->use_it[x][v->use_cur[x]] * v->L + l;
}

int ms_view_queued(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && v->queued[l * v->J + e];
}

int ms_view_prefetched_unused(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J && v->from_prefetch[l * v->J + e] == PF_AHEAD;
}

int ms_view_incoming(const ms_view *v, uint32_t *l, uint32_t *e)
{
    if (v->incoming == UINT32_MAX)
        return 0;
    *l = v->incoming / v->J;
    *e = v->incoming % v->J;
    return 1;
}

uint32_t ms_view_items(const ms_view *v) { return v->batch ? v->batch->n_items : 0; }

const ms_request *ms_view_item_request(const ms_view *v, uint32_t i)
{
    return i < ms_view_items(v) ? &v->batch->slots[v->batch->items[i]].req : NULL;
}

uint64_t ms_view_item_index(const ms_view *v, uint32_t i)
{
    return i < ms_view_items(v) ? v->batch->slots[v->batch->items[i]].index : UINT64_MAX;
}

uint32_t ms_view_item_iter(const ms_view *v, uint32_t i)
{
    return i < ms_view_items(v) ? v->batch->slots[v->batch->items[i]].next_iter : UINT32_MAX;
}

void ms_view_gate_mean(const ms_view *v, uint32_t l, float *out)
{
    memset(out, 0, v->J * sizeof *out);
    uint32_t rows = 0;
    for (uint32_t i = 0; i < ms_view_items(v) && l < v->L; i++)
        rows += ms_gate_add_iteration(v->meta, ms_view_item_request(v, i), ms_view_item_iter(v, i), l,
                                      v->env.topk_fill, out);
    for (uint32_t e = 0; rows > 0 && e < v->J; e++)
        out[e] /= (float)rows;
}

int ms_view_embedding(const ms_view *v, float *out)
{
    uint32_t D = v->meta->embed_dim, n = ms_view_items(v);
    if (D == 0 || n == 0)
        return 0;
    memset(out, 0, D * sizeof *out);
    for (uint32_t i = 0; i < n; i++) {
        const float *e = ms_view_item_request(v, i)->embedding + (size_t)ms_view_item_iter(v, i) * D;
        for (uint32_t d = 0; d < D; d++)
            out[d] += e[d] / (float)n;
    }
    return 1;
}

int ms_view_spec_gate(const ms_view *v, uint32_t l, uint32_t i, float *out)
{
    const ms_trace_meta *m = v->meta;
    if (i < 1 || i > m->spec_depth || l + i >= v->L || ms_view_items(v) == 0)
        return 0;
    memset(out, 0, v->J * sizeof *out);
    uint32_t rows = 0;
    for (uint32_t b = 0; b < ms_view_items(v); b++) {
        const ms_request *r = ms_view_item_request(v, b);
        const ms_iteration *it = &r->iters[ms_view_item_iter(v, b)];
        for (uint32_t row = it->row0; row < it->row0 + it->n_rows; row++, rows++) {
            size_t base = ms_spec_index(m, row, l, i - 1);
            for (uint32_t k = 0; k < v->K; k++)
                if (r->spec_ids[base + k] >= 0)
                    out[r->spec_ids[base + k]] += r->spec_w[base + k];
        }
    }
    for (uint32_t e = 0; rows > 0 && e < v->J; e++)
        out[e] /= (float)rows;
    return 1;
}

const ms_platform *ms_view_platform(const ms_view *v) { return v->cfg->platform; }
double ms_view_expert_bytes(const ms_view *v, uint32_t l) { return l < v->L ? v->layer_bytes[l] : 0; }
double ms_view_expert_params(const ms_view *v, uint32_t l) { return l < v->L ? v->layer_params[l] : 0; }
double ms_view_link_free(const ms_view *v) { return fmax(v->link_free, v->clock); }

void ms_view_set_score(ms_view *v, uint32_t l, uint32_t e, double score)
{
    if (l < v->L && e < v->J)
        v->score[l * v->J + e] = score;
}

double ms_view_score(const ms_view *v, uint32_t l, uint32_t e)
{
    return l < v->L && e < v->J ? v->score[l * v->J + e] : NAN;
}

/* ------------------------------------------------------------------ */
/* copy queue: binary max-heap with lazy deletion (entry valid while its gen
 * matches qgen[x] and the expert is still queued) */

static int qbefore(const qentry *a, const qentry *b)
{
    if (a->demand != b->demand)
        return a->demand > b->demand;
    if (a->prio != b->prio)
        return a->prio > b->prio;
    return a->seq < b->seq;
}

/* Places q at hole i and moves it up to its place. */
static void sift_up(ms_view *v, size_t i, qentry q)
{
    while (i > 0 && qbefore(&q, &v->heap[(i - 1) / 2])) {
        v->heap[i] = v->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    v->heap[i] = q;
}

static void heap_push(ms_view *v, qentry q)
{
    if (v->hn == v->hcap) {
        v->hcap = v->hcap ? 2 * v->hcap : 256;
        v->heap = ms_xrealloc(v->heap, v->hcap, sizeof *v->heap);
    }
    sift_up(v, v->hn++, q);
}

/* Places q at hole i and moves it down to its place among heap[0..hn). */
static void sift_down(ms_view *v, size_t i, qentry q)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= v->hn)
            break;
        if (c + 1 < v->hn && qbefore(&v->heap[c + 1], &v->heap[c]))
            c++;
        if (!qbefore(&v->heap[c], &q))
            break;
        v->heap[i] = v->heap[c];
        i = c;
    }
    v->heap[i] = q;
}

/* Removes and returns heap[i]. */
static qentry heap_take(ms_view *v, size_t i)
{
    qentry out = v->heap[i], last = v->heap[--v->hn];
    if (i < v->hn) {
        if (i > 0 && qbefore(&last, &v->heap[(i - 1) / 2]))
            sift_up(v, i, last);
        else
            sift_down(v, i, last);
    }
    return out;
}

static qentry heap_pop(ms_view *v)
{
    return heap_take(v, 0);
}

static int entry_valid(const ms_view *v, const qentry *q)
{
    return q->gen == v->qgen[q->x] && (q->demand || v->queued[q->x]);
}

static void drop_invalid_top(ms_view *v)
{
    while (v->hn && !entry_valid(v, &v->heap[0]))
        heap_pop(v);
}

/* Drops the stale entries (superseded, expired or cancelled requests) that
 * lazy deletion leaves behind once the heap holds over 4x the live entries
 * (at most n_queued prefetches + J demands), so
 * policies that resubmit or clear the queue every layer keep the heap small.
 * Pop order is unchanged: qbefore is a total order (seq is unique). */
static void compact_heap(ms_view *v)
{
    if (v->hn < 1024 || v->hn <= 4 * (v->n_queued + v->J))
        return;
    size_t w = 0;
    for (size_t i = 0; i < v->hn; i++)
        if (entry_valid(v, &v->heap[i]))
            v->heap[w++] = v->heap[i];
    v->hn = w;
    for (size_t i = w / 2; i-- > 0;)
        sift_down(v, i, v->heap[i]);
}

static void dequeue_prefetch(ms_view *v, uint32_t x)
{
    if (v->queued[x])
        v->n_queued--;
    v->queued[x] = 0;
    v->qgen[x]++;
}

/* ------------------------------------------------------------------ */
/* the executor (sim/exec.h): every op goes through it, and its times are
 * the engine's; a failure (only real backends fail) ends the run */

static int exec_failed(ms_view *v)
{
    v->failed = 1;
    return -1;
}

/* Submits op and waits for it: its start and end on the executor's clock. */
static int exec_run(ms_view *v, ms_op *op, double *start, double *end)
{
    ms_event ev;
    op->iteration = v->iter;
    if (ms_exec_submit(v->exec, op, &ev, v->err) || ms_exec_wait(v->exec, ev, start, end, v->err))
        return exec_failed(v);
    return 0;
}

static void release_slot(ms_view *v, uint32_t x)
{
    if (!v->failed && ms_exec_release(v->exec, x / v->J, x % v->J, v->err))
        exec_failed(v);
}

static ms_op expert_op(const ms_view *v, ms_op_kind kind, uint32_t x)
{
    uint32_t l = x / v->J;
    return (ms_op){.kind = kind, .layer = l, .expert = x % v->J, .bytes = v->layer_bytes[l],
                   .params = v->layer_params[l], .after = MS_NO_EVENT};
}

/* ------------------------------------------------------------------ */
/* cache slots */

static void evict(ms_view *v, uint32_t x)
{
    double bytes = v->layer_bytes[x / v->J];
    const char *unused = v->from_prefetch[x] == PF_AHEAD ? "before_target"
                         : v->from_prefetch[x] == PF_PASSED ? "after_target"
                                                            : "no";
    v->cached[x] = 0;
    v->used_units -= unit_of(v, x);
    v->used_bytes -= bytes;
    if (v->from_prefetch[x]) {
        v->m->prefetch_evicted_unused += v->from_prefetch[x] == PF_AHEAD;
        v->from_prefetch[x] = 0;
        v->m->prefetch_wasted++;
        v->m->pcie_bytes_wasted += bytes;
    }
    if (v->cache->cache->on_evict)
        v->cache->cache->on_evict(v->cache_st, v, x / v->J, x % v->J);
    event_tagged(v, "evict", v->clock, v->clock, x, bytes, unused);
    release_slot(v, x);
}

/* Frees room for x by evicting the cache policy's victims; -1 when nothing
 * evictable is left and x still does not fit. */
static int policy_full(ms_view *v, uint32_t x)
{
    return v->cache->cache->full && v->cache->cache->full(v->cache_st, v, x / v->J, x % v->J);
}

static int make_room(ms_view *v, uint32_t x)
{
    double need = unit_of(v, x);
    v->incoming = x;
    int rc = 0;
    while (v->used_units + need > v->cap_units + 1e-9 || policy_full(v, x)) {
        uint32_t l, e;
        if (!v->cache->cache->victim(v->cache_st, v, &l, &e)) {
            rc = -1;
            break;
        }
        if (!ms_view_evictable(v, l, e)) {
            ms_fail(v->err, "internal error: cache policy '%s' chose expert (%u, %u), which is not evictable",
                    v->cache->name, l, e);
            v->failed = 1;
            rc = -1;
            break;
        }
        evict(v, l * v->J + e);
    }
    v->incoming = UINT32_MAX;
    return rc;
}

static void occupy(ms_view *v, uint32_t x)
{
    v->cached[x] = 1;
    v->used_units += unit_of(v, x);
    v->used_bytes += v->layer_bytes[x / v->J];
    if (v->used_bytes > v->m->gpu_cache_peak_bytes)
        v->m->gpu_cache_peak_bytes = v->used_bytes;
    if (v->cache->cache->on_insert)
        v->cache->cache->on_insert(v->cache_st, v, x / v->J, x % v->J);
}

static int cache_admits(ms_view *v, uint32_t x)
{
    return !v->cache->cache->admit || v->cache->cache->admit(v->cache_st, v, x / v->J, x % v->J);
}

/* ------------------------------------------------------------------ */
/* host-memory tier: LRU over experts; misses come from SSD */

static void host_touch(ms_view *v, uint32_t x)
{
    v->host_used_at[x] = ++v->host_clock;
}

/* Returns 1 when x had to be read from SSD. */
static int host_fetch(ms_view *v, uint32_t x)
{
    if (v->host_cap <= 0)
        return 0;
    if (v->in_host[x]) {
        host_touch(v, x);
        return 0;
    }
    double bytes = v->layer_bytes[x / v->J];
    while (v->host_used + bytes > v->host_cap) {
        uint32_t victim = UINT32_MAX;
        for (uint32_t y = 0; y < v->NX; y++)
            if (v->in_host[y] && (victim == UINT32_MAX || v->host_used_at[y] < v->host_used_at[victim]))
                victim = y;
        if (victim == UINT32_MAX)
            break;
        v->in_host[victim] = 0;
        v->host_used -= v->layer_bytes[victim / v->J];
    }
    v->in_host[x] = 1;
    v->host_used += bytes;
    host_touch(v, x);
    return 1;
}

/* ------------------------------------------------------------------ */
/* the copy engine */

static void start_copy(ms_view *v, const qentry *q, double start)
{
    uint32_t x = q->x;
    double bytes = v->layer_bytes[x / v->J];
    v->clock = start;
    if (!q->demand) {
        dequeue_prefetch(v, x);
        if (!cache_admits(v, x) || make_room(v, x)) {
            v->m->prefetch_dropped++;
            v->clock = v->now;
            return;
        }
        occupy(v, x);
        v->from_prefetch[x] = PF_AHEAD;
        v->m->prefetch_copied++;
    } else {
        v->m->demand_copies++;
    }
    ms_op op = expert_op(v, MS_OP_COPY, x);
    op.from_ssd = host_fetch(v, x);
    op.demand = q->demand;
    op.issue_s = q->issue_t;
    op.not_before_s = start;
    double t0, t1;
    if (exec_run(v, &op, &t0, &t1))
        return;
    if (op.from_ssd)
        v->m->ssd_bytes += bytes;
    v->ready_t[x] = t1;
    v->link_free = t1;
    v->m->pcie_bytes += bytes;
    v->m->pcie_copies++;
    event(v, q->demand ? "copy_demand" : "copy_prefetch", t0, t1, x, bytes);
    v->clock = v->now;
}

/* Starts every queued copy whose start time is before T. */
/* The copy the engine starts next and when: once the link is free (or, if
 * nothing has been issued by then, at the earliest issue time), the best
 * entry issued by that time.  A request whose asynchronous decision cost has
 * not elapsed yet never holds back the ones already issued.  The usual case
 * (the best entry is already issued) costs nothing; otherwise a scan. */
static int next_copy(const ms_view *v, size_t *idx, double *start)
{
    if (v->heap[0].issue_t <= v->link_free) {
        *idx = 0;
        *start = v->link_free;
        return 1;
    }
    double earliest = INFINITY;
    for (size_t i = 0; i < v->hn; i++)
        if (entry_valid(v, &v->heap[i]))
            earliest = fmin(earliest, v->heap[i].issue_t);
    if (!isfinite(earliest))
        return 0;
    double t = fmax(v->link_free, earliest);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < v->hn; i++)
        if (entry_valid(v, &v->heap[i]) && v->heap[i].issue_t <= t &&
            (best == SIZE_MAX || qbefore(&v->heap[i], &v->heap[best])))
            best = i;
    *idx = best;
    *start = t;
    return 1;
}

static void advance(ms_view *v, double T)
{
    for (;;) {
        drop_invalid_top(v);
        if (!v->hn || v->failed)
            return;
        size_t i;
        double start;
        if (!next_copy(v, &i, &start) || start >= T)
            return;
        qentry q = heap_take(v, i);
        start_copy(v, &q, start);
    }
}

/* On-demand loads sit at the head of the queue: start them all now. */
static void start_demands(ms_view *v)
{
    for (;;) {
        drop_invalid_top(v);
        if (!v->hn || !v->heap[0].demand || v->failed)
            return;
        qentry q = heap_pop(v);
        start_copy(v, &q, fmax(v->link_free, q.issue_t));
    }
}

void ms_view_prefetch(ms_view *v, uint32_t l, uint32_t e, double priority)
{
    if (l >= v->L || e >= v->J || !isfinite(priority))
        return;
    uint32_t x = l * v->J + e;
    if (v->cached[x])
        return;
    /* the decision exists once this hook's charged work is done; a request
     * that was already queued keeps its earlier issue time (a new priority
     * does not make it wait again) */
    double issue_t = v->hook_t + v->sync_delay + v->async_delay;
    if (!v->queued[x]) {
        v->queued[x] = 1;
        v->n_queued++;
        v->m->prefetch_issued++;
        v->qissue[x] = issue_t;
    }
    issue_t = fmin(issue_t, v->qissue[x]);
    compact_heap(v);
    v->qgen[x]++;
    qentry q = {x, v->qgen[x], 0, priority, issue_t, v->seq++};
    heap_push(v, q);
}

void ms_view_clear_prefetches(ms_view *v)
{
    for (uint32_t x = 0; x < v->NX; x++)
        if (v->queued[x]) {
            dequeue_prefetch(v, x);
            v->m->prefetch_cancelled++;
        }
}

void ms_view_charge_sync(ms_view *v, double seconds)
{
    if (seconds > 0) {
        v->sync_delay += seconds;
        v->m->policy_sync_s += seconds;
    }
}

void ms_view_charge_async(ms_view *v, double seconds)
{
    if (seconds > 0) {
        v->async_delay += seconds;
        v->m->policy_async_s += seconds;
    }
}

static void begin_hook(ms_view *v, double t)
{
    v->hook_t = t;
    v->sync_delay = 0;
    v->async_delay = 0;
}

/* ------------------------------------------------------------------ */
/* one iteration */

/* Union of top-k over the batch's rows, per layer, in order of first
 * appearance (row, then slot). */
static void build_activated_sets(ms_view *v)
{
    const ms_batcher *b = v->batch;
    uint64_t stamp = v->iter + 1;
    for (uint32_t l = 0; l < v->L; l++) {
        ms_act *acts = v->acts + (size_t)l * v->J;
        uint32_t n = 0;
        for (uint32_t i = 0; i < b->n_items; i++) {
            const ms_request *r = &b->slots[b->items[i]].req;
            const ms_iteration *it = ms_batcher_iter(b, b->items[i]);
            for (uint32_t row = it->row0; row < it->row0 + it->n_rows; row++) {
                size_t base = ms_topk_index(v->meta, row, l);
                for (uint32_t k = 0; k < v->K; k++) {
                    int32_t e = r->topk_ids[base + k];
                    if (e < 0)
                        continue;
                    uint32_t x = l * v->J + (uint32_t)e;
                    if (v->mark[x] != stamp) {
                        v->mark[x] = stamp;
                        v->act_pos[x] = n;
                        acts[n++] = (ms_act){(uint32_t)e, 0, 0.0f};
                    }
                    ms_act *a = &acts[v->act_pos[x]];
                    a->tokens++;
                    a->weight_sum += r->topk_w[base + k];
                }
            }
        }
        v->n_acts[l] = n;
    }
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

/* Compares the recording engine's residency with ours, cell by cell, on
 * decode rows (route-csv traces). */
static void compare_recorded(ms_view *v)
{
    if (!v->meta->has_recorded_hits || v->phase != MS_PHASE_DECODE)
        return;
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
                v->m->recorded_rows++;
                v->m->recorded_agree += (ours == rec);
            }
        }
    }
}

/* Classifies every activated expert and queues on-demand loads.  Returns -1
 * when the cache cannot hold the layer's experts. */
static int serve_layer_experts(ms_view *v, const ms_act *acts, uint32_t n, uint8_t *on_cpu)
{
    uint32_t l = v->layer;
    uint8_t *cached = ms_xcalloc(n, 1);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = l * v->J + acts[i].expert;
        v->protect[x] = v->stamp;
        cached[i] = v->cached[x];
        if (v->cached[x])
            v->outcome[x] = v->ready_t[x] <= v->now ? OUT_HIT : OUT_LATE;
        else
            v->outcome[x] = OUT_MISS;
    }
    memset(on_cpu, 0, n);
    if (v->sched->sched->place)
        v->sched->sched->place(v->sched_st, v, l, n, acts, cached, on_cpu);
    free(cached);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = l * v->J + acts[i].expert;
        int out = v->outcome[x];
        count_outcome(v, out, on_cpu[i]);
        if (out != OUT_MISS && v->from_prefetch[x]) {
            v->from_prefetch[x] = 0;
            v->m->prefetch_useful++;
            v->m->pcie_bytes_useful += v->layer_bytes[l];
            if (out == OUT_LATE)
                v->m->prefetch_late++;
        }
        event(v, out == OUT_HIT ? "hit" : out == OUT_LATE ? "late" : "miss", v->now, v->now, x, 0);
        if (out == OUT_MISS && !on_cpu[i]) {
            if (v->queued[x])
                dequeue_prefetch(v, x);
            if (cache_admits(v, x)) {
                if (make_room(v, x)) {
                    if (!v->failed)
                        ms_fail(v->err,
                                "GPU expert cache (%g %s) has no room for layer %u's %u activated experts in "
                                "iteration %llu: cache policy '%s' found no victim; raise the cache size",
                                v->cfg->cap_value, v->cfg->cap_kind == MS_CAP_BYTES ? "bytes" : "experts", l, n,
                                (unsigned long long)v->iter, v->cache->name);
                    v->failed = 1;
                    return -1;
                }
                occupy(v, x);
            } else {
                v->transient[x] = 1;
            }
            v->ready_t[x] = INFINITY;
            v->qgen[x]++;
            heap_push(v, (qentry){x, v->qgen[x], 1, 0.0, v->now, v->seq++});
        } else if (out != OUT_MISS && v->cache->cache->on_access) {
            v->cache->cache->on_access(v->cache_st, v, l, acts[i].expert);
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
    uint32_t *order = ms_xcalloc(n ? n : 1, sizeof *order);
    double *ready = ms_xcalloc(n ? n : 1, sizeof *ready);
    for (uint32_t i = 0; i < n; i++)
        ready[i] = on_cpu[i] ? INFINITY : fmax(v->ready_t[l * v->J + acts[i].expert], 0.0);
    order_by_ready(order, ready, n);
    double gpu = t_start, cpu = t_start, stall = 0;
    for (uint32_t j = 0; j < n && !v->failed; j++) {
        uint32_t i = order[j];
        uint32_t x = l * v->J + acts[i].expert;
        ms_op op = expert_op(v, on_cpu[i] ? MS_OP_EXPERT_CPU : MS_OP_EXPERT_GPU, x);
        op.tokens = acts[i].tokens;
        op.issue_s = op.not_before_s = t_start;
        double start, end;
        if (exec_run(v, &op, &start, &end))
            break;
        if (on_cpu[i]) {
            event(v, "compute_cpu", start, end, x, 0);
            cpu = end;
            continue;
        }
        stall += start - gpu;
        event(v, "compute_gpu", start, end, x, 0);
        gpu = end;
        if (v->transient[x])
            release_slot(v, x);
        v->transient[x] = 0;
    }
    free(order);
    free(ready);
    ms_counts *c[3];
    counts_of(v, l, c);
    for (int i = 0; i < 3; i++)
        c[i]->stall_s += stall;
    return fmax(gpu, cpu);
}

/* Layer l runs: the queued prefetches of its experts it does not activate
 * expire, and the prefetched ones it does not activate had their target. */
static void expire_prefetches_of_layer(ms_view *v, uint32_t l)
{
    for (uint32_t e = 0; e < v->J; e++) {
        uint32_t x = l * v->J + e;
        if (v->queued[x] && v->mark[x] != v->iter + 1) {
            dequeue_prefetch(v, x);
            v->m->prefetch_cancelled++;
        }
        if (v->from_prefetch[x] == PF_AHEAD && v->mark[x] != v->iter + 1) {
            v->from_prefetch[x] = PF_PASSED;
            v->m->prefetch_target_passed++;
        }
    }
}

static int run_layer(ms_view *v, uint32_t l)
{
    double t0 = v->now;
    advance(v, t0);
    v->layer = l;
    v->stamp++;
    v->clock = v->now;
    begin_hook(v, t0);
    if (v->pf->prefetch->on_layer_start)
        v->pf->prefetch->on_layer_start(v->pf_st, v, l);
    ms_op dense = {.kind = MS_OP_DENSE, .layer = l, .expert = UINT32_MAX, .tokens = v->batch_rows,
                   .bytes = v->dense_bytes[l], .params = v->dense_params[l], .after = MS_NO_EVENT};
    dense.issue_s = dense.not_before_s = t0 + v->sync_delay;
    double dense_start, t_gate;
    if (exec_run(v, &dense, &dense_start, &t_gate))
        return -1;
    event_layer(v, "dense", dense_start, t_gate);
    advance(v, t_gate);
    v->now = v->clock = t_gate;
    if (v->failed)
        return -1;
    expire_prefetches_of_layer(v, l);

    if (v->cache->cache->on_gate)
        v->cache->cache->on_gate(v->cache_st, v, l);
    uint32_t n;
    const ms_act *acts = ms_view_activated(v, l, &n);
    uint8_t *on_cpu = ms_xcalloc(n ? n : 1, 1);
    if (serve_layer_experts(v, acts, n, on_cpu)) {
        free(on_cpu);
        return -1;
    }
    start_demands(v);
    begin_hook(v, t_gate);
    if (v->pf->prefetch->on_gate)
        v->pf->prefetch->on_gate(v->pf_st, v, l);
    double end = compute_layer_experts(v, acts, n, on_cpu, t_gate + v->sync_delay);
    free(on_cpu);
    event_layer(v, "layer", t0, end);
    ms_counts *c[3];
    counts_of(v, l, c);
    for (int i = 0; i < 3; i++) {
        c[i]->layer_steps++;
        c[i]->busy_s += end - t0;
    }
    advance(v, end);
    v->now = v->clock = end;
    return v->failed ? -1 : 0;
}

static void policy_stats_now(const ms_view *v, ms_policy_stats *st)
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
    policy_stats_now(v, &st1);
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

static int run_iteration(ms_view *v)
{
    ms_counts before = v->m->total;
    ms_policy_stats st0;
    if (v->iter_csv)
        policy_stats_now(v, &st0);
    v->phase = v->batch->phase;
    v->batch_rows = v->batch->rows;
    build_activated_sets(v);
    v->layer = 0;
    begin_hook(v, v->now);
    if (v->pf->prefetch->on_iteration)
        v->pf->prefetch->on_iteration(v->pf_st, v);
    v->now += v->sync_delay;
    for (uint32_t l = 0; l < v->L; l++)
        if (run_layer(v, l))
            return -1;
    begin_hook(v, v->now);
    if (v->pf->prefetch->on_iteration_end)
        v->pf->prefetch->on_iteration_end(v->pf_st, v);
    v->now += v->sync_delay; /* a synchronous cost here delays the next iteration */
    if (v->iter_csv)
        write_iteration_row(v, &before, &st0);
    v->m->total.iterations++;
    v->m->phase[v->phase].iterations++;
    return 0;
}

/* ------------------------------------------------------------------ */
/* set-up */

static void request_done(const ms_rslot *s, void *ctx)
{
    ms_view *v = ctx;
    uint32_t first_decode = s->first_iter > 1 ? s->first_iter : 1;
    uint32_t decodes = s->req.n_iters > first_decode ? s->req.n_iters - first_decode : 0;
    if (s->first_iter == 0)
        ms_dvec_push(&v->ttft, s->first_token_s - s->arrival_s);
    if (decodes)
        ms_dvec_push(&v->tpot, (v->now - s->first_token_s) / decodes);
    ms_dvec_push(&v->latency, v->now - s->arrival_s);
    v->m->requests++;
    if (v->req_csv) {
        fprintf(v->req_csv, "%llu,%.9f,", (unsigned long long)s->index, s->arrival_s);
        if (s->first_iter == 0)
            fprintf(v->req_csv, "%.9f", s->first_token_s - s->arrival_s);
        fputc(',', v->req_csv);
        if (decodes)
            fprintf(v->req_csv, "%.9f", (v->now - s->first_token_s) / decodes);
        fprintf(v->req_csv, ",%.9f\n", v->now - s->arrival_s);
    }
}

/* Next-use pre-pass: replays the batch order without time and records, per
 * expert, the iterations that activate it. */
static int build_future(ms_view *v, ms_trace_reader *rd)
{
    v->use_it = ms_xcalloc(v->NX, sizeof *v->use_it);
    v->use_n = ms_xcalloc(v->NX, sizeof *v->use_n);
    v->use_cap = ms_xcalloc(v->NX, sizeof *v->use_cap);
    v->use_cur = ms_xcalloc(v->NX, sizeof *v->use_cur);
    ms_batcher b;
    ms_batcher_init(&b, rd, v->cfg->max_batch, 1);
    ms_batcher_skip(&b, v->env.split.train_requests, v->env.split.train_iters);
    ms_batcher *saved = v->batch;
    v->batch = &b;
    double t = 0;
    int rc;
    uint64_t it = 0;
    while ((rc = ms_batcher_next(&b, &t, v->err)) == 1) {
        v->iter = it;
        build_activated_sets(v);
        for (uint32_t l = 0; l < v->L; l++)
            for (uint32_t i = 0; i < v->n_acts[l]; i++) {
                uint32_t x = l * v->J + v->acts[(size_t)l * v->J + i].expert;
                if (v->use_n[x] == v->use_cap[x]) {
                    v->use_cap[x] = v->use_cap[x] ? 2 * v->use_cap[x] : 16;
                    v->use_it[x] = ms_xrealloc(v->use_it[x], v->use_cap[x], sizeof **v->use_it);
                }
                v->use_it[x][v->use_n[x]++] = (uint32_t)it;
            }
        ms_batcher_complete(&b, 0, NULL, NULL);
        it++;
    }
    ms_batcher_free(&b);
    v->batch = saved;
    v->iter = 0;
    memset(v->mark, 0, v->NX * sizeof *v->mark);
    if (rc < 0)
        return -1;
    /* exact when the timed replay admits requests in the same order */
    int same_arrival = 1;
    for (uint64_t i = 1; i < v->meta->n_requests; i++)
        if (v->meta->req_arrival_s[i] != v->meta->req_arrival_s[0])
            same_arrival = 0;
    v->m->future_exact = v->cfg->max_batch == 1 || v->cfg->offline || same_arrival;
    return 0;
}

/* 1 when the policy a spec names learns from the training split (unknown
 * names are reported later, by load_policy). */
static int spec_learns(ms_policy_kind kind, const char *spec)
{
    char name[64];
    const char *kv;
    ms_err ignored;
    if (ms_spec_split(spec, name, sizeof name, &kv, &ignored))
        return 0;
    const ms_policy_desc *d = ms_policy_find(kind, name);
    if (!d)
        return 0;
    ms_params p;
    if (d->learns && !ms_params_parse(d->params, kv, name, &p, &ignored))
        return d->learns(&p);
    return d->uses_training;
}

static int resolve_split(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    int learns = spec_learns(MS_KIND_PREFETCH, c->prefetch_spec) || spec_learns(MS_KIND_CACHE, c->cache_spec) ||
                 spec_learns(MS_KIND_SCHED, c->sched_spec);
    ms_split *s = &v->env.split;
    if (ms_split_resolve(v->meta, c->train_set ? c->train_frac : -1.0, learns, s, v->err))
        return -1;
    v->m->train_frac = s->frac;
    v->m->train_by_iteration = s->by_iteration;
    v->m->train_requests = s->train_requests;
    v->m->train_iters = s->train_iters;
    return 0;
}

static int load_policy(ms_view *v, ms_policy_kind kind, const char *spec, const ms_policy_desc **desc, void **st)
{
    char name[64];
    const char *kv;
    if (ms_spec_split(spec, name, sizeof name, &kv, v->err))
        return -1;
    *desc = ms_policy_find(kind, name);
    if (!*desc) {
        char known[512] = "";
        for (int i = 0; ms_policy_registry[i]; i++)
            if (ms_policy_registry[i]->kind == kind) {
                size_t u = strlen(known);
                snprintf(known + u, sizeof known - u, "%s%s", u ? ", " : "", ms_policy_registry[i]->name);
            }
        return ms_fail(v->err, "unknown %s policy '%s' (known: %s)", ms_policy_kind_name(kind), name, known);
    }
    ms_params params;
    char who[96];
    snprintf(who, sizeof who, "%s policy '%s'", ms_policy_kind_name(kind), name);
    if (ms_params_parse((*desc)->params, kv, who, &params, v->err))
        return -1;
    void *(*create)(const ms_params *, const ms_policy_env *, ms_err *) =
        kind == MS_KIND_PREFETCH ? (*desc)->prefetch->create
        : kind == MS_KIND_CACHE  ? (*desc)->cache->create
                                 : (*desc)->sched->create;
    *st = create ? create(&params, &v->env, v->err) : NULL;
    if (create && !*st)
        return ms_fail_prefix(v->err, "%s", who);
    return 0;
}

/* Per-layer sizes from the trace; FLOPs from the model profile when given
 * (quantised traces store fewer bytes than params), else bf16 (2 B/param). */
static int setup_layer_sizes(ms_view *v)
{
    const ms_model *model = v->cfg->model;
    v->layer_bytes = ms_xcalloc(v->L, sizeof(double));
    v->layer_params = ms_xcalloc(v->L, sizeof(double));
    v->dense_bytes = ms_xcalloc(v->L, sizeof(double));
    v->dense_params = ms_xcalloc(v->L, sizeof(double));
    double scale = v->cfg->work_scale > 0 ? v->cfg->work_scale : 1.0;
    for (uint32_t l = 0; l < v->L; l++) {
        v->layer_bytes[l] = (double)v->meta->expert_bytes[l];
        v->dense_bytes[l] = (double)v->meta->dense_bytes[l];
        v->layer_params[l] = model ? (double)model->expert_params : v->layer_bytes[l] / 2.0;
        v->dense_params[l] = model ? (double)model->dense_params : v->dense_bytes[l] / 2.0;
        if (scale != 1.0) {
            v->layer_bytes[l] *= scale;
            v->layer_params[l] *= scale;
            v->dense_bytes[l] *= scale;
            v->dense_params[l] *= scale;
        }
        if (v->layer_bytes[l] <= 0)
            return ms_fail(v->err, "%s: layer %u has expert_bytes 0", v->cfg->trace_path, l);
    }
    return 0;
}

static int check_capacity(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    double max_bytes = 0, total_bytes = 0;
    for (uint32_t l = 0; l < v->L; l++) {
        max_bytes = fmax(max_bytes, v->layer_bytes[l]);
        total_bytes += v->layer_bytes[l] * v->J;
    }
    if (!(c->cap_value > 0) || !isfinite(c->cap_value))
        return ms_fail(v->err, "GPU expert cache size must be positive, got %g", c->cap_value);
    if (c->cap_kind == MS_CAP_EXPERTS && c->cap_value != floor(c->cap_value))
        return ms_fail(v->err, "--cache-experts must be a whole number, got %g", c->cap_value);
    double need = c->cap_kind == MS_CAP_BYTES ? v->K * max_bytes : v->K;
    if (c->cap_value < need)
        return ms_fail(v->err,
                       "GPU expert cache (%g %s) is smaller than one layer's %u activated experts (needs at least %g)",
                       c->cap_value, c->cap_kind == MS_CAP_BYTES ? "bytes" : "experts", v->K, need);
    v->cap_units = c->cap_value;
    v->m->gpu_cache_capacity_bytes = c->cap_kind == MS_CAP_BYTES ? c->cap_value : c->cap_value * max_bytes;
    if (c->platform->gpu_mem_bytes > 0 && v->m->gpu_cache_capacity_bytes > c->platform->gpu_mem_bytes)
        return ms_fail(v->err, "GPU expert cache of %.0f bytes exceeds %s's GPU memory of %.0f bytes",
                       v->m->gpu_cache_capacity_bytes, c->platform->name, c->platform->gpu_mem_bytes);
    v->host_cap = c->host_bytes;
    v->m->host_bytes = c->host_bytes > 0 ? c->host_bytes : total_bytes;
    return 0;
}

static int check_model(ms_view *v)
{
    const ms_model *m = v->cfg->model;
    if (!m)
        return 0;
    if (m->moe_layers != v->L || m->experts != v->J)
        return ms_fail(v->err, "%s has L=%u MoE layers and J=%u experts, but model '%s' has L=%u and J=%u",
                       v->cfg->trace_path, v->L, v->J, m->name, m->moe_layers, m->experts);
    return 0;
}

static void preload_cache(ms_view *v)
{
    if (!v->cache->cache->preload)
        return;
    uint32_t *ls = ms_xcalloc(v->NX, sizeof *ls), *es = ms_xcalloc(v->NX, sizeof *es);
    uint32_t n = v->cache->cache->preload(v->cache_st, v, v->NX, ls, es);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = ls[i] * v->J + es[i];
        if (ls[i] >= v->L || es[i] >= v->J || v->cached[x] || v->used_units + unit_of(v, x) > v->cap_units + 1e-9)
            continue;
        occupy(v, x);
        v->ready_t[x] = 0;
    }
    free(ls);
    free(es);
}

/* The experts resident before the run get their copies (a real backend
 * fills their slots), then the executor's clock starts: they are ready at 0. */
static int start_executor(ms_view *v)
{
    for (uint32_t x = 0; x < v->NX; x++) {
        if (!v->cached[x])
            continue;
        ms_op op = expert_op(v, MS_OP_COPY, x);
        op.iteration = UINT64_MAX;
        ms_event ev;
        if (ms_exec_submit(v->exec, &op, &ev, v->err))
            return exec_failed(v);
    }
    return ms_exec_begin(v->exec, v->err) ? exec_failed(v) : 0;
}

static int open_executor(ms_view *v)
{
    if (v->cfg->exec) {
        v->exec = v->cfg->exec;
        return 0;
    }
    if (ms_exec_sim_create(v->cfg->platform, v->L, v->J, &v->own_exec, v->err))
        return -1;
    v->exec = &v->own_exec;
    return 0;
}

static void init_host_tier(ms_view *v)
{
    v->in_host = ms_xcalloc(v->NX, 1);
    v->host_used_at = ms_xcalloc(v->NX, sizeof *v->host_used_at);
    if (v->host_cap <= 0)
        return;
    for (uint32_t x = 0; x < v->NX; x++) {
        double b = v->layer_bytes[x / v->J];
        if (v->host_used + b > v->host_cap)
            break;
        v->in_host[x] = 1;
        v->host_used += b;
        host_touch(v, x);
    }
}

static void alloc_state(ms_view *v)
{
    size_t nx = v->NX;
    v->cached = ms_xcalloc(nx, 1);
    v->transient = ms_xcalloc(nx, 1);
    v->from_prefetch = ms_xcalloc(nx, 1);
    v->queued = ms_xcalloc(nx, 1);
    v->outcome = ms_xcalloc(nx, 1);
    v->qgen = ms_xcalloc(nx, sizeof *v->qgen);
    v->qissue = ms_xcalloc(nx, sizeof *v->qissue);
    v->ready_t = ms_xcalloc(nx, sizeof *v->ready_t);
    v->protect = ms_xcalloc(nx, sizeof *v->protect);
    v->mark = ms_xcalloc(nx, sizeof *v->mark);
    v->act_pos = ms_xcalloc(nx, sizeof *v->act_pos);
    v->score = ms_xcalloc(nx, sizeof *v->score);
    v->incoming = UINT32_MAX;
    for (size_t x = 0; x < nx; x++)
        v->score[x] = NAN;
    v->acts = ms_xcalloc(nx, sizeof *v->acts);
    v->n_acts = ms_xcalloc(v->L, sizeof *v->n_acts);
    v->m->L = v->L;
    v->m->layer = ms_xcalloc(v->L, sizeof *v->m->layer);
}

static void free_state(ms_view *v)
{
    if (v->pf && v->pf_st && v->pf->prefetch->destroy)
        v->pf->prefetch->destroy(v->pf_st);
    if (v->cache && v->cache_st && v->cache->cache->destroy)
        v->cache->cache->destroy(v->cache_st);
    if (v->sched && v->sched_st && v->sched->sched->destroy)
        v->sched->sched->destroy(v->sched_st);
    void *arrays[] = {v->cached, v->transient, v->from_prefetch, v->queued, v->outcome, v->qgen, v->qissue, v->ready_t,
                      v->protect, v->mark, v->act_pos, v->score, v->acts, v->n_acts, v->layer_bytes, v->layer_params, v->dense_bytes,
                      v->dense_params, v->in_host, v->host_used_at, v->heap, v->use_n, v->use_cap, v->use_cur,
                      v->ttft.v, v->tpot.v, v->latency.v};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
    if (v->use_it)
        for (uint32_t x = 0; x < v->NX; x++)
            free(v->use_it[x]);
    free(v->use_it);
}

/* Mean and quantiles of d; NaN each when d has no sample. */
static void summarise(ms_dvec *d, uint64_t *n, double *mean, double *p50, double *p90, double *p99)
{
    *n = d->n;
    if (!d->n) {
        *mean = NAN;
        if (p50)
            *p50 = NAN;
        if (p90)
            *p90 = NAN;
        if (p99)
            *p99 = NAN;
        return;
    }
    gsl_sort(d->v, 1, d->n);
    *mean = gsl_stats_mean(d->v, 1, d->n);
    if (p50)
        *p50 = gsl_stats_quantile_from_sorted_data(d->v, 1, d->n, 0.50);
    if (p90)
        *p90 = gsl_stats_quantile_from_sorted_data(d->v, 1, d->n, 0.90);
    if (p99)
        *p99 = gsl_stats_quantile_from_sorted_data(d->v, 1, d->n, 0.99);
}

/* Opens one optional CSV output through sim/out.h (a temporary renamed into
 * place at the end) and writes the provenance line and the header. */
static FILE *open_csv(ms_view *v, const char *what, const char *path, ms_out **o, const char *header)
{
    if (!path)
        return NULL;
    *o = ms_out_open(what, path, v->err);
    if (!*o)
        return NULL;
    FILE *f = ms_out_fp(*o);
    ms_report_provenance_line(f, v->cfg);
    fputs(header, f);
    return f;
}

static int open_outputs(ms_view *v)
{
    const ms_run_config *c = v->cfg;
    v->ev = open_csv(v, "--events", c->events_path, &v->ev_out,
                     "kind,start_s,end_s,iteration,layer,expert,phase,bytes,unused_prefetch\n");
    if (c->events_path && !v->ev)
        return -1;
    v->iter_csv = open_csv(v, "iterations CSV", c->iterations_path, &v->iter_out,
                           "iteration,phase,hits,late,misses,hit_rate,sem_score,traj_score\n");
    if (c->iterations_path && !v->iter_csv)
        return -1;
    v->req_csv = open_csv(v, "requests CSV", c->requests_path, &v->req_out, "request,arrival_s,ttft_s,tpot_s,latency_s\n");
    if (c->requests_path && !v->req_csv)
        return -1;
    return 0;
}

/* Commits the CSV outputs when the run succeeded (rc 0), else removes them;
 * returns rc, or -1 when a commit failed. */
static int close_outputs(ms_view *v, int rc)
{
    ms_out **outs[] = {&v->ev_out, &v->iter_out, &v->req_out};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        if (!*outs[i])
            continue;
        if (rc == 0)
            rc = ms_out_commit(*outs[i], v->err);
        else
            ms_out_abort(*outs[i]);
        *outs[i] = NULL;
    }
    v->ev = v->iter_csv = v->req_csv = NULL;
    return rc;
}

static int replay(ms_view *v, ms_trace_reader *rd)
{
    ms_batcher b;
    ms_batcher_init(&b, rd, v->cfg->max_batch, v->cfg->offline);
    ms_batcher_skip(&b, v->env.split.train_requests, v->env.split.train_iters);
    v->batch = &b;
    int rc;
    while ((rc = ms_batcher_next(&b, &v->now, v->err)) == 1) {
        v->clock = v->now;
        if (run_iteration(v)) {
            rc = -1;
            break;
        }
        ms_batcher_complete(&b, v->now, request_done, v);
        v->iter++;
    }
    ms_batcher_free(&b);
    v->batch = NULL;
    return rc;
}

int ms_run(const ms_run_config *cfg, ms_metrics *out, ms_err *err)
{
    memset(out, 0, sizeof *out);
    if (cfg->max_batch < 1)
        return ms_fail(err, "--batch must be at least 1");
    ms_trace_reader *rd = ms_reader_open(cfg->trace_path, err);
    if (!rd)
        return -1;
    ms_view *v = ms_xcalloc(1, sizeof *v);
    v->cfg = cfg;
    v->err = err;
    v->m = out;
    v->meta = ms_reader_meta(rd);
    v->L = v->meta->L;
    v->J = v->meta->J;
    v->K = v->meta->K;
    v->NX = v->L * v->J;
    v->env = (ms_policy_env){.meta = v->meta, .trace_path = cfg->trace_path, .platform = cfg->platform,
                             .model = cfg->model, .distance = cfg->distance, .seed = cfg->seed,
                             .topk_fill = cfg->topk_fill == MS_FILL_EVEN ? MS_FILL_EVEN : MS_FILL_ZERO};
    alloc_state(v);
    int rc = -1;
    if (check_model(v) || setup_layer_sizes(v) || check_capacity(v) || resolve_split(v))
        goto done;
    if (load_policy(v, MS_KIND_PREFETCH, cfg->prefetch_spec, &v->pf, &v->pf_st) ||
        load_policy(v, MS_KIND_CACHE, cfg->cache_spec, &v->cache, &v->cache_st) ||
        load_policy(v, MS_KIND_SCHED, cfg->sched_spec, &v->sched, &v->sched_st))
        goto done;
    if ((v->pf->needs_future || v->cache->needs_future || v->sched->needs_future) && build_future(v, rd))
        goto done;
    init_host_tier(v);
    if (open_outputs(v) || open_executor(v))
        goto done;
    preload_cache(v);
    if (start_executor(v) || replay(v, rd))
        goto done;
    out->makespan_s = v->now;
    if (v->pf->prefetch->state_bytes)
        out->policy_state_bytes = v->pf->prefetch->state_bytes(v->pf_st);
    out->has_policy_stats = v->pf->prefetch->stats != NULL;
    policy_stats_now(v, &out->policy_stats);
    summarise(&v->ttft, &out->ttft_samples, &out->ttft_mean_s, &out->ttft_p50_s, NULL, &out->ttft_p99_s);
    summarise(&v->tpot, &out->tpot_samples, &out->tpot_mean_s, &out->tpot_p50_s, NULL, &out->tpot_p99_s);
    summarise(&v->latency, &out->latency_samples, &out->latency_mean_s, &out->latency_p50_s, &out->latency_p90_s,
              &out->latency_p99_s);
    rc = 0;
done:
    rc = close_outputs(v, rc);
    if (v->exec == &v->own_exec)
        ms_exec_destroy(&v->own_exec);
    free_state(v);
    free(v);
    ms_reader_close(rd);
    if (rc)
        ms_metrics_free(out);
    return rc;
}

void ms_metrics_free(ms_metrics *m)
{
    free(m->layer);
    m->layer = NULL;
}
