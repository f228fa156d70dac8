/* Segment-level routing consistency, SRP and SCH (definitions in
 * segment.h).  SRP keeps each window's per-key counts and the number of keys
 * at each count, so sliding by one row costs the row's cells plus m.  SCH
 * simulates the one cache size it reports with the cached keys in a binary
 * heap ordered by (remaining uses in the window, last use): O(log C) per
 * access and per use entering the window. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/stats/segment.h"

static const uint32_t windows[MS_SEG_N_WINDOWS] = {4, 16, 64, 256};
static const double rhos[MS_SEG_N_RHOS] = {2};

/* ---- SRP ---- */

static void count_row(const int32_t *row, uint32_t width, uint32_t *cnt, uint64_t *occ, int dir)
{
    for (uint32_t c = 0; c < width; c++) {
        if (row[c] < 0)
            continue;
        uint32_t *n = &cnt[row[c]];
        if (*n)
            occ[*n]--;
        *n = dir > 0 ? *n + 1 : *n - 1;
        if (*n)
            occ[*n]++;
    }
}

uint64_t ms_srp_windows(const int32_t *keys, uint32_t T, uint32_t width, uint32_t m, uint32_t *cnt,
                        uint64_t *hist)
{
    if (m < 1 || T < m)
        return 0;
    uint64_t *occ = ms_xcalloc((size_t)m + 1, sizeof *occ); /* keys at count f in the window */
    for (uint32_t r = 0; r + 1 < m; r++)
        count_row(keys + (size_t)r * width, width, cnt, occ, +1);
    for (uint32_t p = 0; p + m <= T; p++) {
        count_row(keys + (size_t)(p + m - 1) * width, width, cnt, occ, +1);
        for (uint32_t f = 1; f <= m; f++)
            hist[f] += occ[f];
        count_row(keys + (size_t)p * width, width, cnt, occ, -1);
    }
    for (uint32_t r = T - m + 1; r < T; r++)
        count_row(keys + (size_t)r * width, width, cnt, occ, -1);
    free(occ);
    return (uint64_t)(T - m + 1);
}

double ms_srp_from_hist(const uint64_t *hist, uint32_t m, uint64_t windows_n, uint64_t n_keys)
{
    if (!windows_n)
        return NAN;
    double acts = 0;
    for (uint32_t f = 1; f <= m; f++)
        acts += (double)f * (double)hist[f];
    /* threshold 0: every (window, key) predicted */
    double best = 2 * acts / fmax(1, (double)m * (double)windows_n * (double)n_keys + acts);
    double matches = 0, preds = 0;
    for (uint32_t a = m; a >= 1; a--) {
        matches += (double)a * (double)hist[a];
        preds += (double)m * (double)hist[a];
        double f1 = 2 * matches / fmax(1, preds + acts);
        if (f1 > best)
            best = f1;
    }
    return best;
}

/* ---- SCH ---- */

typedef struct {
    uint32_t n_keys;
    int32_t *cnt;   /* [n_keys] uses in the window not yet served */
    uint64_t *ts;   /* [n_keys] last use, 0 = never */
    int32_t *pos;   /* [n_keys] heap index, -1 = not cached */
    uint8_t *seen;  /* [n_keys] used earlier in the sequence */
    uint32_t *heap; /* [cap] cached keys, the next victim first */
    uint32_t cap, size;
    uint64_t clock;
    uint8_t *hit;   /* [width] */
} sch_state;

static void sch_init(sch_state *s, uint32_t n_keys, uint32_t width, uint64_t entries)
{
    memset(s, 0, sizeof *s);
    s->n_keys = n_keys;
    s->cap = (uint32_t)(entries < n_keys ? entries : n_keys);
    s->cnt = ms_xcalloc(n_keys, sizeof *s->cnt);
    s->ts = ms_xcalloc(n_keys, sizeof *s->ts);
    s->pos = ms_xcalloc(n_keys, sizeof *s->pos);
    for (uint32_t k = 0; k < n_keys; k++)
        s->pos[k] = -1;
    s->seen = ms_xcalloc(n_keys, 1);
    s->heap = ms_xcalloc(s->cap ? s->cap : 1, sizeof *s->heap);
    s->hit = ms_xcalloc(width ? width : 1, 1);
}

static void sch_free(sch_state *s)
{
    free(s->cnt);
    free(s->ts);
    free(s->pos);
    free(s->seen);
    free(s->heap);
    free(s->hit);
}

/* a is evicted before b: fewer remaining uses, then used longer ago */
static int before(const sch_state *s, uint32_t a, uint32_t b)
{
    return s->cnt[a] != s->cnt[b] ? s->cnt[a] < s->cnt[b] : s->ts[a] < s->ts[b];
}

static void heap_put(sch_state *s, uint32_t i, uint32_t key)
{
    s->heap[i] = key;
    s->pos[key] = (int32_t)i;
}

static void heap_fix(sch_state *s, uint32_t i)
{
    uint32_t key = s->heap[i];
    while (i > 0 && before(s, key, s->heap[(i - 1) / 2])) {
        heap_put(s, i, s->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= s->size)
            break;
        if (c + 1 < s->size && before(s, s->heap[c + 1], s->heap[c]))
            c++;
        if (!before(s, s->heap[c], key))
            break;
        heap_put(s, i, s->heap[c]);
        i = c;
    }
    heap_put(s, i, key);
}

static void heap_insert(sch_state *s, uint32_t key)
{
    heap_put(s, s->size++, key);
    heap_fix(s, s->size - 1);
}

static void heap_evict_first(sch_state *s)
{
    uint32_t victim = s->heap[0];
    s->pos[victim] = -1;
    if (--s->size) {
        heap_put(s, 0, s->heap[s->size]);
        heap_fix(s, 0);
    }
}

static void window_add_row(sch_state *s, const int32_t *row, uint32_t width)
{
    for (uint32_t c = 0; c < width; c++)
        if (row[c] >= 0) {
            s->cnt[row[c]]++;
            if (s->pos[row[c]] >= 0)
                heap_fix(s, (uint32_t)s->pos[row[c]]);
        }
}

/* Hits of one batch decided at its start (free slots count as hits). */
static uint64_t batch_hits(sch_state *s, const int32_t *row, uint32_t width, uint32_t *distinct, uint64_t *acc)
{
    uint64_t hits = 0;
    for (uint32_t c = 0; c < width; c++) {
        int32_t k = row[c];
        if (k < 0)
            continue;
        (*acc)++;
        if (!s->seen[k]) {
            s->seen[k] = 1;
            s->hit[c] = *distinct < s->cap;
            (*distinct)++;
        } else {
            s->hit[c] = s->pos[k] >= 0;
        }
        hits += s->hit[c];
    }
    return hits;
}

static void batch_serve(sch_state *s, const int32_t *row, uint32_t width)
{
    for (uint32_t c = 0; c < width; c++) {
        int32_t k = row[c];
        if (k < 0)
            continue;
        s->cnt[k]--;
        s->ts[k] = ++s->clock;
        if (s->pos[k] >= 0) {
            heap_fix(s, (uint32_t)s->pos[k]);
            continue;
        }
        if (s->size == s->cap)
            heap_evict_first(s);
        heap_insert(s, (uint32_t)k);
    }
}

static void sch_reset(sch_state *s, const int32_t *keys, size_t cells)
{
    for (size_t i = 0; i < cells; i++)
        if (keys[i] >= 0) {
            s->cnt[keys[i]] = 0;
            s->ts[keys[i]] = 0;
            s->pos[keys[i]] = -1;
            s->seen[keys[i]] = 0;
        }
    s->size = 0;
    s->clock = 0;
}

static uint64_t sch_run(sch_state *s, const int32_t *keys, uint32_t T, uint32_t width, uint32_t m,
                        uint64_t *accesses)
{
    uint64_t hits = 0, acc = 0;
    uint32_t distinct = 0;
    for (uint32_t r = 0; r < T && r < m; r++)
        window_add_row(s, keys + (size_t)r * width, width);
    for (uint32_t i = 0; i < T; i++) {
        const int32_t *row = keys + (size_t)i * width;
        hits += batch_hits(s, row, width, &distinct, &acc);
        batch_serve(s, row, width);
        if ((uint64_t)i + m < T)
            window_add_row(s, keys + (size_t)(i + m) * width, width);
    }
    sch_reset(s, keys, (size_t)T * width);
    *accesses = acc;
    return hits;
}

uint64_t ms_sch_sequence(const int32_t *keys, uint32_t T, uint32_t width, uint32_t n_keys, uint32_t m,
                         uint64_t entries, uint64_t *accesses)
{
    sch_state s;
    sch_init(&s, n_keys, width, entries);
    uint64_t hits = sch_run(&s, keys, T, width, m, accesses);
    sch_free(&s);
    return hits;
}

/* ---- the accumulator ---- */

struct ms_segment {
    uint32_t L, J, K;
    uint32_t *cnt;                               /* [L*J] SRP window counts (zero between calls) */
    uint64_t *hist[MS_SEG_N_WINDOWS];            /* [m + 1] */
    uint64_t n_windows[MS_SEG_N_WINDOWS];
    sch_state sch[MS_SEG_N_RHOS];
    double sch_sum[MS_SEG_N_WINDOWS][MS_SEG_N_RHOS]; /* sum of per-request hit rates */
    uint64_t sch_seqs;                           /* requests with an access */
    int32_t *keys;                               /* one request's keys */
    size_t keys_cap;
};

int ms_segment_window_index(double m)
{
    for (int i = 0; i < MS_SEG_N_WINDOWS; i++)
        if (m == windows[i])
            return i;
    return -1;
}

int ms_segment_rho_index(double rho)
{
    for (int i = 0; i < MS_SEG_N_RHOS; i++)
        if (rho == rhos[i])
            return i;
    return -1;
}

uint32_t ms_segment_window(int i)
{
    return windows[i];
}

double ms_segment_rho(int i)
{
    return rhos[i];
}

static uint64_t cache_entries(const ms_segment *sg, double rho)
{
    return (uint64_t)llround(rho * sg->K * sg->L);
}

ms_segment *ms_segment_new(uint32_t L, uint32_t J, uint32_t K, ms_err *err)
{
    if (!L || !J || !K || (uint64_t)L * J > (1u << 26)) {
        ms_fail(err, "segment: %u layers x %u experts, top-%u: need 1 .. 2^26 (layer, expert) pairs and K >= 1", L,
                J, K);
        return NULL;
    }
    ms_segment *sg = ms_xcalloc(1, sizeof *sg);
    sg->L = L;
    sg->J = J;
    sg->K = K;
    sg->cnt = ms_xcalloc((size_t)L * J, sizeof *sg->cnt);
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
        sg->hist[w] = ms_xcalloc((size_t)windows[w] + 1, sizeof *sg->hist[w]);
    for (int r = 0; r < MS_SEG_N_RHOS; r++)
        sch_init(&sg->sch[r], L * J, L * K, cache_entries(sg, rhos[r]));
    return sg;
}

/* The request's rows as keys l*J + id, -1 for missing cells. */
static const int32_t *request_keys(ms_segment *sg, const ms_request *req)
{
    size_t cells = (size_t)req->n_rows * sg->L * sg->K;
    if (cells > sg->keys_cap) {
        free(sg->keys);
        sg->keys = ms_xcalloc(cells, sizeof *sg->keys);
        sg->keys_cap = cells;
    }
    for (size_t i = 0; i < cells; i++) {
        uint32_t l = (uint32_t)(i / sg->K % sg->L);
        int32_t id = req->topk_ids[i];
        sg->keys[i] = id < 0 ? -1 : (int32_t)(l * sg->J + (uint32_t)id);
    }
    return sg->keys;
}

void ms_segment_add(ms_segment *sg, const ms_request *req)
{
    if (!req->n_rows)
        return;
    const int32_t *keys = request_keys(sg, req);
    uint32_t width = sg->L * sg->K;
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
        sg->n_windows[w] += ms_srp_windows(keys, req->n_rows, width, windows[w], sg->cnt, sg->hist[w]);
    double rate[MS_SEG_N_WINDOWS][MS_SEG_N_RHOS];
    uint64_t acc = 0;
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
        for (int r = 0; r < MS_SEG_N_RHOS; r++) {
            uint64_t hits = sch_run(&sg->sch[r], keys, req->n_rows, width, windows[w], &acc);
            rate[w][r] = acc ? (double)hits / (double)acc : 0;
        }
    if (!acc)
        return;
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
        for (int r = 0; r < MS_SEG_N_RHOS; r++)
            sg->sch_sum[w][r] += rate[w][r];
    sg->sch_seqs++;
}

void ms_segment_free(ms_segment *sg)
{
    if (!sg)
        return;
    free(sg->cnt);
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
        free(sg->hist[w]);
    for (int r = 0; r < MS_SEG_N_RHOS; r++)
        sch_free(&sg->sch[r]);
    free(sg->keys);
    free(sg);
}

double ms_segment_srp(const ms_segment *sg, uint32_t m)
{
    int w = ms_segment_window_index(m);
    if (w < 0)
        return NAN;
    return ms_srp_from_hist(sg->hist[w], m, sg->n_windows[w], (uint64_t)sg->L * sg->J);
}

double ms_segment_sch(const ms_segment *sg, uint32_t m, double rho)
{
    int w = ms_segment_window_index(m), r = ms_segment_rho_index(rho);
    if (w < 0 || r < 0 || !sg->sch_seqs)
        return NAN;
    return sg->sch_sum[w][r] / (double)sg->sch_seqs;
}

static void json_number(cJSON *o, const char *name, double v)
{
    if (isnan(v))
        cJSON_AddNullToObject(o, name);
    else
        cJSON_AddNumberToObject(o, name, v);
}

cJSON *ms_segment_to_json(const ms_segment *sg)
{
    cJSON *o = cJSON_CreateObject();
    char name[32];
    cJSON *srp = cJSON_AddObjectToObject(o, "srp");
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++) {
        snprintf(name, sizeof name, "%u", windows[w]);
        json_number(srp, name, ms_segment_srp(sg, windows[w]));
    }
    for (int r = 0; r < MS_SEG_N_RHOS; r++) {
        snprintf(name, sizeof name, "sch_rho_%g", rhos[r]);
        cJSON *sch = cJSON_AddObjectToObject(o, name);
        for (int w = 0; w < MS_SEG_N_WINDOWS; w++) {
            snprintf(name, sizeof name, "%u", windows[w]);
            json_number(sch, name, ms_segment_sch(sg, windows[w], rhos[r]));
        }
    }
    return o;
}

static void print_value(FILE *out, double v)
{
    if (isnan(v))
        fprintf(out, "     -");
    else
        fprintf(out, " %.3f", v);
}

void ms_segment_print(const ms_segment *sg, FILE *out)
{
    fprintf(out, "segment consistency (arXiv 2505.16056; rows of a request in order), window m =");
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
        fprintf(out, " %5u", windows[w]);
    fprintf(out, "\n  SRP (best segment-router F1):");
    for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
        print_value(out, ms_segment_srp(sg, windows[w]));
    fprintf(out, "\n");
    for (int r = 0; r < MS_SEG_N_RHOS; r++) {
        fprintf(out, "  SCH rho=%g (global cache %llu):", rhos[r], (unsigned long long)cache_entries(sg, rhos[r]));
        for (int w = 0; w < MS_SEG_N_WINDOWS; w++)
            print_value(out, ms_segment_sch(sg, windows[w], rhos[r]));
        fprintf(out, "\n");
    }
}
