/* `moesim claims`: verdicts from the values a claim's runs produced (see
 * claims.h for the kinds of verdict, claims_table.h for the kinds of claim). */
#include "sim/apps/claims_verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policies/lib/fmoe_store.h"

/* ---- verdicts ---- */

static ms_verdict worst(ms_verdict a, ms_verdict b)
{
    return a > b ? a : b;
}

/* sys[0] against sys[1..]: reduction (or gain) in percent, each compared
 * with the paper's within tol; direction: every sign as the paper's. */
static ms_verdict versus(const cl_claim *cl, const double *v, ms_claim_result *r)
{
    ms_verdict out = MS_VERDICT_HOLDS;
    r->n = cl->npaper;
    for (size_t i = 0; i < cl->npaper; i++) {
        double base = v[i + 1], x = v[0];
        double got = cl->kind == CL_REDUCTION ? 100.0 * (1.0 - x / base) : 100.0 * (x / base - 1.0);
        r->paper[i] = cl->paper_vals[i];
        r->moesim[i] = got;
        snprintf(r->item[i], sizeof r->item[i], "vs %.44s", cl->sys[i + 1].label);
        ms_verdict one = !isfinite(got) ? MS_VERDICT_NO
                         : fabs(got - cl->paper_vals[i]) <= cl->tol ? MS_VERDICT_HOLDS
                         : (got > 0) == (cl->paper_vals[i] > 0) ? MS_VERDICT_DIRECTION
                                                             : MS_VERDICT_NO;
        out = worst(out, one);
    }
    return out;
}

/* the metric rises in table order: holds when strictly, direction when the
 * last is above the first */
static ms_verdict order(const double *v, size_t n)
{
    int strict = 1;
    for (size_t i = 1; i < n; i++)
        strict &= v[i] > v[i - 1];
    return strict ? MS_VERDICT_HOLDS : v[n - 1] > v[0] ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
}

static ms_verdict falls(const double *v, size_t n)
{
    int mono = 1;
    for (size_t i = 1; i < n; i++)
        mono &= v[i] <= v[i - 1];
    return mono ? MS_VERDICT_HOLDS : v[n - 1] < v[0] ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
}

static void text_values(ms_claim_result *r, const char *sep, const double *v, size_t n, const char *fmt)
{
    size_t u = strlen(r->value_text);
    for (size_t i = 0; i < n && u < sizeof r->value_text; i++) {
        if (i)
            u += (size_t)snprintf(r->value_text + u, sizeof r->value_text - u, "%s", sep);
        if (u < sizeof r->value_text)
            u += (size_t)snprintf(r->value_text + u, sizeof r->value_text - u, fmt, v[i]);
    }
}

/* ---- the map-store size claim ---- */

/* fMoE's store of axis_vals[0] maps of this trace's shape (L x J expert
 * probabilities and the trace's embedding, as moesim stores them, fp32): the
 * bytes follow from the layout, no run needed.  Holds when under the bound. */
void cl_store_verdict(const cl_claim *cl, const ms_trace_meta *meta, ms_claim_result *r, ms_verdict *vd)
{
    double maps = cl->axis_vals[0], bound = cl->paper_vals[0];
    double mb = (double)fmoe_store_bytes_of((uint64_t)maps, meta->L, meta->J, meta->embed_dim) / 1e6;
    double maps_only = (double)fmoe_store_bytes_of((uint64_t)maps, meta->L, meta->J, 0) / 1e6;
    r->n = 1;
    r->paper[0] = bound;
    r->moesim[0] = mb;
    snprintf(r->item[0], sizeof r->item[0], "MB at %.0f maps", maps);
    snprintf(r->value_text, sizeof r->value_text, "%.1f MB (%.1f of L x J = %u x %u maps, %.1f of %u-dim embeddings)",
             mb, maps_only, meta->L, meta->J, mb - maps_only, meta->embed_dim);
    *vd = mb < bound ? MS_VERDICT_HOLDS : MS_VERDICT_NO;
}

/* Where sys[0]'s metric stops improving along the axis: the first axis value
 * from which every value is within tol % (relative) of the last one.  Holds
 * when the metric improves overall (first to last, by more than tol %) and
 * levels off at the paper's axis value; direction only when it improves and
 * levels off elsewhere; otherwise not.  Lower is better for times, higher
 * for rates (pct). */
static ms_verdict plateau(const cl_claim *cl, const double *v, size_t nx, int pct, ms_claim_result *r)
{
    double last = v[nx - 1], band = fabs(last) * cl->tol / 100.0;
    size_t knee = nx - 1;
    while (knee > 0 && fabs(v[knee - 1] - last) <= band)
        knee--;
    double gain = pct ? last - v[0] : v[0] - last;
    r->n = nx < MS_CLAIM_MAX_VALUES ? nx : MS_CLAIM_MAX_VALUES;
    for (size_t a = 0; a < r->n; a++) {
        r->paper[a] = NAN;
        r->moesim[a] = v[a];
        snprintf(r->item[a], sizeof r->item[a], "at %g", cl->axis_vals[a]);
    }
    int improves = gain > band;
    if (improves)
        snprintf(r->value_text, sizeof r->value_text, "levels off at %g (paper %g): ", cl->axis_vals[knee],
                 cl->paper_vals[0]);
    else
        snprintf(r->value_text, sizeof r->value_text, "no gain beyond %g %% from %g to %g: ", cl->tol,
                 cl->axis_vals[0], cl->axis_vals[nx - 1]);
    text_values(r, ", ", v, nx, pct ? "%.3f" : "%.2f ms");
    return improves && cl->axis_vals[knee] == cl->paper_vals[0] ? MS_VERDICT_HOLDS
           : improves && knee < nx - 1                         ? MS_VERDICT_DIRECTION
                                                               : MS_VERDICT_NO;
}

/* sys[0] against the others at each axis value: holds when its metric is the
 * lowest at more than half of them ("in most cases"), direction only when at
 * some, otherwise not. */
static ms_verdict lowest(const cl_claim *cl, const double *v, size_t nx, int pct, ms_claim_result *r)
{
    size_t wins = 0, u;
    r->n = nx < MS_CLAIM_MAX_VALUES ? nx : MS_CLAIM_MAX_VALUES;
    u = (size_t)snprintf(r->value_text, sizeof r->value_text, "%s:", cl->sys[0].label);
    for (size_t a = 0; a < nx; a++) {
        size_t best = 1;
        for (size_t i = 2; i < cl->nsys; i++)
            if (v[i * nx + a] < v[best * nx + a])
                best = i;
        wins += v[a] < v[best * nx + a];
        if (a < r->n) {
            r->paper[a] = NAN;
            r->moesim[a] = v[a];
            snprintf(r->item[a], sizeof r->item[a], "at %g", cl->axis_vals[a]);
        }
        if (u < sizeof r->value_text)
            u += (size_t)snprintf(r->value_text + u, sizeof r->value_text - u, pct ? " %g: %.3f vs %.3f (%s);" :
                                  " %g: %.1f vs %.1f ms (%s);", cl->axis_vals[a], v[a], v[best * nx + a],
                                  cl->sys[best].label);
    }
    if (u < sizeof r->value_text)
        snprintf(r->value_text + u, sizeof r->value_text - u, " lowest at %zu of %zu", wins, nx);
    return 2 * wins > nx ? MS_VERDICT_HOLDS : wins ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
}

/* The verdict of a claim from the values of its runs: v[i * nx + a] is
 * system i at axis value a (nx = 1 without an axis). */
ms_verdict cl_values_verdict(const cl_claim *cl, const double *v, size_t nx, ms_claim_result *r)
{
    ms_verdict vd = MS_VERDICT_NO;
    int pct = cl->metric != CL_M_TPOT_MS && cl->metric != CL_M_TTFT_MS;
    const char *fmt = pct ? "%.3f" : "%.2f ms";
    switch (cl->kind) {
    case CL_REDUCTION:
    case CL_GAIN:
        vd = versus(cl, v, r);
        text_values(r, "/", r->moesim, r->n, "%.0f");
        strcat(r->value_text, cl->kind == CL_REDUCTION ? " % lower" : " % higher");
        break;
    case CL_ABOVE: {
        int above = 1, any = 0;
        for (size_t i = 1; i < cl->nsys; i++)
            above &= v[0] > v[i], any |= v[0] > v[i];
        vd = above ? MS_VERDICT_HOLDS : any ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
        r->n = cl->nsys;
        memcpy(r->moesim, v, cl->nsys * sizeof *v);
        for (size_t i = 0; i < r->n; i++)
            r->paper[i] = NAN;
        text_values(r, " vs ", v, cl->nsys, fmt);
        break;
    }
    case CL_ORDER:
        vd = order(v, cl->nsys);
        r->n = cl->nsys;
        memcpy(r->moesim, v, cl->nsys * sizeof *v);
        for (size_t i = 0; i < r->n; i++)
            r->paper[i] = NAN;
        text_values(r, " | ", v, cl->nsys, fmt); /* in the order the paper states */
        break;
    case CL_FALLS: {
        ms_verdict w = MS_VERDICT_HOLDS;
        for (size_t i = 0; i < cl->nsys; i++)
            w = worst(w, falls(v + i * nx, nx));
        for (size_t a = 0; a < nx && cl->nsys == 2; a++)
            if (!(v[a] > v[nx + a]))
                w = worst(w, MS_VERDICT_DIRECTION);
        vd = w;
        r->n = nx < MS_CLAIM_MAX_VALUES ? nx : MS_CLAIM_MAX_VALUES;
        memcpy(r->moesim, v, r->n * sizeof *v);
        for (size_t i = 0; i < r->n; i++)
            r->paper[i] = NAN;
        text_values(r, ", ", v, nx, "%.3f");
        strcat(r->value_text, " (fine); ");
        text_values(r, ", ", v + nx, cl->nsys == 2 ? nx : 0, "%.3f");
        if (cl->nsys == 2)
            strcat(r->value_text, " (coarse)");
        break;
    }
    case CL_BEST_AT: {
        size_t best = 0;
        for (size_t a = 1; a < nx; a++)
            if (v[a] < v[best])
                best = a;
        double at = cl->axis_vals[best];
        vd = at == cl->paper_vals[0] ? MS_VERDICT_HOLDS : fabs(at - cl->paper_vals[0]) <= 1 ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
        r->n = 1;
        r->paper[0] = cl->paper_vals[0];
        r->moesim[0] = at;
        snprintf(r->item[0], sizeof r->item[0], "best distance");
        snprintf(r->value_text, sizeof r->value_text, "lowest at %g: ", at);
        text_values(r, ", ", v, nx, "%.1f");
        break;
    }
    case CL_SPAN: {
        r->n = 2;
        for (size_t i = 0; i < 2; i++) {
            r->paper[i] = cl->paper_vals[i];
            r->moesim[i] = 100.0 * v[i == 0 ? 0 : nx - 1];
            snprintf(r->item[i], sizeof r->item[i], "at %g GB/s", cl->axis_vals[i == 0 ? 0 : nx - 1]);
        }
        int within = fabs(r->moesim[0] - r->paper[0]) <= cl->tol && fabs(r->moesim[1] - r->paper[1]) <= cl->tol;
        vd = within ? MS_VERDICT_HOLDS : r->moesim[1] > r->moesim[0] ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
        snprintf(r->value_text, sizeof r->value_text, "%.0f %% -> %.0f %%", r->moesim[0], r->moesim[1]);
        break;
    }
    case CL_GAP: {
        double gap = 100.0 * (v[1] - v[0]);
        r->n = 1;
        r->paper[0] = cl->paper_vals[0];
        r->moesim[0] = gap;
        snprintf(r->item[0], sizeof r->item[0], "gap to %.36s", cl->sys[1].label);
        vd = fabs(gap - cl->paper_vals[0]) <= cl->tol ? MS_VERDICT_HOLDS : gap > 0 ? MS_VERDICT_DIRECTION : MS_VERDICT_NO;
        snprintf(r->value_text, sizeof r->value_text, "%.1f points (%.3f vs %.3f)", gap, v[0], v[1]);
        break;
    }
    case CL_PLATEAU:
        vd = plateau(cl, v, nx, pct, r);
        break;
    case CL_LOWEST:
        vd = lowest(cl, v, nx, pct, r);
        break;
    case CL_ENTROPY:
    case CL_STORE_MB:
    case CL_SERVERLESS:
    case CL_HOST_TIME: break;
    }
    return vd;
}

