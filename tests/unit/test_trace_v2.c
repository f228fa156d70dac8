/* Trace format v2 (docs/trace-format.md, issue 13): what the writer puts on
 * disk (HDF5 1.10 format with checksummed metadata, every dataset chunked
 * with zstd then Fletcher32, fixed-length strings in compact attribute
 * storage, the text as UTF-8 bytes, a content digest), what the reader
 * refuses in a v2 file, how it reports a damaged chunk and a changed value,
 * and the writer's output safety (sim/core/out.h: checked paths, temporaries
 * removed, an existing file untouched by a failed write). */
#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "sim/core/out.h"
#include "traces/format/trace.h"

/* L=2, J=4, K=2, topk_renorm, token ids, text and recorded hits. */
static void make_meta(ms_trace_meta *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->model_name, sizeof m->model_name, "tiny-v2");
    snprintf(m->source, sizeof m->source, "test_trace_v2");
    m->L = 2;
    m->J = 4;
    m->K = 2;
    m->hidden_size = 8;
    m->probs_kind = MS_PROBS_TOPK_RENORM;
    m->has_token_ids = m->has_text = m->has_recorded_hits = 1;
    ms_trace_meta_alloc_layers(m);
    m->expert_bytes[0] = 4096;
    m->expert_bytes[1] = 8192;
    m->dense_bytes[0] = m->dense_bytes[1] = 512;
}

static void build_request(ms_request *q, const ms_trace_meta *m, uint64_t id, double t, uint32_t prompt,
                          uint32_t out, const char *text)
{
    memset(q, 0, sizeof *q);
    q->id = id;
    q->arrival_s = t;
    q->prompt_len = prompt;
    q->output_len = out;
    q->n_iters = out + 1;
    q->n_rows = prompt + out;
    q->n_tokens = prompt;
    ms_request_alloc(q, m);
    q->iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, prompt};
    for (uint32_t i = 1; i < q->n_iters; i++)
        q->iters[i] = (ms_iteration){MS_PHASE_DECODE, prompt + i - 1, 1};
    for (uint32_t r = 0; r < q->n_rows; r++)
        for (uint32_t l = 0; l < m->L; l++) {
            size_t o = ms_topk_index(m, r, l);
            q->topk_ids[o] = (int32_t)((r + l + id) % 4);
            q->topk_ids[o + 1] = (int32_t)((r + l + id + 1) % 4);
            q->topk_w[o] = 0.75f;
            q->topk_w[o + 1] = 0.25f;
            q->recorded_hit[o] = (int8_t)(r % 2);
            q->recorded_hit[o + 1] = 0;
        }
    for (uint32_t k = 0; k < q->n_tokens; k++)
        q->token_ids[k] = (int32_t)(10 * id + k);
    q->text = ms_xstrdup(text);
}

static int write_two(const char *path, ms_err *err)
{
    ms_trace_meta m;
    make_meta(&m);
    ms_request a, b;
    build_request(&a, &m, 7, 0.5, 3, 2, "r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93");
    build_request(&b, &m, 3, 1.25, 2, 1, "");
    ms_trace_writer *w = ms_writer_open(path, &m, err);
    int rc = w && ms_writer_add(w, &a, err) == 0 && ms_writer_add(w, &b, err) == 0 ? 0 : -1;
    if (rc == 0)
        rc = ms_writer_close(w, err);
    else
        ms_writer_abort(w);
    ms_request_free(&a);
    ms_request_free(&b);
    ms_trace_meta_free(&m);
    return rc;
}

static int tmp_exists_for(const char *path)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, ".%s.tmp.", path);
    DIR *d = opendir(".");
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d)) != NULL)
        found = !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return found;
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[1 << 14];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0)
        fwrite(buf, 1, n, b);
    if (a)
        fclose(a);
    if (b)
        fclose(b);
}

static int files_equal(const char *x, const char *y)
{
    FILE *a = fopen(x, "rb"), *b = fopen(y, "rb");
    int same = a && b;
    while (same) {
        int c = fgetc(a), d = fgetc(b);
        same = c == d;
        if (c == EOF || d == EOF)
            break;
    }
    if (a)
        fclose(a);
    if (b)
        fclose(b);
    return same;
}

/* Reads every request with the digest on; the result of the check. */
static int read_all_digest(const char *path, char hex[MS_DIGEST_HEX], ms_err *err)
{
    ms_trace_reader *r = ms_reader_open(path, err);
    if (!r)
        return -2;
    ms_request q;
    memset(&q, 0, sizeof q);
    ms_reader_digest_begin(r);
    int got;
    while ((got = ms_reader_next(r, &q, err)) == 1)
        ;
    ms_request_free(&q);
    int rc = got < 0 ? -2 : ms_reader_digest_check(r, hex, err);
    ms_reader_close(r);
    return rc;
}

/* ---- what v2 puts on disk ---- */

static void check_dataset_storage(hid_t f, const char *path)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    CHECK(d >= 0);
    hid_t dcpl = H5Dget_create_plist(d);
    CHECK_EQ_INT(H5Pget_layout(dcpl), H5D_CHUNKED);
    CHECK_EQ_INT(H5Pget_nfilters(dcpl), 2);
    unsigned flags, conf;
    size_t n = 4;
    unsigned cd[4];
    char name[64];
    /* zstd first, then the checksum of the stored (compressed) bytes; level
     * -1 (two's complement in the unsigned cd value) for floats, 3 otherwise */
    CHECK_EQ_INT(H5Pget_filter2(dcpl, 0, &flags, &n, cd, sizeof name, name, &conf), 32015);
    CHECK_EQ_INT((int)n, 1);
    hid_t ft = H5Dget_type(d);
    unsigned want_level = H5Tget_class(ft) == H5T_FLOAT ? UINT_MAX : 3u;
    H5Tclose(ft);
    CHECK(cd[0] == want_level);
    n = 4;
    CHECK_EQ_INT(H5Pget_filter2(dcpl, 1, &flags, &n, cd, sizeof name, name, &conf), H5Z_FILTER_FLETCHER32);
    hid_t t = H5Dget_type(d);
    CHECK(H5Tget_class(t) != H5T_STRING); /* nothing variable-length (the global heap has no checksum) */
    H5Tclose(t);
    H5Pclose(dcpl);
    H5Dclose(d);
}

static void test_layout(void)
{
    ms_err err = {{0}};
    unlink("v2_a.h5");
    CHECK_EQ_INT(write_two("v2_a.h5", &err), 0);
    hid_t f = H5Fopen("v2_a.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    H5F_info2_t fi;
    CHECK(H5Fget_info2(f, &fi) >= 0);
    CHECK(fi.super.version >= 2); /* checksummed superblock, v2 object headers */
    const char *ds[] = {"/layers/expert_bytes", "/requests/id", "/requests/arrival_s", "/requests/text_start",
                        "/requests/n_text_bytes", "/tokens/ids", "/text/utf8", "/iterations/phase",
                        "/rows/topk_ids", "/rows/topk_w", "/rows/recorded_hit"};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        check_dataset_storage(f, ds[i]);
    CHECK(H5Lexists(f, "/requests/text", H5P_DEFAULT) == 0); /* v1's variable-length strings are gone */
    /* string attributes: fixed-length; all attributes in the object header */
    const char *strs[] = {"format", "model_name", "source", "probs_kind", "content_sha256"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        hid_t a = H5Aopen(f, strs[i], H5P_DEFAULT);
        hid_t t = H5Aget_type(a);
        CHECK_EQ_INT(H5Tget_class(t), H5T_STRING);
        CHECK_EQ_INT(H5Tis_variable_str(t), 0);
        H5Tclose(t);
        H5Aclose(a);
    }
    H5O_info_t oi;
    CHECK(H5Oget_info2(f, &oi, H5O_INFO_ALL) >= 0);
    CHECK_EQ_INT(oi.num_attrs, 14);
    CHECK_EQ_INT(oi.meta_size.attr.heap_size, 0); /* no dense (fractal heap) attribute storage */
    hid_t g = H5Gopen2(f, "/requests", H5P_DEFAULT);
    H5G_info_t gi;
    CHECK(H5Gget_info(g, &gi) >= 0);
    CHECK_EQ_INT(gi.nlinks, 12);
    CHECK_EQ_INT(gi.storage_type, H5G_STORAGE_TYPE_COMPACT); /* links in the object header too */
    H5Gclose(g);
    /* the text: UTF-8 bytes of both requests, back to back */
    hid_t d = H5Dopen2(f, "/text/utf8", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[1];
    H5Sget_simple_extent_dims(sp, dims, NULL);
    CHECK_EQ_INT(dims[0], 12);
    char text[13] = {0};
    CHECK(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, text) >= 0);
    CHECK(!memcmp(text, "r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93", 12));
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);

    /* the reader gives the text back and says v2 */
    ms_trace_reader *r = ms_reader_open("v2_a.h5", &err);
    CHECK(r != NULL);
    if (r) {
        CHECK_EQ_INT(ms_reader_meta(r)->version, 2);
        CHECK_EQ_INT(strlen(ms_reader_meta(r)->content_sha256), 64);
        ms_request q;
        memset(&q, 0, sizeof q);
        CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
        CHECK(q.text && !strcmp(q.text, "r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93"));
        CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
        CHECK(q.text && !strcmp(q.text, ""));
        CHECK_EQ_INT(q.token_ids[1], 31);
        ms_request_free(&q);
        ms_reader_close(r);
    }
}

/* ---- content digest ---- */

/* Computed independently from docs/trace-format.md by tests/interop/trace_v2.py
 * (content_digest) on v2_a.h5: a change of the documented algorithm breaks
 * every stored digest, so it must show here. */
#define V2_A_DIGEST "fb09ef45cf2f4fda153e09829e93b16c28d2fbc47c020755f2536181b56969f7"

static void test_digest(void)
{
    ms_err err = {{0}};
    char hex[MS_DIGEST_HEX], hex2[MS_DIGEST_HEX];
    CHECK_EQ_INT(read_all_digest("v2_a.h5", hex, &err), 0);
    CHECK(!strcmp(hex, V2_A_DIGEST));
    /* same content, same bytes and digest */
    unlink("v2_b.h5");
    CHECK_EQ_INT(write_two("v2_b.h5", &err), 0);
    CHECK(files_equal("v2_a.h5", "v2_b.h5"));
    CHECK_EQ_INT(read_all_digest("v2_b.h5", hex2, &err), 0);
    CHECK(!strcmp(hex, hex2));

    /* reading out of order: no digest */
    ms_trace_reader *r = ms_reader_open("v2_a.h5", &err);
    ms_request q;
    memset(&q, 0, sizeof q);
    ms_reader_digest_begin(r);
    CHECK_EQ_INT(ms_reader_read(r, 1, &q, &err), 1);
    CHECK_EQ_INT(ms_reader_read(r, 0, &q, &err), 1);
    CHECK_EQ_INT(ms_reader_digest_check(r, hex2, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "v2_a.h5: content digest: the requests were not read once each in order");
    ms_request_free(&q);
    ms_reader_close(r);

    /* a value changed after writing, with valid checksums (HDF5 rewrites the
     * chunk): every value still passes the reader's checks, the digest does not */
    copy_file("v2_a.h5", "v2_changed.h5");
    hid_t f = H5Fopen("v2_changed.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/rows/recorded_hit", H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hsize_t at[3] = {4, 1, 1}, one[3] = {1, 1, 1};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, at, NULL, one, NULL);
    hid_t ms = H5Screate_simple(3, one, NULL);
    int8_t hit = 1;
    CHECK(H5Dwrite(d, H5T_NATIVE_INT8, ms, fs, H5P_DEFAULT, &hit) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
    CHECK_EQ_INT(read_all_digest("v2_changed.h5", hex2, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "v2_changed.h5: content digest mismatch: the file says content_sha256 " V2_A_DIGEST
                       ", its content hashes to ");
    CHECK(strcmp(hex2, hex) != 0);
    CHECK(strchr(err.msg, '\n') == NULL);
}

/* ---- damage ---- */

/* Flips one bit in the middle of chunk 0 of dataset ds, in place. */
static void flip_in_chunk(const char *path, const char *ds)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, ds, H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t coord[4];
    unsigned mask;
    haddr_t addr = 0;
    hsize_t size = 0;
    CHECK(H5Dget_chunk_info(d, sp, 0, coord, &mask, &addr, &size) >= 0);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    off_t at = (off_t)(addr + size / 2);
    CHECK(pread(fd, &c, 1, at) == 1);
    c ^= 0x10;
    CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
}

static void test_damaged_chunks(void)
{
    ms_err err = {{0}};
    copy_file("v2_a.h5", "v2_flip_rows.h5");
    flip_in_chunk("v2_flip_rows.h5", "/rows/topk_w");
    ms_trace_reader *r = ms_reader_open("v2_flip_rows.h5", &err);
    CHECK(r != NULL); /* the request table is intact */
    ms_request q;
    memset(&q, 0, sizeof q);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "v2_flip_rows.h5: /rows/topk_w: cannot read entries 0..4 (HDF5: ");
    CHECK_STR_CONTAINS(err.msg, "Fletcher32");
    CHECK_STR_CONTAINS(err.msg, "; checksum mismatch: the file is damaged)");
    CHECK(strchr(err.msg, '\n') == NULL);
    ms_request_free(&q);
    ms_reader_close(r);

    copy_file("v2_a.h5", "v2_flip_table.h5");
    flip_in_chunk("v2_flip_table.h5", "/requests/arrival_s");
    CHECK(ms_reader_open("v2_flip_table.h5", &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "v2_flip_table.h5: /requests/arrival_s: cannot read");
    CHECK_STR_CONTAINS(err.msg, "checksum mismatch: the file is damaged");

    /* a NUL byte inside a prompt text (bytes rewritten with valid checksums) */
    copy_file("v2_a.h5", "v2_nul.h5");
    hid_t f = H5Fopen("v2_nul.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/text/utf8", H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hsize_t at = 2, one = 1;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &one, NULL);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    uint8_t zero = 0;
    CHECK(H5Dwrite(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, &zero) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
    r = ms_reader_open("v2_nul.h5", &err);
    CHECK(r != NULL);
    if (r) {
        CHECK_EQ_INT(ms_reader_next(r, &q, &err), -1);
        CHECK_STR_CONTAINS(err.msg, "v2_nul.h5: /text/utf8[2]: NUL byte inside the text of request 7");
        ms_request_free(&q);
        ms_reader_close(r);
    }
}

/* ---- what the reader refuses in a v2 file ---- */

static void replace_dataset(const char *path, const char *ds, hid_t dcpl)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, ds, H5P_DEFAULT);
    uint64_t v[2];
    CHECK(H5Dread(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    CHECK(H5Ldelete(f, ds, H5P_DEFAULT) >= 0);
    hsize_t n = 2, max = H5S_UNLIMITED;
    hid_t sp = H5Screate_simple(1, &n, H5Pget_layout(dcpl) == H5D_CHUNKED ? &max : NULL);
    d = H5Dcreate2(f, ds, H5T_STD_U64LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0);
    CHECK(H5Dwrite(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
}

static void open_fails_with(const char *path, const char *needle)
{
    ms_err err = {{0}};
    ms_trace_reader *r = ms_reader_open(path, &err);
    CHECK(r == NULL);
    ms_reader_close(r);
    CHECK_STR_CONTAINS(err.msg, needle);
}

static void test_refusals(void)
{
    copy_file("v2_a.h5", "v2_contig.h5");
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    replace_dataset("v2_contig.h5", "/requests/id", dcpl);
    open_fails_with("v2_contig.h5", "v2_contig.h5: /requests/id: not chunked; format v2 checksums every chunk");
    H5Pclose(dcpl);

    copy_file("v2_a.h5", "v2_nofletcher.h5");
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk = 4;
    H5Pset_chunk(dcpl, 1, &chunk);
    replace_dataset("v2_nofletcher.h5", "/requests/id", dcpl);
    open_fails_with("v2_nofletcher.h5", "v2_nofletcher.h5: /requests/id: no Fletcher32 filter");
    H5Pclose(dcpl);

    /* a variable-length string attribute: held in the unchecksummed global heap */
    copy_file("v2_a.h5", "v2_vlen.h5");
    hid_t f = H5Fopen("v2_vlen.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(H5Adelete(f, "source") >= 0);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "source", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    const char *s = "h5py's default";
    CHECK(H5Awrite(a, t, &s) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    open_fails_with("v2_vlen.h5", "root attribute 'source' is a variable-length string; format v2 stores fixed-length");

    /* the digest attribute must be 64 lowercase hex digits */
    copy_file("v2_a.h5", "v2_baddigest.h5");
    f = H5Fopen("v2_baddigest.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(H5Adelete(f, "content_sha256") >= 0);
    t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 6);
    sp = H5Screate(H5S_SCALAR);
    a = H5Acreate2(f, "content_sha256", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Awrite(a, t, "ABCDEF") >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    open_fails_with("v2_baddigest.h5", "root attribute 'content_sha256' = 'ABCDEF' is not 64 lowercase hex digits");
}

/* ---- the writer's output (sim/core/out.h) ---- */

static void write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    fputs(s, f);
    fclose(f);
}

static void test_writer_output(void)
{
    ms_trace_meta m;
    make_meta(&m);
    ms_err err = {{0}};
    CHECK(ms_writer_open("/dev/null", &m, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "output /dev/null: is a character device, not a regular file; refusing to write it");
    mkdir("v2_dir.h5", 0755);
    CHECK(ms_writer_open("v2_dir.h5", &m, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "output v2_dir.h5: is a directory");
    CHECK(ms_writer_open("v2_no_such_dir/x.h5", &m, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "output v2_no_such_dir/x.h5: folder v2_no_such_dir: No such file or directory");
    write_text("v2_input.txt", "an input\n");
    ms_out_input("v2_input.txt");
    CHECK(ms_writer_open("v2_input.txt", &m, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "is the input file v2_input.txt; refusing to overwrite it");
    ms_out_inputs_clear();

    /* an aborted write leaves an existing file as it was and no temporary */
    write_text("v2_keep.h5", "keep");
    ms_trace_writer *w = ms_writer_open("v2_keep.h5", &m, &err);
    CHECK(w != NULL);
    CHECK(tmp_exists_for("v2_keep.h5"));
    ms_request q;
    build_request(&q, &m, 1, 0, 2, 1, "x");
    CHECK_EQ_INT(ms_writer_add(w, &q, &err), 0);
    ms_request_free(&q);
    ms_writer_abort(w);
    CHECK(!tmp_exists_for("v2_keep.h5"));
    char buf[8] = {0};
    FILE *f = fopen("v2_keep.h5", "r");
    CHECK(f && fgets(buf, sizeof buf, f));
    if (f)
        fclose(f);
    CHECK(!strcmp(buf, "keep"));
    /* a successful write replaces it, keeping its mode */
    chmod("v2_keep.h5", 0640);
    w = ms_writer_open("v2_keep.h5", &m, &err);
    build_request(&q, &m, 1, 0, 2, 1, "x");
    CHECK_EQ_INT(ms_writer_add(w, &q, &err), 0);
    ms_request_free(&q);
    CHECK_EQ_INT(ms_writer_close(w, &err), 0);
    struct stat st;
    CHECK(stat("v2_keep.h5", &st) == 0 && (st.st_mode & 0777) == 0640);
    CHECK(!tmp_exists_for("v2_keep.h5"));
    ms_trace_meta_free(&m);
}

/* ---- progress and notes ---- */

static uint64_t seen_calls, seen_requests, seen_rows, seen_bytes;

static void on_progress(void *ctx, uint64_t requests, uint64_t rows, uint64_t bytes)
{
    (void)ctx;
    seen_calls++;
    CHECK_EQ_INT(requests, seen_calls);
    CHECK(bytes >= seen_bytes);
    seen_requests = requests;
    seen_rows = rows;
    seen_bytes = bytes;
}

static void test_progress_and_note(void)
{
    ms_err err = {{0}};
    ms_writer_set_progress(on_progress, NULL);
    CHECK_EQ_INT(write_two("v2_progress.h5", &err), 0);
    ms_writer_set_progress(NULL, NULL);
    CHECK_EQ_INT(seen_calls, 2);
    CHECK_EQ_INT(seen_requests, 2);
    CHECK_EQ_INT(seen_rows, 5 + 3);
    CHECK(seen_bytes > 1000);

    ms_trace_meta m;
    memset(&m, 0, sizeof m);
    char note[512];
    m.version = 2;
    CHECK_EQ_INT(ms_trace_v1_note("t.h5", &m, note, sizeof note), 0);
    CHECK_EQ_INT(note[0], 0);
    m.version = 1;
    CHECK_EQ_INT(ms_trace_v1_note("t.h5", &m, note, sizeof note), 1);
    CHECK_STR_CONTAINS(note, "t.h5 is trace format v1: no checksums");
    CHECK_STR_CONTAINS(note, "moesim trace upgrade t.h5 NEW.h5");
}

int main(void)
{
    test_layout();
    test_digest();
    test_damaged_chunks();
    test_refusals();
    test_writer_output();
    test_progress_and_note();
    /* every reader and writer above closed what it opened, failures included */
    CHECK_EQ_INT(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    CHECK_DONE();
}
