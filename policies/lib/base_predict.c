#include <stdlib.h>

#include "sim/core/err.h"
#include "policies/lib/base_predict.h"

uint32_t ms_base_top_positive(const double *score, uint32_t J, uint32_t k, uint32_t *out)
{
    uint32_t n = 0;
    /* selection by repeated scans: k and J are small (k <= J <= a few hundred) */
    uint8_t *taken = ms_xcalloc(J ? J : 1, 1);
    while (n < k) {
        uint32_t best = UINT32_MAX;
        for (uint32_t e = 0; e < J; e++)
            if (!taken[e] && score[e] > 0 && (best == UINT32_MAX || score[e] > score[best]))
                best = e;
        if (best == UINT32_MAX)
            break;
        taken[best] = 1;
        out[n++] = best;
    }
    free(taken);
    return n;
}

void ms_base_normalise(double *score, uint32_t J)
{
    double sum = 0;
    for (uint32_t e = 0; e < J; e++)
        sum += score[e];
    for (uint32_t e = 0; e < J; e++)
        score[e] = sum > 0 ? score[e] / sum : 0.0;
}

void ms_coact_init(ms_coact *c, uint32_t L, uint32_t J, uint32_t K, uint32_t d)
{
    c->L = L;
    c->J = J;
    c->K = K;
    c->d = d;
    c->T = ms_xcalloc((size_t)L * J * J, sizeof *c->T);
}

void ms_coact_free(ms_coact *c)
{
    free(c->T);
    c->T = NULL;
}

void ms_coact_add_row_layer(ms_coact *c, const int32_t *ids, uint32_t l)
{
    if (l + c->d >= c->L)
        return;
    const int32_t *src = ids + (size_t)l * c->K, *dst = ids + (size_t)(l + c->d) * c->K;
    for (uint32_t a = 0; a < c->K; a++) {
        if (src[a] < 0)
            continue;
        double *row = c->T + ((size_t)l * c->J + (uint32_t)src[a]) * c->J;
        for (uint32_t b = 0; b < c->K; b++)
            if (dst[b] >= 0)
                row[dst[b]] += 1.0;
    }
}

void ms_coact_add_row(ms_coact *c, const int32_t *ids)
{
    for (uint32_t l = 0; l + c->d < c->L; l++)
        ms_coact_add_row_layer(c, ids, l);
}

void ms_coact_predict(const ms_coact *c, uint32_t l, const uint32_t *experts, uint32_t n, double *out)
{
    for (uint32_t e = 0; e < c->J; e++)
        out[e] = 0;
    if (l + c->d >= c->L)
        return;
    for (uint32_t i = 0; i < n; i++) {
        const double *row = c->T + ((size_t)l * c->J + experts[i]) * c->J;
        for (uint32_t e = 0; e < c->J; e++)
            out[e] += row[e];
    }
}

int ms_base_in_window(uint32_t run, uint32_t l, uint32_t window, uint32_t L, int wrap)
{
    if (wrap && L > 0) {
        uint32_t ahead = (l + L - run % L) % L; /* layers from run forward to l */
        return ahead < window;
    }
    return l >= run && l - run < window;
}
