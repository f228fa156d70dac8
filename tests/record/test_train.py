#!/usr/bin/env python3
"""Tests record.py's --train-steps / --train-text (traces/record/train_tiny.py)
and --temperature on a tiny Mixtral (nothing is downloaded).

Usage: test_train.py MOESIM PROMPTS.jsonl TEXT   (writes train_*.h5 in the cwd)

  * training lowers the loss: the mean of the last 10 % of 40 steps is at
    least 0.5 nat below the first batch's (a byte-level model of an English
    text starts near ln 512 = 6.2; 40 steps reach about 5.4);
  * the routers are trained: their weights differ from the untrained
    model's with the same seed, and the recorded routing is the trained
    model's own (one uncached forward, output_router_logits);
  * the trace validates; sampling (--temperature 0.8) with one seed gives the
    same bytes in the CLI and in-process, and sampling does not give the greedy tokens;
  * bad flags end with one `record.py: ...` line and exit 1 or 2.
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "traces", "record"))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import re  # noqa: E402

import h5py  # noqa: E402
import hdf5plugin  # noqa: E402,F401  (zstd for h5py)
import numpy as np  # noqa: E402
from checks import check, finish  # noqa: E402  (tests/record/checks.py)
import torch  # noqa: E402

import record  # noqa: E402

STEPS = 40

RECORD = os.path.join(ROOT, "traces", "record", "record.py")


def run(*argv):
    return subprocess.run([sys.executable, RECORD, *argv], capture_output=True, text=True)


def router_weights(model):
    return [record.router_weight(m).detach().clone() for _, m in record.find_routers(model)]


def main():
    moesim, prompts, text = sys.argv[1:4]
    # the CLI: trained and sampled
    common = ["--config", "mixtral", "--prompts", prompts, "--max-new-tokens", "6", "--train-steps", str(STEPS),
              "--train-text", text, "--temperature", "0.8", "--seed", "0"]
    for out in ("train_a.h5",):
        res = run(*common, "-o", out)
        check(res.returncode == 0, f"{out}: {res.stdout}{res.stderr}")
        m = re.search(rf"trained {STEPS} steps on .*: loss ([0-9.]+) -> ([0-9.]+)", res.stdout)
        check(m and float(m.group(2)) < float(m.group(1)) - 0.5, f"{out}: training did not lower the loss: {res.stdout}")
        res = subprocess.run([moesim, "trace", "validate", out], capture_output=True, text=True)
        check(res.returncode == 0 and ": ok (2 requests, 14 iterations," in res.stdout, f"{out}: validate: {res.stdout}{res.stderr}")
    with h5py.File("train_a.h5") as a:
        source = a.attrs["source"].decode()  # format v2: a fixed-length string, bytes in h5py
        check(f"--train-steps {STEPS}" in source and "--temperature 0.8" in source,
              f"source attribute lacks the training: {source}")
        ids = a["rows/topk_ids"][()]

    # in-process, the same flags: the same bytes (deterministic), the routers moved, and the
    # recorded routing is the trained model's own
    untrained = router_weights(record.tiny_model("mixtral", 0))
    model, requests, _, data = record.record(record.parse_args(common + ["-o", "train_c.h5"]))
    with open("train_a.h5", "rb") as a, open("train_c.h5", "rb") as c:
        check(a.read() == c.read(), "the CLI and the in-process run with the same flags differ")
    moved = [float((a - b).abs().max()) for a, b in zip(untrained, router_weights(model))]
    check(all(m > 1e-3 for m in moved), f"router weights did not change: max change per layer {moved}")
    row0 = 0
    for req in requests:
        seq = torch.tensor([req.prompt_ids + req.generated])
        with torch.no_grad():
            logits = model(input_ids=seq, output_router_logits=True).router_logits
        for l, t in enumerate(logits):
            top = np.argsort(-torch.softmax(t.float(), -1).numpy(), axis=1, kind="stable")[:, :2]
            check(np.array_equal(ids[row0:row0 + seq.shape[1], l], top), f"layer {l}: recorded top-k is not the trained model's")
        row0 += seq.shape[1]

    # sampling is not greedy: an untrained model, 24 tokens, greedy against T = 2
    gen = []
    for extra in ([], ["--temperature", "2"]):
        args = record.parse_args(["--config", "mixtral", "--prompts", prompts, "--max-new-tokens", "24",
                                  "-o", "train_g.h5", *extra])
        gen.append([r.generated for r in record.record(args)[1]])
    check(gen[0] != gen[1], "--temperature 2 generated the greedy tokens")

    # bad flags: one line each
    with open("train_short.txt", "w") as f:
        f.write("too short")
    bad = [
        (["--train-steps", "5"], 2, "--train-steps: give the text to train on with --train-text FILE"),
        (["--train-text", text], 2, "--train-text: give the number of steps with --train-steps N"),
        (["--train-steps", "-1", "--train-text", text], 2, "--train-steps -1: must be >= 0"),
        (["--train-steps", "5", "--train-text", "no_such.txt"], 1, "--train-text no_such.txt: No such file or directory"),
        (["--train-steps", "5", "--train-text", "train_short.txt"], 1, "--train-text: 9 bytes in all, fewer than one training window of 129"),
        (["--temperature", "-0.5"], 2, "--temperature -0.5: must be finite and >= 0"),
        (["--temperature", "nan"], 2, "--temperature nan: must be finite and >= 0"),
    ]
    for extra, code, msg in bad:
        res = run("--config", "mixtral", "--prompts", prompts, "-o", "train_bad.h5", *extra)
        lines = res.stderr.strip().splitlines()
        one = lines[0] if len(lines) == 1 else ""
        check(res.returncode == code and msg in one and not os.path.exists("train_bad.h5"),
              f"{' '.join(extra)}: exit {res.returncode}, stderr {res.stderr!r}")
    # the output is never an input (the text trained on, the prompts) nor a non-regular file
    with open("train_text_copy.txt", "w") as f:
        f.write(open(text).read())
    for out, msg in (("train_text_copy.txt", "is the input train_text_copy.txt"), (prompts, "is the input"),
                     ("/dev/null", "exists and is not a regular file")):
        before = open(out, "rb").read() if out != "/dev/null" else b""
        res = run("--config", "mixtral", "--prompts", prompts, "--train-steps", "5", "--train-text",
                  "train_text_copy.txt", "-o", out)
        lines = res.stderr.strip().splitlines()
        check(res.returncode == 1 and len(lines) == 1 and msg in lines[0], f"-o {out}: exit {res.returncode}, {res.stderr!r}")
        check(out == "/dev/null" or open(out, "rb").read() == before, f"-o {out}: the input changed")
    res = run("--model-id", "x", "--prompts", prompts, "-o", "train_bad.h5", "--train-steps", "5", "--train-text", text)
    check(res.returncode == 2 and "--train-steps: only with --config" in res.stderr, f"--model-id with training: {res.stderr!r}")

    return finish("train")


if __name__ == "__main__":
    sys.exit(main())
