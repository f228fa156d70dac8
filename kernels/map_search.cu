/* The GPU map search (map_search.h): one warp per (query, entry) sums
 * a.b, |a|^2 and |b|^2 in double and writes the cosine; then one block per
 * query takes the argmax, ties to the lowest index. */
#include <cuda_runtime.h>

#include <stdlib.h>

#include "kernels/map_search.h"

#define WARPS_PER_BLOCK 8
#define ARGMAX_THREADS 256

struct ms_cuda_map_store {
    float *store;     /* device: n * stride */
    uint32_t n, stride, dim;
    float *queries;   /* device: cap_q * dim */
    double *scores;   /* device: cap_q * n */
    ms_map_hit *hits; /* device: cap_q */
    uint32_t cap_q;
};

static int cuda_fail(ms_err *err, const char *what, cudaError_t rc)
{
    return ms_fail(err, "map search (cuda): %s: %s (%s)", what, cudaGetErrorString(rc), cudaGetErrorName(rc));
}

#define CU(call, what)                                                                                                \
    do {                                                                                                              \
        cudaError_t rc_ = (call);                                                                                     \
        if (rc_ != cudaSuccess)                                                                                       \
            return cuda_fail(err, what, rc_);                                                                         \
    } while (0)

__global__ void cosine_scores(const float *store, uint32_t n, uint32_t stride, uint32_t dim, const float *queries,
                              double *scores)
{
    uint32_t lane = threadIdx.x % 32;
    uint32_t y = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    uint32_t qi = blockIdx.y;
    if (y >= n)
        return; /* the whole warp leaves together: y is per warp */
    const float *a = queries + (size_t)qi * dim, *b = store + (size_t)y * stride;
    double ab = 0, aa = 0, bb = 0;
    for (uint32_t i = lane; i < dim; i += 32) {
        double x = a[i], z = b[i];
        ab += x * z;
        aa += x * x;
        bb += z * z;
    }
    for (int off = 16; off > 0; off /= 2) {
        ab += __shfl_down_sync(0xffffffffu, ab, off);
        aa += __shfl_down_sync(0xffffffffu, aa, off);
        bb += __shfl_down_sync(0xffffffffu, bb, off);
    }
    if (lane == 0)
        scores[(size_t)qi * n + y] = aa > 0 && bb > 0 ? ab / (sqrt(aa) * sqrt(bb)) : 0.0;
}

/* (s1, i1) beats (s0, i0): a higher score, or the same score at a lower index. */
__device__ static bool better(double s1, int32_t i1, double s0, int32_t i0)
{
    return i0 < 0 || (i1 >= 0 && (s1 > s0 || (s1 == s0 && i1 < i0)));
}

__global__ void argmax_rows(const double *scores, uint32_t n, ms_map_hit *hits)
{
    __shared__ double best_s[ARGMAX_THREADS];
    __shared__ int32_t best_i[ARGMAX_THREADS];
    const double *row = scores + (size_t)blockIdx.x * n;
    double s = 0;
    int32_t idx = -1;
    for (uint32_t y = threadIdx.x; y < n; y += ARGMAX_THREADS) /* ascending: strict > keeps the lowest index */
        if (better(row[y], (int32_t)y, s, idx)) {
            s = row[y];
            idx = (int32_t)y;
        }
    best_s[threadIdx.x] = s;
    best_i[threadIdx.x] = idx;
    __syncthreads();
    for (uint32_t half = ARGMAX_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half &&
            better(best_s[threadIdx.x + half], best_i[threadIdx.x + half], best_s[threadIdx.x], best_i[threadIdx.x])) {
            best_s[threadIdx.x] = best_s[threadIdx.x + half];
            best_i[threadIdx.x] = best_i[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        hits[blockIdx.x].index = best_i[0];
        hits[blockIdx.x].score = best_i[0] < 0 ? 0.0 : best_s[0];
    }
}

extern "C" void ms_cuda_map_store_free(ms_cuda_map_store *s)
{
    if (!s)
        return;
    cudaFree(s->store);
    cudaFree(s->queries);
    cudaFree(s->scores);
    cudaFree(s->hits);
    free(s);
}

static int upload(ms_cuda_map_store *s, const float *store, ms_err *err)
{
    int devices = 0;
    cudaError_t rc = cudaGetDeviceCount(&devices);
    if (rc != cudaSuccess)
        return ms_fail(err, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(rc));
    if (devices < 1)
        return ms_fail(err, "no CUDA device (cudaGetDeviceCount: 0 devices)");
    if (!s->n || !s->dim)
        return 0;
    size_t bytes = (size_t)s->n * s->stride * sizeof(float);
    CU(cudaMalloc((void **)&s->store, bytes), "cudaMalloc of the store");
    CU(cudaMemcpy(s->store, store, bytes, cudaMemcpyHostToDevice), "cudaMemcpy of the store");
    return 0;
}

extern "C" int ms_cuda_map_store_upload(const float *store, uint32_t n, uint32_t stride, uint32_t dim,
                                        ms_cuda_map_store **out, ms_err *err)
{
    *out = NULL;
    if (dim > stride)
        return ms_fail(err, "map search (cuda): dim %u exceeds the entries' stride %u", dim, stride);
    ms_cuda_map_store *s = (ms_cuda_map_store *)ms_xcalloc(1, sizeof *s);
    s->n = n;
    s->stride = stride;
    s->dim = dim;
    if (upload(s, store, err)) {
        ms_cuda_map_store_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

static int reserve(ms_cuda_map_store *s, uint32_t q, ms_err *err)
{
    if (q <= s->cap_q)
        return 0;
    cudaFree(s->queries);
    cudaFree(s->scores);
    cudaFree(s->hits);
    s->queries = NULL;
    s->scores = NULL;
    s->hits = NULL;
    s->cap_q = 0;
    CU(cudaMalloc((void **)&s->queries, (size_t)q * s->dim * sizeof(float)), "cudaMalloc of the queries");
    CU(cudaMalloc((void **)&s->scores, (size_t)q * s->n * sizeof(double)), "cudaMalloc of the scores");
    CU(cudaMalloc((void **)&s->hits, (size_t)q * sizeof(ms_map_hit)), "cudaMalloc of the hits");
    s->cap_q = q;
    return 0;
}

extern "C" int ms_cuda_map_search(ms_cuda_map_store *s, const float *queries, uint32_t q, ms_map_hit *out,
                                  ms_err *err)
{
    if (!s->n || !s->dim) {
        for (uint32_t i = 0; i < q; i++)
            out[i] = ms_map_hit{-1, 0.0};
        return 0;
    }
    if (!q)
        return 0;
    if (q > 65535)
        return ms_fail(err, "map search (cuda): %u queries in one call (at most 65535)", q);
    if (reserve(s, q, err))
        return -1;
    CU(cudaMemcpy(s->queries, queries, (size_t)q * s->dim * sizeof(float), cudaMemcpyHostToDevice),
       "cudaMemcpy of the queries");
    (void)cudaGetLastError(); /* clear an earlier error: the checks below are these launches' */
    dim3 grid((s->n + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK, q);
    cosine_scores<<<grid, WARPS_PER_BLOCK * 32>>>(s->store, s->n, s->stride, s->dim, s->queries, s->scores);
    CU(cudaGetLastError(), "launch of cosine_scores");
    argmax_rows<<<q, ARGMAX_THREADS>>>(s->scores, s->n, s->hits);
    CU(cudaGetLastError(), "launch of argmax_rows");
    CU(cudaMemcpy(out, s->hits, (size_t)q * sizeof(ms_map_hit), cudaMemcpyDeviceToHost),
       "cudaMemcpy of the hits (or a kernel before it)");
    return 0;
}
