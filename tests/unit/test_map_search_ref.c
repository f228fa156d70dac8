/* The CPU reference of the map search (kernels/map_search.h) equals fMoE's
 * own searches (policies/lib/fmoe_store.h) on random stores: the semantic search
 * (index exact, score within 1e-6, in fact bit-equal) and the trajectory
 * search after each observed layer (index exact, score within 1e-6); ties
 * and zero vectors go the same way. */
#include <stdint.h>

#include "check.h"
#include "kernels/map_search.h"
#include "policies/lib/fmoe_store.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static void fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = uniform();
}

/* Semantic search over n random embeddings of size D, q random queries. */
static void check_semantic(uint32_t n, uint32_t D, uint32_t q)
{
    fmoe_store s;
    fmoe_store_init(&s, n, 2, 3, D, 1);
    float *emb = malloc(sizeof(float) * D), map[6] = {0};
    for (uint32_t y = 0; y < n; y++) {
        fill(emb, D);
        fmoe_store_add(&s, emb, map);
    }
    float *queries = malloc(sizeof(float) * D * q);
    fill(queries, (size_t)D * q);
    ms_map_hit *hits = malloc(sizeof *hits * q);
    float *rows = malloc(sizeof(float) * D * n); /* the store's embeddings, entry by entry */
    for (uint32_t y = 0; y < n; y++)
        fmoe_store_get_emb(&s, y, rows + (size_t)y * D);
    ms_map_search_ref(rows, s.n, D, D, queries, q, hits);
    for (uint32_t i = 0; i < q; i++) {
        double score = -9;
        int best = fmoe_semantic_search(&s, queries + (size_t)i * D, &score);
        CHECK_EQ_INT(hits[i].index, best);
        CHECK_NEAR(hits[i].score, score, 1e-6);
        CHECK(hits[i].score == score); /* same sums in the same order */
    }
    fmoe_store_free(&s);
    free(emb);
    free(rows);
    free(queries);
    free(hits);
}

/* Trajectory search: after observing layers 0..l-1 of a random trajectory,
 * the best entry over the maps' first l*J values. */
static void check_trajectory(uint32_t n, uint32_t L, uint32_t J)
{
    fmoe_store s;
    fmoe_store_init(&s, n, L, J, 0, 1);
    float *map = malloc(sizeof(float) * L * J), *traj = malloc(sizeof(float) * L * J);
    for (uint32_t y = 0; y < n; y++) {
        fill(map, (size_t)L * J);
        fmoe_store_add(&s, NULL, map);
    }
    fill(traj, (size_t)L * J);
    float *maps = malloc(sizeof(float) * L * J * n); /* the store's maps, entry by entry */
    for (uint32_t y = 0; y < n; y++)
        fmoe_store_get_map(&s, y, maps + (size_t)y * L * J);
    fmoe_traj_reset(&s);
    for (uint32_t l = 0; l < L; l++) {
        fmoe_traj_observe(&s, l, traj + (size_t)l * J);
        double score = -9;
        int best = fmoe_traj_best(&s, &score);
        ms_map_hit hit;
        ms_map_search_ref(maps, s.n, L * J, (l + 1) * J, traj, 1, &hit);
        CHECK_EQ_INT(hit.index, best);
        CHECK_NEAR(hit.score, score, 1e-6);
    }
    fmoe_store_free(&s);
    free(map);
    free(maps);
    free(traj);
}

/* Duplicated entries tie: the lower index wins; a zero query scores 0 against
 * all, so entry 0; a zero entry scores 0. */
static void check_ties_and_zeros(void)
{
    enum { N = 6, D = 5 };
    fmoe_store s;
    fmoe_store_init(&s, N, 1, 1, D, 1);
    float e[N][D], map[1] = {0};
    for (int y = 0; y < N; y++)
        fill(e[y], D);
    memcpy(e[4], e[2], sizeof e[2]); /* 2 and 4 equal */
    memset(e[1], 0, sizeof e[1]);    /* a zero entry */
    for (int y = 0; y < N; y++)
        fmoe_store_add(&s, e[y], map);
    float q[3][D];
    memcpy(q[0], e[4], sizeof q[0]); /* matches 2 and 4 exactly */
    memset(q[1], 0, sizeof q[1]);
    for (int i = 0; i < D; i++)
        q[2][i] = -e[2][i]; /* its best is some other entry, or the zero entry */
    ms_map_hit hits[3];
    ms_map_search_ref(&e[0][0], N, D, D, &q[0][0], 3, hits);
    CHECK_EQ_INT(hits[0].index, 2);
    CHECK_NEAR(hits[0].score, 1.0, 1e-6);
    CHECK_EQ_INT(hits[1].index, 0);
    CHECK(hits[1].score == 0.0);
    for (int i = 0; i < 3; i++) {
        double score;
        CHECK_EQ_INT(hits[i].index, fmoe_semantic_search(&s, q[i], &score));
        CHECK(hits[i].score == score);
    }
    fmoe_store_free(&s);
}

static void check_empty(void)
{
    float v[4] = {1, 2, 3, 4};
    ms_map_hit hit = {7, 7};
    ms_map_search_ref(v, 0, 4, 4, v, 1, &hit);
    CHECK_EQ_INT(hit.index, -1);
    CHECK(hit.score == 0.0);
    hit = (ms_map_hit){7, 7};
    ms_map_search_ref(v, 1, 4, 0, v, 1, &hit);
    CHECK_EQ_INT(hit.index, -1);
}

int main(void)
{
    check_semantic(1, 1, 3);
    check_semantic(5, 7, 4);
    check_semantic(100, 64, 8);
    check_semantic(300, 384, 4);
    check_trajectory(50, 6, 8);
    check_trajectory(200, 24, 60);
    check_ties_and_zeros();
    check_empty();
    CHECK_DONE();
}
