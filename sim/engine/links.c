/* One H2D link per GPU in runs with several GPUs (docs/engine.md "Several
 * GPUs"): every link has its own copy queue (on-demand loads first, then
 * prefetches by priority, FIFO on ties: qset.h) and serves one copy
 * at a time.  A copy is latency, then its bytes.  Without a host ceiling a
 * copy takes latency + bytes / link bandwidth, fixed when it starts.  With
 * one (the platform's host_ceiling_bw: root complex or DRAM shared by all
 * links), the k copies in their byte phase at once each move at
 * min(their link's bandwidth, ceiling / k): a processor-sharing fluid that
 * is re-solved whenever a copy starts, so the end of a copy in flight is
 * tentative (later starts on other links can push it back) until no copy
 * can start before it.  The engine starts copies in time order across the
 * links (eng_links_advance), and before a layer computes it settles the
 * copies its experts wait for (eng_links_settle): between the gate hooks
 * and the layer's end nothing changes the queues, so starting those copies
 * early gives the times the lazy order would.  Copies are timed here, not by
 * the executor. */
#include <math.h>
#include <stdlib.h>

#include "sim/engine/state.h"

/* ---- the fluid: copies in their byte phase share the ceiling ---- */

typedef struct {
    double xfer0, left, cap, end;
    int on;
} flow;

static double flow_rate(const flow *f, double ceiling, int active)
{
    return ms_fmin(f->cap, ceiling / active);
}

/* Runs the flows from t0 until `until` (INFINITY: until all end): a flow in
 * its byte phase (xfer0 <= t) moves at flow_rate; one whose bytes are done
 * ends (on = 0, end set).  Identical steps for every `until` up to the
 * first event past it, so the ends a projection gives (until = INFINITY)
 * are the ends a later commit to any time past them computes. */
static void run_flows(flow *f, uint32_t n, double ceiling, double t0, double until)
{
    double t = t0;
    while (t < until) {
        int active = 0, on = 0;
        for (uint32_t i = 0; i < n; i++) {
            on += f[i].on;
            active += f[i].on && f[i].xfer0 <= t;
        }
        if (!on)
            return;
        double next = until;
        for (uint32_t i = 0; i < n; i++) {
            if (!f[i].on)
                continue;
            next = ms_fmin(next, f[i].xfer0 > t ? f[i].xfer0 : t + f[i].left / flow_rate(&f[i], ceiling, active));
        }
        for (uint32_t i = 0; i < n; i++) {
            if (!f[i].on || f[i].xfer0 > t)
                continue;
            double r = flow_rate(&f[i], ceiling, active), fin = t + f[i].left / r;
            if (fin <= next) {
                f[i].on = 0;
                f[i].left = 0;
                f[i].end = fin;
            } else {
                f[i].left -= r * (next - t);
            }
        }
        t = next;
    }
}

static flow *flows_of(const ms_view *v)
{
    flow *f = ms_xcalloc(v->G, sizeof *f);
    for (uint32_t g = 0; g < v->G; g++) {
        const eng_link *k = &v->links[g];
        f[g] = (flow){k->cur_xfer0, k->cur_left, k->cur_cap, k->free_t, k->busy};
    }
    return f;
}

/* ---- copies ---- */

static const char *copy_kind(const qentry *q)
{
    return q->demand ? "copy_demand" : "copy_prefetch";
}

/* The copy in flight on link g is final at end: its weights are ready then,
 * its events row is written (with the iteration it started in).  Its flow
 * stays in the fluid until the next start moves the fluid past it. */
static void finalize(ms_view *v, uint32_t g, double end)
{
    eng_link *k = &v->links[g];
    uint32_t x = k->cur.x;
    if (k->final)
        return;
    k->final = 1;
    k->free_t = end;
    v->ready_t[x] = end;
    v->m->gpu[g].link_busy_s += end - k->cur_start;
    uint64_t iter = v->iter;
    ms_phase phase = v->phase;
    v->iter = k->cur_iter;
    v->phase = k->cur_phase;
    eng_event(v, copy_kind(&k->cur), k->cur_start, end, x, v->layer_bytes[x / v->J]);
    v->iter = iter;
    v->phase = phase;
}

/* No copy starts before t any more: the copies whose (tentative) end is
 * by t are final.  The fluid itself moves only at starts, so the ends a
 * projection published are exactly the ends the next start's run computes. */
static void settle_until(ms_view *v, double t)
{
    for (uint32_t g = 0; g < v->G; g++)
        if (v->links[g].busy && !v->links[g].final && v->links[g].free_t <= t)
            finalize(v, g, v->links[g].free_t);
}

/* A copy starts at s: the fluid moves to s; flows done by then leave it. */
static void move_fluid(ms_view *v, double s)
{
    settle_until(v, s);
    if (!isinf(v->ceiling) && s > v->fluid_t) {
        flow *f = flows_of(v);
        run_flows(f, v->G, v->ceiling, v->fluid_t, s);
        for (uint32_t g = 0; g < v->G; g++) {
            v->links[g].cur_left = f[g].left;
            v->links[g].busy = f[g].on;
        }
        free(f);
    } else if (isinf(v->ceiling)) {
        for (uint32_t g = 0; g < v->G; g++)
            v->links[g].busy = v->links[g].busy && !v->links[g].final;
    }
    v->fluid_t = ms_fmax(v->fluid_t, s);
}

/* Publishes the tentative end of every copy in flight (free_t, ready_t)
 * after a start changed the sharing. */
static void project(ms_view *v)
{
    if (isinf(v->ceiling))
        return;
    flow *f = flows_of(v);
    run_flows(f, v->G, v->ceiling, v->fluid_t, INFINITY);
    for (uint32_t g = 0; g < v->G; g++)
        if (v->links[g].busy) {
            v->links[g].free_t = f[g].end;
            v->ready_t[v->links[g].cur.x] = f[g].end;
        }
    free(f);
}

static void start_on_link(ms_view *v, uint32_t g, const qentry *q, double s)
{
    move_fluid(v, s);
    uint32_t x = q->x;
    double bytes = v->layer_bytes[x / v->J];
    v->clock = s;
    if (!q->demand) {
        if (eng_admit_prefetch(v, x)) {
            v->clock = v->now;
            return;
        }
    } else {
        v->m->demand_copies++;
        v->m->gpu[g].demand_copies++;
    }
    const ms_platform *p = v->cfg->platform;
    int ssd = eng_host_fetch(v, x);
    double lat = ssd ? p->ssd_latency_s + v->copy_calls * p->h2d_latency_s : v->copy_calls * p->h2d_latency_s;
    double cap = ssd ? ms_fmin(p->ssd_bw, v->copy_bw) : v->copy_bw;
    eng_link *k = &v->links[g];
    *k = (eng_link){.q = k->q, .busy = 1, .final = 0, .cur = *q, .cur_start = s, .cur_xfer0 = s + lat, .cur_left = bytes,
                    .cur_cap = cap, .cur_ssd = ssd, .cur_iter = v->iter, .cur_phase = v->phase};
    k->free_t = s + (lat + bytes / cap); /* without a ceiling: final now, as ms_t_copy_h2d */
    v->ready_t[x] = k->free_t;
    if (ssd)
        v->m->ssd_bytes += bytes;
    v->m->pcie_bytes += bytes;
    v->m->pcie_copies++;
    v->m->gpu[g].copies++;
    v->m->gpu[g].pcie_bytes += bytes;
    project(v);
    v->clock = v->now;
}

/* Starts the earliest next copy of all links if it starts before T (ties:
 * the lower GPU); 1 when one was taken off a queue. */
static int start_next(ms_view *v, double T)
{
    uint32_t best = UINT32_MAX, best_x = EQ_NONE;
    double best_s = INFINITY;
    for (uint32_t g = 0; g < v->G && !v->failed; g++) {
        eng_link *k = &v->links[g];
        uint32_t i;
        double s;
        if (!k->q.n || !eng_qset_next(&k->q, k->free_t, &i, &s))
            continue;
        if (s < best_s) {
            best = g;
            best_x = i;
            best_s = s;
        }
    }
    if (best == UINT32_MAX || !(best_s < T))
        return 0;
    qentry q = eng_qset_take(&v->links[best].q, best_x);
    start_on_link(v, best, &q, best_s);
    return 1;
}

void eng_links_advance(ms_view *v, double T)
{
    while (!v->failed && start_next(v, T))
        ;
    if (!v->failed)
        settle_until(v, T);
}

/* Whether the copy of x (a GPU expert of the running layer) is not final:
 * not started yet (ready at INFINITY) or in flight on its link.  *end gets
 * the tentative end of one in flight. */
static int copy_pending(const ms_view *v, uint32_t x, double *end)
{
    const eng_link *k = &v->links[v->gpu_of[x]];
    if (k->busy && !k->final && k->cur.x == x) {
        *end = k->free_t;
        return 1;
    }
    *end = -INFINITY;
    return isinf(v->ready_t[x]);
}

void eng_links_settle(ms_view *v, const ms_act *acts, uint32_t n, const uint8_t *on_cpu)
{
    while (!v->failed) {
        int unstarted = 0, pending = 0;
        double T = v->fluid_t;
        for (uint32_t i = 0; i < n; i++) {
            double end;
            uint32_t x = v->layer * v->J + acts[i].expert;
            if (on_cpu[i] || !copy_pending(v, x, &end))
                continue;
            pending = 1;
            unstarted |= isinf(end) && end < 0;
            T = ms_fmax(T, end);
        }
        if (!pending)
            return;
        if (unstarted) {
            if (!start_next(v, INFINITY)) { /* cannot happen: a demand waits in its link's queue */
                ms_fail(v->err, "internal error: layer %u waits for a copy no link will start", v->layer);
                v->failed = 1;
            }
            continue;
        }
        eng_links_advance(v, T);
    }
}

void eng_links_finish(ms_view *v)
{
    settle_until(v, INFINITY);
}

double eng_links_free(const ms_view *v)
{
    double t = v->clock;
    for (uint32_t g = 0; g < v->G; g++)
        t = ms_fmax(t, v->links[g].free_t);
    return t;
}
