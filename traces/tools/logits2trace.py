#!/usr/bin/env python3
"""logits2trace.py IN OUTDIR [--layout LTJ|TLJ] [--prompt-len P]: the converter
behind `moesim trace import --format hf-logits`.

IN holds the router logits of a Hugging Face transformers MoE model run with
output_router_logits=True (checked against transformers 4.57.6 and 5.23.0):
`outputs.router_logits` is a tuple with one tensor per MoE layer (dense layers
are left out), each (batch*seq, experts), pre-softmax logits.  Accepted files:

  .pt / .pth   torch.save of that tuple (or list), of one stacked tensor
               [layers, tokens, experts], of a list over forward calls of such
               tuples (hooks during generate: concatenated per layer in call
               order), or of a dict holding one of these under
               "router_logits"; loaded with torch.load(weights_only=True);
  .npy         np.save of the stacked array, [layers, tokens, experts]
               (--layout LTJ, default) or [tokens, layers, experts] (TLJ);
  .npz         one (tokens, experts) array per layer, layers in the order of
               the numbers in the key names (layer_0, layer_1, ... or arr_0, ...).

A per-layer tensor of 3 axes must have batch 1 (one sequence per file).  The
router probabilities are softmax(logits) per token and layer in float64: the
distribution of softmax routers (Mixtral, Qwen-MoE, OLMoE, ...).  Routers that
are not a softmax of these logits (DeepSeek-V3's sigmoid with a bias,
DeepSeek-V2's group-limited top-k) cannot be converted: their top-k is not the
top-k of these logits.  Writes OUTDIR/layer<l>.csv (dense-csv: a `phase`
column when --prompt-len P is given, rows < P prefill and each later row one
decode step; values with 9 significant digits), which moesim imports with the
dense-csv importer (probs_kind full).  Errors: one line "moesim: FILE: ..." on
stderr, exit 1.  Needs NumPy; torch only for .pt files.
"""
import os
import re
import sys


def fail(msg):
    sys.stderr.write("moesim: %s\n" % msg)
    sys.exit(1)


def to_numpy(src, t, what):
    import numpy as np
    if hasattr(t, "detach"):  # a torch tensor (bf16 has no NumPy type)
        t = t.detach().float().cpu().numpy()
    a = np.asarray(t)
    if a.dtype.kind not in "fiu":
        fail("%s: %s has dtype %s, expected numbers (router logits)" % (src, what, a.dtype))
    return a.astype(np.float64)


def per_layer(src, layers, what):
    """A sequence of per-layer (tokens, experts) arrays -> [L, T, J]."""
    import numpy as np
    out = []
    for l, t in enumerate(layers):
        a = to_numpy(src, t, "%s[%d]" % (what, l))
        if a.ndim == 3:
            if a.shape[0] != 1:
                fail("%s: %s[%d] has shape %s: a batch of %d; save one sequence per file"
                     % (src, what, l, tuple(a.shape), a.shape[0]))
            a = a[0]
        if a.ndim != 2:
            fail("%s: %s[%d] has shape %s, expected (tokens, experts)" % (src, what, l, tuple(a.shape)))
        out.append(a)
    shapes = {a.shape for a in out}
    if len(shapes) != 1:
        fail("%s: the layers' shapes differ: %s" % (src, sorted(shapes)))
    return np.stack(out)


def load_pt(src):
    try:
        import torch
    except ImportError as e:
        fail("%s: a .pt file needs PyTorch (%s); set MOESIM_PYTHON to a Python that has it" % (src, e))
    try:
        obj = torch.load(src, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any load failure is one line
        fail("%s: torch.load failed (%s)" % (src, str(e).splitlines()[0][:160] if str(e) else type(e).__name__))
    if isinstance(obj, dict):
        if "router_logits" not in obj:
            fail("%s: a dict without the key 'router_logits' (keys: %s)" % (src, ", ".join(map(str, list(obj)[:8]))))
        obj = obj["router_logits"]
    if hasattr(obj, "detach"):
        a = to_numpy(src, obj, "the tensor")
        if a.ndim != 3:
            fail("%s: tensor of shape %s, expected [layers, tokens, experts]" % (src, tuple(a.shape)))
        return a
    if not isinstance(obj, (list, tuple)) or not obj:
        fail("%s: expected a tuple of per-layer tensors, got %s" % (src, type(obj).__name__))
    if all(isinstance(x, (list, tuple)) for x in obj):  # forward calls x layers
        import numpy as np
        steps = [per_layer(src, x, "call %d" % i) for i, x in enumerate(obj)]
        if len({s.shape[0] for s in steps}) != 1 or len({s.shape[2] for s in steps}) != 1:
            fail("%s: the forward calls have different layer or expert counts" % src)
        return np.concatenate(steps, axis=1)
    return per_layer(src, obj, "router_logits")


def load_numpy(src, layout):
    import numpy as np
    try:
        obj = np.load(src, allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        fail("%s: not a NumPy .npy / .npz file (%s)" % (src, str(e).splitlines()[0][:120] if str(e) else type(e).__name__))
    if isinstance(obj, np.ndarray):
        a = to_numpy(src, obj, "the array")
        if a.ndim != 3:
            fail("%s: shape %s, expected 3 axes (--layout %s)" % (src, tuple(a.shape), layout))
        return a if layout == "LTJ" else a.transpose(1, 0, 2)
    keys = list(obj.keys())
    if not keys:
        fail("%s: an empty .npz" % src)

    def num(k):
        m = re.findall(r"\d+", k)
        if not m:
            fail("%s: .npz key '%s' has no layer number" % (src, k))
        return int(m[-1])
    keys.sort(key=num)
    return per_layer(src, [obj[k] for k in keys], "npz")


def main(argv):
    args, layout, plen = [], "LTJ", 0
    i = 1
    while i < len(argv):
        if argv[i] in ("--layout", "--prompt-len") and i + 1 < len(argv):
            if argv[i] == "--layout":
                layout = argv[i + 1]
            else:
                plen = int(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2 or layout not in ("LTJ", "TLJ"):
        fail("usage: logits2trace.py IN OUTDIR [--layout LTJ|TLJ] [--prompt-len P]")
    src, outdir = args
    try:
        import numpy as np
    except ImportError as e:
        fail("%s: the hf-logits converter needs NumPy (%s); set MOESIM_PYTHON to a Python that has it" % (src, e))
    if not os.path.exists(src):
        fail("%s: cannot open: No such file or directory" % src)
    with open(src, "rb") as f:
        magic = f.read(6)
    if magic == b"\x93NUMPY" or magic[:2] == b"PK" and src.endswith(".npz"):
        a = load_numpy(src, layout)
    elif magic[:2] == b"PK" or src.endswith((".pt", ".pth", ".bin")):
        a = load_pt(src)
    else:
        fail("%s: neither a .npy, a .npz nor a torch.save file (starts with %r)" % (src, magic))
    L, T, J = a.shape
    if L == 0 or T == 0 or J == 0:
        fail("%s: empty: %d layers, %d tokens, %d experts" % (src, L, T, J))
    if plen and plen > T:
        fail("%s: --prompt-len %d but only %d token rows" % (src, plen, T))
    bad = ~np.isfinite(a)
    if bad.any():
        l, t, j = map(int, np.argwhere(bad)[0])
        fail("%s: logit at layer %d token %d expert %d is %r, not finite" % (src, l, t, j, float(a[l, t, j])))
    p = np.exp(a - a.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    head = ("phase," if plen else "") + ",".join("e%d" % j for j in range(J)) + "\n"
    for l in range(L):
        path = os.path.join(outdir, "layer%d.csv" % l)
        try:
            with open(path, "w") as f:
                f.write(head)
                for t in range(T):
                    pre = ("prefill," if t < plen else "decode,") if plen else ""
                    f.write(pre + ",".join("%.9g" % v for v in p[l, t]) + "\n")
        except OSError as e:  # a full disk, an unwritable directory: one line naming the file
            fail("%s: cannot write: %s" % (path, e.strerror or e))


if __name__ == "__main__":
    main(sys.argv)
