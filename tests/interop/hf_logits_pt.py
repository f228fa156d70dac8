#!/usr/bin/env python3
"""hf_logits_pt.py MOESIM LOGITS.npy OUTDIR: `moesim trace import --format
hf-logits` on torch.save files holding the logits of LOGITS.npy ([L, T, J])
in the shapes transformers users save (a tuple of per-layer (T, J) tensors,
bf16 too; a stacked tensor; a list over forward calls of tuples, as forward
hooks during generate give; a dict under "router_logits") must give the same
trace as the .npy itself (moesim trace validate + identical content digest).
Exit 77 (skipped) without PyTorch."""
import os
import re
import subprocess
import sys


def main(moesim, npy, outdir):
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print("skipped: %s" % e)
        return 77
    a = np.load(npy)  # [L, T, J]
    L = a.shape[0]
    layers = tuple(torch.tensor(a[l]) for l in range(L))
    cases = {
        "tuple": layers,
        "stacked": torch.tensor(a),
        "calls": [tuple(t[:1] for t in layers), tuple(t[1:] for t in layers)],  # prefill call, decode call
        "dict": {"router_logits": layers},
    }
    base = ["trace", "import", "--format", "hf-logits", "--experts", "4", "--topk", "2", "--expert-bytes", "1MiB",
            "--prompt-len", "1"]

    def digest(out):
        r = subprocess.run([moesim, "trace", "info", out], capture_output=True, text=True)
        m = re.search(r"content_sha256 ([0-9a-f]{64})", r.stdout)
        return m.group(1) if m else None

    def run(src_obj, case):
        """Writes src_obj as CASE/logits (the same base name for every case, so
        the trace's `source` and hence its content digest depend only on the
        routing) and imports it; returns (exit code, report, digest)."""
        d = os.path.join(outdir, "pt_" + case)
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "logits")
        if isinstance(src_obj, bytes):
            with open(src, "wb") as f:
                f.write(src_obj)
        else:
            torch.save(src_obj, src)
        out = os.path.join(d, "out.h5")
        r = subprocess.run([moesim] + base + [src, out], capture_output=True, text=True)
        v = subprocess.run([moesim, "trace", "validate", out], capture_output=True, text=True)
        ok = r.returncode == 0 and v.returncode == 0
        return ok, (r.stdout + r.stderr).strip().splitlines()[0], digest(out) if ok else None

    with open(npy, "rb") as f:
        ok, rep, want = run(f.read(), "npy")
    if not ok or not want:
        print("reference import failed:", rep)
        return 1
    bad = 0
    for name, obj in cases.items():
        ok, rep, got = run(obj, name)
        same = ok and got == want
        print("%-8s %s %s" % (name, "same digest" if same else "DIFFERS", rep))
        bad += not same
    # bf16 logits: probabilities differ (rounded logits) but the top-k here does not
    src = os.path.join(outdir, "logits_bf16.pt")
    torch.save(tuple(t.to(torch.bfloat16) for t in layers), src)
    r = subprocess.run([moesim] + base + [src, os.path.join(outdir, "pt_bf16.h5")], capture_output=True, text=True)
    print("bf16     %s" % ("ok" if r.returncode == 0 else "FAILED: " + r.stderr.strip()))
    bad += r.returncode != 0
    # a batch of 2 sequences is refused with one line
    src = os.path.join(outdir, "logits_batch.pt")
    torch.save(tuple(torch.zeros(2, 2, 4) for _ in range(L)), src)
    r = subprocess.run([moesim] + base + [src, os.path.join(outdir, "pt_batch.h5")], capture_output=True, text=True)
    ok = r.returncode == 1 and "a batch of 2; save one sequence per file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    print("batch    %s %s" % ("ok" if ok else "WRONG", r.stderr.strip()))
    bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
