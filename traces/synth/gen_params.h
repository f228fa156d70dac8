/* Generator params files (`moesim trace gen --params P.ini`, written by
 * `moesim trace fit`): every generator knob plus, optionally, the model shape
 * and a per-layer expert popularity, so a params file alone describes a
 * synthetic trace.
 *
 *   [model]            optional; the trace's shape (gen then needs no --model)
 *   name = NAME        letters, digits, '.', '-', '_' (default "params")
 *   moe_layers = L     required in [model], 1 .. 4096
 *   experts = J        required in [model], 1 .. 512
 *   top_k = K          required in [model], 1 .. J
 *   shared_experts, hidden, vocab   optional (0, 0, 32000)
 *   expert_bytes = B | B0 B1 .. B(L-1)   one value for every layer or L values
 *   dense_bytes  = B | B0 B1 .. B(L-1)   (both required in [model])
 *   [gen]              any knob of docs/generator.md, each at most once
 *   [popularity]       optional; layer0 .. layer(L-1), J non-negative weights
 *                      each (normalised per layer, at least one > 0)
 *   [decode_popularity] optional, the same form: the popularity of decode rows
 *                      (a decode row's preference is its request's tilted by
 *                      decode_popularity / popularity)
 *   [decode_phase2] .. [decode_phase16] optional, the same form, numbered
 *                      without a gap after [decode_popularity]: with P
 *                      sections the decode steps of each request fall in P
 *                      phases (ms_gen_decode_phase in gen.h; P = 2: the
 *                      halves, t > n/2 of n the second) and
 *                      [decode_popularity] is the first phase's.
 *                      [late_decode_popularity] is the older name of
 *                      [decode_phase2]
 *   [lengths]          optional; prompt = P0 P1 .., output = O0 O1 .., one
 *                      entry per request (the same count): request i takes
 *                      entry i mod n instead of lognormal draws
 *   [periods]          optional; period = P0 P1 .. (whole numbers 0 .. 4096),
 *                      repeat = q0 q1 .. (probabilities), the same count:
 *                      request i loops with period entry i mod n, copying
 *                      with probability q (instead of the knobs
 *                      decode_period / period_repeat; period 0 = no loop)
 *
 * A value may continue on indented lines (inih multi-line values): lists are
 * whitespace-separated.  Every error is one line "FILE:LINE: ..." naming the
 * section, key and value: unknown section or key, a key twice, a value out
 * of range or not a number, a list of the wrong length, a missing layer. */
#ifndef MS_GEN_PARAMS_H
#define MS_GEN_PARAMS_H

#include <stdio.h>

#include "sim/core/err.h"
#include "sim/core/profile.h"
#include "traces/synth/gen.h"

typedef struct {
    ms_gen_params p;          /* defaults, then [gen]; pointers into the arrays below */
    int has_model;            /* [model] present */
    ms_model model;           /* valid when has_model */
    uint32_t L, J;            /* shape the [popularity] section was checked against (0 = none) */
    double *popularity;       /* [L][J] or NULL */
    double *decode_popularity; /* [p.decode_phases][L][J] or NULL */
    uint32_t *prompt_lens, *output_lens; /* [n_lens] or NULL */
    uint32_t n_lens;
    uint32_t *periods;        /* [n_periods] or NULL */
    double *period_repeats;   /* [n_periods] or NULL */
    uint32_t n_periods;
    uint64_t *expert_bytes;   /* [L] or NULL */
    uint64_t *dense_bytes;    /* [L] or NULL */
} ms_gen_file;

/* Loads and validates path.  The popularity needs the shape: from [model], or
 * from `shape` (a model given on the command line; it wins over [model] and
 * may be NULL).  On error nothing is left allocated. */
int ms_gen_file_load(const char *path, const ms_model *shape, ms_gen_file *f, ms_err *err);
void ms_gen_file_free(ms_gen_file *f);

/* Writes a params file: comment lines (each line of `comment` prefixed "; "),
 * [model] from `model` with per-layer bytes when given, [gen] with every knob,
 * [popularity], [decode_popularity] and its phases, [lengths] and [periods] when p carries them.  Returns 0 or -1 on a write error. */
int ms_gen_file_write(FILE *out, const char *comment, const ms_model *model, const uint64_t *expert_bytes,
                      const uint64_t *dense_bytes, const ms_gen_params *p);

#endif
