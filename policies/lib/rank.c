#include <stdlib.h>

#include "policies/lib/rank.h"

typedef struct {
    double score;
    uint32_t e;
} scored;

static int by_score_desc(const void *a, const void *b)
{
    const scored *p = a, *q = b;
    if (p->score != q->score)
        return p->score < q->score ? 1 : -1;
    return p->e < q->e ? -1 : 1;
}

void ms_prefetch_top_scored(ms_view *v, uint32_t t, const double *score, uint32_t J, uint32_t k)
{
    scored *s = ms_xcalloc(J, sizeof *s);
    for (uint32_t e = 0; e < J; e++)
        s[e] = (scored){score[e], e};
    qsort(s, J, sizeof *s, by_score_desc);
    for (uint32_t i = 0; i < k && i < J; i++)
        ms_view_prefetch(v, t, s[i].e, (double)(k - i));
    free(s);
}
