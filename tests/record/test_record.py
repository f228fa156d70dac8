#!/usr/bin/env python3
"""Tests traces/record/record.py on tiny randomly initialised models of every
architecture the installed transformers has (nothing is downloaded).

Usage: test_record.py MOESIM PROMPTS.jsonl   (writes record_*.h5 in the cwd)

For each architecture: record 2 prompts x 3 generated tokens (spec depth 1),
then
  * `moesim trace validate` accepts the file (exact request/iteration/row counts)
    as format v2 (HDF5 checksums and the content digest verified);
  * the model's own routing, from one uncached forward over the whole sequence
    with output_router_logits=True, gives the recorded probabilities (1e-4)
    and the recorded top-k ids exactly, cell by cell;
  * every probability row sums to 1 (1e-5) and topk_w are the probabilities
    of topk_ids; the speculative gates of the last layer are all -1;
  * the prefill embedding is the mean of the embedding layer over the prompt.
Finally the CLI run of one architecture gives a byte-identical file.
"""
import os
import subprocess
import sys
import types

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "traces", "record"))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
from checks import check, finish  # noqa: E402  (tests/record/checks.py)
import torch  # noqa: E402
import transformers  # noqa: E402

import record  # noqa: E402

NEW_TOKENS = 3


def args_for(arch, prompts, out, spec):
    return types.SimpleNamespace(config=arch, model_id=None, prompts=prompts, max_new_tokens=NEW_TOKENS,
                                 spec_depth=spec, output=out, seed=0, interval=0.25, dtype="float32", tiny_set=[],
                                 temperature=0.0, train_steps=0, train_text=None)


def validate(moesim, out, n_rows):
    res = subprocess.run([moesim, "trace", "validate", out], capture_output=True, text=True)
    expect = f"{out}: ok (2 requests, {2 * (NEW_TOKENS + 1)} iterations, {n_rows} rows,"
    check(res.returncode == 0 and res.stdout.startswith(expect), f"{out}: validate said {res.stdout}{res.stderr}")
    check("format v1" not in res.stderr, f"{out}: not written as format v2 (checksums, content digest): {res.stderr}")


def own_routing(model, req):
    """[(layer, rows slice within the request, logits [n, J])] from the model's output_router_logits."""
    with torch.no_grad():
        if model.config.is_encoder_decoder:
            out = model(input_ids=torch.tensor([req.prompt_ids]), decoder_input_ids=torch.tensor([req.generated]),
                        output_router_logits=True)
            P = len(req.prompt_ids)
            enc = [t.reshape(-1, t.shape[-1]) for t in out.encoder_router_logits if t is not None and t.numel()]
            dec = [t.reshape(-1, t.shape[-1]) for t in out.decoder_router_logits if t is not None and t.numel()]
            return ([(l, slice(0, P), t) for l, t in enumerate(enc)] +
                    [(len(enc) + l, slice(P, P + len(req.generated)), t) for l, t in enumerate(dec)])
        seq = torch.tensor([req.prompt_ids + req.generated])
        out = model(input_ids=seq, output_router_logits=True)
        return [(l, slice(0, seq.shape[1]), t.reshape(-1, t.shape[-1])) for l, t in enumerate(out.router_logits)]


def check_arch(arch, moesim, prompts):
    out = f"record_{arch}.h5"
    spec = 0 if arch == "switch_transformers" else 1
    model, requests, attrs, data = record.record(args_for(arch, prompts, out, spec))
    R = data["rows/topk_ids"].shape[0]
    validate(moesim, out, R)
    ids, w = data["rows/topk_ids"], data["rows/topk_w"]
    K = int(attrs["K"])
    probs = data.get("rows/probs")
    row0 = 0
    for req in requests:
        n = len(req.prompt_ids) + len(req.generated)
        for l, rows, logits in own_routing(model, req):
            p = torch.softmax(logits.float(), -1).numpy()
            top = np.argsort(-p, axis=1, kind="stable")[:, :K]
            got = ids[row0 + rows.start:row0 + rows.stop, l]
            check(np.array_equal(got, top), f"{arch}: layer {l}: recorded top-k {got.tolist()} != model's {top.tolist()}")
            want_w = np.take_along_axis(p, top, axis=1)
            check(np.allclose(w[row0 + rows.start:row0 + rows.stop, l], want_w, atol=1e-4), f"{arch}: layer {l}: weights")
            if probs is not None:
                check(np.allclose(probs[row0 + rows.start:row0 + rows.stop, l], p, atol=1e-4), f"{arch}: layer {l}: probs")
        if not model.config.is_encoder_decoder:
            emb = model.get_input_embeddings()(torch.tensor([req.prompt_ids]))[0].mean(0).detach().numpy()
            it0 = len(requests[0].iters) if req is not requests[0] else 0
            check(np.allclose(data["iterations/embedding"][it0], emb, atol=1e-6), f"{arch}: prefill embedding")
        row0 += n
    check(row0 == R, f"{arch}: {R} rows, requests hold {row0}")
    if probs is not None:
        check(np.abs(probs.sum(-1) - 1).max() < 1e-5, f"{arch}: probabilities do not sum to 1")
        check(np.allclose(np.take_along_axis(probs, ids, axis=2), w, atol=1e-7), f"{arch}: topk_w != probs[topk_ids]")
    else:
        check(attrs["probs_kind"] == "topk_raw" and ((ids == -1).sum(-1) > 0).sum() > 0, f"{arch}: missing cells")
    if spec:
        check((data["rows/spec_ids"][:, -1] == -1).all(), f"{arch}: spec of the last layer must be -1")
        check((data["rows/spec_ids"][:, 0] >= 0).all(), f"{arch}: spec of layer 0 must be present")
    print(f"{arch}: checked ({R} rows, L={attrs['L']} J={attrs['J']} K={K}, probs {attrs['probs_kind']})")


def main():
    moesim, prompts = sys.argv[1], sys.argv[2]
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    done, skipped = [], []
    for arch, (cfg, cls, _) in record.ARCHS.items():
        if not hasattr(transformers, cfg) or not hasattr(transformers, cls):
            skipped.append(arch)
            print(f"SKIP {arch}: transformers {transformers.__version__} has no {cls}")
            continue
        check_arch(arch, moesim, prompts)
        done.append(arch)
    # The CLI, run as a user would, writes the same bytes as the in-process run.
    res = subprocess.run([sys.executable, os.path.join(ROOT, "traces", "record", "record.py"), "--config", "mixtral",
                          "--prompts", prompts, "--max-new-tokens", str(NEW_TOKENS), "--spec-depth", "1",
                          "--interval", "0.25", "-o", "record_cli_mixtral.h5"], capture_output=True, text=True)
    check(res.returncode == 0, f"CLI: {res.stderr.strip()}")
    with open("record_cli_mixtral.h5", "rb") as a, open("record_mixtral.h5", "rb") as b:
        check(a.read() == b.read(), "CLI run and in-process run differ (not deterministic)")
    print(f"recorded: {' '.join(done)}; skipped: {' '.join(skipped) or 'none'}")
    return finish("record")


if __name__ == "__main__":
    sys.exit(main())
