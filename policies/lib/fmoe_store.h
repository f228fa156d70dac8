/* fMoE's Expert Map Store and the pure formulas of fMoE (seeds 000, 001;
 * docs/policies.md), shared by prefetch/fmoe.c and cache/fmoe.c.
 *
 * An entry y holds a semantic embedding e_y[D] (D = 0: no embeddings kept)
 * and an expert map m_y[L][J] (one iteration's gate distributions, or, for
 * the `hitcount` ablation, one request's activation counts).  The store also
 * carries the running state of the incremental trajectory search: per entry
 * the dot product with the observed trajectory and the squared norm of the
 * entry's prefix over the same layers, plus the trajectory's squared norm.
 * Observing a layer costs O(C x J); nothing is recomputed from scratch.
 * Per entry the store caches the squared norms of its embedding, its whole
 * map and each layer's row of it (set when the entry is written), so that
 * deduplication and the trajectory search never recompute them; every cached
 * value is summed in the same order as the direct formula, so the results
 * are the same bit for bit.
 *
 * Layout (issue 18): every search is a scan over all entries, so the values
 * are stored entries-minor in blocks of FMOE_BLOCK entries: value k of entry
 * y's embedding sits at block(y / FMOE_BLOCK)[k x FMOE_BLOCK + y % FMOE_BLOCK].
 * The maps are layer-major (issue 18, i18m): layer l of every entry is one
 * contiguous slice (fmoe_map_layer) of slots x J floats, blocks of FMOE_BLOCK
 * entries in it, so value (l, j) of entry y sits at
 * map[((l x slots / B + y / B) x J + j) x B + y % B] (B = FMOE_BLOCK): the
 * trajectory search, which reads one layer of every entry, streams one
 * slice.  A whole-map scan addresses it as blocks of J values per entry with
 * the column of (l, j) = l x (slots / B) x J + j (fmoe_map_col).  A scan runs one
 * query value against FMOE_BLOCK entries at a time, with one accumulator per
 * entry: vectorised across entries, each entry's own sum still added term by
 * term in the direct formula's order (no reassociation), so every score is
 * the scalar formula's bit for bit.  A query's zero terms are skipped while
 * every stored value is finite (adding the product 0 x finite = +-0 to a
 * running sum that starts at +0 never changes it); products of two floats
 * are exact in double, so nothing else differs.  Read entries through
 * fmoe_store_get_map / _row / _emb. */
#ifndef MS_FMOE_STORE_H
#define MS_FMOE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "policies/lib/fmoe_scan.h"

struct fmoe_filter_kernels; /* fmoe_filter.h */
struct fmoe_cosf_kernels;   /* fmoe_cosfilter.h */

typedef struct {
    uint32_t cap, L, J, D, d; /* capacity C, layers, experts, embedding size, distance (RDY weights) */
    uint32_t n;               /* entries held */
    uint32_t slots;           /* cap rounded up to whole blocks: the length of the per-entry arrays */
    float *emb;               /* [slots / B][D][B], B = FMOE_BLOCK (when D > 0) */
    float *map;               /* [L][slots / B][J][B]: layer-major (fmoe_map_layer, fmoe_map_col) */
    double *emb_norm2;        /* [slots] |e_y|^2 (when D > 0) */
    double *emb_norm;         /* [slots] sqrt(|e_y|^2) */
    double *map_norm2;        /* [slots] |m_y|^2 over the whole map */
    double *map_norm;         /* [slots] sqrt(|m_y|^2) */
    double *row_norm2;        /* [L][slots] |m_y[l]|^2 */
    double *prefix_norm2;     /* [L][slots] |m_y[0..l]|^2, summed over layers 0..l in order from +0 */
    double *prefix_norm;      /* [L][slots] sqrt of prefix_norm2 */
    double *prefix_inv;       /* [L][slots] 1 / prefix_norm (0 where it is 0): the fused kernel's filter */
    double prefix_floor;      /* <= every positive prefix_norm held (never raised: a lower bound) */
    float *row_norm_up;       /* [slots / B][L][B] sqrt(|m_y[l]|^2) rounded up to a float (deduplication's bounds) */
    double *inv_map_norm;     /* [slots] 1 / map_norm (0 for a zero map): deduplication's bounds */
    double *inv_emb_norm;     /* [slots] 1 / emb_norm (0 for a zero embedding) */
    uint32_t nonfinite;       /* entries holding a NaN or an infinity (then no term is skipped) */
    uint8_t *entry_nonfinite; /* [slots] */
    /* incremental trajectory search (reset at each iteration) */
    double *dot;              /* [slots] m_y[0..observed) . traj (while `filtered`: layers 0 .. synced[y] - 1) */
    double *norm2;            /* [slots] |m_y[0..observed)|^2: norm2_own, or while the layers are observed in
                                 order (0, 1, ..., l) the row l of prefix_norm2, the same values (read only) */
    double *norm2_own;        /* [slots] */
    double *score;            /* [slots] cos(traj, m_y prefix) after the last observed layer */
    int best;                 /* argmax of score (ties to the lower index) */
    double best_score;
    double traj_norm2;        /* |traj|^2 */
    uint32_t observed;        /* layers observed so far */
    int traj_zeroed;          /* dot and norm2_own are zero: nothing observed since the last reset zeroed them */
    int in_order;             /* they were layers 0, 1, ..., observed - 1: norm2 = the cached prefix */
    /* the float filter of the in-order trajectory step (fmoe_filter.h): while `filtered`, dot[y]
       holds layers 0 .. synced[y] - 1 only (fmoe_traj_sync brings every entry up to date) */
    const struct fmoe_filter_kernels *filter; /* NULL: no filter (the exact step) */
    int filtered;             /* this iteration's layers so far were filtered */
    uint16_t *map16;          /* [L][slots / B][J][B] the maps as bfloat16 (fmoe_bf16_pos order in a block) */
    double traj_psum;         /* the sum of the rows observed (filtered iteration) */
    float *fdot;              /* [slots] float estimates of dot */
    float *fscore;            /* [slots] fdot x prefix_invf: estimated score x |traj| */
    float *prefix_invf;       /* [L][slots] (float) prefix_inv, a normal float or 0 */
    double invf_max;          /* >= every prefix_invf ever held (never lowered) */
    uint32_t *synced;         /* [slots] layers summed into dot[y] */
    uint32_t *cand;           /* [slots] the filter's candidates */
    float *traj_rows;         /* [L][J] the rows observed this iteration (the catch-up's queries) */
    uint32_t unfilterable;    /* entries with a negative map value or an inverse root out of float range */
    uint8_t *entry_unfilterable; /* [slots] */
    uint64_t filter_steps, filter_candidates; /* filtered steps, candidates they scored (tests, benchmarks) */
    /* the float filter of deduplication and the semantic search (fmoe_cosfilter.h) */
    const struct fmoe_cosf_kernels *cosf; /* NULL: no filter (the exact searches) */
    float *inv_emb_f, *inv_map_f; /* [slots] (float) inv_emb_norm, inv_map_norm */
    float *fe, *fm, *est;     /* [slots] float sums of the embedding and map products, the estimates */
    float *wf;                /* [max(L J, D)] the query's terms as floats */
    uint32_t *cos_cand;       /* [slots] the candidates */
    uint32_t cos_unfilterable; /* entries with a non-zero norm outside [2^-40, 2^40] (or not finite) */
    uint8_t *entry_cos_unfilterable; /* [slots] */
    uint64_t cosf_queries, cosf_candidates; /* filtered searches, candidates they scored (tests, benchmarks) */
    /* scratch of the scans */
    double *acc, *acc2;       /* [slots] one sum per entry */
    uint32_t *cols;           /* [max(L J, D)] the query's terms that are summed */
    double *stage_bound;      /* [FMOE_STAGES][slots] deduplication's bounds of the terms not summed yet */
    uint32_t *layer_ids;      /* [L] deduplication: 0, 1, ..., L - 1 (the bounds' scan terms) */
    double *layer_norm;       /* [L] deduplication: the query's row norms */
    double *thr;              /* [slots] deduplication: the map dot product an entry needs to stay */
    uint32_t *blocks;         /* [slots / B] deduplication's blocks still in the running */
    double *w;                /* [max(L J, D)] their values */
    /* what fmoe_dedup_pruned skipped (statistics for tests and benchmarks) */
    uint64_t dedup_block_stages;  /* blocks x stages of its queries */
    uint64_t dedup_stages_skipped; /* of those, not summed: their block dropped before */
    /* deduplication's float stages (fmoe_dedup_fstaged) */
    uint32_t *ecols;          /* [D] the query embedding's terms (the map's stay in cols / w) */
    double *ew;               /* [D] their values */
    float *ewf;               /* [D] the same as floats */
    float *fstage_bound;      /* [FMOE_STAGES][slots] float bounds of the terms not summed yet */
    float *layer_norm_f;      /* [L] the query's row norms as floats */
    uint64_t fstaged_queries, fstaged_blocks_exact; /* its searches, blocks it summed in double (tests) */
    void *mem;                /* the one allocation behind every array */
    const fmoe_kernels *kernels; /* the loops this CPU runs (the same results on every CPU) */
} fmoe_store;

void fmoe_store_init(fmoe_store *s, uint32_t cap, uint32_t L, uint32_t J, uint32_t D, uint32_t d);
void fmoe_store_free(fmoe_store *s);
/* Whether a store of capacity cap for an L x J model keeps its map columns
 * below 2^32 (fmoe_map_col; a map array below 256 GB): fmoe_store_init
 * aborts otherwise, so its callers check first. */
int fmoe_store_fits(uint32_t cap, uint32_t L, uint32_t J);
/* Memory of the held entries: n x (D + L x J) x sizeof(float) bytes (the
 * embeddings and maps; the O(C) search scratch is not counted). */
size_t fmoe_store_bytes(const fmoe_store *s);
/* The bytes a store of n maps of an L x J model with D-dimensional
 * embeddings holds (what fmoe_store_bytes says once it has n). */
size_t fmoe_store_bytes_of(uint64_t n, uint32_t L, uint32_t J, uint32_t D);
/* Layer l's slice of the maps: slots / B blocks of J values per entry (the
 * kernels' vals with len = J, first = 0, columns j). */
static inline const float *fmoe_map_layer(const fmoe_store *s, uint32_t l)
{
    return s->map + (size_t)l * s->slots * s->J;
}
/* The kernels' column of map value i = l J + j with vals = map, len = J:
 * l x (slots / B) x J + j (below 2^32 while the map array is below 256 GB:
 * fmoe_store_init refuses more). */
static inline uint32_t fmoe_map_col(const fmoe_store *s, uint32_t i)
{
    return (i / s->J) * (s->slots / FMOE_BLOCK) * s->J + i % s->J;
}
/* Entry y's map (out[L J], row-major), layer l's row of it (out[J]), its
 * embedding (out[D]). */
void fmoe_store_get_map(const fmoe_store *s, uint32_t y, float *out);
void fmoe_store_get_row(const fmoe_store *s, uint32_t y, uint32_t l, float *out);
void fmoe_store_get_emb(const fmoe_store *s, uint32_t y, float *out);

/* ---- formulas ---- */
/* cos(a, b) over n values; 0 when either vector is zero. */
double fmoe_cosine(const float *a, const float *b, size_t n);
/* Semantic search (seed 000 Eq. score-sem): y* = argmax_y cos(e_new, e_y),
 * ties to the lower index; -1 when the store is empty or holds no embeddings.
 * By the float filter when it applies (fmoe_cosfilter.h: the same entry and
 * score; s->acc then holds no cosines). */
int fmoe_semantic_search(fmoe_store *s, const float *e_new, double *score);
/* RDY(x, y) = (d/L) score_sem + ((L-d)/L) score_map (seed 000, "Expert map
 * deduplication"). */
double fmoe_rdy(uint32_t d, uint32_t L, double score_sem, double score_map);
/* RDY((emb, map), entry y), entry by entry (the reference of the scan):
 * fmoe_rdy(d, L, fmoe_cosine(emb, e_y, D), fmoe_cosine(map, m_y, L J))
 * (the semantic term 0 when D = 0). */
double fmoe_store_rdy(const fmoe_store *s, uint32_t y, const float *emb, const float *map);
/* Adds (emb, map): appended while n < C, else it replaces argmax_y RDY(x, y)
 * over whole maps (ties to the lower index); emb is ignored when D = 0 (the
 * semantic term is then 0).  Returns the entry index.  Resets the
 * trajectory state (the store changed). */
uint32_t fmoe_store_add(fmoe_store *s, const float *emb, const float *map);

/* ---- deduplication (fmoe_dedup.c) ---- */
/* argmax_y RDY((emb, map), y) over the held entries (n > 0), ties to the
 * lower index: what fmoe_store_add replaces when the store is full.
 * fmoe_dedup_full computes every entry's RDY (the reference);
 * fmoe_dedup_pruned finds the same entry, with bounds that stop summing an
 * entry's map once it cannot reach the best so far (it calls the reference
 * for non-finite values, a zero query map or d = L); fmoe_dedup, what
 * fmoe_store_add calls, takes past one block of entries the float filter
 * for maps of at most FMOE_COSF_DEDUP_MAX_TERMS terms (fmoe_cosfilter.h),
 * the pruned stages on float sums for longer ones (fmoe_dedup_fstaged),
 * each when it applies (the same entry), else the pruned one.
 * dedup_block_stages / dedup_stages_skipped count the pruned one's work. */
#define FMOE_STAGES 8 /* the map's layers split into at most this many stages between bound checks */
uint32_t fmoe_dedup_full(fmoe_store *s, const float *emb, const float *map);
uint32_t fmoe_dedup_pruned(fmoe_store *s, const float *emb, const float *map);
/* fmoe_dedup_pruned's stages with float sums (fmoe_dedup.c): only the blocks
 * that the float bounds cannot drop are summed in double.  Returns 1 and
 * sets *out to fmoe_dedup_full's entry, or 0 when it does not apply (no
 * float kernels, or the float filter's guards, fmoe_cosfilter.h, or
 * fmoe_dedup_pruned's fail). */
int fmoe_dedup_fstaged(fmoe_store *s, const float *emb, const float *map, uint32_t *out);
/* The same with the map's terms already in s->cols, s->w and s->wf
 * (fmoe_map_terms: nc of them). */
int fmoe_dedup_fstaged_terms(fmoe_store *s, const float *emb, const float *map, uint32_t nc, uint32_t *out);
uint32_t fmoe_dedup(fmoe_store *s, const float *emb, const float *map);

/* Trajectory search (seed 000 Eq. score-map), incremental: reset at the start
 * of an iteration, then observe layers 0, 1, ... in order; each observation
 * adds P_l . m_y[l] (summed over j from 0) to dot[y] and |m_y[l]|^2 to
 * norm2[y] for every entry, and sets score[y].  In order, with the float
 * filter (fmoe_filter.h), only the candidates' dot[y] are brought up to date
 * (fmoe_traj_sync brings every entry) and score[] is not written; the best
 * entry and score are the same. */
void fmoe_traj_reset(fmoe_store *s);
void fmoe_traj_observe(fmoe_store *s, uint32_t l, const float *P);
/* y* = argmax_y dot[y] / (|traj| |m_y prefix|) (0 for a zero vector), ties to
 * the lower index; -1 when empty or nothing observed. */
int fmoe_traj_best(const fmoe_store *s, double *score);

/* delta = clip(1 - score, 0, 1) (seed 000, "Similarity-aware expert selection"). */
double fmoe_delta(double score);
/* order[0..J) = expert ids by probability descending (ties: lower id). */
void fmoe_sort_desc(const float *P, uint32_t J, uint32_t *order);
/* The same order, only as far as it is used (issue 18): a binary heap on
 * (p descending, id ascending) built in O(J), one expert per O(log J) pop.
 * Without NaN that comparison is a strict total order (ids differ; -0 and
 * +0 are equal p, as for fmoe_sort_desc), so any sort gives fmoe_sort_desc's
 * permutation; a row holding a NaN (whose order depends on qsort's
 * algorithm) goes to fmoe_sort_desc.  order has room for J; scratch[J]. */
typedef struct {
    float p;
    uint32_t e;
} fmoe_ranked;
/* order[0..n) = the first n (<= J) of fmoe_sort_desc's order. */
void fmoe_top_desc(const float *P, uint32_t J, uint32_t n, uint32_t *order, fmoe_ranked *scratch);
/* n = fmoe_select_paper(P, fmoe_sort_desc's order, J, delta, K) with order[0..n)
 * that order's first n, taking the experts from the heap one at a time. */
uint32_t fmoe_select_paper_top(const float *P, uint32_t J, double delta, uint32_t K, uint32_t *order,
                               fmoe_ranked *scratch);
/* Paper Eq. expert-prefetch-set: the fewest experts, highest first, whose
 * summed probability >= delta, never fewer than K (at most J). */
uint32_t fmoe_select_paper(const float *P, const uint32_t *order, uint32_t J, double delta, uint32_t K);
/* FineMoE code: k = number of experts whose cumulative sum (descending) is
 * <= delta, clamped to [K, J]. */
uint32_t fmoe_select_code(const float *P, const uint32_t *order, uint32_t J, double delta, uint32_t K);
/* Paper PRI^prefetch = p / (t - l_now); l_now = -1 before layer 0. */
double fmoe_priority_paper(double p, int64_t t, int64_t l_now);
/* FineMoE code: p (1 - (t - start) / (end + 1)) over a call guiding layers
 * [start, end) (end exclusive, as FineMoE's layer_end). */
double fmoe_priority_code(double p, uint32_t t, uint32_t start, uint32_t end);
/* Eviction keys, smallest evicted first: paper PRI^evict = 1 / (p freq), so
 * the victim has the smallest p x freq; code: integer truncation of p x count. */
static inline double fmoe_evict_key_paper(double p, double freq)
{
    return p * freq;
}
double fmoe_evict_key_code(double p, double count);
/* FineMoE's key exactly: size_t(prob x incache_visit_count) with prob a float
 * and the product computed in float32 (task_scheduler.cpp:291-297). */
uint64_t fmoe_evict_key_code_f32(float p, uint64_t count);

#endif
