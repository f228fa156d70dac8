#!/usr/bin/env python3
"""Makes the templates of fuzz_trace_h5 (run once; needs h5py + hdf5plugin).

fuzz_trace_h5 does not feed raw bytes to HDF5: Debian 12's HDF5 1.10.8
crashes, hangs or leaks on corrupt object headers and global heaps
(docs/fuzzing.md), which moesim cannot guard against.  Instead each template is a
valid trace whose *values* are mutable: the fuzz input is spliced into the
template's listed byte regions, so HDF5's structures stay intact while every
number moesim validates is under the fuzzer's control.

  plain.h5   every dataset contiguous and uncompressed (its raw values are
             regions), every root attribute a region: numeric ones hold
             sentinels here (the seed carries the real values), strings are
             fixed-length 256-byte fields
  zstd.h5    the trace as moesim writes it (chunked, zstd filter 32015):
             the compressed bytes of every chunk are regions, so moesim's
             zstd filter (traces/format/h5_zstd.c) decodes fuzzed frames
  plain_v2.h5 (with --v2 V2_TRACE.h5, a format v2 trace with every
             optional part) format v2: HDF5 1.10 file format, every dataset
             one chunk with the Fletcher32 filter only (no compression); the
             regions are the chunks' values, and the harness recomputes each
             chunk's checksum after splicing (third column 1), so the v2
             reader (text bytes, text_start / n_text_bytes, the v2 checks)
             sees fuzzed values behind valid checksums.  Attributes are not
             regions: they live in checksummed object headers.

For each template T: T.regions ("offset length [1]" per line) and the seed
../corpus/trace_h5/T.seed (the template's own region bytes, real values).
Usage: make_trace_templates.py SOURCE_TRACE.h5 OUT_DIR [--v2 V2_TRACE.h5]
(the v1 templates were made from a v1 trace: their SOURCE is not a trace
moesim writes any more; --v2 alone with SOURCE '-' makes plain_v2 only)
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


def make_plain_v2(src, path):
    with h5py.File(path, "w", libver=("v110", "v110")) as dst:
        for n in datasets(src):
            data = src[n][()]
            chunks = (max(data.shape[0], 1),) + data.shape[1:]
            dst.create_dataset(n, data=data, chunks=chunks, maxshape=(None,) + data.shape[1:], fletcher32=True,
                               track_times=False)
        for k in sorted(src.attrs.keys()):
            dst.attrs.create(k, src.attrs[k])  # fixed-length strings stay fixed-length
    blob = open(path, "rb").read()
    regions, seed = [], b""
    with h5py.File(path, "r") as f:
        for n in datasets(f):
            d = f[n]
            if d.id.get_num_chunks() == 0:
                continue
            info = d.id.get_chunk_info(0)
            regions.append((info.byte_offset, info.size - 4, 1))  # the last 4 bytes: Fletcher32
            seed += blob[info.byte_offset:info.byte_offset + info.size - 4]
    return regions, seed


def main():
    args = sys.argv[1:]
    v2 = None
    if "--v2" in args:
        i = args.index("--v2")
        v2 = args[i + 1]
        del args[i:i + 2]
    src_path, out = args
    made = []
    if src_path != "-":
        with h5py.File(src_path, "r") as src:
            made.append(("plain", 0, make_plain(src, f"{out}/plain.h5")))
        made.append(("zstd", 1, make_zstd(src_path, f"{out}/zstd.h5")))
    if v2:
        with h5py.File(v2, "r") as src:
            made.append(("plain_v2", 2, make_plain_v2(src, f"{out}/plain_v2.h5")))
    for name, byte0, (regions, seed) in made:
        with open(f"{out}/{name}.regions", "w") as r:
            for reg in regions:
                r.write(" ".join(str(x) for x in reg) + "\n")
        with open(f"{out}/../corpus/trace_h5/{name}.seed", "wb") as s:
            s.write(bytes([byte0]) + seed)
        print(name, len(regions), "regions,", len(seed), "seed bytes")


if __name__ == "__main__":
    main()
