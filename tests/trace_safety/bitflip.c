/* Bit-flip acceptance test of trace format v2 (issue 13, "Never destroy
 * data"): flips one bit of a trace at each of N seeded offsets, one copy per
 * flip, and runs `moesim run --json` on each copy.  Every flip must either
 * fail cleanly (exit status 1, exactly one line "moesim: ..." on stderr) or
 * leave the "metrics" member byte-identical to the run on the unflipped
 * file (with nothing on stderr).  A different result (a silent change), a
 * signal, another exit status, more or fewer lines, or a run over the time
 * limit (a hang) fails the test.
 *
 * usage: bitflip MOESIM TRACE.h5 WORKDIR N SEED TIMEOUT_S [RUN ARGS...]
 *
 * It also says where the flips landed: in the stored bytes of a chunk
 * (H5Dget_chunk_info: protected by Fletcher32) or elsewhere (HDF5's
 * metadata, protected by its own checksums, or unused bytes), and prints
 * the first failures in full.
 *
 * With N = "meta", it flips one seeded bit of every byte outside the chunks
 * instead (HDF5's structures: a long exhaustive run, by hand).  With
 * BITFLIP_VERBOSE set, it lists the flips that left the metrics identical. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "traces/format/trace.h"

typedef struct {
    uint64_t off, size;
} range;

static range *chunks;
static size_t n_chunks, cap_chunks;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bitflip: %s: %s\n", what, detail);
    exit(2);
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
        die(path, "cannot read");
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void write_all(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0)
        die(path, "cannot write");
}

static const char *const datasets[] = {
    "/layers/expert_bytes", "/layers/dense_bytes", "/requests/id", "/requests/arrival_s", "/requests/prompt_len",
    "/requests/output_len", "/requests/iter_start", "/requests/n_iters", "/requests/row_start", "/requests/n_rows",
    "/requests/token_start", "/requests/n_tokens", "/requests/text_start", "/requests/n_text_bytes", "/tokens/ids",
    "/text/utf8", "/iterations/phase", "/iterations/row_start", "/iterations/n_rows", "/iterations/embedding",
    "/rows/topk_ids", "/rows/topk_w", "/rows/probs", "/rows/recorded_hit", "/rows/spec_ids", "/rows/spec_w",
};

/* The stored chunks of every dataset of format v2 (their raw bytes, after
 * the filters). */
static void find_chunks(const char *path)
{
    ms_err err;
    if (ms_h5_register_zstd(&err) < 0)
        die("zstd filter", err.msg);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        die(path, "not an HDF5 file");
    for (size_t k = 0; k < sizeof datasets / sizeof datasets[0]; k++) {
        char group[64];
        snprintf(group, sizeof group, "%.*s", (int)(strrchr(datasets[k], '/') - datasets[k]), datasets[k]);
        if (H5Lexists(f, group, H5P_DEFAULT) <= 0 || H5Lexists(f, datasets[k], H5P_DEFAULT) <= 0)
            continue;
        hid_t d = H5Dopen2(f, datasets[k], H5P_DEFAULT);
        hid_t sp = H5Dget_space(d);
        hsize_t n = 0;
        if (H5Dget_num_chunks(d, sp, &n) >= 0)
            for (hsize_t i = 0; i < n; i++) {
                hsize_t coord[8];
                unsigned mask;
                haddr_t addr;
                hsize_t size;
                if (H5Dget_chunk_info(d, sp, i, coord, &mask, &addr, &size) < 0)
                    continue;
                if (n_chunks == cap_chunks) {
                    cap_chunks = cap_chunks ? 2 * cap_chunks : 64;
                    chunks = realloc(chunks, cap_chunks * sizeof *chunks);
                }
                chunks[n_chunks++] = (range){addr, size};
            }
        H5Sclose(sp);
        H5Dclose(d);
    }
    H5Fclose(f);
}

static int in_chunk(uint64_t off)
{
    for (size_t i = 0; i < n_chunks; i++)
        if (off >= chunks[i].off && off < chunks[i].off + chunks[i].size)
            return 1;
    return 0;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- one run ---- */

typedef struct {
    int status; /* waitpid status */
    int timed_out;
    char *out, *err;
} run_result;

static char *slurp_fd(int fd)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (n + 1 == cap)
            b = realloc(b, cap *= 2);
        ssize_t k = read(fd, b + n, cap - n - 1);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    b[n] = 0;
    return b;
}

/* Runs argv with stdout / stderr into files of dir, killed after timeout_s. */
static run_result run(char **argv, const char *dir, double timeout_s)
{
    char out_path[4096], err_path[4096];
    snprintf(out_path, sizeof out_path, "%s/run.out", dir);
    snprintf(err_path, sizeof err_path, "%s/run.err", dir);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", strerror(errno));
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0)
            _exit(126);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    run_result r = {0};
    struct timespec t0, t, nap = {0, 2000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t got = waitpid(pid, &r.status, WNOHANG);
        if (got == pid)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > timeout_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &r.status, 0);
            r.timed_out = 1;
            break;
        }
        nanosleep(&nap, NULL);
    }
    int fo = open(out_path, O_RDONLY), fe = open(err_path, O_RDONLY);
    r.out = slurp_fd(fo);
    r.err = slurp_fd(fe);
    close(fo);
    close(fe);
    return r;
}

/* The "metrics" member of a run's JSON, printed compactly (NULL if none). */
static char *metrics_of(const char *json)
{
    cJSON *o = cJSON_Parse(json);
    cJSON *m = o ? cJSON_GetObjectItemCaseSensitive(o, "metrics") : NULL;
    char *s = m ? cJSON_PrintUnformatted(m) : NULL;
    cJSON_Delete(o);
    return s;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: bitflip MOESIM TRACE.h5 WORKDIR N SEED TIMEOUT_S [RUN ARGS...]\n");
        return 2;
    }
    const char *moesim = argv[1], *trace = argv[2], *dir = argv[3];
    int meta_all = !strcmp(argv[4], "meta");
    long n_flips = meta_all ? 0 : strtol(argv[4], NULL, 10);
    uint64_t seed = strtoull(argv[5], NULL, 10);
    double timeout_s = strtod(argv[6], NULL);
    char copy[4096];
    snprintf(copy, sizeof copy, "%s/flipped.h5", dir);

    size_t len;
    unsigned char *orig = read_all(trace, &len);
    find_chunks(trace);
    uint64_t chunk_bytes = 0;
    for (size_t i = 0; i < n_chunks; i++)
        chunk_bytes += chunks[i].size;
    uint64_t *meta_offs = NULL;
    if (meta_all) {
        meta_offs = malloc(len * sizeof *meta_offs);
        for (uint64_t o = 0; o < len; o++)
            if (!in_chunk(o))
                meta_offs[n_flips++] = o;
    }

    /* moesim run --trace COPY --json ARGS... */
    int n_extra = argc - 7;
    char **rargv = calloc((size_t)n_extra + 6, sizeof *rargv);
    rargv[0] = (char *)moesim;
    rargv[1] = "run";
    rargv[2] = "--trace";
    rargv[3] = copy;
    rargv[4] = "--json";
    for (int i = 0; i < n_extra; i++)
        rargv[5 + i] = argv[7 + i];

    write_all(copy, orig, len);
    run_result base = run(rargv, dir, timeout_s * 4);
    char *want = metrics_of(base.out);
    if (base.timed_out || !WIFEXITED(base.status) || WEXITSTATUS(base.status) != 0 || !want || base.err[0]) {
        fprintf(stderr, "bitflip: the unflipped run failed (status %d): %s%s\n", base.status, base.err,
                want ? "" : "(no metrics)");
        return 1;
    }

    long clean = 0, same = 0, bad = 0, chunk_flips = 0, chunk_clean = 0, meta_flips = 0, meta_clean = 0;
    long silent = 0, crashes = 0, hangs = 0;
    double t_max = 0;
    uint64_t rng = seed;
    unsigned char *b = malloc(len);
    struct timespec t_start, t_end;
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    for (long k = 0; k < n_flips; k++) {
        uint64_t off = meta_all ? meta_offs[k] : splitmix64(&rng) % len;
        unsigned bit = (unsigned)(splitmix64(&rng) % 8);
        memcpy(b, orig, len);
        b[off] ^= (unsigned char)(1u << bit);
        write_all(copy, b, len);
        struct timespec a, z;
        clock_gettime(CLOCK_MONOTONIC, &a);
        run_result r = run(rargv, dir, timeout_s);
        clock_gettime(CLOCK_MONOTONIC, &z);
        double dt = (double)(z.tv_sec - a.tv_sec) + (double)(z.tv_nsec - a.tv_nsec) * 1e-9;
        t_max = dt > t_max ? dt : t_max;
        int chunk = in_chunk(off);
        chunk_flips += chunk;
        meta_flips += !chunk;
        const char *verdict = NULL;
        if (r.timed_out) {
            verdict = "HANG (killed after the time limit)";
            hangs++;
        } else if (WIFSIGNALED(r.status)) {
            verdict = "CRASH (signal)";
            crashes++;
        } else if (WEXITSTATUS(r.status) == 0) {
            char *got = metrics_of(r.out);
            if (!got || strcmp(got, want)) {
                verdict = "SILENT CHANGE (exit 0, different metrics)";
                silent++;
            }
            else if (r.err[0])
                verdict = "exit 0 but stderr not empty";
            else {
                same++;
                if (getenv("BITFLIP_VERBOSE"))
                    printf("identical: byte %" PRIu64 " bit %u (%s)\n", off, bit, chunk ? "chunk data" : "metadata/unused");
            }
            free(got);
        } else if (WEXITSTATUS(r.status) != 1 || count_lines(r.err) != 1 || strncmp(r.err, "moesim: ", 8)) {
            verdict = "not one line 'moesim: ...' with exit status 1";
        } else {
            clean++;
            chunk_clean += chunk;
            meta_clean += !chunk;
        }
        if (verdict) {
            if (bad < 10)
                fprintf(stderr, "FAIL flip %ld: byte %" PRIu64 " bit %u (%s): %s; status %d; stderr: %s\n", k, off, bit,
                        chunk ? "chunk data" : "metadata/unused", verdict, r.status, r.err);
            bad++;
        }
        free(r.out);
        free(r.err);
    }
    clock_gettime(CLOCK_MONOTONIC, &t_end);
    double total = (double)(t_end.tv_sec - t_start.tv_sec) + (double)(t_end.tv_nsec - t_start.tv_nsec) * 1e-9;
    printf("%ld flips of %s (%zu bytes, %zu chunks holding %" PRIu64 " bytes), seed %" PRIu64 ": %ld failed cleanly "
           "(one line, exit 1), %ld left the metrics identical, %ld bad (%ld silent changes, %ld crashes, %ld hangs, %ld "
           "other output); "
           "in chunk data %ld (%ld failed cleanly), elsewhere %ld (%ld failed cleanly); %.1f s, slowest run %.2f s\n",
           n_flips, trace, len, n_chunks, chunk_bytes, seed, clean, same, bad, silent, crashes, hangs,
           bad - silent - crashes - hangs, chunk_flips, chunk_clean, meta_flips,
           meta_clean, total, t_max);
    fflush(stdout);
    unlink(copy);
    free(base.out);
    free(base.err);
    free(meta_offs);
    free(b);
    free(orig);
    free(want);
    free(rargv);
    free(chunks);
    return bad ? 1 : 0;
}
