"""npy importer test: writes a small [tokens, layers, experts] softmax array,
runs `moesim trace import --format npy`, validates the trace and checks with
h5py that topk_ids equal the argmax-k of the array (ties to the lower id)
and probs equal the array.  Usage: npy_roundtrip.py MOESIM WORKDIR"""
import os
import subprocess
import sys

import h5py
import hdf5plugin  # noqa: F401  (zstd filter)
import numpy as np

moesim, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)
T, L, J, K = 5, 3, 6, 2
logits = rng.normal(size=(T, L, J))
p = np.exp(logits) / np.exp(logits).sum(axis=2, keepdims=True)
p = p.astype(np.float32)
src, out = os.path.join(work, "router.npy"), os.path.join(work, "router.h5")
np.save(src, p)
r = subprocess.run([moesim, "trace", "import", "--format", "npy", "--topk", str(K), "--expert-bytes", "4096",
                    src, out], capture_output=True, text=True)
print(r.stdout, r.stderr)
assert r.returncode == 0, r.returncode
assert "1 request, 1 prefill iteration (5 token rows) + 0 decode iterations, 5 array rows (tokens); no missing cells" in r.stdout
r = subprocess.run([moesim, "trace", "validate", out], capture_output=True, text=True)
assert r.returncode == 0 and "ok (1 requests, 1 iterations, 5 rows, 0 missing cells)" in r.stdout, r.stdout + r.stderr
with h5py.File(out, "r") as f:
    assert f.attrs["probs_kind"] in ("full", b"full")
    assert (f.attrs["L"], f.attrs["J"], f.attrs["K"]) == (L, J, K)
    ids = f["rows/topk_ids"][...]
    probs = f["rows/probs"][...]
want = np.argsort(-p, axis=2, kind="stable")[:, :, :K]
assert np.array_equal(ids, want), (ids, want)
assert np.array_equal(probs, p)
# a 2-D array is refused with one line naming the file and shape
bad = os.path.join(work, "flat.npy")
np.save(bad, p[:, 0, :])
r = subprocess.run([moesim, "trace", "import", "--format", "npy", "--topk", "2", "--expert-bytes", "1", bad,
                    os.path.join(work, "flat.h5")], capture_output=True, text=True)
assert r.returncode == 1 and r.stderr.count("\n") == 1 and "flat.npy: shape (5, 6), expected 3 axes" in r.stderr, r.stderr
print("ok")
