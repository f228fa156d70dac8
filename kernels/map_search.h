/* fMoE's map search (docs/policies.md; policies/lib/fmoe_store.h): the cosine
 * similarity of a query against every entry of a store, the best entry and
 * its score, ties to the lowest index.  The semantic search is this over the
 * embeddings (dim = D); the trajectory search after l observed layers is this
 * over the first l*J values of every map (stride = L*J, the query is the
 * concatenated P_0..P_{l-1}).
 *
 * A store is n entries, entry y at store + y*stride, of which the first `dim`
 * floats are compared (dim <= stride).  Queries are q rows of `dim` floats.
 * cos(a, b) = a.b / (|a| |b|) summed in double; 0 when either vector is zero
 * (fmoe_cosine).  A hit is (-1, 0) when n = 0 or dim = 0.
 *
 * ms_map_search_ref is the CPU reference (kernels/map_search_ref.c, always
 * built): it sums in fmoe_cosine's order, so its result equals
 * fmoe_semantic_search's bit for bit.  The GPU search (kernels/map_search.cu,
 * only in builds with MS_HAVE_CUDA) sums in a different order: scores agree to
 * ~1e-12 and the index is the reference's unless two entries' scores are that
 * close. */
#ifndef MS_MAP_SEARCH_H
#define MS_MAP_SEARCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the C headers below declare C functions */
#endif

#include "sim/core/err.h"

typedef struct {
    int32_t index; /* best entry, -1 when there is none */
    double score;  /* its cosine similarity */
} ms_map_hit;

void ms_map_search_ref(const float *store, uint32_t n, uint32_t stride, uint32_t dim, const float *queries,
                       uint32_t q, ms_map_hit *out);

/* ---- GPU (MS_HAVE_CUDA) ----
 * upload copies the store to the device once (n*stride floats); search runs
 * q queries (one copy in, two kernels, one copy out, synchronous).  Errors:
 * -1 with a one-line message (no device, a failed CUDA call, dim > stride). */
typedef struct ms_cuda_map_store ms_cuda_map_store;
int ms_cuda_map_store_upload(const float *store, uint32_t n, uint32_t stride, uint32_t dim, ms_cuda_map_store **out,
                             ms_err *err);
int ms_cuda_map_search(ms_cuda_map_store *s, const float *queries, uint32_t q, ms_map_hit *out, ms_err *err);
void ms_cuda_map_store_free(ms_cuda_map_store *s);

#ifdef __cplusplus
}
#endif

#endif
