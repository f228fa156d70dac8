#include "policies/lib/hybrimoe_hss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/err.h"
#include "sim/core/fminmax.h"

/* ------------------------------------------------------------------ */
/* MRS */

/* Puts e (score x) into the sorted run top[0..at] whose slot `at` is free:
 * shifts the entries of lower score one place down (an equal score stays
 * in front: it has the lower id). */
static inline void insert_top(uint32_t *top, float *val, uint32_t at, uint32_t e, float x)
{
    while (at > 0 && val[at - 1] < x) {
        val[at] = val[at - 1];
        top[at] = top[at - 1];
        at--;
    }
    val[at] = x;
    top[at] = e;
}

typedef float top_vf4 __attribute__((vector_size(16))); /* GCC vector extensions: SSE2 / NEON */
typedef int32_t top_vi4 __attribute__((vector_size(16)));
#define TOP_BOUND_VECTORS 16 /* p up to 64 */

static inline top_vf4 load_vf4(const float *p)
{
    top_vf4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* max(a, b) lane by lane (b where they are equal: either is right here) */
static inline top_vf4 max_vf4(top_vf4 a, top_vf4 b)
{
    top_vi4 gt = a > b;
    return (top_vf4)(((top_vi4)a & gt) | ((top_vi4)b & ~gt));
}

/* A lower bound of the p-th largest of s[0..J) (0 < p <= J): the smallest of
 * the maxima of q >= p disjoint groups of ids, each a residue mod q up to
 * the last whole block of q (q = p rounded up to a multiple of 4: q / 4
 * vectors of running maxima, four lanes at a time; the ids after the last
 * block are in no group).  Those q maxima are q distinct entries at or
 * above it, so an entry below it has p entries above it and is never among
 * the top p, whatever the tie rule.  -inf (no bound) when J < q or p > 64. */
static float top_p_bound(const float *s, uint32_t J, uint32_t p)
{
    uint32_t m = (p + 3) / 4, q = 4 * m;
    if (m == 0 || m > TOP_BOUND_VECTORS || J < q)
        return -INFINITY;
    top_vf4 acc[TOP_BOUND_VECTORS];
    for (uint32_t i = 0; i < m; i++)
        acc[i] = load_vf4(s + 4 * i);
    for (uint32_t b = q; b + q <= J; b += q)
        for (uint32_t i = 0; i < m; i++)
            acc[i] = max_vf4(load_vf4(s + b + 4 * i), acc[i]);
    top_vf4 low = acc[0];
    for (uint32_t i = 1; i < m; i++) {
        top_vi4 lt = acc[i] < low;
        low = (top_vf4)(((top_vi4)acc[i] & lt) | ((top_vi4)low & ~lt));
    }
    float bound = low[0];
    for (int i = 1; i < 4; i++)
        bound = low[i] < bound ? low[i] : bound;
    return bound;
}

/* top[0..p) = the p experts of largest s (p <= J), largest first, ties to
 * the lower id (s holds no NaN: gate scores are checked), val[i] = s[top[i]]:
 * one pass keeping the best p found so far in that order, their values
 * beside them so that the usual test (not above the p-th) reads no s[top[]];
 * O(J p) at worst, usually O(J).  With J >= 4q (top_p_bound's q) the first
 * p places are filled only with entries at or above top_p_bound (at least p
 * are), so the p-th starts high and fewer later entries are inserted: an
 * entry below the bound is never among the top p, and the rest are visited
 * in id order, so the p and their order are those of the plain pass over
 * every entry.  (With fewer experts the bound saves less than it costs.) */
static void top_p_experts(const float *s, uint32_t J, uint32_t p, uint32_t *top, float *val)
{
    if (p == 0)
        return;
    uint32_t n = 0, e = 0;
    if (J >= 16 * ((p + 3) / 4)) {
        float bound = top_p_bound(s, J, p);
        for (; n < p; e++) /* n reaches p before e reaches J: the q group maxima are at or above the bound */
            if (s[e] >= bound)
                insert_top(top, val, n++, e, s[e]);
    } else {
        for (; n < p; e++, n++)
            insert_top(top, val, n, e, s[e]);
    }
    float last = val[p - 1];
    for (; e < J; e++) {
        if (!(s[e] > last))
            continue; /* an equal score has a lower id there */
        insert_top(top, val, p - 1, e, s[e]);
        last = val[p - 1];
    }
}

#define MRS_STACK_P 64  /* TopP sizes (and, for the f32 update, expert counts) kept on the stack */
#define MRS_STACK_J 512

static int by_id(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void ms_mrs_update(double *S, const float *s, uint32_t J, uint32_t p, double alpha, int order_bug)
{
    if (p > J)
        p = J;
    uint32_t top_buf[MRS_STACK_P];
    float topv_buf[MRS_STACK_P];
    int heap = p > MRS_STACK_P; /* the usual p (2K) fits on the stack: no allocation per gate */
    uint32_t *top = heap ? ms_xcalloc(p, sizeof *top) : top_buf;
    float *topv = heap ? ms_xcalloc(p, sizeof *topv) : topv_buf;
    top_p_experts(s, J, p, top, topv); /* topv descending, as torch.topk returns them */
    if (order_bug)           /* boolean-mask assignment visits the experts in id order */
        qsort(top, p, sizeof *top, by_id);
    /* (1 - alpha) * S for every expert; TopP(s) is zero outside the top p */
    for (uint32_t e = 0; e < J; e++)
        S[e] *= 1.0 - alpha;
    for (uint32_t i = 0; i < p; i++)
        S[top[i]] += alpha * topv[i];
    if (heap) {
        free(top);
        free(topv);
    }
}

void ms_mrs_update_f32(float *S, const float *s, uint32_t J, uint32_t p, float alpha, int order_bug)
{
    if (p > J)
        p = J;
    uint32_t top_buf[MRS_STACK_P];
    float topv_buf[MRS_STACK_P];
    uint8_t in_buf[MRS_STACK_J];
    int heap = p > MRS_STACK_P || J > MRS_STACK_J;
    uint32_t *top = heap ? ms_xcalloc(p ? p : 1, sizeof *top) : top_buf;
    float *topv = heap ? ms_xcalloc(p ? p : 1, sizeof *topv) : topv_buf;
    uint8_t *in = heap ? ms_xcalloc(J ? J : 1, 1) : memset(in_buf, 0, J);
    top_p_experts(s, J, p, top, topv);
    if (order_bug)
        qsort(top, p, sizeof *top, by_id);
    float keep = 1.0f - alpha;
    for (uint32_t i = 0; i < p; i++) {
        float a = alpha * topv[i], b = keep * S[top[i]];
        S[top[i]] = a + b;
        in[top[i]] = 1;
    }
    for (uint32_t e = 0; e < J; e++)
        if (!in[e])
            S[e] = keep * S[e];
    if (heap) {
        free(top);
        free(topv);
        free(in);
    }
}

/* ------------------------------------------------------------------ */
/* paper HSS: three simulated timelines */

typedef struct {
    uint32_t *q; /* expert indices */
    uint32_t n;
} hss_queue;

typedef struct {
    const ms_hss_expert *x;
    const ms_hss_opts *o;
    hss_queue gq;  /* GPU queue, load descending */
    hss_queue cq;  /* CPU queue, load ascending */
    double *ready; /* when each expert's weights are on the GPU */
    double g, c, k;               /* when each timeline frees */
    double g_end, c_end;          /* last compute finish on each */
    int cpu_started, cpu_blocked, link_blocked;
    uint8_t *on_cpu, *moved;
} hss_sim;

/* The head leaves by advancing the array (each expert enters a queue at
 * most once, so the n slots hold every insertion); any other by shifting. */
static void queue_remove(hss_queue *q, uint32_t pos)
{
    if (pos == 0) {
        q->q++;
        q->n--;
        return;
    }
    for (uint32_t j = pos; j + 1 < q->n; j++)
        q->q[j] = q->q[j + 1];
    q->n--;
}

/* Inserts i after every queued expert whose key is not after it. */
static void queue_insert(hss_queue *q, const ms_hss_expert *x, uint32_t i, int descending)
{
    uint32_t pos = q->n;
    while (pos > 0 && (descending ? x[q->q[pos - 1]].load < x[i].load : x[q->q[pos - 1]].load > x[i].load))
        pos--;
    for (uint32_t j = q->n; j > pos; j--)
        q->q[j] = q->q[j - 1];
    q->q[pos] = i;
    q->n++;
}

static double cpu_cost(const hss_sim *s, uint32_t i)
{
    return s->x[i].t_cpu + (s->cpu_started ? 0.0 : s->o->cpu_first);
}

/* When the GPU finishes the first `upto` experts of its queue in order. */
static double gpu_finish_of_prefix(const hss_sim *s, uint32_t upto)
{
    double t = s->g;
    for (uint32_t j = 0; j < upto; j++)
        t = ms_fmax(t, s->ready[s->gq.q[j]]) + s->x[s->gq.q[j]].t_gpu;
    return t;
}

/* A timeline that acts unblocks the idle ones: they may act again from the
 * time it acted (its decision may have changed what is worth doing). */
static void unblock_others(hss_sim *s, double t)
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

static void gpu_take_head(hss_sim *s)
{
    unblock_others(s, s->g);
    uint32_t i = s->gq.q[0];
    queue_remove(&s->gq, 0);
    s->g = ms_fmax(s->g, s->ready[i]) + s->x[i].t_gpu;
    s->g_end = s->g;
}

static void cpu_compute(hss_sim *s, uint32_t i)
{
    s->c += cpu_cost(s, i);
    s->c_end = s->c;
    s->cpu_started = 1;
    s->on_cpu[i] = 1;
}

/* CPU: head of its own queue; else steal the lowest-load GPU-queue expert
 * when (guard) it finishes it before the GPU would; else wait. */
static void cpu_act(hss_sim *s)
{
    double t = s->c;
    if (s->cq.n > 0) {
        uint32_t i = s->cq.q[0];
        queue_remove(&s->cq, 0);
        cpu_compute(s, i);
    } else {
        uint32_t tail = s->gq.q[s->gq.n - 1];
        if (s->o->guard && s->c + cpu_cost(s, tail) >= gpu_finish_of_prefix(s, s->gq.n)) {
            s->cpu_blocked = 1;
            return;
        }
        queue_remove(&s->gq, s->gq.n - 1);
        cpu_compute(s, tail);
    }
    unblock_others(s, t);
}

/* Link: move the highest-load CPU-queue expert when (guard) the GPU would
 * finish it before the CPU would; else wait. */
static void link_act(hss_sim *s)
{
    uint32_t i = s->cq.q[s->cq.n - 1];
    const ms_hss_expert *x = s->x;
    double t = s->k, arrive = s->k + x[i].t_copy;
    uint32_t ahead = 0; /* GPU-queue experts it would sit behind */
    while (ahead < s->gq.n && x[s->gq.q[ahead]].load >= x[i].load)
        ahead++;
    double on_gpu = ms_fmax(gpu_finish_of_prefix(s, ahead), arrive) + x[i].t_gpu;
    double on_cpu = s->c + (s->cpu_started ? 0.0 : s->o->cpu_first);
    for (uint32_t j = 0; j < s->cq.n; j++)
        on_cpu += x[s->cq.q[j]].t_cpu;
    if (s->o->guard && on_gpu >= on_cpu) {
        s->link_blocked = 1;
        return;
    }
    queue_remove(&s->cq, s->cq.n - 1);
    s->k = arrive;
    s->ready[i] = arrive;
    s->moved[i] = 1;
    queue_insert(&s->gq, x, i, 1);
    unblock_others(s, t);
}

static void hss_build_queues(hss_sim *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        s->ready[i] = s->x[i].cached ? ms_fmax(0.0, s->x[i].ready) : INFINITY;
        queue_insert(s->x[i].cached ? &s->gq : &s->cq, s->x, i, s->x[i].cached);
    }
}

#define HSS_STACK 64 /* a layer's activated experts up to this: the simulation's arrays on the stack */

double ms_hss_paper(const ms_hss_expert *x, uint32_t n, const ms_hss_opts *o, uint8_t *on_cpu, uint8_t *moved)
{
    uint32_t gq_buf[HSS_STACK], cq_buf[HSS_STACK];
    double ready_buf[HSS_STACK];
    uint8_t moved_stack[HSS_STACK];
    int heap = n > HSS_STACK;
    uint8_t *moved_buf = moved ? moved : heap ? ms_xcalloc(n, 1) : moved_stack;
    hss_sim s = {.x = x, .o = o, .k = ms_fmax(0.0, o->link_free), .on_cpu = on_cpu, .moved = moved_buf};
    uint32_t *gq = heap ? ms_xcalloc(n, sizeof *s.gq.q) : gq_buf, *cq = heap ? ms_xcalloc(n, sizeof *s.cq.q) : cq_buf;
    s.gq.q = gq;
    s.cq.q = cq;
    s.ready = heap ? ms_xcalloc(n, sizeof *s.ready) : ready_buf;
    for (uint32_t i = 0; i < n; i++)
        on_cpu[i] = moved_buf[i] = 0;
    hss_build_queues(&s, n);
    while (s.gq.n + s.cq.n > 0) {
        /* the timeline that frees first acts; ties: GPU, link, CPU */
        double tg = s.gq.n > 0 ? s.g : INFINITY;
        double tk = !s.link_blocked && s.cq.n > 0 ? s.k : INFINITY;
        double tc = !s.cpu_blocked ? s.c : INFINITY;
        if (isfinite(tg) && tg <= tk && tg <= tc)
            gpu_take_head(&s);
        else if (isfinite(tk) && tk <= tc)
            link_act(&s);
        else if (isfinite(tc))
            cpu_act(&s);
        else
            break; /* unreachable: a blocked CPU implies GPU work, a blocked link CPU work */
    }
    if (heap) {
        free(gq);
        free(cq);
        free(s.ready);
        if (!moved)
            free(moved_buf);
    }
    return ms_fmax(s.g_end, s.c_end);
}

/* ------------------------------------------------------------------ */
/* code HSS */

/* order = cached experts then uncached, each by tokens descending, stable. */
static void code_order(const uint32_t *tokens, const uint8_t *cached, uint32_t n, uint32_t *order)
{
    uint32_t m = 0;
    for (int part = 1; part >= 0; part--)
        for (uint32_t i = 0; i < n; i++)
            if ((cached[i] != 0) == part) {
                uint32_t j = m++;
                while (j > 0 && (cached[order[j - 1]] != 0) == part && tokens[order[j - 1]] < tokens[i]) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = i;
            }
}

double ms_hss_code(const uint32_t *tokens, const uint8_t *cached, uint32_t n, const ms_hss_code_costs *c,
                   uint8_t *on_cpu)
{
    uint32_t order_buf[HSS_STACK];
    uint32_t *order = n > HSS_STACK ? ms_xcalloc(n, sizeof *order) : order_buf;
    code_order(tokens, cached, n, order);
    double gpu_total = 0, cpu_total = 0, move_total = 0;
    uint32_t head = 0, tail = n, gpu_n = 0, cpu_n = 0;
    for (uint32_t i = 0; i < n; i++)
        on_cpu[i] = 0;
    while (head < tail) {
        uint32_t f = order[head], b = order[tail - 1];
        int is_move = !cached[f];
        double t_gpu = c->gpu + (gpu_n == 0 ? c->gpu_first : 0.0);
        double t_cpu = c->cpu * tokens[b] + (cpu_n == 0 ? c->cpu_first : 0.0);
        if (is_move && move_total + c->move > gpu_total)
            t_gpu += move_total + c->move - gpu_total;
        if (gpu_total + t_gpu <= cpu_total + t_cpu) {
            if (is_move)
                move_total += c->move;
            gpu_total += t_gpu;
            gpu_n++;
            head++;
        } else {
            cpu_total += t_cpu;
            cpu_n++;
            on_cpu[b] = 1;
            tail--;
        }
    }
    if (order != order_buf)
        free(order);
    return ms_fmax(gpu_total, cpu_total);
}

