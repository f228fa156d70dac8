"""Trains record.py's tiny `--config` models briefly on a text, so that their
routers learn something before the routing is recorded (docs/recorder.md,
"Trained tiny models").

A randomly initialised router maps each token to a fixed path of experts,
and greedy generation from random weights loops within a few steps: the
routing of such a recording is a token -> path table, not what a trained
router does.  Trained routers, with the load-balancing loss they are trained
with, spread tokens over the experts and route by context as well as by
token.  No trained MoE checkpoint is reachable from this project's machines,
so this trains the tiny model itself: a byte-level language model on the
given text (next-byte prediction, the same UTF-8 byte tokens the prompts get),
with the architecture's own router auxiliary loss and coefficient from its
config class.

The recipe is fixed and deterministic for a given seed, torch version and
thread count: AdamW (lr 3e-3, weight decay 0.01, 50 warm-up steps, cosine
decay to 0), batches of 16 windows of 128 bytes drawn uniformly from the text
with a generator seeded by the seed, gradient norm clipped at 1.  These are
common small-model settings (an estimate, not tuned to any statistic of the
recorded trace)."""
import math

TRAIN_BATCH = 16
TRAIN_SEQ = 128
TRAIN_LR = 3e-3
TRAIN_WARMUP = 50


class TrainError(Exception):
    """A one-line error for the user (record.py prints it)."""


def read_text(paths, vocab):
    """The UTF-8 bytes of PATHS concatenated, as token ids (byte % vocab)."""
    chunks = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                chunks.append(f.read())
        except OSError as e:
            raise TrainError(f"--train-text {path}: {e.strerror}")
        if not chunks[-1]:
            raise TrainError(f"--train-text {path}: empty file")
    data = b"".join(chunks)
    if len(data) < TRAIN_SEQ + 1:
        raise TrainError(f"--train-text: {len(data)} bytes in all, fewer than one training window "
                         f"of {TRAIN_SEQ + 1}")
    return [b % vocab for b in data]


def learning_rate(step, steps):
    """Linear warm-up over TRAIN_WARMUP steps, then cosine decay to 0."""
    warm = min(1.0, (step + 1) / TRAIN_WARMUP)
    return TRAIN_LR * warm * 0.5 * (1.0 + math.cos(math.pi * step / steps))


def train(model, paths, steps, seed, log=None):
    """Trains MODEL in place for STEPS steps on the text of PATHS; returns
    (first batch loss, mean loss of the last 10 % of the steps).  The model is
    left in eval mode."""
    import torch
    data = torch.tensor(read_text(paths, model.config.vocab_size), dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    model.config.output_router_logits = True  # adds the router's auxiliary loss to the loss
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=TRAIN_LR, weight_decay=0.01)
    first, tail, n_tail = None, 0.0, 0
    for step in range(steps):
        starts = torch.randint(0, len(data) - TRAIN_SEQ, (TRAIN_BATCH,), generator=gen)
        x = torch.stack([data[s:s + TRAIN_SEQ] for s in starts.tolist()])
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, steps)
        loss = model(input_ids=x, labels=x).loss  # labels are shifted inside the model
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = float(loss.detach())
        first = value if first is None else first
        if step >= steps - max(1, steps // 10):
            tail += value
            n_tail += 1
        if log and (step % 100 == 0 or step == steps - 1):
            log(f"train step {step}: loss {value:.3f}")
    model.config.output_router_logits = False
    return first, tail / n_tail
