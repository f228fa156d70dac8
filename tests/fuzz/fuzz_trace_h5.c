/* Trace reader, formats v1 and v2 (traces/format/trace_h5_open.c, trace_h5_read.c): ms_reader_open and
 * every ms_reader_next (each request also through ms_request_check), with
 * the content digest checked at the end, on a trace built from the input.
 *
 * The input does not reach HDF5 as raw file bytes: Debian 12's HDF5 1.10.8
 * hangs, reads out of bounds and leaks on corrupt object headers and global
 * heaps (docs/fuzzing.md lists what a raw-bytes harness hit within
 * seconds), inside the first H5Aexists / H5Aread / H5Dopen, where moesim
 * cannot guard against it.  Instead, byte 0 picks one of three templates of
 * trace_templates/ (made by make_trace_templates.py) and the rest is spliced
 * into the template's regions, in order (a short input leaves the rest of
 * the template as it is):
 *   0 plain.h5  every root attribute value (L, J, K, flags, version, the
 *               fixed-length strings format / probs_kind / model_name ...)
 *               and every dataset's raw values (uncompressed): all that
 *               moesim validates, with HDF5's structures intact
 *   1 zstd.h5   the compressed bytes of every chunk of a v1 trace as moesim
 *               wrote it, so moesim's zstd filter decodes fuzzed frames
 *   2 plain_v2.h5  format v2, every dataset one uncompressed chunk with
 *               HDF5's Fletcher32 checksum: the regions are the chunks'
 *               values and the harness recomputes each checksum after
 *               splicing (a region line's third column 1), so the v2 reader
 *               (text bytes and their columns, v2 checks, content digest)
 *               sees fuzzed values; flipped checksums are the bit-flip test's
 *               business (tests/trace_safety). */
#include "fuzz_util.h"
#include "traces/format/trace.h"

#define N_TEMPLATES 3
#define MAX_REGIONS 256

typedef struct {
    uint8_t *bytes;
    size_t len;
    size_t n_regions;
    size_t off[MAX_REGIONS], size[MAX_REGIONS];
    int fletcher[MAX_REGIONS]; /* the 4 bytes after the region hold its Fletcher32 */
} template_t;

static template_t g_t[N_TEMPLATES];
static int g_loaded;

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fz_die("opening", path);
    size_t cap = 1 << 20;
    uint8_t *b = malloc(cap);
    if (!b)
        abort();
    *len = fread(b, 1, cap, f);
    fclose(f);
    if (*len == 0 || *len == cap)
        fz_die("reading (empty or over 1 MiB)", path);
    return b;
}

static void load_template(template_t *t, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.h5", MS_FUZZ_TEMPLATES, name);
    t->bytes = read_all(path, &t->len);
    snprintf(path, sizeof path, "%s/%s.regions", MS_FUZZ_TEMPLATES, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fz_die("opening", path);
    unsigned long long o, n;
    int fl;
    char line[128];
    while (t->n_regions < MAX_REGIONS && fgets(line, sizeof line, f)) {
        int got = sscanf(line, "%llu %llu %d", &o, &n, &fl);
        if (got < 2)
            continue;
        t->fletcher[t->n_regions] = got == 3 && fl == 1;
        if (o + n + (t->fletcher[t->n_regions] ? 4 : 0) > t->len)
            fz_die("a region past the end of the template in", path);
        t->off[t->n_regions] = (size_t)o;
        t->size[t->n_regions++] = (size_t)n;
    }
    fclose(f);
}

/* HDF5's H5_checksum_fletcher32 (16-bit big-endian words, a last odd byte
 * as a high half, sums folded every 360 words), stored little-endian after
 * the chunk by the Fletcher32 filter. */
static uint32_t fletcher32(const uint8_t *data, size_t len)
{
    uint32_t sum1 = 0, sum2 = 0;
    size_t words = len / 2;
    while (words) {
        size_t k = words > 360 ? 360 : words;
        words -= k;
        do {
            sum1 += (uint32_t)((data[0] << 8) | data[1]);
            data += 2;
            sum2 += sum1;
        } while (--k);
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if (len % 2) {
        sum1 += (uint32_t)(*data << 8);
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    return (sum2 << 16) | sum1;
}

/* The template with data[0..n) spliced into its regions. */
static uint8_t *build_file(const template_t *t, const uint8_t *data, size_t n)
{
    uint8_t *b = malloc(t->len);
    if (!b)
        abort();
    memcpy(b, t->bytes, t->len);
    size_t used = 0;
    for (size_t r = 0; r < t->n_regions && used < n; r++) {
        size_t k = t->size[r] < n - used ? t->size[r] : n - used;
        memcpy(b + t->off[r], data + used, k);
        used += k;
    }
    for (size_t r = 0; r < t->n_regions; r++)
        if (t->fletcher[r]) {
            uint32_t c = fletcher32(b + t->off[r], t->size[r]);
            for (int i = 0; i < 4; i++)
                b[t->off[r] + t->size[r] + (size_t)i] = (uint8_t)(c >> (8 * i));
        }
    return b;
}

static void read_trace(const char *path)
{
    ms_err err;
    err.msg[0] = '\0';
    ms_trace_reader *r = ms_reader_open(path, &err);
    if (!r) {
        fz_check_err(&err);
        return;
    }
    const ms_trace_meta *m = ms_reader_meta(r);
    ms_request req;
    memset(&req, 0, sizeof req);
    ms_reader_digest_begin(r);
    int all = 0;
    for (;;) {
        err.msg[0] = '\0';
        int rc = ms_reader_next(r, &req, &err);
        if (rc < 0)
            fz_check_err(&err);
        if (rc != 1) {
            all = rc == 0;
            break;
        }
        if (ms_request_check(m, &req, "fuzz", &err)) {
            fprintf(stderr, "fuzz harness: ms_reader_next returned a request failing ms_request_check: %s\n", err.msg);
            abort();
        }
    }
    ms_request_free(&req);
    if (all) {
        char hex[MS_DIGEST_HEX];
        err.msg[0] = '\0';
        if (ms_reader_digest_check(r, hex, &err) < 0)
            fz_check_err(&err);
    }
    ms_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_loaded) {
        load_template(&g_t[0], "plain");
        load_template(&g_t[1], "zstd");
        load_template(&g_t[2], "plain_v2");
        g_loaded = 1;
    }
    if (size < 1)
        return 0;
    const template_t *t = &g_t[data[0] % N_TEMPLATES];
    uint8_t *file = build_file(t, data + 1, size - 1);
    fz_dir d;
    fz_dir_make(&d);
    char path[PATH_MAX];
    fz_write(&d, "t.h5", file, t->len, path, sizeof path);
    free(file);
    read_trace(path);
    fz_dir_remove(&d);
    return 0;
}
