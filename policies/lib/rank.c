#include <stdlib.h>

#include "policies/lib/rank.h"

/* score descending, then id ascending: a total order (scores are never NaN) */
static int ranks_before(const ms_scored *p, const ms_scored *q)
{
    if (p->score != q->score)
        return p->score > q->score;
    return p->e < q->e;
}

void ms_rank_first(ms_scored *s, uint32_t n, uint32_t k)
{
    for (uint32_t j = 0; j < k && j < n; j++) {
        uint32_t best = j;
        for (uint32_t i = j + 1; i < n; i++)
            if (ranks_before(&s[i], &s[best]))
                best = i;
        ms_scored t = s[j];
        s[j] = s[best];
        s[best] = t;
    }
}

void ms_prefetch_top_scored(ms_view *v, uint32_t t, const double *score, uint32_t J, uint32_t k)
{
    ms_scored *s = ms_xcalloc(J, sizeof *s);
    for (uint32_t e = 0; e < J; e++)
        s[e] = (ms_scored){score[e], e};
    ms_rank_first(s, J, k);
    for (uint32_t i = 0; i < k && i < J; i++)
        ms_view_prefetch(v, t, s[i].e, (double)(k - i));
    free(s);
}
