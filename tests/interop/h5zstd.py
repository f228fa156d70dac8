"""zstd (HDF5 filter 32015) access for the interop scripts, with no moesim code.

The normal path is h5py + hdf5plugin (`import hdf5plugin` registers filter
32015).  Some builds of hdf5plugin ship without compiled filters (Debian's
python3-hdf5plugin relies on separate filter packages and has no zstd); then
chunks are read and written raw (read_direct_chunk / write_direct_chunk) and
each chunk is (de)compressed as the plain zstd frame the filter defines, with
the `zstandard` module or the `zstd` command-line tool.  Format v2 chunks end
with HDF5's Fletcher32 checksum (filter 3, after zstd): checked and stripped
before decompressing (trace_v2.py).
"""
import shutil
import subprocess
import tempfile

import h5py
import numpy as np

import trace_v2

try:
    import hdf5plugin  # noqa: F401  (registers the filters it was built with)
except ImportError:
    hdf5plugin = None

ZSTD_ID = 32015


def filter_available():
    return bool(h5py.h5z.filter_avail(ZSTD_ID))


def method():
    return "h5py + hdf5plugin" if filter_available() else "raw chunks + zstd frames"


def _decompress(frame):
    try:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(frame)
    except ImportError:
        pass
    if not shutil.which("zstd"):
        raise SystemExit("no zstd decoder: install hdf5plugin with its filters, python3-zstandard or zstd")
    return subprocess.run(["zstd", "-d", "-q", "-c"], input=frame, stdout=subprocess.PIPE, check=True).stdout


def _compress(data, level=3):
    try:
        import zstandard
        return zstandard.ZstdCompressor(level=level, write_content_size=True).compress(data)
    except ImportError:
        pass
    # From a file, so the frame header records the content size (the filter needs it).
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        return subprocess.run(["zstd", f"-{level}", "-q", "-c", f.name], stdout=subprocess.PIPE,
                              check=True).stdout


def filters_of(ds):
    plist = ds.id.get_create_plist()
    return [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]


def read(ds):
    """The whole dataset as a numpy array."""
    if filter_available() or ZSTD_ID not in filters_of(ds):
        return ds[()]
    checksummed = filters_of(ds) == [ZSTD_ID, trace_v2.FLETCHER32_ID]
    assert checksummed or filters_of(ds) == [ZSTD_ID], f"{ds.name}: filters {filters_of(ds)}"
    out = np.empty(ds.shape, dtype=ds.dtype)
    if ds.size == 0:
        return out
    chunk = ds.chunks
    for lead in range(0, ds.shape[0], chunk[0]):
        offset = (lead,) + (0,) * (len(chunk) - 1)
        assert all(c == s for c, s in zip(chunk[1:], ds.shape[1:])), f"{ds.name}: chunked across inner axes"
        mask, frame = ds.id.read_direct_chunk(offset)
        assert mask == 0, f"{ds.name}: chunk {offset} skipped its filter (mask {mask})"
        if checksummed:
            frame = trace_v2.strip_fletcher32(frame, f"{ds.name} chunk {offset}")
        data = np.frombuffer(_decompress(frame), dtype=ds.dtype)
        assert data.size == int(np.prod(chunk)), f"{ds.name}: chunk {offset} holds {data.size} values"
        n = min(chunk[0], ds.shape[0] - lead)
        out[lead:lead + n] = data.reshape(chunk)[:n]
    return out


def create(group, name, array, level=3):
    """A dataset compressed with filter 32015, one chunk, extendible along axis 0."""
    array = np.ascontiguousarray(array)
    maxshape = (None,) + array.shape[1:]
    chunks = (max(array.shape[0], 1),) + array.shape[1:]
    if filter_available():
        return group.create_dataset(name, data=array, chunks=chunks, maxshape=maxshape,
                                    compression=ZSTD_ID, compression_opts=(level,))
    ds = group.create_dataset(name, shape=array.shape, dtype=array.dtype, chunks=chunks, maxshape=maxshape,
                              compression=ZSTD_ID, compression_opts=(level,), allow_unknown_filter=True)
    if array.shape[0]:
        ds.id.write_direct_chunk((0,) * array.ndim, _compress(array.tobytes(), level))
    return ds
