/* The host backend's expert FFN and dense stand-in: float activations times
 * bf16 weights, plain C (no BLAS), a streaming kernel: the weight rows are
 * read in order, once per op (per 64 token rows), each chunk widened in
 * registers and applied to every token row while the next rows stream in.
 *
 * Its time is therefore roofline-shaped: about weight bytes / memory
 * bandwidth at a few tokens, 2 x params x tokens / the loop's FLOP/s at
 * many, as sim/core/timing.h prices it (docs/real-execution.md gives the
 * measured GB/s and FLOP/s; bench/host_ffn.c measures them).
 *
 * Weight layout: a matrix mapping `in` features to `out` features is
 * stored row-major as [in][out] bf16.  An expert is its matrices back to
 * back: for 3 matrices gate [hidden][ffn], up [hidden][ffn], down
 * [ffn][hidden]; for 2: up [hidden][ffn], down [ffn][hidden].
 * Activation: SiLU(gate) * up (3 matrices), SiLU(up) (2 matrices). */
#ifndef MS_HOST_FFN_H
#define MS_HOST_FFN_H

#include <stddef.h>
#include <stdint.h>

/* bf16 <-> float (round to nearest even). */
float ms_bf16_to_float(uint16_t b);
uint16_t ms_float_to_bf16(float f);

/* y[tokens][out] = x[tokens][in] * W[in][out]. */
void ms_ffn_matmul(const float *x, const uint16_t *w, float *y, uint32_t tokens, uint32_t in, uint32_t out);

/* Scratch of one stream: sized once for max_tokens rows. */
typedef struct {
    float *g, *u; /* [max_tokens][ffn] */
    float *y;     /* [max_tokens][max(hidden, dense_cols)] */
} ms_ffn_scratch;

int ms_ffn_scratch_init(ms_ffn_scratch *s, uint32_t max_tokens, uint32_t ffn, size_t out_cols);
void ms_ffn_scratch_free(ms_ffn_scratch *s);

/* One expert over `tokens` rows of x [tokens][hidden]; the result lands in s->y. */
void ms_ffn_expert(const float *x, const uint16_t *w, uint32_t tokens, uint32_t hidden, uint32_t ffn,
                   uint32_t matrices, ms_ffn_scratch *s);

/* Bytes of one expert's weights (bf16). */
static inline size_t ms_ffn_expert_bytes(uint32_t hidden, uint32_t ffn, uint32_t matrices)
{
    return (size_t)matrices * hidden * ffn * sizeof(uint16_t);
}

#endif
