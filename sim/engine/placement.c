/* Expert placement on GPUs (placement.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/placement.h"

ms_place_kind ms_placement_kind(const char *spec)
{
    if (!spec || !*spec || !strcmp(spec, "round-robin"))
        return MS_PLACE_ROUND_ROBIN;
    if (!strcmp(spec, "layer"))
        return MS_PLACE_LAYER;
    if (!strcmp(spec, "balanced"))
        return MS_PLACE_BALANCED;
    return MS_PLACE_FILE;
}

/* One layer's experts, by decreasing load (ties: lower id), each onto the
 * least loaded GPU so far (ties: fewer experts, then lower GPU). */
static void place_balanced_layer(uint32_t J, uint32_t G, const uint64_t *load, uint8_t *gpu_of)
{
    uint32_t *order = ms_xcalloc(J, sizeof *order);
    uint64_t *gload = ms_xcalloc(G, sizeof *gload);
    uint32_t *gn = ms_xcalloc(G, sizeof *gn);
    for (uint32_t i = 0; i < J; i++) {
        uint32_t j = i;
        while (j > 0 && load[order[j - 1]] < load[i]) { /* stable insertion: equal loads keep id order */
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (uint32_t i = 0; i < J; i++) {
        uint32_t best = 0;
        for (uint32_t g = 1; g < G; g++)
            if (gload[g] < gload[best] || (gload[g] == gload[best] && gn[g] < gn[best]))
                best = g;
        gpu_of[order[i]] = (uint8_t)best;
        gload[best] += load[order[i]];
        gn[best]++;
    }
    free(order);
    free(gload);
    free(gn);
}

void ms_placement_fill(ms_place_kind kind, uint32_t L, uint32_t J, uint32_t G, const uint64_t *load, uint8_t *gpu_of)
{
    for (uint32_t l = 0; l < L; l++) {
        if (kind == MS_PLACE_BALANCED) {
            place_balanced_layer(J, G, load + (size_t)l * J, gpu_of + (size_t)l * J);
            continue;
        }
        for (uint32_t e = 0; e < J; e++) {
            size_t x = (size_t)l * J + e;
            gpu_of[x] = (uint8_t)(kind == MS_PLACE_LAYER ? (uint64_t)l * G / L : x % G);
        }
    }
}

/* A whole number in [0, max) at *p (digits only), advancing *p; -1 when
 * there is none or it is out of range. */
static long long read_index(const char **p, const char *end, unsigned long long max)
{
    const char *s = *p;
    unsigned long long v = 0;
    if (s >= end || *s < '0' || *s > '9')
        return -1;
    while (s < end && *s >= '0' && *s <= '9') {
        v = v * 10 + (unsigned long long)(*s - '0');
        if (v > 1000000000ULL)
            return -1;
        s++;
    }
    *p = s;
    return v < max ? (long long)v : -2;
}

static void trim(const char **b, const char **e)
{
    while (*b < *e && (**b == ' ' || **b == '\t'))
        (*b)++;
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r'))
        (*e)--;
}

/* The line [b, e) for a message: at most 60 bytes, other than printable
 * ASCII shown as '?'. */
static void snippet(const char *b, const char *e, char *out, size_t cap)
{
    size_t n = 0;
    for (; b < e && n + 1 < cap && n < 60; b++)
        out[n++] = (*b >= 0x20 && *b < 0x7f) ? *b : '?';
    out[n] = '\0';
}

/* One line "layer,expert,gpu" into gpu_of; 0 or -1 with the reason. */
static int parse_line(const char *b, const char *e, uint32_t L, uint32_t J, uint32_t G, uint8_t *gpu_of,
                      uint8_t *seen, char *why, size_t n)
{
    const char *p = b;
    long long l = read_index(&p, e, L);
    if (l < 0 || p >= e || *p != ',')
        return snprintf(why, n, l == -2 ? "layer outside 0..%u" : "expected layer,expert,gpu", L - 1), -1;
    p++;
    long long x = read_index(&p, e, J);
    if (x < 0 || p >= e || *p != ',')
        return snprintf(why, n, x == -2 ? "expert outside 0..%u" : "expected layer,expert,gpu", J - 1), -1;
    p++;
    long long g = read_index(&p, e, G);
    if (g == -2)
        return snprintf(why, n, "GPU outside 0..%u (the run has %u GPUs)", G - 1, G), -1;
    if (g < 0 || p != e)
        return snprintf(why, n, "expected layer,expert,gpu"), -1;
    size_t i = (size_t)l * J + (size_t)x;
    if (seen[i])
        return snprintf(why, n, "expert (%lld, %lld) placed twice", l, x), -1;
    seen[i] = 1;
    gpu_of[i] = (uint8_t)g;
    return 0;
}

int ms_placement_parse(const char *text, size_t n, const char *path, uint32_t L, uint32_t J, uint32_t G,
                       uint8_t *gpu_of, ms_err *err)
{
    if (!L || !J || !G || G > 256)
        return ms_fail(err, "%s: placement needs layers, experts and 1..256 GPUs", path);
    uint8_t *seen = ms_xcalloc((size_t)L * J, 1);
    const char *s = text, *end = text + n;
    int line = 0, rc = 0;
    char why[160];
    while (s < end && !rc) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *b = s, *e = nl ? nl : end;
        s = nl ? nl + 1 : end;
        line++;
        trim(&b, &e);
        if (b == e || *b == '#' || (line == 1 && e - b == 16 && !memcmp(b, "layer,expert,gpu", 16)))
            continue;
        if (parse_line(b, e, L, J, G, gpu_of, seen, why, sizeof why)) {
            char text[64];
            snippet(b, e, text, sizeof text);
            rc = ms_fail(err, "%s:%d: %s: %s", path, line, text, why);
        }
    }
    for (size_t i = 0; !rc && i < (size_t)L * J; i++)
        if (!seen[i])
            rc = ms_fail(err, "%s: no GPU for expert (%zu, %zu): a placement names every (layer, expert) of the "
                              "trace (%u x %u)",
                         path, i / J, i % J, L, J);
    free(seen);
    return rc;
}

int ms_placement_read(const char *path, uint32_t L, uint32_t J, uint32_t G, uint8_t *gpu_of, ms_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ms_fail(err, "%s: cannot open placement file: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = ms_xcalloc(cap, 1);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            if (cap >= ((size_t)1 << 30)) {
                free(buf);
                fclose(f);
                return ms_fail(err, "%s: placement file over 1 GiB", path);
            }
            buf = ms_xrealloc(buf, cap * 2, 1);
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    int rc = bad ? ms_fail(err, "%s: cannot read placement file", path)
                 : ms_placement_parse(buf, n, path, L, J, G, gpu_of, err);
    free(buf);
    return rc;
}
