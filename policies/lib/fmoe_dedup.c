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
 * Blocks stay the kernels' unit (FMOE_BLOCK entries). */
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

/* Whether the bounds hold: finite values, a non-zero query map, d < L. */
static int prunable(const fmoe_store *s, const float *emb, const float *map)
{
    size_t LJ = (size_t)s->L * s->J;
    return s->d < s->L && !s->nonfinite && fmoe_all_finite(map, LJ) && (!s->D || fmoe_all_finite(emb, s->D)) &&
           fmoe_norm2_of(map, LJ) > 0;
}

uint32_t fmoe_dedup_pruned(fmoe_store *s, const float *emb, const float *map)
{
    if (!prunable(s, emb, map))
        return fmoe_dedup_full(s, emb, map);
    uint32_t LJ = s->L * s->J;
    dedup q = {.s = s, .nb = (s->n + B - 1) / B, .best = 0, .best_rdy = -INFINITY};
    q.ee = s->D ? fmoe_norm2_of(emb, s->D) : 0.0;
    q.mm = fmoe_norm2_of(map, LJ);
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

uint32_t fmoe_dedup(fmoe_store *s, const float *emb, const float *map)
{
    uint32_t y;
    if (s->n > B && fmoe_dedup_filtered(s, emb, map, &y)) /* the same entry (fmoe_cosfilter.h) */
        return y;
    return s->n > B ? fmoe_dedup_pruned(s, emb, map) : fmoe_dedup_full(s, emb, map);
}
