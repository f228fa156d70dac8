/* Differential test of policies/lib/hybrimoe_hss.c's paper HSS (the
 * `hybrid` scheduler, issue 18) against the implementation it replaced,
 * kept below as the reference (ref_*): there, a queue's head left by
 * shifting every other entry one place; now the queue's array advances.
 * 40,000 seeded layers of 1-80 experts (the stack arrays end at 64), loads
 * from a few values (ties in the queue orders are common), random cached /
 * ready / times, guard 0 and 1, a first-CPU surcharge or none: the same CPU
 * experts, the same moves and the same makespan bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#include "sim/core/fminmax.h"
#include "policies/lib/hybrimoe_hss.h"

#include "splitmix.h"

/* paper HSS: three simulated timelines */

typedef struct {
    uint32_t *q; /* expert indices */
    uint32_t n;
} ref_queue;

typedef struct {
    const ms_hss_expert *x;
    const ms_hss_opts *o;
    ref_queue gq;  /* GPU queue, load descending */
    ref_queue cq;  /* CPU queue, load ascending */
    double *ready; /* when each expert's weights are on the GPU */
    double g, c, k;               /* when each timeline frees */
    double g_end, c_end;          /* last compute finish on each */
    int cpu_started, cpu_blocked, link_blocked;
    uint8_t *on_cpu, *moved;
} ref_sim;

static void ref_queue_remove(ref_queue *q, uint32_t pos)
{
    for (uint32_t j = pos; j + 1 < q->n; j++)
        q->q[j] = q->q[j + 1];
    q->n--;
}

/* Inserts i after every queued expert whose key is not after it. */
static void ref_queue_insert(ref_queue *q, const ms_hss_expert *x, uint32_t i, int descending)
{
    uint32_t pos = q->n;
    while (pos > 0 && (descending ? x[q->q[pos - 1]].load < x[i].load : x[q->q[pos - 1]].load > x[i].load))
        pos--;
    for (uint32_t j = q->n; j > pos; j--)
        q->q[j] = q->q[j - 1];
    q->q[pos] = i;
    q->n++;
}

static double ref_cpu_cost(const ref_sim *s, uint32_t i)
{
    return s->x[i].t_cpu + (s->cpu_started ? 0.0 : s->o->cpu_first);
}

/* When the GPU finishes the first `upto` experts of its queue in order. */
static double ref_gpu_finish_of_prefix(const ref_sim *s, uint32_t upto)
{
    double t = s->g;
    for (uint32_t j = 0; j < upto; j++)
        t = ms_fmax(t, s->ready[s->gq.q[j]]) + s->x[s->gq.q[j]].t_gpu;
    return t;
}

/* A timeline that acts unblocks the idle ones: they may act again from the
 * time it acted (its decision may have changed what is worth doing). */
static void ref_unblock_others(ref_sim *s, double t)
{
    if (s->cpu_blocked) {
        s->cpu_blocked = 0;
        s->c = ms_fmax(s->c, t);
    }
    if (s->link_blocked) {
        s->link_blocked = 0;
        s->k = ms_fmax(s->k, t);
    }
}

static void ref_gpu_take_head(ref_sim *s)
{
    ref_unblock_others(s, s->g);
    uint32_t i = s->gq.q[0];
    ref_queue_remove(&s->gq, 0);
    s->g = ms_fmax(s->g, s->ready[i]) + s->x[i].t_gpu;
    s->g_end = s->g;
}

static void ref_cpu_compute(ref_sim *s, uint32_t i)
{
    s->c += ref_cpu_cost(s, i);
    s->c_end = s->c;
    s->cpu_started = 1;
    s->on_cpu[i] = 1;
}

/* CPU: head of its own queue; else steal the lowest-load GPU-queue expert
 * when (guard) it finishes it before the GPU would; else wait. */
static void ref_cpu_act(ref_sim *s)
{
    double t = s->c;
    if (s->cq.n > 0) {
        uint32_t i = s->cq.q[0];
        ref_queue_remove(&s->cq, 0);
        ref_cpu_compute(s, i);
    } else {
        uint32_t tail = s->gq.q[s->gq.n - 1];
        if (s->o->guard && s->c + ref_cpu_cost(s, tail) >= ref_gpu_finish_of_prefix(s, s->gq.n)) {
            s->cpu_blocked = 1;
            return;
        }
        ref_queue_remove(&s->gq, s->gq.n - 1);
        ref_cpu_compute(s, tail);
    }
    ref_unblock_others(s, t);
}

/* Link: move the highest-load CPU-queue expert when (guard) the GPU would
 * finish it before the CPU would; else wait. */
static void ref_link_act(ref_sim *s)
{
    uint32_t i = s->cq.q[s->cq.n - 1];
    const ms_hss_expert *x = s->x;
    double t = s->k, arrive = s->k + x[i].t_copy;
    uint32_t ahead = 0; /* GPU-queue experts it would sit behind */
    while (ahead < s->gq.n && x[s->gq.q[ahead]].load >= x[i].load)
        ahead++;
    double on_gpu = ms_fmax(ref_gpu_finish_of_prefix(s, ahead), arrive) + x[i].t_gpu;
    double on_cpu = s->c + (s->cpu_started ? 0.0 : s->o->cpu_first);
    for (uint32_t j = 0; j < s->cq.n; j++)
        on_cpu += x[s->cq.q[j]].t_cpu;
    if (s->o->guard && on_gpu >= on_cpu) {
        s->link_blocked = 1;
        return;
    }
    ref_queue_remove(&s->cq, s->cq.n - 1);
    s->k = arrive;
    s->ready[i] = arrive;
    s->moved[i] = 1;
    ref_queue_insert(&s->gq, x, i, 1);
    ref_unblock_others(s, t);
}

static void ref_build_queues(ref_sim *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        s->ready[i] = s->x[i].cached ? ms_fmax(0.0, s->x[i].ready) : INFINITY;
        ref_queue_insert(s->x[i].cached ? &s->gq : &s->cq, s->x, i, s->x[i].cached);
    }
}

#define REF_STACK 64 /* a layer's activated experts up to this: the simulation's arrays on the stack */

static double ref_hss_paper(const ms_hss_expert *x, uint32_t n, const ms_hss_opts *o, uint8_t *on_cpu, uint8_t *moved)
{
    uint32_t gq_buf[REF_STACK], cq_buf[REF_STACK];
    double ready_buf[REF_STACK];
    uint8_t moved_stack[REF_STACK];
    int heap = n > REF_STACK;
    uint8_t *moved_buf = moved ? moved : heap ? calloc(n, 1) : moved_stack;
    ref_sim s = {.x = x, .o = o, .k = ms_fmax(0.0, o->link_free), .on_cpu = on_cpu, .moved = moved_buf};
    s.gq.q = heap ? calloc(n, sizeof *s.gq.q) : gq_buf;
    s.cq.q = heap ? calloc(n, sizeof *s.cq.q) : cq_buf;
    s.ready = heap ? calloc(n, sizeof *s.ready) : ready_buf;
    for (uint32_t i = 0; i < n; i++)
        on_cpu[i] = moved_buf[i] = 0;
    ref_build_queues(&s, n);
    while (s.gq.n + s.cq.n > 0) {
        /* the timeline that frees first acts; ties: GPU, link, CPU */
        double tg = s.gq.n > 0 ? s.g : INFINITY;
        double tk = !s.link_blocked && s.cq.n > 0 ? s.k : INFINITY;
        double tc = !s.cpu_blocked ? s.c : INFINITY;
        if (isfinite(tg) && tg <= tk && tg <= tc)
            ref_gpu_take_head(&s);
        else if (isfinite(tk) && tk <= tc)
            ref_link_act(&s);
        else if (isfinite(tc))
            ref_cpu_act(&s);
        else
            break; /* unreachable: a blocked CPU implies GPU work, a blocked link CPU work */
    }
    if (heap) {
        free(s.gq.q);
        free(s.cq.q);
        free(s.ready);
        if (!moved)
            free(moved_buf);
    }
    return ms_fmax(s.g_end, s.c_end);
}


static double some_time(void)
{
    static const double pool[] = {0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 3.0};
    return below(4) ? pool[below(7)] : (double)(rnd() >> 11) / 9007199254740992.0 * 4.0;
}

static void test_against_reference(void)
{
    uint64_t layers = 0, differ = 0, with_moves = 0, with_cpu = 0;
    ms_hss_expert x[80];
    for (uint64_t seed = 1; seed <= 40000; seed++) {
        rng_state = seed;
        uint32_t n = 1 + (seed % 5 == 0 ? below(80) : below(8));
        for (uint32_t i = 0; i < n; i++) {
            double tokens = (double)(1 + below(4));
            x[i] = (ms_hss_expert){
                .load = tokens, .cached = below(3) != 0, .ready = below(3) ? 0.0 : some_time(),
                .t_gpu = some_time(), .t_cpu = some_time() * tokens, .t_copy = some_time(),
            };
        }
        ms_hss_opts o = {.link_free = below(2) ? 0.0 : some_time(), .cpu_first = below(3) ? 0.0 : some_time(),
                         .guard = (int)below(4) != 0};
        uint8_t cpu_a[80], cpu_b[80], mv_a[80], mv_b[80];
        double a = ms_hss_paper(x, n, &o, cpu_a, mv_a);
        double b = ref_hss_paper(x, n, &o, cpu_b, mv_b);
        differ += memcmp(&a, &b, sizeof a) != 0 || memcmp(cpu_a, cpu_b, n) != 0 || memcmp(mv_a, mv_b, n) != 0;
        for (uint32_t i = 0; i < n; i++) {
            with_moves += mv_a[i];
            with_cpu += cpu_a[i];
        }
        layers++;
    }
    CHECK_EQ_INT(differ, 0);
    CHECK(with_moves > 10000 && with_cpu > 10000); /* both the link and the CPU acted often */
    printf("%llu layers, %llu moves, %llu CPU experts\n", (unsigned long long)layers,
           (unsigned long long)with_moves, (unsigned long long)with_cpu);
}

int main(void)
{
    test_against_reference();
    CHECK_DONE();
}
