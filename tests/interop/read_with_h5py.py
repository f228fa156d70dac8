#!/usr/bin/env python3
"""Reads a moesim trace (format v1 or v2) with h5py alone and checks it
against the values the writer was given (JSON written by
tests/unit/test_trace_io.c).

Usage: read_with_h5py.py TRACE.h5 EXPECTED.json

Follows docs/trace-format.md only: request table -> global iteration and row
ranges.  Asserts that every numeric dataset is chunked, extendible along
axis 0 and compressed with filter 32015 (zstd, hdf5plugin's id), in v2
followed by Fletcher32 (filter 3) on every dataset, and, for v2, recomputes
the content digest (trace_v2.py) and compares it with content_sha256.
"""
import json
import os
import sys

import h5py
import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h5zstd  # noqa: E402
import trace_v2  # noqa: E402

FLAG_TOKEN_IDS, FLAG_TEXT, FLAG_RECORDED_HITS = 1, 2, 4


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")


def check_equal(have, want, what):
    have, want = np.asarray(have), np.asarray(want)
    check(have.shape == want.shape and np.array_equal(have, want), f"{what}: {have.tolist()} != {want.tolist()}")


def check_storage(f, version):
    numeric = []
    f.visititems(lambda name, obj: numeric.append(obj) if isinstance(obj, h5py.Dataset) else None)
    want = [h5zstd.ZSTD_ID] if version == 1 else [h5zstd.ZSTD_ID, trace_v2.FLETCHER32_ID]
    for ds in numeric:
        if ds.dtype.kind in "OS":  # v1 variable-length text: HDF5 cannot filter it
            check(version == 1, f"{ds.name}: strings in a v2 trace")
            continue
        check(ds.chunks is not None, f"{ds.name} is chunked")
        check(ds.maxshape[0] is None, f"{ds.name} is extendible along axis 0")
        check(h5zstd.filters_of(ds) == want, f"{ds.name} filters {h5zstd.filters_of(ds)} == {want}")
    return len(numeric)


def main():
    path, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as fh:
        exp = json.load(fh)
    f = h5py.File(path, "r")
    a = f.attrs
    version = int(a["version"])
    check(version in (1, 2), f"version attribute {version}")
    if version == 2:  # fixed-length strings (h5py returns bytes), checksummed metadata
        check(all(isinstance(a[k], np.bytes_) for k in ("format", "model_name", "source", "probs_kind")),
              "v2 string attributes are fixed-length")
        check(f.id.get_create_plist().get_version()[0] >= 2, "v2: superblock version 2 or later")
    check(trace_v2.attr_str(a["format"]) == "moesim-trace", "format attribute")
    for key in ("L", "J", "K", "embed_dim", "spec_depth"):
        check(int(a[key]) == exp[key], f"attribute {key} = {a[key]}, expected {exp[key]}")
    check(trace_v2.attr_str(a["model_name"]) == exp["model_name"], "model_name attribute")
    check(trace_v2.attr_str(a["probs_kind"]) == exp["probs_kind"], "probs_kind attribute")
    L, J, K, S, E = (exp[k] for k in ("L", "J", "K", "spec_depth", "embed_dim"))
    flags = int(a["flags"])
    n_datasets = check_storage(f, version)
    check_equal(h5zstd.read(f["layers/expert_bytes"]), exp["expert_bytes"], "/layers/expert_bytes")

    col = {name: h5zstd.read(f["requests/" + name]) for name in
           ("id", "arrival_s", "prompt_len", "output_len", "iter_start", "n_iters", "row_start", "n_rows",
            "token_start", "n_tokens")}
    reqs = exp["requests"]
    check(len(col["id"]) == len(reqs), f"{len(col['id'])} requests, expected {len(reqs)}")
    rows = {name: h5zstd.read(f["rows/" + name]) for name in f["rows"]}
    it = {name: h5zstd.read(f["iterations/" + name]) for name in f["iterations"]}
    tokens = h5zstd.read(f["tokens/ids"]) if flags & FLAG_TOKEN_IDS else None
    text = None
    if flags & FLAG_TEXT and version == 1:
        text = f["requests/text"].asstr()[()]
    elif flags & FLAG_TEXT:  # v2: UTF-8 bytes, one slice per request
        utf8, t0, tn = (h5zstd.read(f[p]) for p in ("text/utf8", "requests/text_start", "requests/n_text_bytes"))
        text = [bytes(utf8[int(s):int(s) + int(n)]).decode("utf-8") for s, n in zip(t0, tn)]
    check_equal(rows["topk_ids"].shape[1:], (L, K), "/rows/topk_ids shape")

    for i, r in enumerate(reqs):
        tag = f"request {r['id']}"
        check(int(col["id"][i]) == r["id"], f"{tag}: id")
        check(float(col["arrival_s"][i]) == r["arrival_s"], f"{tag}: arrival_s")
        prompt, out = r["prompt_len"], r["output_len"]
        check(int(col["prompt_len"][i]) == prompt and int(col["output_len"][i]) == out, f"{tag}: lengths")
        # the iteration rule of docs/trace-format.md: one prefill of prompt_len rows, output_len decodes of 1 row
        n_it, n_rows = int(col["n_iters"][i]), int(col["n_rows"][i])
        check(n_it == out + 1 and n_rows == prompt + out, f"{tag}: n_iters {n_it}, n_rows {n_rows}")
        i0, r0 = int(col["iter_start"][i]), int(col["row_start"][i])
        check_equal(it["phase"][i0:i0 + n_it], [0] + [1] * out, f"{tag}: /iterations/phase")
        check_equal(it["n_rows"][i0:i0 + n_it], [prompt] + [1] * out, f"{tag}: /iterations/n_rows")
        check_equal(it["row_start"][i0:i0 + n_it], [r0] + [r0 + prompt + k for k in range(out)],
                    f"{tag}: /iterations/row_start (global)")
        sl = slice(r0, r0 + n_rows)
        check_equal(rows["topk_ids"][sl].ravel(), r["topk_ids"], f"{tag}: /rows/topk_ids")
        check_equal(rows["topk_w"][sl].ravel(), np.float32(r["topk_w"]), f"{tag}: /rows/topk_w")
        if "probs" in r:
            check_equal(rows["probs"][sl].shape[1:], (L, J), f"{tag}: /rows/probs shape")
            check_equal(rows["probs"][sl].ravel(), np.float32(r["probs"]), f"{tag}: /rows/probs")
        if "spec_ids" in r:
            check_equal(rows["spec_ids"][sl].shape[1:], (L, S, K), f"{tag}: /rows/spec_ids shape")
            check_equal(rows["spec_ids"][sl].ravel(), r["spec_ids"], f"{tag}: /rows/spec_ids")
            check_equal(rows["spec_w"][sl].ravel(), np.float32(r["spec_w"]), f"{tag}: /rows/spec_w")
        if "recorded_hit" in r:
            check_equal(rows["recorded_hit"][sl].ravel(), r["recorded_hit"], f"{tag}: /rows/recorded_hit")
        if "embedding" in r:
            check_equal(it["embedding"][i0:i0 + n_it].shape[1:], (E,), f"{tag}: embedding shape")
            check_equal(it["embedding"][i0:i0 + n_it].ravel(), np.float32(r["embedding"]), f"{tag}: embedding")
        if "token_ids" in r:
            t0, nt = int(col["token_start"][i]), int(col["n_tokens"][i])
            check_equal(tokens[t0:t0 + nt], r["token_ids"], f"{tag}: /tokens/ids")
        if "text" in r:
            check(text[i] == r["text"], f"{tag}: text {text[i]!r} != {r['text']!r}")
    if version == 2:
        digest = trace_v2.content_digest(f, h5zstd.read)
        stored = trace_v2.attr_str(a["content_sha256"])
        check(digest == stored, f"content digest {digest} != content_sha256 {stored}")
    print(f"{path}: ok ({len(reqs)} requests, {n_datasets} datasets, read via {h5zstd.method()})")


if __name__ == "__main__":
    main()
