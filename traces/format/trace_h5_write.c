/* The trace writer (trace.h ms_writer_*): datasets created chunked,
 * compressed and checksummed, requests appended one by one, disk space
 * reserved ahead of HDF5, the request table and digest at close
 * (trace_h5_parts.h). */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/digest.h"
#include "sim/core/out.h"
#include "traces/format/trace_h5_parts.h"

/* Metadata HDF5 may have to write besides the chunks (object headers, chunk
 * indexes, superblock): 256 KiB (a small trace's metadata takes ~40 KiB),
 * plus 64 bytes per chunk written, at most the metadata cache's 32 MiB. */
#define RESERVE_META ((uint64_t)256 << 10)
#define RESERVE_META_MAX ((uint64_t)32 << 20)

static ms_write_progress_fn progress_fn;
static void *progress_ctx;

void ms_writer_set_progress(ms_write_progress_fn fn, void *ctx)
{
    progress_fn = fn;
    progress_ctx = ctx;
}

struct ms_trace_writer {
    char *path;
    char tmp_path[PATH_MAX]; /* the temporary beside path (sim/core/out.h), registered for removal on a signal */
    int have_tmp;
    hid_t file;
    hid_t ds[D_COUNT];
    int n_inner[D_COUNT];
    hsize_t inner[D_COUNT][3];
    hsize_t size[D_COUNT];   /* entries along the first axis so far */
    size_t entry[D_COUNT];   /* bytes of one entry */
    size_t cache[D_COUNT];   /* bytes of the dataset's chunk cache: data HDF5 may hold unwritten */
    hsize_t chunk0[D_COUNT]; /* entries per chunk */
    ms_trace_meta meta; /* dimensions + layers copied; request table built here */
    uint64_t cap;
    uint64_t *iter_start, *row_start, *token_start, *text_start;
    uint32_t *n_tokens, *n_text;
    uint64_t n_tokens_total, n_text_total;
    content_digest *dig;
    int rfd;               /* our descriptor of the temporary, for fallocate; -1 when unsupported */
    uint64_t reserved_end; /* bytes [0, reserved_end) of the temporary have disk blocks */
    int failed;            /* a write failed or the disk is full: the file is incomplete */
};

/* ---- disk space, reserved ahead of HDF5 ----
 *
 * HDF5 1.10.8 cannot fail a write cleanly: after a write error (a full disk)
 * its H5Fclose fails too and leaves a freed file behind its id, which its
 * exit-time clean-up closes again (SIGSEGV in H5F__close_cb; h5_zstd.c).  So the writer makes sure HDF5 never meets a full disk: before
 * each request it reserves (fallocate, keeping the file size) the blocks for
 * everything HDF5 may write until the next check and at close: the request's
 * uncompressed bytes, every chunk cache's worth of pending data and the
 * metadata.  A full disk is then the reservation's ENOSPC, reported here,
 * and closing writes into reserved blocks.  Where fallocate is not supported
 * (EOPNOTSUPP) the writer goes on without a reserve. */

static uint64_t file_bytes(ms_trace_writer *w)
{
    hsize_t n = 0;
    if (H5Fget_filesize(w->file, &n) < 0) {
        H5Eclear2(H5E_DEFAULT);
        n = 0;
    }
    struct stat st;
    if (w->rfd >= 0 && fstat(w->rfd, &st) == 0 && (uint64_t)st.st_size > n)
        n = (hsize_t)st.st_size;
    return n;
}

/* Data HDF5 may still hold unwritten: chunk caches and metadata. */
static uint64_t pending_bytes(const ms_trace_writer *w)
{
    uint64_t data = 0, chunks = 0;
    for (int d = 0; d < D_COUNT; d++) {
        if (w->ds[d] < 0)
            continue;
        uint64_t b = (uint64_t)w->size[d] * w->entry[d];
        data += b < w->cache[d] ? b : w->cache[d];
        chunks += (w->size[d] + w->chunk0[d] - 1) / w->chunk0[d];
    }
    uint64_t meta = RESERVE_META + chunks * 64;
    return data + (meta < RESERVE_META_MAX ? meta : RESERVE_META_MAX);
}

static int space_fail(ms_trace_writer *w, int e, uint64_t more, ms_err *err)
{
    w->failed = 1;
    return ms_fail(err, "%s: %s (%.1f MiB written after %" PRIu64 " requests, about %.1f MiB more needed; nothing "
                   "is left behind)", w->path, strerror(e), (double)file_bytes(w) / 1048576.0, w->meta.n_requests,
                   (double)more / 1048576.0);
}

/* Reserves blocks for `more` new bytes plus what is pending. */
static int reserve(ms_trace_writer *w, uint64_t more, ms_err *err)
{
    if (w->rfd < 0)
        return 0;
    uint64_t size = file_bytes(w);
    /* zstd frames and Fletcher32 add a few bytes per chunk; incompressible
     * data grows by at most 1/256 */
    uint64_t need = size + more + more / 64 + pending_bytes(w);
    if (need <= w->reserved_end)
        return 0;
    uint64_t from = w->reserved_end > size ? w->reserved_end : size;
    if (need - from > (uint64_t)INT64_MAX - from)
        return space_fail(w, EFBIG, more, err);
    if (fallocate(w->rfd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(need - from)) == 0) {
        w->reserved_end = need;
        return 0;
    }
    int e = errno;
    if (e == EOPNOTSUPP || e == ENOSYS) { /* a file system without fallocate: no reserve */
        close(w->rfd);
        w->rfd = -1;
        return 0;
    }
    return space_fail(w, e, more, err);
}

/* Before HDF5 touches the temporary: room for its first metadata (H5Fcreate
 * truncates the file, which drops this reservation; reserve() makes it again
 * right after). */
static int probe_space(ms_trace_writer *w, ms_err *err)
{
    int fd = open(w->tmp_path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return ms_fail(err, "%s: cannot open the temporary %s: %s", w->path, w->tmp_path, strerror(errno));
    int rc = 0;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)RESERVE_META) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
        rc = space_fail(w, errno, RESERVE_META, err);
    close(fd);
    return rc;
}

/* ---- requests ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int h5p_check_unique_ids(const uint64_t *ids, uint64_t n, const char *path, ms_err *err)
{
    if (n < 2)
        return 0;
    uint64_t *s = ms_xcalloc(n, sizeof *s);
    memcpy(s, ids, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    int rc = 0;
    for (uint64_t i = 1; i < n && rc == 0; i++)
        if (s[i] == s[i - 1])
            rc = ms_fail(err, "%s: /requests/id: request id %" PRIu64 " appears more than once", path, s[i]);
    free(s);
    return rc;
}

static int write_attr(ms_trace_writer *w, const char *name, hid_t ftype, hid_t mtype, const void *value,
                      ms_err *err)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(w->file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t st = a >= 0 ? H5Awrite(a, mtype, value) : -1;
    int rc = st < 0 ? h5p_h5_fail(err, w->path, name, "cannot write the root attribute") : 0;
    if (a >= 0 && H5Aclose(a) < 0 && rc == 0)
        rc = h5p_h5_fail(err, w->path, name, "cannot write the root attribute");
    H5Sclose(sp);
    return rc;
}

static int write_attr_u32(ms_trace_writer *w, const char *name, uint32_t v, ms_err *err)
{
    return write_attr(w, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, &v, err);
}

/* A fixed-length UTF-8 string of exactly its bytes (at least one, so "" is
 * one NUL byte), held in the checksummed object header, never in the global
 * heap. */
static int write_attr_str(ms_trace_writer *w, const char *name, const char *s, ms_err *err)
{
    size_t n = strlen(s);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n ? n : 1);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    H5Tset_cset(t, H5T_CSET_UTF8);
    char *buf = ms_xcalloc(n + 1, 1);
    memcpy(buf, s, n);
    int rc = write_attr(w, name, t, t, buf, err);
    free(buf);
    H5Tclose(t);
    return rc;
}

static int write_root_attributes(ms_trace_writer *w, ms_err *err)
{
    const ms_trace_meta *m = &w->meta;
    struct { const char *name; uint32_t v; } ints[] = {
        {"version", MS_TRACE_FORMAT_VERSION}, {"L", m->L}, {"J", m->J}, {"K", m->K},
        {"shared_experts", m->shared_experts}, {"hidden_size", m->hidden_size}, {"embed_dim", m->embed_dim},
        {"spec_depth", m->spec_depth}, {"flags", h5p_meta_flags(m)},
    };
    if (write_attr_str(w, "format", FORMAT_NAME, err) < 0 || write_attr_str(w, "model_name", m->model_name, err) < 0 ||
        write_attr_str(w, "source", m->source, err) < 0 ||
        write_attr_str(w, "probs_kind", ms_probs_kind_name(m->probs_kind), err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (write_attr_u32(w, ints[i].name, ints[i].v, err) < 0)
            return -1;
    return 0;
}

#define STR_(x) #x
#define STR(x) STR_(x)
const char *ms_trace_storage_tag(void)
{
    return "v" STR(MS_TRACE_FORMAT_VERSION) " zstd " STR(ZSTD_LEVEL) ", floats zstd " STR(ZSTD_LEVEL_FLOAT)
           ", fletcher32, chunks " STR(CHUNK_TARGET_BYTES);
}

/* First-axis entries per chunk: about CHUNK_TARGET_BYTES per chunk. */
static hsize_t chunk_entries(size_t entry_bytes)
{
    hsize_t n = CHUNK_TARGET_BYTES / (entry_bytes ? entry_bytes : 1);
    return n ? n : 1;
}

/* Empty, extendible along the first axis, chunked, zstd-compressed, then
 * Fletcher32-checksummed (the checksum covers the stored bytes, so a reader
 * checks it before decompressing), without timestamps (same trace in, same
 * bytes out).  The chunk cache holds the chunk being filled and one more:
 * appends are sequential, and it bounds what HDF5 holds unwritten. */
static int create_dataset(ms_trace_writer *w, ds_id d, ms_err *err)
{
    const ds_desc *dd = &h5p_ds_table[d];
    int n_inner = h5p_ds_inner_dims(&w->meta, d, w->inner[d]);
    hsize_t dims[4] = {0}, maxdims[4] = {H5S_UNLIMITED}, chunk[4];
    size_t entry = h5p_elem_size(dd->type);
    for (int i = 0; i < n_inner; i++) {
        dims[1 + i] = maxdims[1 + i] = chunk[1 + i] = w->inner[d][i];
        entry *= w->inner[d][i] ? w->inner[d][i] : 1;
    }
    chunk[0] = chunk_entries(entry);
    w->entry[d] = entry;
    w->chunk0[d] = chunk[0];
    w->cache[d] = 2 * (size_t)chunk[0] * entry + ((size_t)64 << 10);
    /* cd_values are unsigned: a negative level travels as its two's complement */
    int level = dd->type == T_F32 || dd->type == T_F64 ? ZSTD_LEVEL_FLOAT : ZSTD_LEVEL;
    unsigned cd_level = (unsigned)level;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1 + n_inner, chunk);
    H5Pset_filter(dcpl, ZSTD_FILTER_ID, H5Z_FLAG_MANDATORY, 1, &cd_level);
    H5Pset_fletcher32(dcpl);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_chunk_cache(dapl, CACHE_SLOTS, w->cache[d], 1.0);
    hid_t sp = H5Screate_simple(1 + n_inner, dims, maxdims);
    w->ds[d] = H5Dcreate2(w->file, dd->path, h5p_file_type(dd->type), sp, H5P_DEFAULT, dcpl, dapl);
    int rc = w->ds[d] < 0 ? h5p_h5_fail(err, w->path, dd->path, "cannot create the dataset") : 0;
    H5Sclose(sp);
    H5Pclose(dapl);
    H5Pclose(dcpl);
    w->n_inner[d] = n_inner;
    return rc;
}

static int create_layout(ms_trace_writer *w, ms_err *err)
{
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_obj_track_times(gcpl, 0);
    H5Pset_link_phase_change(gcpl, MAX_COMPACT, MAX_COMPACT - 8);
    int rc = 0;
    for (size_t g = 0; g < sizeof h5p_group_names / sizeof h5p_group_names[0] && rc == 0; g++) {
        if ((!strcmp(h5p_group_names[g], "/tokens") && !w->meta.has_token_ids) ||
            (!strcmp(h5p_group_names[g], "/text") && !w->meta.has_text))
            continue;
        hid_t id = H5Gcreate2(w->file, h5p_group_names[g], H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (id < 0)
            rc = h5p_h5_fail(err, w->path, h5p_group_names[g], "cannot create the group");
        else
            H5Gclose(id);
    }
    H5Pclose(gcpl);
    for (int d = 0; d < D_COUNT && rc == 0; d++)
        if (h5p_ds_wanted(&w->meta, (ds_id)d))
            rc = create_dataset(w, (ds_id)d, err);
    return rc;
}

/* Appends n entries along the first axis of dataset d. */
static int append(ms_trace_writer *w, ds_id d, uint64_t n, const void *buf, ms_err *err)
{
    if (n == 0)
        return 0;
    int rank = 1 + w->n_inner[d];
    hsize_t newdims[4], off[4] = {w->size[d], 0, 0, 0}, cnt[4];
    newdims[0] = w->size[d] + n;
    cnt[0] = n;
    for (int i = 1; i < rank; i++)
        newdims[i] = cnt[i] = w->inner[d][i - 1];
    if (H5Dset_extent(w->ds[d], newdims) < 0) {
        w->failed = 1;
        return h5p_h5_fail(err, w->path, h5p_ds_table[d].path, "cannot extend the dataset");
    }
    hid_t fs = H5Dget_space(w->ds[d]);
    hid_t ms = H5Screate_simple(rank, cnt, NULL);
    herr_t st = H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
    if (st >= 0)
        st = H5Dwrite(w->ds[d], h5p_mem_type(h5p_ds_table[d].type), ms, fs, H5P_DEFAULT, buf);
    int rc = 0;
    if (st < 0) {
        w->failed = 1;
        rc = h5p_h5_fail(err, w->path, h5p_ds_table[d].path, "cannot write");
    }
    H5Sclose(ms);
    H5Sclose(fs);
    w->size[d] += n;
    return rc;
}

static void writer_free(ms_trace_writer *w)
{
    ms_trace_meta_free(&w->meta);
    free(w->iter_start);
    free(w->row_start);
    free(w->token_start);
    free(w->text_start);
    free(w->n_tokens);
    free(w->n_text);
    h5p_digest_free(w->dig);
    free(w->path);
    free(w);
}

/* Closes every HDF5 object and the file; with ok, renames the temporary
 * over the path (sim/core/out.h: fsync, rename), else removes it.  Frees w.
 * Returns 0, or -1 with one line when ok and something failed (then the
 * temporary is removed too). */
static int writer_finish(ms_trace_writer *w, int ok, ms_err *err)
{
    for (int d = 0; d < D_COUNT; d++) {
        if (w->ds[d] >= 0 && H5Dclose(w->ds[d]) < 0 && ok) {
            h5p_h5_fail(err, w->path, h5p_ds_table[d].path, "cannot finish the dataset");
            ok = 0;
        }
        w->ds[d] = H5I_INVALID_HID;
    }
    if (w->file >= 0 && H5Fclose(w->file) < 0 && ok) {
        h5p_h5_fail(err, w->path, NULL, "cannot finish the HDF5 file");
        ok = 0;
    }
    w->file = H5I_INVALID_HID;
    if (w->rfd >= 0) {
        /* give back the reserved blocks past the end of the file */
        struct stat st;
        if (ok && fstat(w->rfd, &st) == 0 && ftruncate(w->rfd, st.st_size) != 0) {
            ms_fail(err, "%s: cannot trim the temporary %s: %s", w->path, w->tmp_path, strerror(errno));
            ok = 0;
        }
        close(w->rfd);
        w->rfd = -1;
    }
    int rc = ok ? 0 : -1;
    if (w->have_tmp) {
        ms_err tmp_err;
        if (ms_out_tmp_end(w->tmp_path, w->path, ok, ok ? err : &tmp_err) < 0)
            rc = -1;
    }
    writer_free(w);
    return rc;
}

void ms_writer_abort(ms_trace_writer *w)
{
    if (w) {
        ms_err ignored;
        writer_finish(w, 0, &ignored);
    }
}

static void copy_meta_dims(ms_trace_meta *dst, const ms_trace_meta *src)
{
    *dst = *src;
    dst->version = MS_TRACE_FORMAT_VERSION;
    dst->content_sha256[0] = '\0';
    dst->expert_bytes = dst->dense_bytes = NULL;
    dst->req_id = NULL;
    dst->req_arrival_s = NULL;
    dst->req_prompt_len = dst->req_output_len = dst->req_n_iters = NULL;
    dst->req_n_rows = NULL;
    dst->n_requests = dst->n_iterations = dst->n_rows = 0;
    ms_trace_meta_alloc_layers(dst);
    memcpy(dst->expert_bytes, src->expert_bytes, src->L * sizeof *dst->expert_bytes);
    memcpy(dst->dense_bytes, src->dense_bytes, src->L * sizeof *dst->dense_bytes);
}

/* HDF5's 1.10 file format (superblock v3, object header v2, extensible-array
 * chunk indexes: all checksummed; Debian 12's HDF5 1.10.8 and h5py read
 * it), attributes and links kept in the object headers. */
static hid_t create_file(ms_trace_writer *w)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_obj_track_times(fcpl, 0);
    H5Pset_attr_phase_change(fcpl, MAX_COMPACT, MAX_COMPACT - 8);
    H5Pset_link_phase_change(fcpl, MAX_COMPACT, MAX_COMPACT - 8);
    hid_t f = H5Fcreate(w->tmp_path, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    return f;
}

/* The file is written as a temporary beside path (ms_out_tmp_begin) and
 * renamed over path on close, so a killed or failed writer never leaves a
 * file under the final name; a signal removes the temporary. */
ms_trace_writer *ms_writer_open(const char *path, const ms_trace_meta *meta, ms_err *err)
{
    if (h5p_h5_start(err) < 0 || h5p_validate_meta(meta, path, err) < 0)
        return NULL;
    ms_trace_writer *w = ms_xcalloc(1, sizeof *w);
    w->path = ms_xstrdup(path);
    w->file = H5I_INVALID_HID;
    w->rfd = -1;
    for (int d = 0; d < D_COUNT; d++)
        w->ds[d] = H5I_INVALID_HID;
    copy_meta_dims(&w->meta, meta);
    if (ms_out_tmp_begin("output", path, w->tmp_path, sizeof w->tmp_path, err) < 0) {
        writer_free(w);
        return NULL;
    }
    w->have_tmp = 1;
    if (probe_space(w, err) < 0)
        goto fail;
    w->file = create_file(w);
    if (w->file < 0) {
        h5p_h5_fail(err, w->path, NULL, "cannot create the HDF5 file");
        goto fail;
    }
    w->rfd = open(w->tmp_path, O_WRONLY | O_CLOEXEC);
    if (reserve(w, 0, err) < 0 || write_root_attributes(w, err) < 0 || create_layout(w, err) < 0 ||
        append(w, D_EXPERT_BYTES, w->meta.L, w->meta.expert_bytes, err) < 0 ||
        append(w, D_DENSE_BYTES, w->meta.L, w->meta.dense_bytes, err) < 0)
        goto fail;
    w->dig = h5p_digest_new(&w->meta, 1);
    return w;
fail:
    ms_writer_abort(w);
    return NULL;
}

static int append_iterations(ms_trace_writer *w, const ms_request *q, ms_err *err)
{
    uint64_t n = q->n_iters;
    uint8_t *phase = ms_xcalloc(n, 1);
    uint64_t *row = ms_xcalloc(n, sizeof *row);
    uint32_t *rows = ms_xcalloc(n, sizeof *rows);
    for (uint64_t k = 0; k < n; k++) {
        phase[k] = q->iters[k].phase == MS_PHASE_DECODE;
        row[k] = w->meta.n_rows + q->iters[k].row0;
        rows[k] = q->iters[k].n_rows;
    }
    int rc = append(w, D_IT_PHASE, n, phase, err);
    if (rc == 0)
        rc = append(w, D_IT_ROW_START, n, row, err);
    if (rc == 0)
        rc = append(w, D_IT_N_ROWS, n, rows, err);
    if (rc == 0 && q->embedding)
        rc = append(w, D_IT_EMBED, n, q->embedding, err);
    free(phase);
    free(row);
    free(rows);
    return rc;
}

static int append_rows(ms_trace_writer *w, const ms_request *q, ms_err *err)
{
    uint64_t n = q->n_rows;
    if (append(w, D_ROW_TOPK_IDS, n, q->topk_ids, err) < 0 || append(w, D_ROW_TOPK_W, n, q->topk_w, err) < 0)
        return -1;
    if (q->probs && append(w, D_ROW_PROBS, n, q->probs, err) < 0)
        return -1;
    if (q->recorded_hit && append(w, D_ROW_HIT, n, q->recorded_hit, err) < 0)
        return -1;
    if (q->spec_ids && (append(w, D_ROW_SPEC_IDS, n, q->spec_ids, err) < 0 ||
                        append(w, D_ROW_SPEC_W, n, q->spec_w, err) < 0))
        return -1;
    return 0;
}

static void push_request_entry(ms_trace_writer *w, const ms_request *q, uint32_t text_bytes)
{
    ms_trace_meta *m = &w->meta;
    uint64_t i = m->n_requests;
    if (i == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        m->req_id = ms_xrealloc(m->req_id, w->cap, sizeof *m->req_id);
        m->req_arrival_s = ms_xrealloc(m->req_arrival_s, w->cap, sizeof *m->req_arrival_s);
        m->req_prompt_len = ms_xrealloc(m->req_prompt_len, w->cap, sizeof *m->req_prompt_len);
        m->req_output_len = ms_xrealloc(m->req_output_len, w->cap, sizeof *m->req_output_len);
        m->req_n_iters = ms_xrealloc(m->req_n_iters, w->cap, sizeof *m->req_n_iters);
        m->req_n_rows = ms_xrealloc(m->req_n_rows, w->cap, sizeof *m->req_n_rows);
        w->iter_start = ms_xrealloc(w->iter_start, w->cap, sizeof *w->iter_start);
        w->row_start = ms_xrealloc(w->row_start, w->cap, sizeof *w->row_start);
        w->token_start = ms_xrealloc(w->token_start, w->cap, sizeof *w->token_start);
        w->n_tokens = ms_xrealloc(w->n_tokens, w->cap, sizeof *w->n_tokens);
        w->text_start = ms_xrealloc(w->text_start, w->cap, sizeof *w->text_start);
        w->n_text = ms_xrealloc(w->n_text, w->cap, sizeof *w->n_text);
    }
    m->req_id[i] = q->id;
    m->req_arrival_s[i] = q->arrival_s;
    m->req_prompt_len[i] = q->prompt_len;
    m->req_output_len[i] = q->output_len;
    m->req_n_iters[i] = q->n_iters;
    m->req_n_rows[i] = q->n_rows;
    w->iter_start[i] = m->n_iterations;
    w->row_start[i] = m->n_rows;
    w->token_start[i] = w->n_tokens_total;
    w->n_tokens[i] = q->n_tokens;
    w->text_start[i] = w->n_text_total;
    w->n_text[i] = text_bytes;
    m->n_requests++;
    m->n_iterations += q->n_iters;
    m->n_rows += q->n_rows;
    w->n_tokens_total += q->n_tokens;
    w->n_text_total += text_bytes;
}

int ms_writer_add(ms_trace_writer *w, const ms_request *q, ms_err *err)
{
    ms_trace_meta *m = &w->meta;
    if (w->failed)
        return ms_fail(err, "%s: an earlier write failed; the trace is incomplete", w->path);
    if (ms_request_check(m, q, w->path, err) < 0)
        return -1;
    if (m->n_requests > 0 && q->arrival_s < m->req_arrival_s[m->n_requests - 1])
        return ms_fail(err, "%s: request %" PRIu64 ": arrival_s = %.9g before the previous request's %.9g "
                       "(arrivals must be non-decreasing)", w->path, q->id, q->arrival_s,
                       m->req_arrival_s[m->n_requests - 1]);
    size_t text = q->text ? strlen(q->text) : 0;
    if (text > UINT32_MAX)
        return ms_fail(err, "%s: request %" PRIu64 ": text of %zu bytes, at most %u", w->path, q->id, text, UINT32_MAX);
    if (reserve(w, ms_trace_request_bytes(m, q->n_rows, q->n_iters, q->n_tokens, text), err) < 0)
        return -1;
    if (append_rows(w, q, err) < 0 || append_iterations(w, q, err) < 0)
        return -1;
    if (q->token_ids && append(w, D_TOK_IDS, q->n_tokens, q->token_ids, err) < 0)
        return -1;
    if (q->text && append(w, D_TEXT_UTF8, text, q->text, err) < 0)
        return -1;
    h5p_digest_request(w->dig, m, q);
    push_request_entry(w, q, (uint32_t)text);
    if (progress_fn)
        progress_fn(progress_ctx, m->n_requests, m->n_rows, file_bytes(w));
    return 0;
}

static int write_request_table(ms_trace_writer *w, ms_err *err)
{
    ms_trace_meta *m = &w->meta;
    uint64_t n = m->n_requests;
    if (h5p_check_unique_ids(m->req_id, n, w->path, err) < 0)
        return -1;
    if (reserve(w, n * ms_trace_request_bytes(m, 0, 0, 0, 0), err) < 0)
        return -1;
    struct { ds_id d; const void *buf; } cols[] = {
        {D_REQ_ID, m->req_id}, {D_REQ_ARRIVAL, m->req_arrival_s}, {D_REQ_PROMPT, m->req_prompt_len},
        {D_REQ_OUTPUT, m->req_output_len}, {D_REQ_ITER_START, w->iter_start}, {D_REQ_N_ITERS, m->req_n_iters},
        {D_REQ_ROW_START, w->row_start}, {D_REQ_N_ROWS, m->req_n_rows}, {D_REQ_TOKEN_START, w->token_start},
        {D_REQ_N_TOKENS, w->n_tokens}, {D_REQ_TEXT_START, w->text_start}, {D_REQ_N_TEXT, w->n_text},
    };
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
        if (w->ds[cols[c].d] >= 0 && append(w, cols[c].d, n, cols[c].buf, err) < 0)
            return -1;
    return 0;
}

/* The content digest of everything written, as root attribute. */
static int write_digest(ms_trace_writer *w, ms_err *err)
{
    h5p_digest_final(w->dig, &w->meta, w->meta.content_sha256);
    w->dig = NULL;
    return write_attr_str(w, DIGEST_ATTR, w->meta.content_sha256, err);
}

int ms_writer_close(ms_trace_writer *w, ms_err *err)
{
    if (!w)
        return 0;
    int rc = 0;
    if (w->failed)
        rc = ms_fail(err, "%s: not written: an earlier write failed", w->path);
    else if (write_request_table(w, err) < 0 || write_digest(w, err) < 0)
        rc = -1;
    if (rc < 0) {
        ms_writer_abort(w);
        return -1;
    }
    return writer_finish(w, 1, err);
}
