"""Reads and writes moesim traces (docs/trace-format.md) with h5py, for the
recorder (record.py) and the embedder (embed.py).

write_trace() writes format version 2, as moesim's own writer does: HDF5's 1.10
file format (superblock 3, checksummed object headers and chunk indexes), the
root attributes in the root's object header, fixed-length UTF-8 strings, every
dataset chunked along its first axis (about 256 KiB a chunk), zstd (filter
32015, level 3; -1 for float datasets) then Fletcher32, no timestamps, and
the content digest (`content_sha256`) of the values written. The file goes to
a temporary beside the target (.NAME.tmp.XXXXXX) and is renamed over it only
when complete and synced.

read_trace() reads a v1 or v2 trace whole into the same (attrs, data) form, the
prompt text as a list of strings under "requests/text"; a v2 trace's values
must hash to its content digest.
"""
import hashlib
import os
import struct
import tempfile

import numpy as np

ZSTD_ID = 32015
CHUNK_BYTES = 256 * 1024
# zstd levels as moesim's writer: 3, and -1 (cd value 2^32 - 1, two's
# complement) for floats, whose mantissas barely compress (docs/trace-format.md).
ZSTD_LEVEL, ZSTD_LEVEL_FLOAT_CD = 3, 2**32 - 1
MAX_COMPACT_ATTRS = 64  # moesim writes 14 root attributes: all in the object header

# The dataset table of docs/trace-format.md (v2 rows), in its order, which is
# also the content digest's order, with the type each dataset is digested in.
TABLE = (
    ("layers/expert_bytes", "<u8"), ("layers/dense_bytes", "<u8"),
    ("requests/id", "<u8"), ("requests/arrival_s", "<f8"), ("requests/prompt_len", "<u4"),
    ("requests/output_len", "<u4"), ("requests/iter_start", "<u8"), ("requests/n_iters", "<u4"),
    ("requests/row_start", "<u8"), ("requests/n_rows", "<u8"), ("requests/token_start", "<u8"),
    ("requests/n_tokens", "<u4"), ("requests/text_start", "<u8"), ("requests/n_text_bytes", "<u4"),
    ("tokens/ids", "<i4"), ("text/utf8", "u1"),
    ("iterations/phase", "u1"), ("iterations/row_start", "<u8"), ("iterations/n_rows", "<u4"),
    ("iterations/embedding", "<f4"),
    ("rows/topk_ids", "<i4"), ("rows/topk_w", "<f4"), ("rows/probs", "<f4"), ("rows/recorded_hit", "i1"),
    ("rows/spec_ids", "<i4"), ("rows/spec_w", "<f4"),
)
TABLE_TYPES = dict(TABLE)
HEADER_INTS = ("L", "J", "K", "shared_experts", "hidden_size", "embed_dim", "spec_depth", "flags")
HEADER_STRS = ("probs_kind", "model_name", "source")


class TraceFileError(Exception):
    """One line naming the file: the caller prints it and exits non-zero."""


def check_output(out, inputs):
    """A one-line error unless OUT may be written: never an existing file that
    is not a regular file, never one of INPUTS (under any name)."""
    if os.path.lexists(out) and not os.path.isfile(out):
        raise TraceFileError(f"-o {out}: exists and is not a regular file")
    for src in inputs:
        if os.path.exists(out) and os.path.exists(src) and os.path.samefile(out, src):
            raise TraceFileError(f"-o {out}: is the input {src}; write to a new file")


def clip_utf8(text, limit):
    """TEXT cut to at most LIMIT UTF-8 bytes at a character boundary (the
    format bounds model_name below 128 bytes and source below 512)."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


def text_datasets(texts):
    """The v2 prompt text of TEXTS (one string per request): /text/utf8 and
    the per-request start and length."""
    blobs = [t.encode("utf-8") for t in texts]
    starts = np.cumsum([0] + [len(b) for b in blobs[:-1]]).astype(np.uint64) if blobs else np.zeros(0, np.uint64)
    return {"requests/text_start": starts,
            "requests/n_text_bytes": np.array([len(b) for b in blobs], dtype=np.uint32),
            "text/utf8": np.frombuffer(b"".join(blobs), dtype=np.uint8).copy()}


def as_table_type(name, arr):
    """ARR in the dataset table's type for NAME; a value the type cannot hold is an error."""
    want = np.dtype(TABLE_TYPES[name])
    arr = np.ascontiguousarray(arr)
    out = arr.astype(want)
    if arr.dtype.kind in "iub" and not np.array_equal(out.astype(np.int64), arr.astype(np.int64)):
        raise TraceFileError(f"/{name}: a value does not fit {want}")
    return out


def content_digest(attrs, data):
    """docs/trace-format.md "Content digest" of ATTRS and DATA (v2 datasets)."""
    top = hashlib.sha256(b"moesim-trace content v2\n")
    top.update(b"".join(struct.pack("<I", int(attrs[k])) for k in HEADER_INTS))
    for k in HEADER_STRS:
        top.update(str(attrs[k]).encode("utf-8") + b"\0")
    for name, _ in TABLE:
        if name in data:
            values = np.ascontiguousarray(data[name])
            top.update(b"/" + name.encode() + b"\0" + hashlib.sha256(values.tobytes()).hexdigest().encode())
    return top.hexdigest()


def _fixed_string_attr(f, key, value):
    import h5py
    raw = str(value).encode("utf-8")
    f.attrs.create(key, np.array(raw or b"\0", dtype=f"S{max(len(raw), 1)}"),
                   dtype=h5py.string_dtype("utf-8", max(len(raw), 1)))


def _create_file(tmp):
    import h5py
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V110, h5py.h5f.LIBVER_V110)
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    fcpl.set_attr_phase_change(MAX_COMPACT_ATTRS, MAX_COMPACT_ATTRS - 8)
    return h5py.File(h5py.h5f.create(os.fsencode(tmp), h5py.h5f.ACC_TRUNC, fapl=fapl, fcpl=fcpl))


def _group(f, name):
    import h5py
    if name in f:
        return f[name]
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    return h5py.Group(h5py.h5g.create(f.id, name.encode(), gcpl=gcpl))


def _dataset(g, name, arr):
    row_bytes = max(int(np.prod(arr.shape[1:], dtype=np.int64)) * arr.itemsize, 1)
    lead = max(1, min(max(arr.shape[0], 1), CHUNK_BYTES // row_bytes))
    level = ZSTD_LEVEL_FLOAT_CD if arr.dtype.kind == "f" else ZSTD_LEVEL
    g.create_dataset(name, data=arr, chunks=(lead,) + arr.shape[1:], maxshape=(None,) + arr.shape[1:],
                     compression=ZSTD_ID, compression_opts=(level,), fletcher32=True, track_times=False)


def write_trace(path, attrs, data):
    """Writes ATTRS (format, version and content_sha256 are set here) and DATA
    ({'group/name': array} in the table's names; "requests/text", a list of
    strings, becomes the v2 text datasets) as format v2 to PATH."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers the zstd filter 32015)
    if not h5py.h5z.filter_avail(ZSTD_ID):
        raise TraceFileError("h5py cannot write zstd (filter 32015): install hdf5plugin from PyPI")
    data = dict(data)
    if "requests/text" in data:
        data.update(text_datasets(data.pop("requests/text")))
    unknown = sorted(set(data) - set(TABLE_TYPES))
    if unknown:
        raise TraceFileError(f"{path}: /{unknown[0]} is not a dataset of trace format v2")
    data = {name: as_table_type(name, data[name]) for name, _ in TABLE if name in data}
    attrs = dict(attrs, format="moesim-trace", version=np.uint32(2))
    for key, limit in (("model_name", 127), ("source", 511)):
        if len(str(attrs[key]).encode("utf-8")) > limit:
            raise TraceFileError(f"{path}: {key} is {len(str(attrs[key]).encode('utf-8'))} bytes, at most {limit}")
    attrs["content_sha256"] = content_digest(attrs, data)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=f".{os.path.basename(path)}.tmp.")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # as an open() would create it, not mkstemp's 0600
    try:
        with _create_file(tmp) as f:
            for k, v in attrs.items():
                if isinstance(v, (str, bytes)):
                    _fixed_string_attr(f, k, v.decode("utf-8") if isinstance(v, bytes) else v)
                else:
                    f.attrs.create(k, np.uint32(v), dtype=np.uint32)
            for name, arr in data.items():
                group, ds = name.split("/")
                _dataset(_group(f, group), ds, arr)
        with open(tmp, "rb") as done:
            os.fsync(done.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise TraceFileError(f"{path}: cannot write: {e}")
    finally:
        if os.path.exists(tmp):  # any failure, also an interrupt: nothing is left behind
            os.remove(tmp)


def check_digest(path, stored, attrs, data):
    """A v2 trace's values must hash to its content_sha256 (HDF5's checksums
    cover the stored bytes, the digest the values: an edit shows)."""
    if stored is None:
        raise TraceFileError(f"{path}: format v2 without content_sha256")
    try:
        digest = content_digest(attrs, {n: as_table_type(n, data[n]) for n, _ in TABLE if n in data})
    except (KeyError, ValueError, TraceFileError) as e:
        raise TraceFileError(f"{path}: cannot digest the content: {e}")
    if digest != stored:
        raise TraceFileError(f"{path}: content digest mismatch: the file says content_sha256 {stored}, "
                             f"its content hashes to {digest}")


def _attr(v):
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode("utf-8")
    if isinstance(v, str):
        return v
    return int(v)


def read_trace(path):
    """(attrs, data) of the v1 or v2 trace at PATH, every dataset read whole;
    the prompt text as "requests/text" (list of str) whatever the version."""
    import h5py
    import hdf5plugin  # noqa: F401
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise TraceFileError(f"{path}: cannot open: {e}")
    with f:
        version = int(f.attrs.get("version", 0))
        if _attr(f.attrs.get("format", b"")) != "moesim-trace" or version not in (1, 2):
            raise TraceFileError(f"{path}: not a moesim trace of format version 1 or 2")
        attrs = {k: _attr(v) for k, v in f.attrs.items() if k not in ("format", "version", "content_sha256")}
        stored = _attr(f.attrs["content_sha256"]) if version == 2 and "content_sha256" in f.attrs else None
        data = {}
        try:
            for g in f:
                for d in f[g]:
                    data[f"{g}/{d}"] = f[g][d][()]
        except OSError as e:
            raise TraceFileError(f"{path}: cannot read /{g}/{d}: {e}")
    if version == 2:
        check_digest(path, stored, attrs, data)
    if "text/utf8" in data:
        blob = data.pop("text/utf8").tobytes()
        starts, lens = data.pop("requests/text_start"), data.pop("requests/n_text_bytes")
        data["requests/text"] = [blob[int(s):int(s) + int(n)].decode("utf-8") for s, n in zip(starts, lens)]
    elif "requests/text" in data:
        data["requests/text"] = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in data["requests/text"]]
    return attrs, data
