/* Repeated tokens in decode routing: see repeats.h for the definitions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/stats/repeats.h"

/* One bit per (layer, expert): the experts of iteration `it` at every layer. */
static void step_bits(const ms_trace_meta *m, const ms_request *r, uint32_t it, uint64_t *bits, size_t words)
{
    memset(bits, 0, words * sizeof *bits);
    const ms_iteration *iter = &r->iters[it];
    for (uint32_t row = iter->row0; row < iter->row0 + iter->n_rows; row++)
        for (uint32_t l = 0; l < m->L; l++)
            for (uint32_t k = 0; k < m->K; k++) {
                int32_t e = r->topk_ids[ms_topk_index(m, row, l) + k];
                if (e >= 0) {
                    size_t b = (size_t)l * m->J + (uint32_t)e;
                    bits[b / 64] |= 1ull << (b % 64);
                }
            }
}

static uint32_t count_and(const uint64_t *a, const uint64_t *b, size_t words)
{
    uint32_t n = 0;
    for (size_t i = 0; i < words; i++)
        n += (uint32_t)__builtin_popcountll(b ? a[i] & b[i] : a[i]);
    return n;
}

/* Decode steps of r as bitsets ([n][words], caller frees); *n_out steps. */
static uint64_t *decode_steps(const ms_trace_meta *m, const ms_request *r, size_t words, uint32_t *n_out)
{
    uint32_t n = 0;
    for (uint32_t it = 0; it < r->n_iters; it++)
        n += r->iters[it].phase == MS_PHASE_DECODE;
    uint64_t *bits = ms_xcalloc((size_t)(n ? n : 1) * words, sizeof *bits);
    n = 0;
    for (uint32_t it = 0; it < r->n_iters; it++)
        if (r->iters[it].phase == MS_PHASE_DECODE)
            step_bits(m, r, it, bits + (size_t)n++ * words, words);
    *n_out = n;
    return bits;
}

/* (1/m) sum_{k=1..m} q^k = y for q in [0, 1] (increasing in q). */
static double solve_repeat(double y, uint32_t m)
{
    if (!(y > 0))
        return 0;
    if (y >= 1)
        return 1;
    double lo = 0, hi = 1;
    for (int i = 0; i < 60; i++) {
        double q = 0.5 * (lo + hi), s = 0, qk = 1;
        for (uint32_t k = 1; k <= m; k++)
            s += qk *= q;
        if (s / m < y)
            lo = q;
        else
            hi = q;
    }
    return 0.5 * (lo + hi);
}

void ms_period_of_request(const ms_trace_meta *m, const ms_request *r, ms_period *out)
{
    memset(out, 0, sizeof *out);
    size_t words = ((size_t)m->L * m->J + 63) / 64;
    uint32_t n;
    uint64_t *s = decode_steps(m, r, words, &n);
    uint32_t W = n > 0 && n - 1 < MS_PERIOD_MAX_LAG ? n - 1 : MS_PERIOD_MAX_LAG;
    double rd[MS_PERIOD_MAX_LAG + 1];
    for (uint32_t d = 2; d <= W && n >= 4; d++) {
        double num = 0, den = 0;
        for (uint32_t t = d; t < n; t++) {
            num += count_and(s + (size_t)t * words, s + (size_t)(t - d) * words, words);
            den += count_and(s + (size_t)t * words, NULL, words);
        }
        rd[d] = den > 0 ? num / den : NAN;
    }
    double best = 0;
    for (uint32_t P = 2; n >= 4 && P <= W / 2; P++) {
        double sm = 0, so = 0, so2 = 0;
        uint32_t nm = 0, no = 0;
        for (uint32_t d = 2; d <= W; d++) {
            if (isnan(rd[d]))
                continue;
            if (d % P == 0) {
                sm += rd[d];
                nm++;
            } else {
                so += rd[d];
                so2 += rd[d] * rd[d];
                no++;
            }
        }
        if (!nm || no < 2)
            continue;
        double mo = so / no, sd = sqrt(fmax(0, (so2 - so * mo) / (no - 1)));
        double contrast = sm / nm - mo, se = sd * sqrt(1.0 / nm + 1.0 / no);
        /* a loop lifts every multiple of P: a contrast within two standard
         * errors of the other lags' spread is noise, not a loop */
        if (!(contrast > best) || !(contrast > MS_PERIOD_MIN_Z * se))
            continue;
        best = contrast;
        out->period = P;
        out->r_mult = sm / nm;
        out->r_other = mo;
        out->repeat = solve_repeat(mo < 1 ? (out->r_mult - mo) / (1 - mo) : 0, W / P);
    }
    free(s);
}

struct ms_xreq {
    const ms_trace_meta *m;
    size_t words;
    uint64_t *stored;     /* [MS_XREQ_STEPS][words] decode steps of earlier requests */
    uint32_t n_stored, seen; /* stored steps; decode steps met so far (evaluated or not) */
    double sum;
    uint64_t count, whole;
};

ms_xreq *ms_xreq_new(const ms_trace_meta *m)
{
    ms_xreq *x = ms_xcalloc(1, sizeof *x);
    x->m = m;
    x->words = ((size_t)m->L * m->J + 63) / 64;
    return x;
}

void ms_xreq_add(ms_xreq *x, const ms_request *r)
{
    if (x->seen >= MS_XREQ_STEPS)
        return;
    size_t w = x->words;
    uint32_t n;
    uint64_t *s = decode_steps(x->m, r, w, &n);
    uint32_t before = x->n_stored;
    for (uint32_t t = 0; t < n && x->seen < MS_XREQ_STEPS; t++, x->seen++) {
        const uint64_t *a = s + (size_t)t * w;
        uint32_t size = count_and(a, NULL, w), most = 0;
        if (!before || !size)
            continue;
        for (uint32_t j = 0; j < before; j++) {
            uint32_t c = count_and(a, x->stored + (size_t)j * w, w);
            most = c > most ? c : most;
        }
        x->sum += (double)most / size;
        x->whole += most == size;
        x->count++;
    }
    if (!x->stored)
        x->stored = ms_xcalloc((size_t)MS_XREQ_STEPS * w, sizeof *x->stored);
    for (uint32_t t = 0; t < n && x->n_stored < MS_XREQ_STEPS; t++)
        memcpy(x->stored + (size_t)x->n_stored++ * w, s + (size_t)t * w, w * sizeof *s);
    free(s);
}

double ms_xreq_mean(const ms_xreq *x)
{
    return x->count ? x->sum / (double)x->count : NAN;
}

double ms_xreq_exact(const ms_xreq *x)
{
    return x->count ? (double)x->whole / (double)x->count : NAN;
}

void ms_xreq_free(ms_xreq *x)
{
    if (!x)
        return;
    free(x->stored);
    free(x);
}
