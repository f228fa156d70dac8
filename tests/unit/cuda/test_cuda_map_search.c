/* The GPU map search (kernels/map_search.cu) equals the CPU reference
 * (kernels/map_search_ref.c, itself equal to fmoe_store's search): the same
 * index unless the two entries' reference scores tie within 1e-6, scores
 * within 1e-6; duplicated entries tie exactly and go to the lower index; a
 * zero query gives entry 0 with score 0.  Exits 77 (skipped) without a device. */
#include <stdint.h>

#include "check.h"
#include "kernels/cuda_backend.h"
#include "kernels/map_search.h"

static uint64_t rng = 12345;

static float uniform(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static double ref_score(const float *store, uint32_t stride, uint32_t dim, uint32_t y, const float *query)
{
    ms_map_hit h;
    ms_map_search_ref(store + (size_t)y * stride, 1, stride, dim, query, 1, &h);
    return h.score;
}

static int search_gpu(const float *store, uint32_t n, uint32_t stride, uint32_t dim, const float *queries,
                      uint32_t q, ms_map_hit *out)
{
    ms_cuda_map_store *s = NULL;
    ms_err err;
    if (ms_cuda_map_store_upload(store, n, stride, dim, &s, &err) || ms_cuda_map_search(s, queries, q, out, &err)) {
        fprintf(stderr, "gpu map search: %s\n", err.msg);
        ms_cuda_map_store_free(s);
        return -1;
    }
    ms_cuda_map_store_free(s);
    return 0;
}

/* n random entries (stride >= dim, the padding poisoned), q random queries;
 * `dups`: entry n/2 copies entry n/4 and query 0 equals it. */
static void check_random(uint32_t n, uint32_t stride, uint32_t dim, uint32_t q, int dups)
{
    float *store = malloc(sizeof(float) * n * stride), *queries = malloc(sizeof(float) * dim * q);
    for (size_t i = 0; i < (size_t)n * stride; i++)
        store[i] = i % stride < dim ? uniform() : 1e30f;
    for (size_t i = 0; i < (size_t)dim * q; i++)
        queries[i] = uniform();
    if (dups) {
        memcpy(store + (size_t)(n / 2) * stride, store + (size_t)(n / 4) * stride, sizeof(float) * dim);
        memcpy(queries, store + (size_t)(n / 4) * stride, sizeof(float) * dim);
    }
    ms_map_hit *ref = malloc(sizeof *ref * q), *gpu = malloc(sizeof *gpu * q);
    ms_map_search_ref(store, n, stride, dim, queries, q, ref);
    for (uint32_t i = 0; i < q; i++)
        gpu[i] = (ms_map_hit){-7, -7};
    CHECK(search_gpu(store, n, stride, dim, queries, q, gpu) == 0);
    for (uint32_t i = 0; i < q; i++) {
        const float *qi = queries + (size_t)i * dim;
        CHECK_NEAR(gpu[i].score, ref[i].score, 1e-6);
        if (gpu[i].index != ref[i].index) {
            CHECK(gpu[i].index >= 0 && gpu[i].index < (int32_t)n);
            if (gpu[i].index >= 0 && gpu[i].index < (int32_t)n)
                CHECK_NEAR(ref_score(store, stride, dim, (uint32_t)gpu[i].index, qi), ref[i].score, 1e-6);
        }
    }
    if (dups) {
        CHECK_EQ_INT(ref[0].index, n / 4);
        CHECK_EQ_INT(gpu[0].index, n / 4); /* exact tie with n/2: the lower index */
        CHECK_NEAR(gpu[0].score, 1.0, 1e-6);
    }
    free(store);
    free(queries);
    free(ref);
    free(gpu);
}

static void check_edges(void)
{
    float store[3 * 4], zero[4] = {0, 0, 0, 0};
    for (int i = 0; i < 12; i++)
        store[i] = uniform();
    ms_map_hit h = {-7, -7};
    CHECK(search_gpu(store, 3, 4, 4, zero, 1, &h) == 0);
    CHECK_EQ_INT(h.index, 0);
    CHECK(h.score == 0.0);
    h = (ms_map_hit){-7, -7};
    CHECK(search_gpu(store, 0, 4, 4, store, 1, &h) == 0);
    CHECK_EQ_INT(h.index, -1);
    ms_cuda_map_store *s = NULL;
    ms_err err;
    CHECK(ms_cuda_map_store_upload(store, 3, 2, 4, &s, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "dim 4 exceeds the entries' stride 2");
    CHECK(s == NULL);
}

int main(void)
{
    ms_err err;
    if (!ms_cuda_available(&err)) {
        CHECK_STR_CONTAINS(err.msg, "no CUDA device (cudaGetDeviceCount: ");
        CHECK(!strchr(err.msg, '\n'));
        if (ms_check_failures)
            CHECK_DONE();
        printf("%s: skipped\n", err.msg);
        return 77;
    }
    check_random(1, 1, 1, 1, 0);
    check_random(13, 8, 5, 3, 0);
    check_random(1000, 1440, 300, 7, 1);  /* trajectory-shaped: 24 layers x 60 experts, 5 observed */
    check_random(5000, 400, 384, 16, 1);  /* semantic: MiniLM embeddings, padded rows */
    check_random(20000, 64, 64, 2, 1);
    check_edges();
    CHECK_DONE();
}
