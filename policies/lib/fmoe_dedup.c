/* RDY deduplication of fMoE's Expert Map Store (fmoe_store.h): which entry a
 * new map replaces when the store is full.
 *
 * The reference (fmoe_dedup_full) computes every entry's RDY: the semantic
 * cosine over D values and the map cosine over L J values, which is most of
 * fMoE's work (issue 18: every added map against all C entries).
 *
 * fmoe_dedup_pruned gives the same entry, with the same score, with less
 * work.  The map's layers are split into S <= FMOE_STAGES stages.  Each
 * entry's map dot product ab_y is summed stage after stage (the scan kernels
 * continue a sum where it stopped, so a finished sum is the reference's bit
 * for bit).  Before each stage, an entry whose partial sum P_y cannot lift
 * its RDY to the best RDY found so far is dropped:
 *
 *  - By Cauchy-Schwarz, layer by layer, the terms still to add sum to at
 *    most R_y = sum over the remaining layers l of |q_l| |m_y[l]| in absolute
 *    value, so the computed ab_y is at most U_y = P_y + R_y + eps (|P_y| +
 *    R_y): eps covers every rounding (the remaining additions, the norms,
 *    R_y and U_y themselves: fewer than nc + J + L + 8 roundings of relative
 *    size 2^-53; eps allows 8 times as many).
 *  - With best the best RDY so far, w = d / L < 1 and n_y = |q| |m_y| the
 *    cosine's denominator, RDY_y = w sem_y + (1 - w) ab_y / n_y < best - DELTA
 *    in real numbers when ab_y < thr_y = (best - DELTA - w sem_y) / (1 - w) n_y.
 *    The floating-point RDY differs from the real one by a few roundings of
 *    values below 3 in size (cosines are within [-1, 1] up to rounding), and
 *    the computed thr_y from the real one by a few roundings relative to
 *    (|best| + DELTA + |w sem_y|) n_y / (1 - w); DELTA = 2^-30 is millions of
 *    times both.  So U_y < thr_y proves the computed RDY_y < best: the entry
 *    can be neither the largest nor tied with it.  (An entry with a zero map
 *    has U_y = thr_y sign aside = 0: never dropped, finished exactly.)
 *
 * Every entry not dropped is finished and compared with the reference's rule
 * (the largest RDY, ties to the lower index) whatever the order blocks
 * finish in, so the winner is the reference's.  The bounds need finite
 * values, a non-zero query map and d < L; else fmoe_dedup takes the
 * reference.
 *
 * Order of work: stage 0 for every block of entries; the block with the best
 * first guess (RDY with ab_y = P_y + R_y) is finished first, which sets best
 * (high early, so more is dropped) and every thr_y; then the other blocks
 * stage by stage, a block dropped when none of its entries can stay.
 * Blocks stay the kernels' unit (FMOE_BLOCK entries).
 *
 * fmoe_dedup_fstaged (issue 18, i18r) runs the same stages on float sums:
 * the float filter's kernels (fmoe_cosfilter.h: fused multiply-adds, eight
 * entries per instruction, no conversion to double) sum each block's stages
 * and the bounds, and only the blocks that the float bounds cannot drop
 * after the last stage get the exact double sums (the scan kernels over
 * those blocks from +0 with the full search's terms: its sums bit for bit)
 * and the reference's RDY.  Why a dropped entry y can neither win nor tie
 * (u = 2^-24; N the query's non-zero map terms, L the layers, both <= 2^14;
 * the filter's guards: finite values, every non-zero norm within [2^-40,
 * 2^40]; p_i = q_i m_y,i the products, exact in a fused multiply-add and in
 * double; S = sum p_i; P_t the real sum of the products of stages 0 .. t -
 * 1 (whole layers); f_t the float chain over the same terms, from +0, in
 * order; Q = |q| |m_y|):
 *  - |f_t - P_t| <= gamma_N sum |p_i| + N 2^-150 (one rounding per fused
 *    multiply-add, 2^-150 below the normal range), gamma_N <= 1.001 N u,
 *    and sum |p_i| <= Q by Cauchy-Schwarz.
 *  - |S - P_t| <= T_t, the sum over the layers l of stages t .. S - 1 of
 *    |q_l| |m_y[l]| (Cauchy-Schwarz per layer), T_0 <= Q (again).  The
 *    float bound R_t (fstage_bound) sums, in float, a_l = (float) |q_l| x
 *    (|m_y[l]| rounded up to a float), a_l >= |q_l| |m_y[l]| (1 - 2^-23)
 *    (the query's row norm in double, then rounded to a float) for a row
 *    norm of at least FLT_MIN; below it (a subnormal row) the loss is at
 *    most 2^-150 |m_y[l]| <= 2^-110 Q (|q| >= 2^-40), absolute; and the
 *    float sum of the a_l adds its gamma_L (its terms >= 0) and at most
 *    L 2^-150 of underflow: T_t <= R_t + (L + 3) 2^-23.9 Q + L 2^-110 Q +
 *    L 2^-150.
 *  - The reference's ab_y, N double additions of the p_i: |ab_y - S| <=
 *    1.001 N 2^-53 Q.
 * Together ab_y <= f_t + R_t + (N + L + 5) 2^-23.9 Q + 2^-135 (R_S = 0),
 * and the code's U_y = f_t + R_t + epsf qn mn_y + 2^-120, epsf = (N + L +
 * 16) 2^-23, qn mn_y >= Q (1 - 2^-39) (qn = sqrt(mm) (1 + 2^-40) covers the
 * query's norm; mn_y = map_norm, computed in double from at most 2^14
 * squares, is within about (N + 2) 2^-53 <= 2^-39 of the real norm and may
 * be below it: a review measured 2^-40.2 on a map of 16,384 terms),
 * exceeds that by 10 2^-23 Q at least, far above the roundings of the
 * test f_t + R_t >= thr_y - (epsf qn mn_y + 2^-120) in double (below 2^-36
 * Q: |f_t| and R_t are at most 1.01 Q, |thr_y| at most 2^16 Q).  The
 * semantic cosine enters the thresholds as an upper bound too: the float
 * estimate (fe_y x ie_y) x ae of fmoe_cosfilter.c plus its bound (ne + 8)
 * 2^-23 + 2^-30 (w = 1, ne the embedding's non-zero terms) is at least the
 * cosine fmoe_sem_of computes; a larger semantic cosine only lowers thr_y,
 * so U_y < thr_y still proves RDY_y < best by the argument above.  best is
 * the exact RDY of an entry of the first block (the largest float guess),
 * finished in double first.  An entry with a zero map (U_y > 0 = thr_y) is
 * never dropped. */
#include <math.h>
#include <string.h>

#include "policies/lib/fmoe_cosfilter.h"
#include "policies/lib/fmoe_scan.h"
#include "policies/lib/fmoe_store.h"
#include "policies/lib/fmoe_store_priv.h"

#define B FMOE_BLOCK

uint32_t fmoe_dedup_full(fmoe_store *s, const float *emb, const float *map)
{
    uint32_t LJ = s->L * s->J;
    double ee = s->D ? fmoe_norm2_of(emb, s->D) : 0.0, mm = fmoe_norm2_of(map, LJ);
    uint32_t nc = fmoe_map_terms(s, map);
    s->kernels->scan(s->map, s->J, 0, (s->n + B - 1) / B, s->cols, s->w, nc, s->acc);
    if (s->D)
        fmoe_scan_query(s, s->emb, s->D, 0, emb, s->D, s->acc2);
    uint32_t best = 0;
    double best_rdy = -INFINITY;
    for (uint32_t y = 0; y < s->n; y++) {
        double r = fmoe_rdy_of(s, y, fmoe_sem_of(s, y, s->acc2, ee), s->acc[y], mm);
        if (r > best_rdy) {
            best = y;
            best_rdy = r;
        }
    }
    return best;
}

#define DELTA 0x1p-30   /* the margin of the thresholds */
#define SEM_SLACK 0x1p-40 /* above the rounding of a semantic cosine by multiplications */

/* The pruned search's state for one query. */
typedef struct {
    fmoe_store *s;
    double ee, mm, eps;
    double qn, epsf;              /* the float stages (fmoe_dedup_fstaged): |q| rounded up, their eps */
    uint32_t nc, ne;              /* the float stages: the map's and the embedding's terms */
    uint32_t nb, S;               /* blocks held, stages */
    uint32_t k0[FMOE_STAGES + 1]; /* stage t sums the query's terms k0[t] .. k0[t + 1) - 1 */
    uint32_t best;
    double best_rdy;
} dedup;

/* Whether an entry of block b may still reach the best once stages
 * 0 .. t - 1 are summed (0 < t < S): U_y >= thr_y for one y (thr_y = +inf
 * past the held entries).  stage_bound[t] holds R_y of the stages t .. S - 1. */
static int block_stays(const dedup *q, uint32_t b, uint32_t t)
{
    const fmoe_store *s = q->s;
    const double *R = s->stage_bound + (size_t)t * s->slots + (size_t)b * B;
    const double *P = s->acc + (size_t)b * B, *thr = s->thr + (size_t)b * B;
    int stay = 0;
    for (uint32_t i = 0; i < B; i++)
        stay |= P[i] + (R[i] + q->eps * (fabs(P[i]) + R[i])) >= thr[i];
    return stay;
}

/* Sums stages t0 .. t1 - 1 into the blocks b0 .. b0 + nb - 1. */
static void scan_stages(dedup *q, uint32_t b0, uint32_t nb, uint32_t t0, uint32_t t1)
{
    fmoe_store *s = q->s;
    uint32_t k = q->k0[t0], nc = q->k0[t1] - k;
    if (nb && nc) /* layer-major: block b0 of every layer's slice at s->map + b0 J B, columns fmoe_map_col */
        s->kernels->scan_more(s->map + (size_t)b0 * s->J * B, s->J, 0, nb, s->cols + k, s->w + k, nc,
                              s->acc + (size_t)b0 * B);
}

/* Block b's finished entries against the best: the reference's RDY (acc2
 * holds the embedding dot products), the largest, ties to the lower index
 * (the reference's rule whatever the order blocks finish in). */
static void finish_block(dedup *q, uint32_t b)
{
    const fmoe_store *s = q->s;
    uint32_t end = (b + 1) * B < s->n ? (b + 1) * B : s->n;
    for (uint32_t y = b * B; y < end; y++) {
        double r = fmoe_rdy_of(s, y, fmoe_sem_of(s, y, s->acc2, q->ee), s->acc[y], q->mm);
        if (r > q->best_rdy || (r == q->best_rdy && y < q->best)) {
            q->best = y;
            q->best_rdy = r;
        }
    }
}

/* stage_bound[t][y] = R_y of stages t .. S - 1: the sum over their layers l
 * of |q_l| |m_y[l]| (in any order: eps covers it; the entries' row norms
 * rounded up), by the scan kernels over the row norms, the last stage
 * first, each stage's sums continuing the next one's. */
static void stage_bounds(dedup *q, const float *map, const uint32_t *layer0)
{
    fmoe_store *s = q->s;
    size_t S = s->slots, len = (size_t)q->nb * B;
    for (uint32_t l = 0; l < s->L; l++)
        s->layer_norm[l] = sqrt(fmoe_norm2_of(map + (size_t)l * s->J, s->J));
    for (uint32_t t = q->S; t-- > 0;) {
        double *R = s->stage_bound + t * S;
        uint32_t l0 = layer0[t], nl = layer0[t + 1] - l0;
        if (t + 1 < q->S) {
            memcpy(R, R + S, len * sizeof *R);
            s->kernels->scan_more(s->row_norm_up, s->L, 0, q->nb, s->layer_ids + l0, s->layer_norm + l0, nl, R);
        } else {
            s->kernels->scan(s->row_norm_up, s->L, 0, q->nb, s->layer_ids + l0, s->layer_norm + l0, nl, R);
        }
    }
}

/* Stages of about equal layer counts and their first query terms. */
static void split_stages(dedup *q, uint32_t nc, uint32_t *layer0)
{
    fmoe_store *s = q->s;
    q->S = s->L < FMOE_STAGES ? s->L : FMOE_STAGES;
    uint32_t k = 0;
    for (uint32_t t = 0; t <= q->S; t++) {
        layer0[t] = (uint32_t)((uint64_t)t * s->L / q->S);
        while (k < nc && s->cols[k] < fmoe_map_col(s, layer0[t] * s->J)) /* columns rise with the term index */
            k++;
        q->k0[t] = k;
    }
}

/* thr[y] = an upper bound of entry y's semantic cosine as the reference
 * computes it: the same dot product over the same norms, multiplied by
 * inverses instead of divided (a few roundings apart, far below SEM_SLACK);
 * 0 + SEM_SLACK where the reference's cosine is 0. */
static void sem_bounds(const dedup *q)
{
    fmoe_store *s = q->s;
    size_t len = (size_t)q->nb * B;
    double *restrict thr = s->thr;
    const double *restrict dot = s->acc2, *restrict inv = s->inv_emb_norm;
    double f = q->ee > 0 ? 1.0 / sqrt(q->ee) : 0.0;
    if (!s->D)
        f = 0.0;
    for (size_t b = 0; b < len; b += B)
        for (uint32_t i = 0; i < B; i++)
            thr[b + i] = (f ? dot[b + i] * f * inv[b + i] : 0.0) + SEM_SLACK;
}

/* The block whose entry has the largest RDY if its map terms still to add
 * reached their bound R_y (a guess: any block gives the same result);
 * thr[] holds the semantic bounds. */
static uint32_t first_guess(const dedup *q)
{
    const fmoe_store *s = q->s;
    const double *R = s->stage_bound + (q->S > 1 ? s->slots : 0);
    double w = (double)s->d / s->L, f = (1.0 - w) / sqrt(q->mm), top = -INFINITY;
    uint32_t at = 0;
    for (uint32_t y = 0; y < s->n; y++) {
        double g = w * s->thr[y] + f * (s->acc[y] + R[y]) * s->inv_map_norm[y];
        if (g > top) {
            top = g;
            at = y;
        }
    }
    return at / B;
}

/* thr[y] = (best - DELTA - w sem_y) |q| |m_y| / (1 - w) from the semantic
 * bounds thr[] held; +inf past the held entries. */
static void thresholds(const dedup *q)
{
    fmoe_store *s = q->s;
    size_t len = (size_t)q->nb * B;
    double *restrict thr = s->thr;
    const double *restrict mn = s->map_norm;
    double w = (double)s->d / s->L, f = sqrt(q->mm) / (1.0 - w), need = q->best_rdy - DELTA;
    for (size_t b = 0; b < len; b += B)
        for (uint32_t i = 0; i < B; i++)
            thr[b + i] = (need - w * thr[b + i]) * f * mn[b + i];
    for (size_t y = s->n; y < len; y++)
        thr[y] = INFINITY;
}

/* Whether the bounds hold: finite values, a non-zero query map (mm, its
 * squared norm), d < L. */
static int prunable(const fmoe_store *s, const float *emb, const float *map, double mm)
{
    size_t LJ = (size_t)s->L * s->J;
    return s->d < s->L && !s->nonfinite && fmoe_all_finite(map, LJ) && (!s->D || fmoe_all_finite(emb, s->D)) &&
           mm > 0;
}

uint32_t fmoe_dedup_pruned(fmoe_store *s, const float *emb, const float *map)
{
    uint32_t LJ = s->L * s->J;
    double mm = fmoe_norm2_of(map, LJ);
    if (!prunable(s, emb, map, mm))
        return fmoe_dedup_full(s, emb, map);
    dedup q = {.s = s, .nb = (s->n + B - 1) / B, .best = 0, .best_rdy = -INFINITY};
    q.ee = s->D ? fmoe_norm2_of(emb, s->D) : 0.0;
    q.mm = mm;
    if (s->D) /* acc2: the embedding dot products */
        fmoe_scan_query(s, s->emb, s->D, 0, emb, s->D, s->acc2);
    uint32_t nc = fmoe_map_terms(s, map), layer0[FMOE_STAGES + 1];
    q.eps = ldexp((double)nc + s->J + s->L + 64, -50);
    split_stages(&q, nc, layer0);
    stage_bounds(&q, map, layer0);
    if (q.k0[1]) /* stage 0's sums from +0: the kernels' scan, not scan_more of zeroed sums (the same bits) */
        s->kernels->scan(s->map, s->J, 0, q.nb, s->cols, s->w, q.k0[1], s->acc);
    else
        memset(s->acc, 0, (size_t)q.nb * B * sizeof *s->acc);
    sem_bounds(&q);
    uint32_t first = first_guess(&q);
    scan_stages(&q, first, 1, 1, q.S);
    finish_block(&q, first);
    thresholds(&q);
    s->dedup_block_stages += (uint64_t)q.nb * q.S;
    uint32_t live = 0;
    for (uint32_t b = 0; b < q.nb; b++)
        if (b != first)
            s->blocks[live++] = b;
    for (uint32_t t = 1; t < q.S; t++) {
        uint32_t kept = 0;
        for (uint32_t i = 0; i < live; i++)
            if (block_stays(&q, s->blocks[i], t))
                s->blocks[kept++] = s->blocks[i];
            else
                s->dedup_stages_skipped += q.S - t;
        live = kept;
        for (uint32_t i = 0, run; i < live; i += run) { /* runs of consecutive blocks: one kernel call */
            for (run = 1; i + run < live && s->blocks[i + run] == s->blocks[i] + run; run++)
                ;
            scan_stages(&q, s->blocks[i], run, t, t + 1);
        }
    }
    for (uint32_t i = 0; i < live; i++)
        finish_block(&q, s->blocks[i]);
    return q.best;
}

/* ---- the float stages (fmoe_dedup_fstaged; the argument is in the header) ---- */

#define FLOAT_ABS 0x1p-120 /* above the float sums' underflow errors, (N + L) 2^-150 <= 2^-135 */

/* thr[y] = an upper bound of entry y's semantic cosine as fmoe_sem_of
 * computes it: the float filter's estimate plus its bound (w = 1); 0
 * without embeddings (the reference's cosine is then 0). */
static void sem_bounds_float(const dedup *q)
{
    fmoe_store *s = q->s;
    if (!s->D) {
        memset(s->thr, 0, (size_t)q->nb * B * sizeof *s->thr);
        return;
    }
    s->cosf->fscan(s->emb, s->D, q->nb, s->ecols, s->ewf, q->ne, s->fe);
    float ae = q->ee > 0 ? (float)(1.0 / sqrt(q->ee)) : 0.0f; /* fmoe_cosfilter.c's query factor, w = 1 */
    s->cosf->estimate(s->fe, s->inv_emb_f, ae, NULL, NULL, 0.0f, s->n, s->est);
    double E = (q->ne + 8) * 0x1p-23 + 0x1p-30;
    for (uint32_t y = 0; y < s->n; y++)
        s->thr[y] = s->est[y] + E;
}

/* fstage_bound[t][y] = the float R^t: the sum over the layers l of stages t
 * .. S - 1 of (float) |q_l| x (|m_y[l]| rounded up), by the float kernels,
 * the last stage first, each stage's chains continuing the next one's. */
static void stage_bounds_float(dedup *q, const float *map, const uint32_t *layer0)
{
    fmoe_store *s = q->s;
    size_t S = s->slots, len = (size_t)q->nb * B;
    for (uint32_t l = 0; l < s->L; l++)
        s->layer_norm_f[l] = (float)sqrt(fmoe_norm2_of(map + (size_t)l * s->J, s->J));
    for (uint32_t t = q->S; t-- > 0;) {
        float *R = s->fstage_bound + t * S;
        uint32_t l0 = layer0[t], nl = layer0[t + 1] - l0;
        if (t + 1 < q->S) {
            memcpy(R, R + S, len * sizeof *R);
            s->cosf->fscan_more(s->row_norm_up, s->L, q->nb, s->layer_ids + l0, s->layer_norm_f + l0, nl, R);
        } else {
            s->cosf->fscan(s->row_norm_up, s->L, q->nb, s->layer_ids + l0, s->layer_norm_f + l0, nl, R);
        }
    }
}

/* Float sums of stages t0 .. t1 - 1 into fm[] of the blocks b0 .. b0 + nb
 * - 1: from +0 at stage 0, else continuing fm's chains. */
static void fsum_stages(const dedup *q, uint32_t b0, uint32_t nb, uint32_t t0, uint32_t t1)
{
    fmoe_store *s = q->s;
    uint32_t k = q->k0[t0];
    fmoe_fscan_fn *f = t0 ? s->cosf->fscan_more : s->cosf->fscan;
    if (nb && (q->k0[t1] > k || !t0))
        f(s->map + (size_t)b0 * s->J * B, s->J, nb, s->cols + k, s->wf + k, q->k0[t1] - k, s->fm + (size_t)b0 * B);
}

/* thr[y] -= epsf qn mn_y + 2^-120: U_y >= thr_y becomes f_t + R_t >= thr_y
 * (the roundings of the subtraction, 2^-52 |thr_y| <= 2^-36 Q with |thr_y|
 * <= 2^16 Q as d < L <= 2^14, are far inside epsf's slack). */
static void float_margins(const dedup *q)
{
    fmoe_store *s = q->s;
    const double *mn = s->map_norm;
    for (size_t y = 0; y < s->n; y++)
        s->thr[y] -= q->epsf * (q->qn * mn[y]) + FLOAT_ABS;
}

/* Whether an entry of block b may still reach the best once stages 0 .. t -
 * 1 are summed in float (0 < t <= S): U_y >= thr_y for one y, thr less
 * its margin (float_margins). */
static int fblock_stays(const dedup *q, uint32_t b, uint32_t t)
{
    const fmoe_store *s = q->s;
    const double *thr = s->thr + (size_t)b * B;
    const float *f = s->fm + (size_t)b * B;
    int stay = 0;
    if (t < q->S) {
        const float *Rt = s->fstage_bound + (size_t)t * s->slots + (size_t)b * B;
        for (uint32_t i = 0; i < B; i++)
            stay |= (double)f[i] + (double)Rt[i] >= thr[i];
    } else {
        for (uint32_t i = 0; i < B; i++)
            stay |= (double)f[i] >= thr[i];
    }
    return stay;
}

/* The block of the largest RDY guessed from stage 0's float sums with the
 * terms still to add at their bound (any block gives the same result). */
static uint32_t first_guess_float(const dedup *q)
{
    const fmoe_store *s = q->s;
    const float *R = s->fstage_bound + (q->S > 1 ? s->slots : 0);
    double w = (double)s->d / s->L, f = (1.0 - w) / q->qn, top = -INFINITY;
    uint32_t at = 0;
    for (uint32_t y = 0; y < s->n; y++) {
        double g = w * s->thr[y] + f * ((double)s->fm[y] + R[y]) * s->inv_map_norm[y];
        if (g > top) {
            top = g;
            at = y;
        }
    }
    return at / B;
}

/* Blocks b0 .. b0 + nb - 1 summed in double (the full search's sums bit for
 * bit: the scan kernels over them alone, from +0, its terms) and finished. */
static void finish_exact(dedup *q, uint32_t b0, uint32_t nb)
{
    fmoe_store *s = q->s;
    s->kernels->scan(s->map + (size_t)b0 * s->J * B, s->J, 0, nb, s->cols, s->w, q->nc, s->acc + (size_t)b0 * B);
    if (s->D)
        s->kernels->scan(s->emb + (size_t)b0 * s->D * B, s->D, 0, nb, s->ecols, s->ew, q->ne,
                         s->acc2 + (size_t)b0 * B);
    for (uint32_t b = b0; b < b0 + nb; b++)
        finish_block(q, b);
    s->fstaged_blocks_exact += nb;
}

/* Each run of consecutive blocks of s->blocks[0 .. live): f(q, first, count, t). */
static void for_runs(dedup *q, uint32_t live, uint32_t t, void (*f)(dedup *, uint32_t, uint32_t, uint32_t))
{
    const uint32_t *bl = q->s->blocks;
    for (uint32_t i = 0, run; i < live; i += run) {
        for (run = 1; i + run < live && bl[i + run] == bl[i] + run; run++)
            ;
        f(q, bl[i], run, t);
    }
}

static void fsum_run(dedup *q, uint32_t b0, uint32_t nb, uint32_t t)
{
    fsum_stages(q, b0, nb, t, t + 1);
}

static void exact_run(dedup *q, uint32_t b0, uint32_t nb, uint32_t t)
{
    (void)t;
    finish_exact(q, b0, nb);
}

int fmoe_dedup_fstaged(fmoe_store *s, const float *emb, const float *map, uint32_t *out)
{
    return fmoe_dedup_fstaged_terms(s, emb, map, fmoe_map_terms(s, map), out);
}

int fmoe_dedup_fstaged_terms(fmoe_store *s, const float *emb, const float *map, uint32_t nc, uint32_t *out)
{
    uint32_t LJ = s->L * s->J;
    double mm = fmoe_norm2_of(map, LJ), ee = s->D ? fmoe_norm2_of(emb, s->D) : 0.0;
    /* finite sums of squares: every value finite (checked by fmoe_cosf_applies, with the store's guards) */
    if (!s->cosf || s->n <= B || s->d >= s->L || !(mm > 0) || !fmoe_cosf_applies(s, ee, mm))
        return 0;
    dedup q = {.s = s, .ee = ee, .mm = mm, .nb = (s->n + B - 1) / B, .best = 0, .best_rdy = -INFINITY, .nc = nc};
    q.qn = sqrt(mm) * (1 + 0x1p-40); /* above |q| as computed and rounded here */
    q.ne = s->D ? fmoe_emb_terms(s, emb) : 0;
    sem_bounds_float(&q);
    q.epsf = ((double)nc + s->L + 16) * 0x1p-23;
    uint32_t layer0[FMOE_STAGES + 1];
    split_stages(&q, nc, layer0);
    stage_bounds_float(&q, map, layer0);
    fsum_stages(&q, 0, q.nb, 0, 1);
    uint32_t first = first_guess_float(&q);
    finish_exact(&q, first, 1);
    thresholds(&q);
    float_margins(&q);
    uint32_t live = 0;
    for (uint32_t b = 0; b < q.nb; b++)
        if (b != first)
            s->blocks[live++] = b;
    for (uint32_t t = 1; t <= q.S; t++) { /* t = S: the last check, with every stage summed */
        uint32_t kept = 0;
        for (uint32_t i = 0; i < live; i++)
            if (fblock_stays(&q, s->blocks[i], t))
                s->blocks[kept++] = s->blocks[i];
        live = kept;
        if (t < q.S)
            for_runs(&q, live, t, fsum_run);
    }
    for_runs(&q, live, 0, exact_run);
    s->fstaged_queries++;
    *out = q.best;
    return 1;
}

uint32_t fmoe_dedup(fmoe_store *s, const float *emb, const float *map)
{
    uint32_t y;
    if (s->n <= B)
        return fmoe_dedup_full(s, emb, map);
    /* the same entry whichever answers: the float filter for short maps (fmoe_cosfilter.h), the
       float stages for long ones, else the pruned search; the map's terms computed once */
    uint32_t nc = fmoe_map_terms(s, map);
    if (fmoe_dedup_filtered_terms(s, emb, map, nc, &y) || fmoe_dedup_fstaged_terms(s, emb, map, nc, &y))
        return y;
    return fmoe_dedup_pruned(s, emb, map);
}
