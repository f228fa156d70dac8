/* MoE-Infinity machinery shared by prefetch `eam` and cache `eam`
 * (seed 004; docs/policies.md).
 *
 * An Expert Activation Matrix (EAM) is an L x J matrix of routed-token
 * counts, stored row-major as double[L * J]: M[l * J + e] = token rows of a
 * sequence that layer l routed to expert e (prompt + generated tokens).
 * Layers are 0-based everywhere in this module (the paper's Eq. 1 sums over
 * l in [0, L) and Algorithm 1 line 26 uses fl.idx, also 0-based).
 *
 * Contents: the pure formulas (distance, priorities) for the tests; the EAM
 * collection (EAMC) and its seeded k-means construction; the per-request
 * tracker that keeps EAMs only for sequences in flight. */
#ifndef MS_EAM_COMMON_H
#define MS_EAM_COMMON_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "policies/lib/xheap.h"
#include "policies/policy.h"

#define EAM_EPSILON 1e-8   /* Algorithm 1 line 26 / Algorithm 2 line 8 EPSILON */
#define EAM_CODE_MASK 1e-9 /* 2024 code: collection rows <= l_now overwritten with this */

typedef enum { EAM_MODE_PAPER = 0, EAM_MODE_CODE = 1, EAM_MODE_CODE_HEAD = 2 } eam_mode;

/* "paper" | "code" | "code-head" -> mode; -1 when unknown. */
int eam_mode_parse(const char *s);

/* ---- pure formulas ---- */

/* Cosine of two length-J rows after dividing each by its own sum; a zero
 * row (sum 0) gives cosine 0 (docs/policies.md). */
double eam_row_cosine(const double *a, const double *b, uint32_t J);
/* Eq. (1): 1 - (1/L) sum_l cos(M1[l] / sum M1[l], M2[l] / sum M2[l]). */
double eam_distance(const double *m1, const double *m2, uint32_t L, uint32_t J);
/* 2024 code matching distance: Eq. (1) with the collection entry's rows
 * 0..l_now overwritten with 1e-9 before row-normalising (cur unchanged). */
double eam_distance_code(const double *entry, const double *cur, uint32_t L, uint32_t J, uint32_t l_now);
/* Algorithm 1 line 25-26 (and Algorithm 2 lines 6-8, same form):
 * p = count / row_sum (0 when row_sum is 0); (p + 1e-8) * (1 - f / L),
 * f the 0-based layer. */
static inline double eam_layer_decay(uint32_t f, uint32_t L)
{
    return 1.0 - (double)f / L; /* line 26: 1 - fl.idx / n_layers */
}
/* eam_priority_paper with the layer's decay already formed (the same value). */
static inline double eam_priority_decayed(double count, double row_sum, double decay)
{
    double p = row_sum > 0 ? count / row_sum : 0.0; /* line 25: p = p_eam[fl][e] / n_token */
    return (p + EAM_EPSILON) * decay;                /* line 26: (p + EPSILON) x (1 - fl.idx / n_layers) */
}
static inline double eam_priority_paper(double count, double row_sum, uint32_t f, uint32_t L)
{
    return eam_priority_decayed(count, row_sum, eam_layer_decay(f, L));
}
/* 2024 code prefetch priority: (count + 1e-8) * (1 - (l - l_now) / (L + 1)),
 * for l >= l_now; count is the matched entry's raw token count. */
double eam_priority_code(double count, uint32_t l, uint32_t l_now, uint32_t L);

/* ---- the EAM collection ---- */

typedef struct {
    uint32_t L, J, n, cap;
    double *m;        /* [cap][L][J] raw counts */
    uint64_t version; /* bumped by every push and clear (eam_matcher's cue) */
} eam_set;

void eam_set_init(eam_set *s, uint32_t L, uint32_t J);
void eam_set_free(eam_set *s);
void eam_set_clear(eam_set *s);
void eam_set_push(eam_set *s, const double *m);
static inline const double *eam_set_at(const eam_set *s, uint32_t i)
{
    return s->m + (size_t)i * s->L * s->J;
}

/* Index of the entry nearest cur (Algorithm 1 lines 16-21: strict '<', so
 * ties go to the lowest index); paper mode uses eam_distance, code mode
 * eam_distance_code at l_now.  UINT32_MAX when the set is empty. */
uint32_t eam_match(const eam_set *c, const double *cur, eam_mode mode, uint32_t l_now);

/* Paper-mode matching, incremental: the same argmin of Eq. (1) as
 * eam_match(c, cur, EAM_MODE_PAPER, .) (ties to the lowest index) and the
 * same distance bit for bit (the per-row cosines are computed with the same
 * operations in the same order as eam_row_cosine and summed over l in order).
 * Per entry it keeps (recomputed only when the collection changed: another
 * set, or its version moved) its row sums, its row-normalised rows
 * (a[e] / sum, the very quotients eam_row_cosine forms) and their norms;
 * against the cur last matched, its cosine with every row and the running
 * sums of those cosines over l = 0, 1, ...  A match recomputes the cosines of
 * only the rows of cur that differ from its copy of the last cur, and the
 * running sums from the first such row on.  Entries are stored
 * entries-minor in blocks of EAM_BLOCK (policies/lib/eam_match.c), so each
 * row's dot products run as independent lanes, one per entry, each summed
 * over e in order (no fused multiply-add).  Cost per match: O(n J) per
 * changed row plus O(n) per row from the first changed one, no division in
 * the dot products, instead of O(n L J) with a division per term. */
#define EAM_BLOCK 8

typedef struct {
    uint32_t L, J, n, nb, n_cap; /* nb = blocks of EAM_BLOCK entries in use */
    const eam_set *set; /* the collection the entry stats describe */
    uint64_t version;   /* its version then */
    int primed;         /* cos, pre and last describe a previous cur */
    double *an;         /* [L][nb][J][EAM_BLOCK] entry row l divided by its sum (0: zero row or padding);
                           a match reads row l of every block, one stretch of memory */
    double *sum;        /* [n][L] entry row sums (row_sum's order) */
    double *root;       /* [L][nb B] sqrt of the squared norm of the row-normalised entry row (+inf: zero row) */
    double *cos;        /* [L][nb B] eam_row_cosine(entry row l, last row l) */
    double *pre;        /* [L][nb B] sum of cos[0..l] in l's order, from +0 */
    double *dist;       /* [nb B] scratch: each entry's Eq. (1) distance */
    double *last;       /* [L][J] cur at the previous match */
    double *y;          /* [J] scratch: a cur row divided by its sum */
    uint32_t *nz;       /* [J] scratch: the e with y[e] != 0, ascending (the dot products skip the rest) */
    int avx;            /* the dot products on AVX (init: when the CPU has it; a test may clear it) */
    uint64_t *gen;      /* [L] the row generations of the last match (eam_matcher_match_gen) */
    int gen_valid;      /* gen describes last */
} eam_matcher;

void eam_matcher_init(eam_matcher *m, uint32_t L, uint32_t J);
void eam_matcher_free(eam_matcher *m);
/* Index of the entry of c (c->L, c->J equal to the matcher's) nearest cur,
 * UINT32_MAX when c is empty; its Eq. (1) distance in *dist when dist is not
 * NULL (INFINITY when empty). */
uint32_t eam_matcher_match(eam_matcher *m, const eam_set *c, const double *cur, double *dist);
/* The same, told which rows of cur may have changed: row_gen[l] moves
 * whenever row l is rewritten (eam_tracker's row_gen; it may move without a
 * change).  A row whose generation did not move since the last call is not
 * compared with the copy of the last cur. */
uint32_t eam_matcher_match_gen(eam_matcher *m, const eam_set *c, const double *cur, const uint64_t *row_gen,
                               double *dist);
/* Row l's sum of entry i of the collection last matched (the sum
 * Algorithm 1 line 23 forms: row[0] + row[1] + ... from +0). */
static inline double eam_matcher_row_sum(const eam_matcher *m, uint32_t i, uint32_t l)
{
    return m->sum[(size_t)i * m->L + l];
}

/* K-means with Eq. (1) as the distance over the row-normalised samples:
 * k-means++ initialisation drawn from rng (first centre uniform, then each
 * next centre with probability proportional to its squared distance to the
 * nearest centre so far), then Lloyd iterations (assign to the nearest
 * centroid, ties to the lower index; centroid = mean of its members'
 * row-normalised EAMs; an empty cluster keeps its centroid) until no
 * assignment changes or max_iter rounds.  k <= s->n.  assign[n] gets each
 * sample's cluster, centroids[k][L][J] the final centroids. */
void eam_kmeans(const eam_set *s, uint32_t k, gsl_rng *rng, uint32_t max_iter, uint32_t *assign, double *centroids);
/* EAMC construction (paper section 4.2): when s->n <= P every sample is
 * kept; else k-means with k = P and, per non-empty cluster, the member
 * nearest its centroid (ties to the lower index), in cluster order.  Writes
 * the kept samples' raw counts into out (cleared first). */
void eam_build_collection(const eam_set *s, uint32_t P, gsl_rng *rng, uint32_t max_iter, eam_set *out);

/* ---- per-request EAMs of the sequences in flight ---- */

/* A sequence = one request; on a single-request trace split by iteration,
 * one window of `window` iterations of it (the same cut as the training
 * samples), so the live EAM and the collection describe the same thing. */
typedef struct {
    uint64_t req;
    uint32_t seg;          /* window index (0 unless windowed) */
    uint32_t last_iter;    /* its iteration in the latest batch that held it */
    uint32_t n_iters;      /* iterations of its request */
    uint64_t hits, accesses; /* distinct (layer, expert) needs found resident */
    double *m;             /* [L][J] */
} eam_seq;

typedef struct {
    uint32_t L, J, window; /* window 0: one sequence per request */
    eam_seq *seq;
    uint32_t n, cap;
    uint32_t *item_seq;    /* [items] sequence of each batch item */
    uint32_t n_items, item_cap;
    double *cur;           /* [L][J] sum over the running batch's sequences */
    double *cur_sum;       /* [L] sum of cur's row l: +0, then cur[l][0], cur[l][1], ... */
    uint64_t *row_gen;     /* [L] bumped whenever cur's row l is recomputed */
    uint64_t iter;         /* engine iteration the batch belongs to */
    int started;
    int primed;            /* cur was summed for a binding of items to sequences */
    uint32_t *mark;        /* [J] scratch for distinct experts */
    uint32_t stamp;
} eam_tracker;

/* Called with every sequence that finished, just before it is dropped. */
typedef void (*eam_done_fn)(void *ctx, const eam_seq *s);

void eam_tracker_init(eam_tracker *t, uint32_t L, uint32_t J, uint32_t window);
void eam_tracker_free(eam_tracker *t);
/* When the engine has moved to a new iteration: drops (after done()) every
 * sequence whose last iteration ran, binds the batch's items to their
 * sequences (new ones start at zero) and recomputes cur (not when the
 * binding is the one cur was summed for: cur and row_gen stay).  Idempotent
 * within an iteration. */
void eam_tracker_sync(eam_tracker *t, const ms_view *v, eam_done_fn done, void *ctx);
/* Algorithm 1 lines 6-7: adds layer l's routed tokens of every batch item
 * to its sequence's EAM, and updates cur's row l. */
void eam_tracker_add_layer(eam_tracker *t, const ms_view *v, uint32_t l);
/* Per item, its distinct experts of layer l: accesses + 1 each, hits + 1 for
 * each resident one (call after classification: misses are not resident). */
void eam_tracker_note_hits(eam_tracker *t, const ms_view *v, uint32_t l);

/* ---- cache eam's victim order (paper mode) ---- */

/* The cached experts ordered by Algorithm 2's key (lines 6-8: (cur[l][e] /
 * sum cur[l] + 1e-8)(1 - l / L), from the tracker's cur and its row sums),
 * then by x = l J + e: the victim is the first evictable member in that
 * order, the one a scan taking the smallest (key, x) over the evictable
 * members gives.  The key is positive and finite, so its IEEE bits order as
 * the value does: an indexed heap (policies/lib/xheap.h) keyed on them.  The
 * keys of a row are refreshed when the tracker recomputed that row (its
 * row_gen moved) before each search. */
typedef struct {
    const eam_tracker *tr;
    uint32_t L, J;
    ms_xheap order;
    double *decay;    /* [L] eam_layer_decay(l, L) */
    uint64_t *seen;   /* [L] tr->row_gen[l] the keys of row l were computed at */
} eam_victims;

void eam_victims_init(eam_victims *q, const eam_tracker *tr);
void eam_victims_free(eam_victims *q);
void eam_victims_add(eam_victims *q, uint32_t x);
void eam_victims_remove(eam_victims *q, uint32_t x);
/* The smallest member with accept(ctx, x) != 0, MS_NIL when none. */
uint32_t eam_victims_first(eam_victims *q, int (*accept)(const void *ctx, uint32_t x), const void *ctx);
/* The smallest member the engine lets be evicted (ms_view_evictable), MS_NIL when none. */
uint32_t eam_victims_first_evictable(eam_victims *q, const ms_view *v);
/* Algorithm 2's key of x from the tracker as it is now. */
double eam_victim_key(const eam_tracker *tr, const double *decay, uint32_t x);

/* Window length to use for env: `window` when the split is by iteration
 * (a single-request trace), else 0. */
uint32_t eam_window_for(const ms_policy_env *env, uint32_t window);

/* Offline samples from the training split: one EAM per training request, or
 * per window of a by-iteration split.  0 ok, -1 with err set. */
int eam_collect_training(const ms_policy_env *env, uint32_t window, eam_set *out, ms_err *err);

#endif
