/* A growable array of doubles (latencies, per-iteration errors, timing
 * samples): zero-initialise, push, read v[0..n), free v. */
#ifndef MS_DVEC_H
#define MS_DVEC_H

#include <stddef.h>

#include "sim/core/err.h"

typedef struct {
    double *v;
    size_t n, cap;
} ms_dvec;

static inline void ms_dvec_push(ms_dvec *d, double x)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 64;
        d->v = ms_xrealloc(d->v, d->cap, sizeof *d->v);
    }
    d->v[d->n++] = x;
}

#endif
