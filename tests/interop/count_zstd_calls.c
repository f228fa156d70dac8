/* LD_PRELOAD shim for tests/trace_io.cmake: counts ZSTD_decompress calls and
 * prints the count on exit, to check that streaming a trace decompresses
 * every chunk exactly once (the reader's chunk cache at work). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

typedef size_t (*decompress_fn)(void *, size_t, const void *, size_t);

static long calls;

static void report(void)
{
    fprintf(stderr, "ZSTD_decompress calls: %ld\n", calls);
}

size_t ZSTD_decompress(void *dst, size_t dst_cap, const void *src, size_t src_size)
{
    static decompress_fn real;
    if (!real) {
        *(void **)&real = dlsym(RTLD_NEXT, "ZSTD_decompress");
        if (!real)
            abort();
        atexit(report);
    }
    calls++;
    return real(dst, dst_cap, src, src_size);
}
