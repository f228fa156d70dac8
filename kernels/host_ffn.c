/* Expert FFN over bf16 weights (see host_ffn.h).  Compiled at -O3 so that
 * the bf16 widening and the axpy inner loop vectorise without -ffast-math
 * (every reduction is an elementwise axpy, so no reassociation is needed). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_ffn.h"

#define COL_BLOCK 512 /* output columns per block: one converted weight row slice (2 KiB) */

float ms_bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t ms_float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void widen(const uint16_t *restrict src, float *restrict dst, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

static void axpy(float a, const float *restrict x, float *restrict y, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

void ms_ffn_matmul(const float *x, const uint16_t *w, float *y, uint32_t tokens, uint32_t in, uint32_t out)
{
    float wrow[COL_BLOCK];
    for (uint32_t t = 0; t < tokens; t++)
        memset(y + (size_t)t * out, 0, (size_t)out * sizeof *y);
    if (!tokens)
        return;
    for (uint32_t c0 = 0; c0 < out; c0 += COL_BLOCK) {
        uint32_t nc = out - c0 < COL_BLOCK ? out - c0 : COL_BLOCK;
        for (uint32_t k = 0; k < in; k++) {
            widen(w + (size_t)k * out + c0, wrow, nc);
            for (uint32_t t = 0; t < tokens; t++)
                axpy(x[(size_t)t * in + k], wrow, y + (size_t)t * out + c0, nc);
        }
    }
}

int ms_ffn_scratch_init(ms_ffn_scratch *s, uint32_t max_tokens, uint32_t ffn, size_t out_cols)
{
    size_t rows = max_tokens ? max_tokens : 1;
    s->g = malloc(rows * ffn * sizeof(float));
    s->u = malloc(rows * ffn * sizeof(float));
    s->y = malloc(rows * (out_cols ? out_cols : 1) * sizeof(float));
    if (!s->g || !s->u || !s->y) {
        ms_ffn_scratch_free(s);
        return -1;
    }
    return 0;
}

void ms_ffn_scratch_free(ms_ffn_scratch *s)
{
    free(s->g);
    free(s->u);
    free(s->y);
    s->g = s->u = s->y = NULL;
}

static float silu(float v)
{
    return v / (1.0f + expf(-v));
}

void ms_ffn_expert(const float *x, const uint16_t *w, uint32_t tokens, uint32_t hidden, uint32_t ffn,
                   uint32_t matrices, ms_ffn_scratch *s)
{
    size_t mat = (size_t)hidden * ffn;
    size_t n = (size_t)tokens * ffn;
    if (matrices == 3) {
        ms_ffn_matmul(x, w, s->g, tokens, hidden, ffn);
        ms_ffn_matmul(x, w + mat, s->u, tokens, hidden, ffn);
        for (size_t i = 0; i < n; i++)
            s->u[i] *= silu(s->g[i]);
    } else {
        ms_ffn_matmul(x, w, s->u, tokens, hidden, ffn);
        for (size_t i = 0; i < n; i++)
            s->u[i] = silu(s->u[i]);
    }
    ms_ffn_matmul(s->u, w + (matrices - 1) * mat, s->y, tokens, ffn, hidden);
}
