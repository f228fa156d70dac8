"""Trace format v2 with h5py alone, following docs/trace-format.md only: the
content digest ("Content digest") and HDF5's Fletcher32 checksum of a chunk
(for the raw-chunk fallback of h5zstd.py).  No moesim code.
"""
import hashlib
import struct

import numpy as np

FLETCHER32_ID = 3

# docs/trace-format.md's dataset table: path and element type, in table (= digest) order.
DATASETS = [
    ("/layers/expert_bytes", "<u8"), ("/layers/dense_bytes", "<u8"),
    ("/requests/id", "<u8"), ("/requests/arrival_s", "<f8"), ("/requests/prompt_len", "<u4"),
    ("/requests/output_len", "<u4"), ("/requests/iter_start", "<u8"), ("/requests/n_iters", "<u4"),
    ("/requests/row_start", "<u8"), ("/requests/n_rows", "<u8"), ("/requests/token_start", "<u8"),
    ("/requests/n_tokens", "<u4"), ("/requests/text_start", "<u8"), ("/requests/n_text_bytes", "<u4"),
    ("/tokens/ids", "<i4"), ("/text/utf8", "u1"),
    ("/iterations/phase", "u1"), ("/iterations/row_start", "<u8"), ("/iterations/n_rows", "<u4"),
    ("/iterations/embedding", "<f4"),
    ("/rows/topk_ids", "<i4"), ("/rows/topk_w", "<f4"), ("/rows/probs", "<f4"), ("/rows/recorded_hit", "i1"),
    ("/rows/spec_ids", "<i4"), ("/rows/spec_w", "<f4"),
]
HEADER_INTS = ("L", "J", "K", "shared_experts", "hidden_size", "embed_dim", "spec_depth", "flags")
HEADER_STRS = ("probs_kind", "model_name", "source")


def attr_str(v):
    """A string attribute as str (v2 stores fixed-length strings, which h5py
    returns as bytes; v1 variable-length ones, returned as str)."""
    return v.decode("utf-8") if isinstance(v, (bytes, np.bytes_)) else str(v)


def content_digest(f, read=lambda ds: ds[()]):
    """The content digest of an open trace: one SHA-256 per dataset present
    (its elements row-major, little-endian, in the table's type), then one
    over the header and, per dataset in table order, path + NUL + hex."""
    top = hashlib.sha256(b"moesim-trace content v2\n")
    a = f.attrs
    top.update(b"".join(struct.pack("<I", int(a[k])) for k in HEADER_INTS))
    for k in HEADER_STRS:
        top.update(attr_str(a[k]).encode("utf-8") + b"\0")
    for path, dtype in DATASETS:
        if path.lstrip("/") not in f:
            continue
        values = np.ascontiguousarray(np.asarray(read(f[path])).astype(dtype, casting="same_kind"))
        top.update(path.encode() + b"\0" + hashlib.sha256(values.tobytes()).hexdigest().encode())
    return top.hexdigest()


def fletcher32(data):
    """HDF5's H5_checksum_fletcher32: 16-bit big-endian words (a last odd
    byte as its high half), sums folded every 360 words."""
    sum1 = sum2 = 0
    n = len(data) // 2
    words = np.frombuffer(data[:2 * n], dtype=">u2").astype(np.uint64)
    for start in range(0, n, 360):
        for w in words[start:start + 360].tolist():
            sum1 += w
            sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    if len(data) % 2:
        sum1 += data[-1] << 8
        sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return (sum2 << 16) | sum1


def strip_fletcher32(chunk, where):
    """A stored chunk without its trailing checksum (little-endian uint32),
    after checking it."""
    body, stored = chunk[:-4], struct.unpack("<I", chunk[-4:])[0]
    want = fletcher32(body)
    if stored != want:
        raise SystemExit(f"FAIL: {where}: Fletcher32 {stored:#010x}, computed {want:#010x}")
    return body
