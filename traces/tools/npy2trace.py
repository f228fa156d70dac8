#!/usr/bin/env python3
"""npy2trace.py IN.npy OUTDIR: converter behind `moesim trace import --format npy`.

IN.npy holds router probabilities as a float array [tokens, layers, experts]
(raw softmax per token and layer: finite, >= 0, each (token, layer) summing
to 1 within 1e-3).  Writes OUTDIR/layer<l>.csv for every layer l: a header
e0,...,e<J-1> and one row per token (dense-csv, one prefill-only request),
values printed with 9 significant digits (exact for float32).  moesim then
imports OUTDIR with the dense-csv importer.  Errors: one line
"moesim: FILE: ..." on stderr, exit 1.  Needs NumPy only.
"""
import os
import sys


def fail(msg):
    sys.stderr.write("moesim: %s\n" % msg)
    sys.exit(1)


def main(argv):
    if len(argv) != 3:
        fail("usage: npy2trace.py IN.npy OUTDIR")
    src, outdir = argv[1], argv[2]
    try:
        import numpy as np
    except ImportError as e:
        fail("%s: the npy converter needs NumPy (%s); set MOESIM_PYTHON to a Python that has it" % (src, e))
    try:
        with open(src, "rb") as f:
            magic = f.read(6)
    except OSError as e:
        fail("%s: cannot open: %s" % (src, e.strerror))
    if magic != b"\x93NUMPY":
        fail("%s: not a .npy file (starts with %r, expected b'\\x93NUMPY')" % (src, magic))
    try:
        a = np.load(src, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        fail("%s: cannot open: No such file or directory" % src)
    except Exception as e:  # noqa: BLE001 - any load failure is one line
        fail("%s: not a NumPy .npy array (%s)" % (src, str(e).splitlines()[0][:120] if str(e) else type(e).__name__))
    if not isinstance(a, np.ndarray):
        fail("%s: not a single .npy array" % src)
    if a.ndim != 3:
        fail("%s: shape %s, expected 3 axes [tokens, layers, experts]" % (src, tuple(a.shape)))
    if a.dtype.kind != "f":
        fail("%s: dtype %s, expected floating-point probabilities" % (src, a.dtype))
    T, L, J = a.shape
    if T == 0 or L == 0 or J == 0:
        fail("%s: empty array, shape %s" % (src, tuple(a.shape)))
    files = []
    try:
        write_layers(np, a, src, outdir, files)
    except OSError as e:  # a full disk, an unwritable directory: one line naming the file
        fail("%s: cannot write: %s" % (e.filename or outdir, e.strerror or e))


def write_layers(np, a, src, outdir, files):
    """Checks every row of `a` and writes it to OUTDIR/layer<l>.csv; the files
    are closed (flushed) before returning, so a failed write raises here."""
    T, L, J = a.shape
    try:
        for l in range(L):
            files.append(open(os.path.join(outdir, "layer%d.csv" % l), "w"))
            files[-1].write(",".join("e%d" % j for j in range(J)) + "\n")
        for t in range(T):
            row = np.asarray(a[t], dtype=np.float64)
            bad = ~np.isfinite(row) | (row < 0)
            if bad.any():
                l, j = map(int, np.argwhere(bad)[0])
                fail("%s: value at [%d, %d, %d] = %r is not a finite probability >= 0" % (src, t, l, j, float(row[l, j])))
            sums = row.sum(axis=1)
            off = np.abs(sums - 1.0) > 1e-3
            if off.any():
                l = int(np.argmax(off))
                fail("%s: probabilities at [%d, %d, :] sum to %.6g, expected 1 (raw softmax)" % (src, t, l, sums[l]))
            for l in range(L):
                files[l].write(",".join("%.9g" % v for v in np.asarray(a[t, l], dtype=np.float32)) + "\n")
    finally:
        for f in files:
            try:
                f.close()
            except OSError as e:
                raise OSError(e.errno, e.strerror, f.name) from e


if __name__ == "__main__":
    main(sys.argv)
