/* Expert FFN over bf16 weights (see host_ffn.h): a streaming kernel.
 *
 * y[t][c] = sum_k x[t][k] W[k][c] walks the weight rows k in order and, for
 * a block of output columns, updates every token row of the op from the
 * same widened weights: the weights are read from memory once per block of
 * up to TOK_BLOCK tokens (once per op at decode sizes), while the token
 * rows' partial sums (TOK_BLOCK x col block floats) stay in L1/L2.  Four
 * weight rows are widened (bf16 -> float: a 16-bit shift) into a small
 * stack buffer and folded into y in one pass, so y is loaded and stored a
 * quarter as often as the multiply-adds happen.
 *
 * Compiled at -O3 with contracted multiply-adds and, on x86-64 with GCC,
 * cloned for AVX-512 / AVX2+FMA / baseline (runtime dispatch), so the inner
 * loops vectorise without -march=native or -ffast-math (no reduction is
 * reassociated: every inner loop is an elementwise update). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=fast")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/host_ffn.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MS_CLONES
#endif
#if defined(__GNUC__)
#define MS_INLINE static inline __attribute__((always_inline))
#else
#define MS_INLINE static inline
#endif

#define TOK_BLOCK 64     /* token rows updated per pass over the weights */
#define Y_BLOCK_FLOATS (TOK_BLOCK * 128) /* the y tile of a block: 32 KiB, in L1 */
#define VEC 16           /* columns per register chunk (one AVX-512 vector) */
#define KSTEP 4          /* weight rows folded into y per pass over y */

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

MS_INLINE float bf16f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* y[t][0..n) += sum_j a[t][j] W[k + j][c0 + 0..n) over KSTEP weight rows
 * (w0 = row k at column c0, rows wstride apart), a[t][j] = x[t][k + j]
 * gathered in xa[t * KSTEP + j].  Column chunk by chunk: a chunk of the
 * KSTEP rows is widened into registers once and folded into every token
 * row, so the weight stream advances at the pace of the arithmetic and the
 * memory traffic overlaps it (one pass over the weights for all tokens). */
MS_INLINE void fold_rows(const float *restrict xa, uint32_t tokens, const uint16_t *restrict w0, size_t wstride,
                         float *restrict y, size_t ystride, uint32_t n)
{
    const uint16_t *w1 = w0 + wstride, *w2 = w1 + wstride, *w3 = w2 + wstride;
    uint32_t c = 0;
    for (; c + VEC <= n; c += VEC) {
        float v0[VEC], v1[VEC], v2[VEC], v3[VEC];
        for (uint32_t j = 0; j < VEC; j++) {
            v0[j] = bf16f(w0[c + j]);
            v1[j] = bf16f(w1[c + j]);
            v2[j] = bf16f(w2[c + j]);
            v3[j] = bf16f(w3[c + j]);
        }
        for (uint32_t t = 0; t < tokens; t++) {
            const float *a = xa + (size_t)t * KSTEP;
            float *restrict yt = y + (size_t)t * ystride + c;
            for (uint32_t j = 0; j < VEC; j++)
                yt[j] += a[0] * v0[j] + a[1] * v1[j] + a[2] * v2[j] + a[3] * v3[j];
        }
    }
    for (; c < n; c++)
        for (uint32_t t = 0; t < tokens; t++) {
            const float *a = xa + (size_t)t * KSTEP;
            y[(size_t)t * ystride + c] += a[0] * bf16f(w0[c]) + a[1] * bf16f(w1[c]) + a[2] * bf16f(w2[c]) +
                                          a[3] * bf16f(w3[c]);
        }
}

MS_INLINE void fold_row(const float *restrict x, size_t xstride, uint32_t tokens, const uint16_t *restrict w,
                        float *restrict y, size_t ystride, uint32_t n)
{
    for (uint32_t t = 0; t < tokens; t++) {
        float a = x[(size_t)t * xstride];
        float *restrict yt = y + (size_t)t * ystride;
        for (uint32_t c = 0; c < n; c++)
            yt[c] += a * bf16f(w[c]);
    }
}

/* Columns per block: the block of y (tokens x columns) stays within
 * Y_BLOCK_FLOATS (L1/L2); whole rows when they fit (contiguous streaming). */
static uint32_t col_block(uint32_t tokens, uint32_t out)
{
    if ((size_t)tokens * out <= Y_BLOCK_FLOATS)
        return out;
    uint32_t cb = Y_BLOCK_FLOATS / (tokens ? tokens : 1);
    return cb & ~(uint32_t)(VEC - 1); /* >= 128: TOK_BLOCK x 128 = Y_BLOCK_FLOATS */
}

/* One block: token rows [0, tokens) of x and y, output columns [c0, c0 + nc),
 * accumulated in a contiguous tile (rows of y are `out` apart: a power-of-two
 * stride would map every token row to the same cache sets) and stored once. */
MS_CLONES
static void matmul_block(const float *x, const uint16_t *w, float *y, uint32_t tokens, uint32_t in, uint32_t out,
                         uint32_t c0, uint32_t nc)
{
    float xa[TOK_BLOCK * KSTEP];
    float tile[Y_BLOCK_FLOATS];
    memset(tile, 0, (size_t)tokens * nc * sizeof *tile);
    uint32_t k = 0;
    for (; k + KSTEP <= in; k += KSTEP) {
        for (uint32_t t = 0; t < tokens; t++)
            for (uint32_t j = 0; j < KSTEP; j++)
                xa[t * KSTEP + j] = x[(size_t)t * in + k + j];
        fold_rows(xa, tokens, w + (size_t)k * out + c0, out, tile, nc, nc);
    }
    for (; k < in; k++)
        fold_row(x + k, in, tokens, w + (size_t)k * out + c0, tile, nc, nc);
    for (uint32_t t = 0; t < tokens; t++)
        memcpy(y + (size_t)t * out + c0, tile + (size_t)t * nc, (size_t)nc * sizeof *tile);
}

void ms_ffn_matmul(const float *x, const uint16_t *w, float *y, uint32_t tokens, uint32_t in, uint32_t out)
{
    for (uint32_t t0 = 0; t0 < tokens; t0 += TOK_BLOCK) {
        uint32_t nt = tokens - t0 < TOK_BLOCK ? tokens - t0 : TOK_BLOCK;
        uint32_t cb = col_block(nt, out);
        for (uint32_t c0 = 0; c0 < out; c0 += cb)
            matmul_block(x + (size_t)t0 * in, w, y + (size_t)t0 * out, nt, in, out, c0,
                         out - c0 < cb ? out - c0 : cb);
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
