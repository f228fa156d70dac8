/* ODS (Alg. 1) and the exact per-design solver; see serverless_ods.h. */
#include "sim/serverless/serverless_ods.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double t, cost;
    uint32_t r;
    ms_sl_cfg cfg;
} option;

typedef struct {
    double lat, cost, A, T;
} point;

/* Options of one expert with d > 0 tokens under design a and beta. */
static int expert_options(const ms_sl_platform *p, const ms_sl_model *m, int a, uint32_t d, uint32_t beta,
                          option *out)
{
    int n = 0;
    for (int j = 0; j < p->n_mem; j++)
        for (int g = 1; g <= p->max_replicas; g++) {
            uint32_t r = ms_sl_per_replica(d, (uint32_t)g);
            if (!ms_sl_fits_memory(p, m, p->mem_mb[j], r) || (a == MS_SL_DIRECT && !ms_sl_fits_payload(p, m, r)))
                continue;
            double t = ms_sl_rep_time(p, m, a, p->mem_mb[j], r, beta);
            out[n++] = (option){t, ms_sl_expert_cost(p, p->mem_mb[j], (uint32_t)g, t), r,
                                {(uint8_t)j, (uint8_t)g}};
        }
    return n;
}

/* Cheapest option with r <= A and t <= T (ties: smaller t, then order). */
static const option *cheapest(const option *o, int n, double A, double T)
{
    const option *best = NULL;
    for (int k = 0; k < n; k++)
        if (o[k].r <= A && o[k].t <= T && (!best || o[k].cost < best->cost || (o[k].cost == best->cost && o[k].t < best->t)))
            best = &o[k];
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_point(const void *a, const void *b)
{
    const point *x = a, *y = b;
    if (x->lat != y->lat)
        return (x->lat > y->lat) - (x->lat < y->lat);
    return (x->cost > y->cost) - (x->cost < y->cost);
}

typedef struct {
    const ms_sl_platform *p;
    const ms_sl_model *m;
    int a;
    uint32_t beta, J;
    const uint32_t *d; /* this layer's counts [J] */
    option **opt;      /* [J] */
    int *nopt;
    uint64_t tokens;
} layer_ctx;

/* Evaluates thresholds (A, T): layer cost and latency; -1 when an expert has no option. */
static int eval_thresholds(const layer_ctx *c, double A, double T, point *out)
{
    double cost = 0, max_rep = 0;
    uint32_t max_r = 0;
    for (uint32_t i = 0; i < c->J; i++) {
        if (!c->d[i])
            continue;
        const option *o = cheapest(c->opt[i], c->nopt[i], A, T);
        if (!o)
            return -1;
        cost += o->cost;
        max_rep = fmax(max_rep, o->t);
        if (o->r > max_r)
            max_r = o->r;
    }
    *out = (point){ms_sl_layer_latency(c->p, c->m, c->a, max_rep, max_r, c->tokens), cost, A, T};
    return 0;
}

/* Pareto set of the layer (ascending latency, strictly descending cost). */
static int layer_pareto(const layer_ctx *c, point **out)
{
    int total = 0;
    for (uint32_t i = 0; i < c->J; i++)
        total += c->nopt[i];
    double *Ts = ms_xcalloc((size_t)total + 1, sizeof *Ts), *As = ms_xcalloc((size_t)total + 1, sizeof *As);
    int nT = 0, nA = 0;
    for (uint32_t i = 0; i < c->J; i++)
        for (int k = 0; k < c->nopt[i]; k++) {
            Ts[nT++] = c->opt[i][k].t;
            As[nA++] = c->opt[i][k].r;
        }
    if (c->a != MS_SL_DIRECT) {
        nA = 1;
        As[0] = INFINITY;
    }
    qsort(Ts, (size_t)nT, sizeof *Ts, cmp_double);
    qsort(As, (size_t)nA, sizeof *As, cmp_double);
    point *pts = NULL;
    int np = 0, cap = 0;
    if (!nT) { /* no token in the layer */
        pts = ms_xcalloc(1, sizeof *pts);
        point q;
        eval_thresholds(c, INFINITY, INFINITY, &q);
        pts[np++] = q;
    }
    for (int ia = 0; ia < nA; ia++) {
        if (ia && As[ia] == As[ia - 1])
            continue;
        for (int it = 0; it < nT; it++) {
            if (it && Ts[it] == Ts[it - 1])
                continue;
            point q;
            if (eval_thresholds(c, As[ia], Ts[it], &q))
                continue;
            if (np == cap)
                pts = ms_xrealloc(pts, (size_t)(cap = cap ? 2 * cap : 64), sizeof *pts);
            pts[np++] = q;
        }
    }
    free(Ts);
    free(As);
    qsort(pts, (size_t)np, sizeof *pts, cmp_point);
    int kept = 0;
    for (int k = 0; k < np; k++)
        if (!kept || pts[k].cost < pts[kept - 1].cost)
            pts[kept++] = pts[k];
    *out = pts;
    return kept;
}

/* Memory option for an expert with no token: the smallest that holds it. */
static ms_sl_cfg idle_cfg(const ms_sl_platform *p, const ms_sl_model *m)
{
    for (int j = 0; j < p->n_mem; j++)
        if (ms_sl_fits_memory(p, m, p->mem_mb[j], 0))
            return (ms_sl_cfg){(uint8_t)j, 1};
    return (ms_sl_cfg){(uint8_t)(p->n_mem - 1), 1};
}

/* Fills the layer's configs for chosen thresholds. */
static void layer_configs(const layer_ctx *c, const point *q, ms_sl_cfg *cfg)
{
    for (uint32_t i = 0; i < c->J; i++) {
        const option *o = c->d[i] ? cheapest(c->opt[i], c->nopt[i], q->A, q->T) : NULL;
        cfg[i] = o ? o->cfg : idle_cfg(c->p, c->m);
    }
}

/* Solves design a for one beta; returns total cost (INFINITY if infeasible). */
static double solve_beta(const ms_sl_platform *p, const ms_sl_model *m, int a, uint32_t beta, const uint32_t *d,
                         double budget, int grid, ms_sl_plan *plan, double *layer_cost,
                         double *layer_lat)
{
    uint32_t L = m->L, J = m->J;
    int per = p->n_mem * p->max_replicas;
    option *store = ms_xcalloc((size_t)J * per, sizeof *store);
    option **opt = ms_xcalloc(J, sizeof *opt);
    int *nopt = ms_xcalloc(J, sizeof *nopt);
    point **pts = ms_xcalloc(L, sizeof *pts);
    int *npts = ms_xcalloc(L, sizeof *npts);
    double unit = budget / grid;
    double *dp = ms_xcalloc((size_t)grid + 1, sizeof *dp), *nd = ms_xcalloc((size_t)grid + 1, sizeof *nd);
    int *choice = ms_xcalloc((size_t)L * (grid + 1), sizeof *choice);
    double total = INFINITY;
    for (uint32_t e = 0; e < L; e++) {
        layer_ctx c = {p, m, a, beta, J, d + (size_t)e * J, opt, nopt, 0};
        for (uint32_t i = 0; i < J; i++) {
            opt[i] = store + (size_t)i * per;
            nopt[i] = c.d[i] ? expert_options(p, m, a, c.d[i], beta, opt[i]) : 0;
            c.tokens += c.d[i];
            if (c.d[i] && !nopt[i])
                goto out; /* an expert fits no option under this design */
        }
        npts[e] = layer_pareto(&c, &pts[e]);
        for (int b = 0; b <= grid; b++) {
            nd[b] = INFINITY;
            choice[(size_t)e * (grid + 1) + b] = -1;
            for (int k = 0; k < npts[e]; k++) {
                double u = ceil(pts[e][k].lat / unit - 1e-9);
                if (u > b)
                    break;
                double v = dp[b - (int)u] + pts[e][k].cost;
                if (v < nd[b]) {
                    nd[b] = v;
                    choice[(size_t)e * (grid + 1) + b] = k;
                }
            }
        }
        memcpy(dp, nd, ((size_t)grid + 1) * sizeof *dp);
    }
    total = dp[grid];
    if (isfinite(total)) { /* walk back the choices */
        int b = grid;
        for (uint32_t e = L; e-- > 0;) {
            int k = choice[(size_t)e * (grid + 1) + b];
            layer_ctx c = {p, m, a, beta, J, d + (size_t)e * J, opt, nopt, 0};
            for (uint32_t i = 0; i < J; i++) {
                opt[i] = store + (size_t)i * per;
                nopt[i] = c.d[i] ? expert_options(p, m, a, c.d[i], beta, opt[i]) : 0;
            }
            layer_configs(&c, &pts[e][k], plan->cfg + (size_t)e * J);
            plan->a[e] = (uint8_t)a;
            layer_cost[e] = pts[e][k].cost;
            layer_lat[e] = pts[e][k].lat;
            b -= (int)ceil(pts[e][k].lat / unit - 1e-9);
        }
        plan->beta = beta;
    }
out:
    for (uint32_t e = 0; e < L; e++)
        free(pts[e]);
    free(pts);
    free(npts);
    free(store);
    free(opt);
    free(nopt);
    free(dp);
    free(nd);
    free(choice);
    return total;
}

int ms_sl_solve_design(const ms_sl_platform *p, const ms_sl_model *m, int a, const uint32_t *d, uint64_t n_tokens,
                       double target_s, int grid, ms_sl_plan *plan, double *layer_cost, double *layer_lat)
{
    double budget = target_s - ms_sl_fixed_latency(p, m, n_tokens);
    if (budget <= 0)
        return 1;
    uint32_t max_d = 1;
    for (size_t k = 0; k < (size_t)m->L * m->J; k++)
        if (d[k] > max_d)
            max_d = d[k];
    ms_sl_plan trial;
    ms_sl_plan_alloc(&trial, m->L, m->J);
    double *tc = ms_xcalloc(m->L, sizeof *tc), *tl = ms_xcalloc(m->L, sizeof *tl);
    double best = INFINITY;
    for (uint32_t beta = 1;; beta = beta * 2 > max_d ? max_d : beta * 2) {
        double c = solve_beta(p, m, a, beta, d, budget, grid, &trial, tc, tl);
        if (c < best) {
            best = c;
            ms_sl_plan_copy(plan, &trial);
            memcpy(layer_cost, tc, m->L * sizeof *tc);
            memcpy(layer_lat, tl, m->L * sizeof *tl);
        }
        if (a != MS_SL_PIPE || beta == max_d)
            break;
    }
    ms_sl_plan_free(&trial);
    free(tc);
    free(tl);
    return isfinite(best) ? 0 : 1;
}

/* Fastest latency of design a: the sum of each layer's fastest Pareto point. */
static double fastest_latency(const ms_sl_platform *p, const ms_sl_model *m, const uint32_t *d, uint64_t n_tokens)
{
    double best = INFINITY;
    int per = p->n_mem * p->max_replicas;
    option *store = ms_xcalloc((size_t)m->J * per, sizeof *store);
    option **opt = ms_xcalloc(m->J, sizeof *opt);
    int *nopt = ms_xcalloc(m->J, sizeof *nopt);
    for (int a = 1; a <= 3; a++) {
        double sum = ms_sl_fixed_latency(p, m, n_tokens);
        for (uint32_t e = 0; e < m->L && isfinite(sum); e++) {
            layer_ctx c = {p, m, a, 1, m->J, d + (size_t)e * m->J, opt, nopt, 0};
            for (uint32_t i = 0; i < m->J; i++) {
                opt[i] = store + (size_t)i * per;
                nopt[i] = c.d[i] ? expert_options(p, m, a, c.d[i], 1, opt[i]) : 0;
                c.tokens += c.d[i];
                if (c.d[i] && !nopt[i])
                    sum = INFINITY;
            }
            if (!isfinite(sum))
                break;
            point *pts;
            int np = layer_pareto(&c, &pts);
            sum += np ? pts[0].lat : INFINITY;
            free(pts);
        }
        best = fmin(best, sum);
    }
    free(store);
    free(opt);
    free(nopt);
    return best;
}

int ms_sl_ods(const ms_sl_platform *p, const ms_sl_model *m, const uint32_t *d, uint64_t n_tokens, double target_s,
              int grid, ms_sl_plan *plan, ms_sl_ods_info *info, ms_err *err)
{
    uint32_t L = m->L, J = m->J;
    memset(info, 0, sizeof *info);
    ms_sl_plan sol[4];
    double *c[4], *t[4];
    int any = 0;
    for (int a = 1; a <= 3; a++) {
        ms_sl_plan_alloc(&sol[a], L, J);
        c[a] = ms_xcalloc(L, sizeof *c[a]);
        t[a] = ms_xcalloc(L, sizeof *t[a]);
        info->feasible[a] = !ms_sl_solve_design(p, m, a, d, n_tokens, target_s, grid, &sol[a], c[a], t[a]);
        info->design_cost[a] = INFINITY;
        if (info->feasible[a]) {
            any = 1;
            info->design_cost[a] = 0;
            for (uint32_t e = 0; e < L; e++)
                info->design_cost[a] += c[a][e];
        } else
            for (uint32_t e = 0; e < L; e++)
                c[a][e] = INFINITY;
    }
    int rc = 0;
    if (!any) {
        double fast = fastest_latency(p, m, d, n_tokens);
        if (isfinite(fast))
            rc = ms_fail(err, "serverless: latency target %.1f ms is infeasible: the fastest deployment needs %.1f ms",
                         target_s * 1e3, fast * 1e3);
        else
            rc = ms_fail(err, "serverless: latency target %.1f ms is infeasible: some expert's tokens fit no function "
                         "of any memory option and replica count", target_s * 1e3);
        goto out;
    }
    /* Alg. 1 lines 1-17: mix per layer, drop the slowest layer's choice while the target is missed. */
    double fixed = ms_sl_fixed_latency(p, m, n_tokens);
    for (int itr = 0; itr <= 2 * (int)L; itr++) {
        info->rounds = itr + 1;
        double lat = fixed, cost = 0;
        int stuck = 0;
        uint32_t slow = 0;
        double slow_lat = -1;
        for (uint32_t e = 0; e < L; e++) {
            int best = 1;
            for (int a = 2; a <= 3; a++)
                if (c[a][e] < c[best][e])
                    best = a;
            if (!isfinite(c[best][e])) {
                stuck = 1;
                break;
            }
            plan->a[e] = (uint8_t)best;
            memcpy(plan->cfg + (size_t)e * J, sol[best].cfg + (size_t)e * J, J * sizeof *plan->cfg);
            lat += t[best][e];
            cost += c[best][e];
            /* INTERPRETATION: line 10 reads "argmin_e t^lat"; the text says
             * "the MoE layer with the highest latency", which we follow. */
            if (t[best][e] > slow_lat) {
                slow_lat = t[best][e];
                slow = e;
            }
        }
        if (stuck)
            break;
        if (lat <= target_s) {
            plan->beta = sol[1].beta;
            info->mixed = 1;
            info->planned_cost = cost;
            info->planned_latency = lat;
            goto out;
        }
        c[plan->a[slow]][slow] = INFINITY;
    }
    /* lines 18-20: the cheapest single-design plan */
    int a_best = 0;
    for (int a = 1; a <= 3; a++)
        if (info->feasible[a] && (!a_best || info->design_cost[a] < info->design_cost[a_best]))
            a_best = a;
    ms_sl_plan_copy(plan, &sol[a_best]);
    info->planned_cost = info->design_cost[a_best];
    info->planned_latency = fixed;
    for (uint32_t e = 0; e < L; e++)
        info->planned_latency += t[a_best][e];
out:
    for (int a = 1; a <= 3; a++) {
        ms_sl_plan_free(&sol[a]);
        free(c[a]);
        free(t[a]);
    }
    return rc;
}

void ms_sl_fixed_plan(ms_sl_platform *p, double mem_mb, int a, ms_sl_plan *plan)
{
    int j = 0;
    while (j < p->n_mem && p->mem_mb[j] != mem_mb)
        j++;
    if (j == p->n_mem && p->n_mem < MS_SL_MAX_MEM)
        p->mem_mb[p->n_mem++] = mem_mb; /* extra, unordered option used only by this plan */
    for (uint32_t e = 0; e < plan->L; e++) {
        plan->a[e] = (uint8_t)a;
        for (uint32_t i = 0; i < plan->J; i++)
            plan->cfg[(size_t)e * plan->J + i] = (ms_sl_cfg){(uint8_t)j, 1};
    }
    plan->beta = 1;
}
