/* The zstd HDF5 filter, id 32015: the id and chunk encoding of the filter
 * that Python's hdf5plugin registers (each chunk is one plain zstd frame made
 * by ZSTD_compress; cd_values[0], when given, is the compression level, a
 * negative one as its two's complement, as hdf5plugin reads it), so
 * h5py + hdf5plugin read moesim traces and moesim reads theirs.  Registered
 * in-process with H5Zregister: no HDF5_PLUGIN_PATH needed. */
#include <hdf5.h>
#include <limits.h>
#include <stdint.h>
#include <zstd.h>

#include "traces/format/trace.h"

#define MS_H5Z_ZSTD 32015
/* hdf5plugin's name for the filter; h5py shows it in dataset properties. */
#define MS_H5Z_ZSTD_NAME "Zstandard compression: http://www.zstd.net"
/* A zstd block of at most 128 KiB takes at least 3 bytes, so no frame expands
 * more than ~43690x; a larger claimed size is a corrupt header, refused before
 * allocating.  HDF5 chunks are below 4 GiB. */
#define MS_ZSTD_MAX_RATIO 65536ull
#define MS_ZSTD_MAX_CHUNK 0xFFFFFFFFull

static size_t zstd_decompress_chunk(size_t nbytes, size_t *buf_size, void **buf)
{
    unsigned long long size = ZSTD_getFrameContentSize(*buf, nbytes);
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size == 0 ||
        size > MS_ZSTD_MAX_CHUNK || size > (unsigned long long)nbytes * MS_ZSTD_MAX_RATIO)
        return 0; /* HDF5 reports "filter returned failure" */
    void *out = H5allocate_memory((size_t)size, 0);
    if (!out)
        return 0;
    size_t got = ZSTD_decompress(out, (size_t)size, *buf, nbytes);
    if (ZSTD_isError(got) || got != size) {
        H5free_memory(out);
        return 0;
    }
    H5free_memory(*buf);
    *buf = out;
    *buf_size = (size_t)size;
    return got;
}

static size_t zstd_compress_chunk(size_t cd_nelmts, const unsigned cd_values[], size_t nbytes, size_t *buf_size,
                                  void **buf)
{
    int level = ZSTD_CLEVEL_DEFAULT;
    if (cd_nelmts > 0)
        level = cd_values[0] > INT_MAX ? -(int)(UINT_MAX - cd_values[0]) - 1 : (int)cd_values[0];
    if (level > ZSTD_maxCLevel())
        level = ZSTD_maxCLevel();
    if (level < ZSTD_minCLevel())
        level = ZSTD_minCLevel();
    size_t cap = ZSTD_compressBound(nbytes);
    void *out = H5allocate_memory(cap, 0);
    if (!out)
        return 0;
    size_t got = ZSTD_compress(out, cap, *buf, nbytes, level);
    if (ZSTD_isError(got)) {
        H5free_memory(out);
        return 0;
    }
    H5free_memory(*buf);
    *buf = out;
    *buf_size = cap;
    return got;
}

static size_t zstd_filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[], size_t nbytes,
                          size_t *buf_size, void **buf)
{
    if (flags & H5Z_FLAG_REVERSE)
        return zstd_decompress_chunk(nbytes, buf_size, buf);
    return zstd_compress_chunk(cd_nelmts, cd_values, nbytes, buf_size, buf);
}

static const H5Z_class2_t zstd_class = {
    H5Z_CLASS_T_VERS, (H5Z_filter_t)MS_H5Z_ZSTD, 1, 1, MS_H5Z_ZSTD_NAME, NULL, NULL, zstd_filter,
};

int ms_h5_register_zstd(ms_err *err)
{
    static int registered;
    if (registered)
        return 0;
    /* Before HDF5's first call (H5dont_atexit is void after the library
     * initialised): no clean-up at exit.  HDF5 1.10.8 frees a file's state
     * when H5Fclose fails (a write error while flushing) but keeps its id,
     * and its exit-time clean-up then closes that id again: SIGSEGV in
     * H5F__close_cb (fixed upstream in 1.14.1, HDFGroup/hdf5#2291).  moesim
     * closes every file it opens, and the writer reserves disk space ahead
     * of HDF5 so that a full disk never fails inside HDF5; this is the net
     * for a write error that still does (EIO). */
    H5dont_atexit();
    if (H5Zregister(&zstd_class) < 0)
        return ms_fail(err, "HDF5: cannot register the zstd filter (id %d)", MS_H5Z_ZSTD);
    registered = 1;
    return 0;
}
