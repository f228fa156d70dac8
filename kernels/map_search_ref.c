/* The CPU reference of the map search (map_search.h): fmoe_cosine's sums in
 * its order, fmoe_semantic_search's argmax (strictly greater wins, so ties go
 * to the lowest index). */
#include "kernels/map_search.h"

#include <math.h>
#include <stddef.h>

static double cosine_ref(const float *a, const float *b, uint32_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (uint32_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / (sqrt(aa) * sqrt(bb)) : 0.0;
}

static ms_map_hit search_one(const float *store, uint32_t n, uint32_t stride, uint32_t dim, const float *query)
{
    ms_map_hit hit = {-1, 0.0};
    if (!n || !dim)
        return hit;
    for (uint32_t y = 0; y < n; y++) {
        double c = cosine_ref(query, store + (size_t)y * stride, dim);
        if (hit.index < 0 || c > hit.score) {
            hit.index = (int32_t)y;
            hit.score = c;
        }
    }
    return hit;
}

void ms_map_search_ref(const float *store, uint32_t n, uint32_t stride, uint32_t dim, const float *queries,
                       uint32_t q, ms_map_hit *out)
{
    for (uint32_t i = 0; i < q; i++)
        out[i] = search_one(store, n, stride, dim, queries + (size_t)i * dim);
}
