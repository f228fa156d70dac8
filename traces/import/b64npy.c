/* Base64 and .npy decoding for the engine importers (b64npy.h). */
#include <stdlib.h>
#include <string.h>

#include "traces/import/b64npy.h"

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int ms_b64_decode(const char *s, size_t n, uint8_t **out, size_t *out_n, const char *what, ms_err *err)
{
    *out = NULL;
    *out_n = 0;
    if (n % 4)
        return ms_fail(err, "%s: %zu base64 characters, not a multiple of 4 (truncated?)", what, n);
    size_t pad = n >= 1 && s[n - 1] == '=' ? (n >= 2 && s[n - 2] == '=' ? 2 : 1) : 0;
    uint8_t *b = ms_xcalloc(n / 4 * 3 + 1, 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (size_t j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)s[i + j];
            int x = b64_value(c);
            if (x < 0 && !(c == '=' && i + j >= n - pad)) {
                free(b);
                return ms_fail(err, "%s: character %zu ('%c', byte %u) is not base64", what, i + j + 1,
                               c >= 32 && c < 127 ? c : '?', c);
            }
            v = v << 6 | (uint32_t)(x < 0 ? 0 : x);
        }
        b[o++] = (uint8_t)(v >> 16);
        b[o++] = (uint8_t)(v >> 8);
        b[o++] = (uint8_t)v;
    }
    *out = b;
    *out_n = o - pad;
    return 0;
}

/* The value text after 'key': in the header dict h[0..n), or NULL. */
static const char *dict_value(const char *h, size_t n, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 < n; i++)
        if ((h[i] == '\'' || h[i] == '"') && !strncmp(h + i + 1, key, kl) && h[i + 1 + kl] == h[i]) {
            const char *p = h + i + kl + 2;
            while (p < h + n && (*p == ' ' || *p == ':'))
                p++;
            return p;
        }
    return NULL;
}

static int parse_descr(const char *p, const char *end, ms_npy_ints *a)
{
    static const struct {
        const char *d;
        int bytes, sign;
    } kinds[] = {{"|u1", 1, 0}, {"|i1", 1, 1}, {"<u2", 2, 0}, {"<i2", 2, 1},
                 {"<u4", 4, 0}, {"<i4", 4, 1}, {"<u8", 8, 0}, {"<i8", 8, 1}};
    if (p >= end || (*p != '\'' && *p != '"') || end - p < 5)
        return -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strncmp(p + 1, kinds[i].d, 3) && p[4] == p[0]) {
            a->elem_bytes = kinds[i].bytes;
            a->is_signed = kinds[i].sign;
            return 0;
        }
    return -1;
}

static int parse_shape(const char *p, const char *end, ms_npy_ints *a)
{
    if (p >= end || *p != '(')
        return -1;
    p++;
    a->ndim = 0;
    a->count = 1;
    for (;;) {
        while (p < end && *p == ' ')
            p++;
        if (p < end && *p == ')')
            break;
        if (p >= end || *p < '0' || *p > '9' || a->ndim == 4)
            return -1;
        uint64_t v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (v > (UINT64_MAX - 9) / 10)
                return -1;
            v = v * 10 + (uint64_t)(*p++ - '0');
        }
        a->shape[a->ndim++] = v;
        if (v && a->count > UINT64_MAX / v)
            return -1;
        a->count *= v;
        while (p < end && *p == ' ')
            p++;
        if (p < end && *p == ',')
            p++;
    }
    return a->ndim ? 0 : -1;
}

int ms_npy_parse_ints(const uint8_t *buf, size_t n, ms_npy_ints *a, const char *what, ms_err *err)
{
    memset(a, 0, sizeof *a);
    if (n < 10 || memcmp(buf, "\x93NUMPY", 6))
        return ms_fail(err, "%s: not a .npy image (no \\x93NUMPY magic)", what);
    int major = buf[6];
    size_t hl, start;
    if (major == 1) {
        hl = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if ((major == 2 || major == 3) && n >= 12) {
        hl = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        start = 12;
    } else {
        return ms_fail(err, "%s: .npy format version %d.%d unknown (1, 2 or 3)", what, major, buf[7]);
    }
    if (hl > n - start)
        return ms_fail(err, "%s: .npy header of %zu bytes runs past the %zu bytes given", what, hl, n);
    const char *h = (const char *)buf + start, *end = h + hl;
    const char *d = dict_value(h, hl, "descr"), *f = dict_value(h, hl, "fortran_order"),
               *s = dict_value(h, hl, "shape");
    if (!d || parse_descr(d, end, a)) {
        int dl = 0; /* the quoted descr, quotes included */
        while (d && d + dl < end && dl < 16 && (dl == 0 || (d[dl] != ',' && d[dl] != '}')))
            dl++;
        return ms_fail(err, "%s: .npy descr %.*s is not an integer type (|u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8)", what,
                       d ? dl : 1, d ? d : "?");
    }
    if (!f || strncmp(f, "False", 5))
        return ms_fail(err, "%s: .npy array is not C order (fortran_order must be False)", what);
    if (!s || parse_shape(s, end, a))
        return ms_fail(err, "%s: .npy shape '%.20s' is not a tuple of 1 to 4 sizes", what, s ? s : "?");
    size_t data = start + hl;
    if (a->count > (n - data) / (uint64_t)a->elem_bytes || a->count * (uint64_t)a->elem_bytes != n - data)
        return ms_fail(err, "%s: .npy data is %zu bytes, the shape needs %llu x %d", what, n - data,
                       (unsigned long long)a->count, a->elem_bytes);
    a->data = buf + data;
    return 0;
}

int64_t ms_npy_get(const ms_npy_ints *a, uint64_t i)
{
    const uint8_t *p = a->data + i * (uint64_t)a->elem_bytes;
    uint64_t v = 0;
    for (int b = a->elem_bytes - 1; b >= 0; b--)
        v = v << 8 | p[b];
    if (a->is_signed && a->elem_bytes < 8 && (v >> (8 * a->elem_bytes - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * a->elem_bytes);
    return (int64_t)v;
}
