/* Opening a trace file (trace.h ms_reader_open): the superblock and root
 * attributes, every dataset's type and layout, the layer sizes and the
 * request table, each checked (trace_h5_parts.h). */
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

static H5T_conv_ret_t abort_on_range(H5T_conv_except_t kind, hid_t src, hid_t dst, void *s, void *d, void *u)
{
    (void)src; (void)dst; (void)s; (void)d; (void)u;
    if (kind == H5T_CONV_EXCEPT_RANGE_HI || kind == H5T_CONV_EXCEPT_RANGE_LOW)
        return H5T_CONV_ABORT;
    return H5T_CONV_UNHANDLED;
}

static int open_hdf5_file(ms_trace_reader *r, ms_err *err)
{
    struct stat st;
    if (stat(r->path, &st) != 0)
        return ms_fail(err, "%s: cannot open: %s", r->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ms_fail(err, "%s: not a regular file", r->path);
    htri_t is = H5Fis_hdf5(r->path);
    if (is < 0)
        return h5p_h5_fail(err, r->path, NULL, "cannot read the file");
    if (is == 0)
        return ms_fail(err, "%s: not an HDF5 file (no HDF5 signature)", r->path);
    r->file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0)
        return h5p_h5_fail(err, r->path, NULL, "cannot open the HDF5 file");
    r->dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_type_conv_cb(r->dxpl, abort_on_range, NULL);
    return 0;
}

/* An attribute of the root group: one value (scalar or [1]) of class cls. */
static hid_t open_root_attr(ms_trace_reader *r, const char *name, H5T_class_t cls, hid_t *type, ms_err *err)
{
    htri_t ex = H5Aexists(r->file, name);
    if (ex < 0)
        return h5p_h5_fail(err, r->path, name, "cannot look up the root attribute");
    if (ex == 0)
        return ms_fail(err, "%s: root attribute '%s' missing", r->path, name);
    hid_t a = H5Aopen(r->file, name, H5P_DEFAULT);
    if (a < 0)
        return h5p_h5_fail(err, r->path, name, "cannot open the root attribute");
    hid_t sp = H5Aget_space(a);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    H5Sclose(sp);
    *type = H5Aget_type(a);
    if (n != 1 || H5Tget_class(*type) != cls) {
        H5Tclose(*type);
        H5Aclose(a);
        return ms_fail(err, "%s: root attribute '%s' is not a single %s", r->path, name,
                       cls == H5T_STRING ? "string" : "integer");
    }
    return a;
}

static int read_attr_uint32(ms_trace_reader *r, const char *name, uint32_t *out, ms_err *err)
{
    hid_t type;
    hid_t a = open_root_attr(r, name, H5T_INTEGER, &type, err);
    if (a < 0)
        return -1;
    /* Read through int64 / uint64 so negative and huge values are seen. */
    int is_signed = H5Tget_sign(type) == H5T_SGN_2;
    int64_t sv = 0;
    uint64_t uv = 0;
    herr_t st = is_signed ? H5Aread(a, H5T_NATIVE_INT64, &sv) : H5Aread(a, H5T_NATIVE_UINT64, &uv);
    if (st < 0) {
        h5p_h5_fail(err, r->path, name, "cannot read the root attribute");
        H5Tclose(type);
        H5Aclose(a);
        return -1;
    }
    H5Tclose(type);
    H5Aclose(a);
    if (is_signed && sv < 0)
        return ms_fail(err, "%s: root attribute '%s' = %" PRId64 " is negative", r->path, name, sv);
    uint64_t v = is_signed ? (uint64_t)sv : uv;
    if (v > UINT32_MAX)
        return ms_fail(err, "%s: root attribute '%s' = %" PRIu64 " out of range [0, %u]", r->path, name, v,
                       UINT32_MAX);
    *out = (uint32_t)v;
    return 0;
}

/* Fixed-length or (v1 only: h5py's default, but held in HDF5's global heap,
 * which has no checksum) variable-length string attribute.  *vlen (when not
 * NULL) tells which it was. */
static int read_attr_string(ms_trace_reader *r, const char *name, char *buf, size_t cap, int allow_vlen, int *vlen,
                            ms_err *err)
{
    hid_t type;
    hid_t a = open_root_attr(r, name, H5T_STRING, &type, err);
    if (a < 0)
        return -1;
    int rc = 0;
    size_t len = 0;
    int is_vlen = H5Tis_variable_str(type) > 0;
    if (vlen)
        *vlen = is_vlen;
    if (is_vlen && !allow_vlen) {
        rc = ms_fail(err, "%s: root attribute '%s' is a variable-length string; format v2 stores fixed-length "
                     "strings", r->path, name);
    } else if (is_vlen) {
        hid_t mt = h5p_vlen_string_type(H5Tget_cset(type));
        char *s = NULL;
        if (H5Aread(a, mt, &s) < 0) {
            rc = h5p_h5_fail(err, r->path, name, "cannot read the root attribute");
        } else {
            len = s ? strlen(s) : 0;
            if (len < cap)
                memcpy(buf, s ? s : "", len + 1);
            H5free_memory(s);
        }
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(type);
        char *tmp = ms_xcalloc(n + 1, 1);
        hid_t mt = H5Tcopy(type);
        if (H5Aread(a, mt, tmp) < 0)
            rc = h5p_h5_fail(err, r->path, name, "cannot read the root attribute");
        len = strlen(tmp);
        if (rc == 0 && len < cap)
            memcpy(buf, tmp, len + 1);
        H5Tclose(mt);
        free(tmp);
    }
    H5Tclose(type);
    H5Aclose(a);
    if (rc == 0 && len >= cap)
        return ms_fail(err, "%s: root attribute '%s' is %zu bytes long, at most %zu allowed", r->path, name, len,
                       cap - 1);
    return rc;
}

/* v2: the stored content digest, 64 lowercase hex digits. */
static int read_digest_attr(ms_trace_reader *r, ms_err *err)
{
    char *hex = r->meta.content_sha256;
    if (read_attr_string(r, DIGEST_ATTR, hex, MS_DIGEST_HEX, 0, NULL, err) < 0)
        return -1;
    size_t n = strlen(hex);
    int ok = n == MS_DIGEST_HEX - 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = (hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f');
    if (!ok)
        return ms_fail(err, "%s: root attribute '" DIGEST_ATTR "' = '%s' is not 64 lowercase hex digits", r->path, hex);
    return 0;
}

/* v2 promises checksums on HDF5's metadata: superblock version 2 or later
 * (HDF5 1.8+ file format, with checksummed object headers). */
static int check_v2_superblock(ms_trace_reader *r, ms_err *err)
{
    H5F_info2_t info;
    if (H5Fget_info2(r->file, &info) < 0)
        return h5p_h5_fail(err, r->path, NULL, "cannot read the superblock");
    if (info.super.version < 2)
        return ms_fail(err, "%s: superblock version %u: format v2 needs HDF5's checksummed metadata (superblock "
                       "version 2 or later: create the file with libver bounds 1.10)", r->path, info.super.version);
    return 0;
}

static int read_root_attributes(ms_trace_reader *r, ms_err *err)
{
    ms_trace_meta *m = &r->meta;
    char format[64], kind[64];
    uint32_t version, flags;
    int format_vlen = 0;
    if (read_attr_string(r, "format", format, sizeof format, 1, &format_vlen, err) < 0)
        return -1;
    if (strcmp(format, FORMAT_NAME))
        return ms_fail(err, "%s: root attribute 'format' = '%s', expected '%s'", r->path, format, FORMAT_NAME);
    if (read_attr_uint32(r, "version", &version, err) < 0)
        return -1;
    if (version < MS_TRACE_FORMAT_OLDEST || version > MS_TRACE_FORMAT_VERSION)
        return ms_fail(err, "%s: root attribute 'version' = %u unsupported (this moesim reads versions %d to %d)",
                       r->path, version, MS_TRACE_FORMAT_OLDEST, MS_TRACE_FORMAT_VERSION);
    m->version = version;
    int v1 = version == 1;
    if (!v1 && format_vlen)
        return ms_fail(err, "%s: root attribute 'format' is a variable-length string; format v2 stores fixed-length "
                       "strings", r->path);
    if (!v1 && (check_v2_superblock(r, err) < 0 || read_digest_attr(r, err) < 0))
        return -1;
    struct { const char *name; uint32_t *dst; } ints[] = {
        {"L", &m->L}, {"J", &m->J}, {"K", &m->K}, {"shared_experts", &m->shared_experts},
        {"hidden_size", &m->hidden_size}, {"embed_dim", &m->embed_dim}, {"spec_depth", &m->spec_depth},
        {"flags", &flags},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (read_attr_uint32(r, ints[i].name, ints[i].dst, err) < 0)
            return -1;
    if (read_attr_string(r, "model_name", m->model_name, sizeof m->model_name, v1, NULL, err) < 0 ||
        read_attr_string(r, "source", m->source, sizeof m->source, v1, NULL, err) < 0 ||
        read_attr_string(r, "probs_kind", kind, sizeof kind, v1, NULL, err) < 0)
        return -1;
    if (ms_probs_kind_parse(kind, &m->probs_kind) < 0)
        return ms_fail(err, "%s: root attribute 'probs_kind' = '%s' unknown (full, topk_renorm, topk_raw, topk_ids)", r->path,
                       kind);
    if (flags & ~FLAG_KNOWN)
        return ms_fail(err, "%s: root attribute 'flags' = %u has unknown bits (known: 1 token ids, 2 text, "
                       "4 recorded hits)", r->path, flags);
    m->has_token_ids = (flags & FLAG_TOKEN_IDS) != 0;
    m->has_text = (flags & FLAG_TEXT) != 0;
    m->has_recorded_hits = (flags & FLAG_RECORDED_HITS) != 0;
    return 0;
}

/* Whether path exists, checking each group on the way (H5Lexists fails on
 * a missing intermediate group): 1, 0, or -1 with err when HDF5 cannot tell
 * (a damaged group: not the same as a missing dataset). */
static int link_exists(ms_trace_reader *r, const char *path, ms_err *err)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            htri_t ex = H5Lexists(r->file, buf, H5P_DEFAULT);
            if (ex < 0)
                return h5p_h5_fail(err, r->path, buf, "cannot look up the link");
            if (ex == 0)
                return 0;
            if (c == 0)
                return 1;
            *p = c;
        }
    }
}

/* Chunk cache big enough that sequential requests never decompress a chunk
 * twice: a few chunks per dataset. */
static hid_t access_plist_for(hid_t ds)
{
    size_t bytes = CACHE_MIN_BYTES;
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t cd[8];
        int n = H5Pget_chunk(dcpl, 8, cd);
        hid_t t = H5Dget_type(ds);
        size_t chunk = t >= 0 ? H5Tget_size(t) : 8;
        for (int i = 0; i < n; i++)
            chunk = cd[i] && chunk > CACHE_MAX_BYTES / cd[i] ? CACHE_MAX_BYTES : chunk * cd[i];
        if (t >= 0)
            H5Tclose(t);
        if (chunk > CACHE_MAX_BYTES / 4)
            bytes = CACHE_MAX_BYTES;
        else if (4 * chunk > bytes)
            bytes = 4 * chunk;
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_chunk_cache(dapl, CACHE_SLOTS, bytes, 1.0);
    return dapl;
}

static int open_dataset(ms_trace_reader *r, ds_id d, ms_err *err)
{
    const char *path = h5p_ds_table[d].path;
    hid_t ds = H5Dopen2(r->file, path, H5P_DEFAULT);
    if (ds < 0)
        return h5p_h5_fail(err, r->path, path, "cannot open the dataset");
    hid_t dapl = access_plist_for(ds);
    H5Dclose(ds);
    r->ds[d] = H5Dopen2(r->file, path, dapl);
    H5Pclose(dapl);
    if (r->ds[d] < 0)
        return h5p_h5_fail(err, r->path, path, "cannot open the dataset");
    return 0;
}

static void format_dims(char *buf, size_t cap, int rank, const hsize_t *dims)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* v2: chunked, with HDF5's Fletcher32 checksum in the filter pipeline. */
static int check_v2_storage(ms_trace_reader *r, ds_id d, ms_err *err)
{
    hid_t dcpl = H5Dget_create_plist(r->ds[d]);
    if (dcpl < 0)
        return h5p_h5_fail(err, r->path, h5p_ds_table[d].path, "cannot read the dataset's storage");
    int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED;
    unsigned flags = 0, conf = 0;
    size_t nelmts = 0;
    int fletcher = chunked && H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, &nelmts, NULL, 0, NULL,
                                                    &conf) >= 0;
    H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
    if (!chunked || !fletcher)
        return ms_fail(err, "%s: %s: %s; format v2 checksums every chunk (Fletcher32 filter)", r->path,
                       h5p_ds_table[d].path, chunked ? "no Fletcher32 filter" : "not chunked");
    return 0;
}

/* v2: every dataset checksummed (after the shape checks, which name the
 * more telling problem). */
static int check_v2_datasets(ms_trace_reader *r, ms_err *err)
{
    for (int d = 0; d < D_COUNT && r->meta.version >= 2; d++)
        if (r->ds[d] >= 0 && check_v2_storage(r, (ds_id)d, err) < 0)
            return -1;
    return 0;
}

/* Class, rank and the dimensions after the first; the first is checked
 * against the request table later. */
static int check_dataset_layout(ms_trace_reader *r, ds_id d, ms_err *err)
{
    const ds_desc *dd = &h5p_ds_table[d];
    hid_t t = H5Dget_type(r->ds[d]);
    H5T_class_t cls = H5Tget_class(t);
    int vlen = cls == H5T_STRING && H5Tis_variable_str(t) > 0;
    H5Tclose(t);
    if (cls != h5p_elem_class(dd->type))
        return ms_fail(err, "%s: %s: stored as HDF5 class %d, expected %s", r->path, dd->path, (int)cls,
                       dd->type == T_STR ? "string" : h5p_elem_class(dd->type) == H5T_FLOAT ? "float" : "integer");
    if (dd->type == T_STR && !vlen)
        return ms_fail(err, "%s: %s: fixed-length strings, expected variable-length UTF-8 strings", r->path, dd->path);
    hid_t sp = H5Dget_space(r->ds[d]);
    int rank = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[8] = {0};
    if (rank >= 1 && rank <= 8)
        H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    hsize_t inner[3] = {0};
    int n_inner = h5p_ds_inner_dims(&r->meta, d, inner);
    int ok = rank == 1 + n_inner;
    for (int i = 0; ok && i < n_inner; i++)
        ok = dims[1 + i] == inner[i];
    if (!ok) {
        char have[96], want[96];
        hsize_t w[4] = {dims[0], inner[0], inner[1], inner[2]};
        format_dims(have, sizeof have, rank < 0 ? 0 : rank > 8 ? 8 : rank, dims);
        format_dims(want, sizeof want, 1 + n_inner, w);
        return ms_fail(err, "%s: %s: shape %s, expected %s = %s", r->path, dd->path, have, dd->shape, want);
    }
    r->rank[d] = rank;
    memcpy(r->dims[d], dims, sizeof r->dims[d]);
    return 0;
}

static int open_datasets(ms_trace_reader *r, ms_err *err)
{
    const ms_trace_meta *m = &r->meta;
    for (int d = 0; d < D_COUNT; d++) {
        int present = link_exists(r, h5p_ds_table[d].path, err);
        if (present < 0)
            return -1;
        int wanted = h5p_ds_wanted(m, (ds_id)d);
        int optional = m->probs_kind == MS_PROBS_FULL && (d == D_ROW_TOPK_IDS || d == D_ROW_TOPK_W);
        if (wanted && !present && !optional)
            return ms_fail(err, "%s: dataset %s missing", r->path, h5p_ds_table[d].path);
        if (present && !wanted && d == D_REQ_TEXT && m->version >= 2)
            return ms_fail(err, "%s: dataset /requests/text (variable-length strings) is format v1; format v2 keeps "
                           "the text in /text/utf8", r->path);
        if (present && !wanted)
            return ms_fail(err, "%s: dataset %s present but the root attributes say the trace has none "
                           "(flags %u, probs_kind %s, embed_dim %u, spec_depth %u)", r->path, h5p_ds_table[d].path,
                           h5p_meta_flags(m), ms_probs_kind_name(m->probs_kind), m->embed_dim, m->spec_depth);
        if (present && (open_dataset(r, (ds_id)d, err) < 0 || check_dataset_layout(r, (ds_id)d, err) < 0))
            return -1;
    }
    if ((r->ds[D_ROW_TOPK_IDS] >= 0) != (r->ds[D_ROW_TOPK_W] >= 0))
        return ms_fail(err, "%s: /rows/topk_ids and /rows/topk_w must be stored together", r->path);
    r->derive_topk = r->ds[D_ROW_TOPK_IDS] < 0;
    return 0;
}

/* Reads the whole of a 1-D dataset (n elements, checked by the caller). */
static int read_column(ms_trace_reader *r, ds_id d, void *buf, ms_err *err)
{
    if (r->dims[d][0] == 0)
        return 0;
    if (H5Dread(r->ds[d], h5p_mem_type(h5p_ds_table[d].type), H5S_ALL, H5S_ALL, r->dxpl, buf) < 0)
        return h5p_h5_fail(err, r->path, h5p_ds_table[d].path, "cannot read");
    return 0;
}

static int check_first_dim(ms_trace_reader *r, ds_id d, uint64_t want, const char *what, ms_err *err)
{
    if (r->ds[d] >= 0 && r->dims[d][0] != want)
        return ms_fail(err, "%s: %s: %llu entries along the first axis, expected %" PRIu64 " (%s)", r->path,
                       h5p_ds_table[d].path, (unsigned long long)r->dims[d][0], want, what);
    return 0;
}

static int read_layers(ms_trace_reader *r, ms_err *err)
{
    ms_trace_meta *m = &r->meta;
    ms_trace_meta_alloc_layers(m);
    if (check_first_dim(r, D_EXPERT_BYTES, m->L, "L", err) < 0 || check_first_dim(r, D_DENSE_BYTES, m->L, "L", err) < 0 ||
        read_column(r, D_EXPERT_BYTES, m->expert_bytes, err) < 0 || read_column(r, D_DENSE_BYTES, m->dense_bytes, err) < 0)
        return -1;
    return h5p_validate_meta(m, r->path, err);
}


/* One request's entry: counts consistent with the iteration rule, ranges
 * contiguous with the requests before it. */
static int check_request_entry(ms_trace_reader *r, uint64_t i, uint64_t iters, uint64_t rows, uint64_t toks,
                               uint64_t text, ms_err *err)
{
    const ms_trace_meta *m = &r->meta;
    const char *p = r->path;
    double t = m->req_arrival_s[i];
    uint64_t prompt = m->req_prompt_len[i], out = m->req_output_len[i];
    if (!isfinite(t) || t < 0)
        return ms_fail(err, "%s: /requests/arrival_s[%" PRIu64 "] = %g not a finite time >= 0", p, i, t);
    if (i > 0 && t < m->req_arrival_s[i - 1])
        return ms_fail(err, "%s: /requests/arrival_s[%" PRIu64 "] = %.9g before the previous request's %.9g "
                       "(arrivals must be non-decreasing)", p, i, t, m->req_arrival_s[i - 1]);
    if (prompt == 0)
        return ms_fail(err, "%s: /requests/prompt_len[%" PRIu64 "] = 0 (at least one prompt token)", p, i);
    if (m->req_n_iters[i] != out + 1)
        return ms_fail(err, "%s: /requests/n_iters[%" PRIu64 "] = %u, expected output_len + 1 = %" PRIu64, p, i,
                       m->req_n_iters[i], out + 1);
    if (m->req_n_rows[i] != prompt + out)
        return ms_fail(err, "%s: /requests/n_rows[%" PRIu64 "] = %" PRIu64 ", expected prompt_len + output_len = %"
                       PRIu64, p, i, m->req_n_rows[i], prompt + out);
    if (m->req_n_rows[i] > UINT32_MAX)
        return ms_fail(err, "%s: /requests/n_rows[%" PRIu64 "] = %" PRIu64 " more than a request may hold", p, i,
                       m->req_n_rows[i]);
    uint64_t want_tokens = m->has_token_ids ? prompt : 0;
    if (r->n_tokens[i] != want_tokens)
        return ms_fail(err, "%s: /requests/n_tokens[%" PRIu64 "] = %u, expected %" PRIu64, p, i, r->n_tokens[i],
                       want_tokens);
    struct { const char *name; uint64_t have, want; } starts[] = {
        {"iter_start", r->iter_start[i], iters}, {"row_start", r->row_start[i], rows},
        {"token_start", r->token_start[i], toks}, {"text_start", r->text_start ? r->text_start[i] : 0, text},
    };
    for (int k = 0; k < 4; k++)
        if (starts[k].have != starts[k].want)
            return ms_fail(err, "%s: /requests/%s[%" PRIu64 "] = %" PRIu64 ", expected %" PRIu64
                           " (contiguous after the requests before it)", p, starts[k].name, i, starts[k].have,
                           starts[k].want);
    return 0;
}

static int read_request_table(ms_trace_reader *r, ms_err *err)
{
    ms_trace_meta *m = &r->meta;
    uint64_t n = r->dims[D_REQ_ID][0];
    for (int d = 0; d < D_COUNT; d++)
        if (h5p_ds_table[d].axis == AX_REQ && check_first_dim(r, (ds_id)d, n, "one per request, as /requests/id", err) < 0)
            return -1;
    m->n_requests = n;
    m->req_id = ms_xcalloc(n, sizeof *m->req_id);
    m->req_arrival_s = ms_xcalloc(n, sizeof *m->req_arrival_s);
    m->req_prompt_len = ms_xcalloc(n, sizeof *m->req_prompt_len);
    m->req_output_len = ms_xcalloc(n, sizeof *m->req_output_len);
    m->req_n_iters = ms_xcalloc(n, sizeof *m->req_n_iters);
    m->req_n_rows = ms_xcalloc(n, sizeof *m->req_n_rows);
    r->iter_start = ms_xcalloc(n, sizeof *r->iter_start);
    r->row_start = ms_xcalloc(n, sizeof *r->row_start);
    r->token_start = ms_xcalloc(n, sizeof *r->token_start);
    r->n_tokens = ms_xcalloc(n, sizeof *r->n_tokens);
    int text_v2 = r->ds[D_REQ_TEXT_START] >= 0;
    if (text_v2) {
        r->text_start = ms_xcalloc(n, sizeof *r->text_start);
        r->n_text = ms_xcalloc(n, sizeof *r->n_text);
    }
    if (read_column(r, D_REQ_ID, m->req_id, err) < 0 || read_column(r, D_REQ_ARRIVAL, m->req_arrival_s, err) < 0 ||
        read_column(r, D_REQ_PROMPT, m->req_prompt_len, err) < 0 ||
        read_column(r, D_REQ_OUTPUT, m->req_output_len, err) < 0 ||
        read_column(r, D_REQ_N_ITERS, m->req_n_iters, err) < 0 || read_column(r, D_REQ_N_ROWS, m->req_n_rows, err) < 0 ||
        read_column(r, D_REQ_ITER_START, r->iter_start, err) < 0 ||
        read_column(r, D_REQ_ROW_START, r->row_start, err) < 0 ||
        read_column(r, D_REQ_TOKEN_START, r->token_start, err) < 0 ||
        read_column(r, D_REQ_N_TOKENS, r->n_tokens, err) < 0 ||
        (text_v2 && (read_column(r, D_REQ_TEXT_START, r->text_start, err) < 0 ||
                     read_column(r, D_REQ_N_TEXT, r->n_text, err) < 0)))
        return -1;
    uint64_t iters = 0, rows = 0, toks = 0, text = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (check_request_entry(r, i, iters, rows, toks, text, err) < 0)
            return -1;
        iters += m->req_n_iters[i];
        rows += m->req_n_rows[i];
        toks += r->n_tokens[i];
        text += text_v2 ? r->n_text[i] : 0;
    }
    if (h5p_check_unique_ids(m->req_id, n, r->path, err) < 0)
        return -1;
    m->n_iterations = iters;
    m->n_rows = rows;
    r->n_tokens_total = toks;
    r->n_text_total = text;
    for (int d = 0; d < D_COUNT; d++) {
        axis_kind ax = h5p_ds_table[d].axis;
        if (ax == AX_LAYER || ax == AX_REQ)
            continue;
        uint64_t want = ax == AX_TOK ? toks : ax == AX_TEXT ? text : ax == AX_ITER ? iters : rows;
        const char *what = ax == AX_TOK    ? "sum of /requests/n_tokens"
                           : ax == AX_TEXT ? "sum of /requests/n_text_bytes"
                           : ax == AX_ITER ? "sum of /requests/n_iters"
                                           : "sum of /requests/n_rows";
        if (check_first_dim(r, (ds_id)d, want, what, err) < 0)
            return -1;
    }
    return 0;
}

void ms_reader_close(ms_trace_reader *r)
{
    if (!r)
        return;
    for (int d = 0; d < D_COUNT; d++)
        h5p_close_id(&r->ds[d], H5Dclose);
    h5p_close_id(&r->dxpl, H5Pclose);
    h5p_close_id(&r->file, H5Fclose);
    ms_trace_meta_free(&r->meta);
    free(r->iter_start);
    free(r->row_start);
    free(r->token_start);
    free(r->n_tokens);
    free(r->text_start);
    free(r->n_text);
    free(r->path);
    ms_trace_cache_release(r->mem);
    h5p_checked_release(r->checked);
    free(r->own_marks);
    h5p_digest_free(r->dig);
    free(r);
}

/* Whether every request of the file was checked, with every part in
 * `parts`, by an earlier reader of this process (the shared marks of
 * trace_checked.c: same path, inode, size, mtime and content digest).  The
 * chunks it read then passed their Fletcher32 checksums, and the values
 * their checks. */
static int all_checked(const ms_trace_reader *r, unsigned parts)
{
    if (!r->checked)
        return 0;
    uint8_t want = (uint8_t)(H5P_CHECKED | (parts & MS_PART_ALL));
    for (uint64_t i = 0; i < r->meta.n_requests; i++)
        if ((r->marks[i] & want) != want)
            return 0;
    return 1;
}

/* A trace is checked once (issue 18.1): a pass over a file that this
 * process has already read and checked whole, with the same parts, skips
 * the chunks' Fletcher32 checksums as it skips the value checks (it reads
 * no chunk an earlier pass did not verify).  Any other pass, and every
 * content digest, verifies them. */
static void set_chunk_checksums(ms_trace_reader *r)
{
    if (r->dxpl != H5I_INVALID_HID)
        H5Pset_edc_check(r->dxpl, !r->dig && all_checked(r, r->parts) ? H5Z_DISABLE_EDC : H5Z_ENABLE_EDC);
}

int ms_reader_chunk_checksums(const ms_trace_reader *r)
{
    return r->dxpl != H5I_INVALID_HID && H5Pget_edc_check(r->dxpl) == H5Z_ENABLE_EDC;
}

/* Every part, and the marks of what was checked (trace_checked.c). */
static void start_reading(ms_trace_reader *r)
{
    r->parts = MS_PART_ALL;
    r->checked = h5p_checked_acquire(r->path, &r->meta);
    if (r->checked)
        r->marks = h5p_checked_marks(r->checked);
    else
        r->marks = r->own_marks = ms_xcalloc(r->meta.n_requests ? r->meta.n_requests : 1, 1);
    set_chunk_checksums(r);
}

/* A reader of path with nothing open yet. */
static ms_trace_reader *reader_new(const char *path)
{
    ms_trace_reader *r = ms_xcalloc(1, sizeof *r);
    r->path = ms_xstrdup(path);
    r->file = r->dxpl = H5I_INVALID_HID;
    for (int d = 0; d < D_COUNT; d++)
        r->ds[d] = H5I_INVALID_HID;
    return r;
}

/* A reader over a cached snapshot: no HDF5 object is opened. */
static ms_trace_reader *open_from_snapshot(const char *path, ms_trace_snapshot *s)
{
    ms_trace_reader *r = reader_new(path);
    ms_trace_meta_copy(&r->meta, ms_trace_snapshot_meta(s));
    r->mem = s;
    start_reading(r);
    return r;
}

ms_trace_snapshot *ms_reader_snapshot(const ms_trace_reader *r)
{
    return r->mem;
}

/* A v1 trace streamed has no stored digest: the SHA-256 of its bytes now,
 * right after the open (one pass over the file, remembered by its stat for
 * the process), so that results name what was opened; "" when unreadable. */
static void name_v1_stream(ms_trace_reader *r)
{
    ms_err err;
    _Static_assert(sizeof r->v1_sha256 == MS_DIGEST_HEX, "a hex SHA-256");
    if (r->meta.version < 2 && ms_digest_file_cached(r->path, r->v1_sha256, &err) != 0)
        r->v1_sha256[0] = '\0';
}

ms_trace_reader *ms_reader_open(const char *path, ms_err *err)
{
    ms_trace_snapshot *s = ms_trace_cache_acquire(path);
    if (s)
        return open_from_snapshot(path, s);
    ms_trace_reader *r = ms_reader_open_stream(path, err);
    if (r)
        name_v1_stream(r);
    return r;
}

/* The digest a streamed reader was opened with: v2 stored, v1 of its bytes. */
static const char *opened_digest(const ms_trace_reader *r)
{
    return r->meta.version >= 2 ? r->meta.content_sha256 : r->v1_sha256;
}

ms_trace_reader *ms_reader_open_again(const ms_trace_reader *r, ms_err *err)
{
    if (r->mem) {
        ms_trace_cache_hold(r->mem);
        return open_from_snapshot(r->path, r->mem);
    }
    ms_trace_reader *again = ms_reader_open_stream(r->path, err);
    if (again && r->v1_sha256[0])
        name_v1_stream(again);
    if (again && (again->meta.version >= 2) != (r->meta.version >= 2))
        ms_fail(err, "%s: the trace was replaced while a run read it (format v%u when the run opened it, v%u now)",
                r->path, r->meta.version, again->meta.version);
    else if (again && opened_digest(r)[0] && strcmp(opened_digest(again), opened_digest(r)))
        ms_fail(err, "%s: the trace was replaced while a run read it (%s %s when the run opened it, %s now)", r->path,
                r->meta.version >= 2 ? DIGEST_ATTR : "sha256", opened_digest(r)[0] ? opened_digest(r) : "unknown",
                opened_digest(again)[0] ? opened_digest(again) : "unknown");
    else
        return again;
    ms_reader_close(again);
    return NULL;
}

ms_trace_reader *ms_reader_open_stream(const char *path, ms_err *err)
{
    if (h5p_h5_start(err) < 0)
        return NULL;
    ms_trace_reader *r = reader_new(path);
    if (open_hdf5_file(r, err) < 0 || read_root_attributes(r, err) < 0 || open_datasets(r, err) < 0 ||
        read_layers(r, err) < 0 || read_request_table(r, err) < 0 || check_v2_datasets(r, err) < 0) {
        ms_reader_close(r);
        return NULL;
    }
    start_reading(r);
    return r;
}

const ms_trace_meta *ms_reader_meta(const ms_trace_reader *r)
{
    return &r->meta;
}

void ms_reader_rewind(ms_trace_reader *r)
{
    r->cursor = 0;
}

void ms_reader_select(ms_trace_reader *r, unsigned parts)
{
    r->parts = (parts & MS_PART_ALL) | (r->dig ? MS_PART_ALL : 0u); /* a digest covers every part */
    set_chunk_checksums(r);
}

void ms_reader_digest_begin(ms_trace_reader *r)
{
    h5p_digest_free(r->dig);
    r->dig = h5p_digest_new(&r->meta, !r->derive_topk);
    r->parts = MS_PART_ALL;
    set_chunk_checksums(r);
}

int ms_reader_digest_check(ms_trace_reader *r, char hex[MS_DIGEST_HEX], ms_err *err)
{
    hex[0] = '\0';
    content_digest *g = r->dig;
    r->dig = NULL;
    if (!g)
        return ms_fail(err, "%s: no content digest was started (ms_reader_digest_begin)", r->path);
    if (g->broken || g->next != r->meta.n_requests) {
        uint64_t next = g->next;
        h5p_digest_free(g);
        return ms_fail(err, "%s: content digest: the requests were not read once each in order (%" PRIu64 " of %"
                       PRIu64 ")", r->path, next, r->meta.n_requests);
    }
    h5p_digest_final(g, &r->meta, hex);
    if (r->meta.version < 2)
        return 1;
    if (strcmp(hex, r->meta.content_sha256))
        return ms_fail(err, "%s: content digest mismatch: the file says " DIGEST_ATTR " %s, its content hashes to %s "
                       "(values changed after writing)", r->path, r->meta.content_sha256, hex);
    return 0;
}

/* ---- provenance (trace.h ms_trace_digest_of) ---- */

int ms_trace_stored_digest(const char *path, char hex[MS_DIGEST_HEX])
{
    ms_err err;
    hex[0] = '\0';
    if (h5p_h5_start(&err) < 0)
        return 0;
    ms_trace_reader *r = reader_new(path);
    char format[64];
    uint32_t version = 0;
    int ok = open_hdf5_file(r, &err) == 0 && read_attr_string(r, "format", format, sizeof format, 1, NULL, &err) == 0 &&
             !strcmp(format, FORMAT_NAME) && read_attr_uint32(r, "version", &version, &err) == 0 && version >= 2 &&
             version <= MS_TRACE_FORMAT_VERSION && read_digest_attr(r, &err) == 0;
    if (ok)
        memcpy(hex, r->meta.content_sha256, MS_DIGEST_HEX);
    ms_reader_close(r);
    H5Eclear2(H5E_DEFAULT);
    return ok;
}

/* A v2 file's stored digest is read at every call, not remembered by the
 * file's stat: it is what tells a rewrite that kept size and mtime. */
int ms_trace_digest_of(const char *path, ms_trace_digest *d, ms_err *err)
{
    d->content = ms_trace_stored_digest(path, d->hex);
    if (d->content || ms_digest_file_cached(path, d->hex, err) == 0)
        return 0;
    d->hex[0] = '\0';
    return -1;
}

void ms_reader_trace_digest(const ms_trace_reader *r, ms_trace_digest *d)
{
    if (r->mem) {
        *d = *ms_trace_snapshot_digest(r->mem);
        return;
    }
    d->content = r->meta.version >= 2 && r->meta.content_sha256[0];
    memcpy(d->hex, d->content ? r->meta.content_sha256 : r->v1_sha256, MS_DIGEST_HEX);
}

const char *ms_trace_digest_name(const ms_trace_digest *d)
{
    return d->content ? DIGEST_ATTR : "sha256";
}
