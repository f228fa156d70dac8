/* bench_host_ffn: the host backend's expert FFN (kernels/host_ffn.h) alone.
 * Usage: bench_host_ffn [hidden ffn matrices [reps]]  (default: Mixtral at
 * expert scale 1/16: 4096 896 3).  Prints, per token count, the median
 * seconds of one expert, the weight bytes streamed per second and the
 * GFLOP/s (2 x params x tokens / s).  matrices 1: one [hidden][ffn] matmul
 * (the dense stand-in's shape, e.g. 4096 10250 1). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_clock.h"
#include "kernels/host_ffn.h"

int main(int argc, char **argv)
{
    unsigned hidden = argc > 3 ? (unsigned)atoi(argv[1]) : 4096, ffn = argc > 3 ? (unsigned)atoi(argv[2]) : 896;
    unsigned mats = argc > 3 ? (unsigned)atoi(argv[3]) : 3;
    int reps = argc > 4 ? atoi(argv[4]) : 7;
    unsigned toks[] = {1, 2, 4, 8, 16, 32, 64, 128};
    unsigned maxt = 128;
    size_t elems = (size_t)mats * hidden * ffn;
    uint16_t *w = malloc(elems * 2);
    float *x = malloc((size_t)maxt * hidden * sizeof *x);
    ms_ffn_scratch s;
    if (!w || !x || ms_ffn_scratch_init(&s, maxt, ffn, ffn > hidden ? ffn : hidden)) {
        fprintf(stderr, "bench_host_ffn: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < elems; i++)
        w[i] = ms_float_to_bf16((float)((i * 2654435761u) % 1000) * 1e-5f - 0.005f);
    for (size_t i = 0; i < (size_t)maxt * hidden; i++)
        x[i] = (float)(i % 97) * 0.01f;
    printf("hidden %u ffn %u matrices %u: %.1f MiB of bf16 weights\n", hidden, ffn, mats, elems * 2 / 1048576.0);
    printf("%7s %12s %10s %10s\n", "tokens", "seconds", "GB/s", "GFLOP/s");
    for (size_t i = 0; i < sizeof toks / sizeof *toks; i++) {
        double t[64];
        for (int r = 0; r < reps && r < 64; r++) {
            double t0 = bench_now_s();
            if (mats == 1)
                ms_ffn_matmul(x, w, s.y, toks[i], hidden, ffn);
            else
                ms_ffn_expert(x, w, toks[i], hidden, ffn, mats, &s);
            t[r] = bench_now_s() - t0;
        }
        double med = bench_median(t, (size_t)reps);
        printf("%7u %12.6f %10.2f %10.2f\n", toks[i], med, elems * 2 / med / 1e9, 2.0 * elems * toks[i] / med / 1e9);
    }
    ms_ffn_scratch_free(&s);
    free(w);
    free(x);
    return 0;
}
