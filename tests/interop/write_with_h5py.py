#!/usr/bin/env python3
"""Writes a small moesim trace (format v1, probs_kind full) with h5py alone,
following docs/trace-format.md, for `moesim trace validate` to read.

Usage: write_with_h5py.py OUT.h5

Two requests: id 10 (prompt 3, output 2) and id 11 (prompt 1, output 1):
5 iterations, 7 rows.  Attributes are written as h5py writes Python values
(int64, variable-length UTF-8 strings); /rows/topk_* are left out, so the
reader derives the top-k from /rows/probs.
"""
import os
import sys

import h5py
import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h5zstd  # noqa: E402

L, J, K, E = 2, 4, 2, 3
REQUESTS = [  # id, arrival_s, prompt_len, output_len, text
    (10, 0.0, 3, 2, "h5py wrote this"),
    (11, 0.75, 1, 1, "and this \u2713"),
]


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    cols = {k: [] for k in ("id", "arrival_s", "prompt_len", "output_len", "iter_start", "n_iters", "row_start",
                            "n_rows", "token_start", "n_tokens")}
    phase, it_row_start, it_n_rows, tokens, texts = [], [], [], [], []
    n_iters = n_rows = n_tokens = 0
    for rid, t, prompt, outlen, text in REQUESTS:
        for k, v in (("id", rid), ("arrival_s", t), ("prompt_len", prompt), ("output_len", outlen),
                     ("iter_start", n_iters), ("n_iters", outlen + 1), ("row_start", n_rows),
                     ("n_rows", prompt + outlen), ("token_start", n_tokens), ("n_tokens", prompt)):
            cols[k].append(v)
        phase += [0] + [1] * outlen
        it_row_start += [n_rows] + [n_rows + prompt + k for k in range(outlen)]
        it_n_rows += [prompt] + [1] * outlen
        tokens += [1000 * rid + k for k in range(prompt)]
        texts.append(text)
        n_iters += outlen + 1
        n_rows += prompt + outlen
        n_tokens += prompt
    logits = rng.normal(size=(n_rows, L, J))
    probs = np.exp(logits) / np.exp(logits).sum(axis=2, keepdims=True)

    with h5py.File(out, "w") as f:
        for k, v in (("format", "moesim-trace"), ("version", 1), ("model_name", "h5py-written"),
                     ("source", "tests/interop/write_with_h5py.py"), ("L", L), ("J", J), ("K", K),
                     ("shared_experts", 0), ("hidden_size", 32), ("probs_kind", "full"), ("embed_dim", E),
                     ("spec_depth", 0), ("flags", 1 | 2)):
            f.attrs[k] = v
        layers = f.create_group("layers")
        h5zstd.create(layers, "expert_bytes", np.array([3059712, 2654208], dtype=np.uint64))
        h5zstd.create(layers, "dense_bytes", np.array([11953152, 11682816], dtype=np.uint64))
        req = f.create_group("requests")
        types = {"arrival_s": np.float64, "prompt_len": np.uint32, "output_len": np.uint32, "n_iters": np.uint32,
                 "n_tokens": np.uint32}
        for k, v in cols.items():
            h5zstd.create(req, k, np.array(v, dtype=types.get(k, np.uint64)))
        req.create_dataset("text", data=texts, dtype=h5py.string_dtype("utf-8"))
        h5zstd.create(f.create_group("tokens"), "ids", np.array(tokens, dtype=np.int32))
        it = f.create_group("iterations")
        h5zstd.create(it, "phase", np.array(phase, dtype=np.uint8))
        h5zstd.create(it, "row_start", np.array(it_row_start, dtype=np.uint64))
        h5zstd.create(it, "n_rows", np.array(it_n_rows, dtype=np.uint32))
        h5zstd.create(it, "embedding", rng.normal(size=(n_iters, E)).astype(np.float32))
        h5zstd.create(f.create_group("rows"), "probs", probs.astype(np.float32))
    print(f"{out}: {len(REQUESTS)} requests, {n_iters} iterations, {n_rows} rows, via {h5zstd.method()}")


if __name__ == "__main__":
    main()
