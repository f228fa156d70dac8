/* Decoders for serving engines' routed-expert payloads (import_engine.c):
 * standard base64 (RFC 4648, '=' padding) and the NumPy .npy header
 * (format 1.0, 2.0, 3.0) of a C-order integer array. */
#ifndef MS_B64NPY_H
#define MS_B64NPY_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/err.h"

/* Decodes base64 text s[0..n) into a new buffer (*out, *out_n; free it).
 * Whitespace is not allowed; the length must be a multiple of 4.  0 ok, -1
 * with err = "WHAT: ..." naming the offending character's offset. */
int ms_b64_decode(const char *s, size_t n, uint8_t **out, size_t *out_n, const char *what, ms_err *err);

/* A parsed .npy array of integers. */
typedef struct {
    int elem_bytes;      /* 1, 2, 4 or 8 */
    int is_signed;
    uint32_t ndim;
    uint64_t shape[4];
    const uint8_t *data; /* little-endian elements, C order, inside the buffer */
    uint64_t count;      /* product of the shape */
} ms_npy_ints;

/* Parses a .npy image buf[0..n): magic, version, header dict with descr in
 * |u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8, fortran_order False and a shape of 1 to 4
 * axes, then exactly count elements.  0 ok, -1 with err = "WHAT: ...". */
int ms_npy_parse_ints(const uint8_t *buf, size_t n, ms_npy_ints *a, const char *what, ms_err *err);
/* Element i as int64 (sign- or zero-extended). */
int64_t ms_npy_get(const ms_npy_ints *a, uint64_t i);

#endif
