#!/usr/bin/env python3
"""Makes the templates of fuzz_trace_h5 (run once; needs h5py + hdf5plugin).

fuzz_trace_h5 does not feed raw bytes to HDF5: Debian 12's HDF5 1.10.8
crashes, hangs or leaks on corrupt object headers and global heaps (README
"Fuzzing"), which moesim cannot guard against.  Instead each template is a
valid trace whose *values* are mutable: the fuzz input is spliced into the
template's listed byte regions, so HDF5's structures stay intact while every
number moesim validates is under the fuzzer's control.

  plain.h5   every dataset contiguous and uncompressed (its raw values are
             regions), every root attribute a region: numeric ones hold
             sentinels here (the seed carries the real values), strings are
             fixed-length 256-byte fields
  zstd.h5    the trace as moesim writes it (chunked, zstd filter 32015):
             the compressed bytes of every chunk are regions, so moesim's
             zstd filter (traces/h5_zstd.c) decodes fuzzed frames

For each template T: T.regions ("offset length" per line) and the seed
../corpus/trace_h5/T.seed (the template's own region bytes, real values).
Usage: make_trace_templates.py SOURCE_TRACE.h5 OUT_DIR
"""
import sys

import h5py
import hdf5plugin  # noqa: F401  (registers the zstd filter for reading)
import numpy as np

STR_LEN = 256


def datasets(f):
    out = []
    f.visititems(lambda n, o: out.append(n) if isinstance(o, h5py.Dataset) else None)
    return sorted(out)


def make_plain(src, path):
    attrs = sorted(src.attrs.keys())
    sentinels = {}
    with h5py.File(path, "w", libver="earliest") as dst:
        for n in datasets(src):
            data = src[n][()]
            dst.create_dataset(n, data=data, chunks=None, compression=None)
        for i, k in enumerate(attrs):
            v = src.attrs[k]
            if isinstance(v, (bytes, np.bytes_, str)):
                s = b"@@%02d" % i + b"#" * (STR_LEN - 4)
                dst.attrs.create(k, np.bytes_(s))
                sentinels[k] = (s, (v.encode() if isinstance(v, str) else bytes(v))[:STR_LEN].ljust(STR_LEN, b"\0"))
            else:
                arr = np.asarray(v)
                s = np.array(0xA1B2C300 + i, dtype=np.uint32).astype(arr.dtype).tobytes()
                dst.attrs.create(k, np.array(0xA1B2C300 + i, dtype=np.uint32).astype(arr.dtype))
                sentinels[k] = (s, arr.tobytes())
    blob = open(path, "rb").read()
    regions, seed = [], b""
    for k in attrs:
        s, real = sentinels[k]
        at = blob.find(s)
        assert at >= 0 and blob.find(s, at + 1) < 0, k
        regions.append((at, len(s)))
        seed += real
    with h5py.File(path, "r") as f:
        for n in datasets(f):
            d = f[n]
            off = d.id.get_offset()
            if off is None or d.id.get_storage_size() == 0:
                continue
            regions.append((off, d.id.get_storage_size()))
            seed += blob[off:off + d.id.get_storage_size()]
    return regions, seed


def make_zstd(src_path, path):
    blob = open(src_path, "rb").read()
    open(path, "wb").write(blob)
    regions = []
    with h5py.File(path, "r") as f:
        for n in datasets(f):
            d = f[n]
            for i in range(d.id.get_num_chunks()):
                info = d.id.get_chunk_info(i)
                regions.append((info.byte_offset, info.size))
    seed = b"".join(blob[o:o + n] for o, n in regions)
    return regions, seed


def main():
    src_path, out = sys.argv[1], sys.argv[2]
    with h5py.File(src_path, "r") as src:
        plain = make_plain(src, f"{out}/plain.h5")
    zstd = make_zstd(src_path, f"{out}/zstd.h5")
    for name, (regions, seed) in (("plain", plain), ("zstd", zstd)):
        with open(f"{out}/{name}.regions", "w") as r:
            for o, n in regions:
                r.write(f"{o} {n}\n")
        with open(f"{out}/../corpus/trace_h5/{name}.seed", "wb") as s:
            s.write(bytes([0 if name == "plain" else 1]) + seed)
        print(name, len(regions), "regions,", len(seed), "seed bytes")


if __name__ == "__main__":
    main()
