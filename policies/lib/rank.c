#include <stdlib.h>

#include "policies/lib/rank.h"

/* score descending, then id ascending: a total order (scores are never NaN) */
static int ranks_before(const ms_scored *p, const ms_scored *q)
{
    if (p->score != q->score)
        return p->score > q->score;
    return p->e < q->e;
}

/* Moves s[i] into the sorted run s[0..at] (s[0..at) sorted, s[at] a hole
 * filled with s[i]'s value): shifts the entries that s[i] ranks before one
 * place down. */
static void insert_sorted(ms_scored *s, uint32_t at, ms_scored x)
{
    while (at > 0 && ranks_before(&x, &s[at - 1])) {
        s[at] = s[at - 1];
        at--;
    }
    s[at] = x;
}

/* s[0..k) kept as the best so far, sorted: first the first k entries are
 * sorted in place, then each later entry that ranks before the k-th enters
 * the run and the k-th takes its slot (s stays a permutation).  The order is
 * total (score, then id), so the k best and their order are those of a full
 * sort; an entry not above the k-th, the usual case, costs one comparison. */
void ms_rank_first(ms_scored *s, uint32_t n, uint32_t k)
{
    if (k > n)
        k = n;
    if (k == 0)
        return;
    for (uint32_t i = 1; i < k; i++)
        insert_sorted(s, i, s[i]);
    for (uint32_t i = k; i < n; i++) {
        if (!ranks_before(&s[i], &s[k - 1]))
            continue;
        ms_scored x = s[i];
        s[i] = s[k - 1];
        insert_sorted(s, k - 1, x);
    }
}

void ms_prefetch_top_scored(ms_view *v, uint32_t t, const double *score, uint32_t J, uint32_t k)
{
    ms_scored buf[256]; /* J experts per layer fit here on every model so far: no allocation per layer */
    ms_scored *s = J <= 256 ? buf : ms_xcalloc(J, sizeof *s);
    for (uint32_t e = 0; e < J; e++)
        s[e] = (ms_scored){score[e], e};
    ms_rank_first(s, J, k);
    for (uint32_t i = 0; i < k && i < J; i++)
        ms_view_prefetch(v, t, s[i].e, (double)(k - i));
    if (s != buf)
        free(s);
}
