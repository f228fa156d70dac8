#!/usr/bin/env python3
"""Records a moesim trace (docs/trace-format.md, version 2) from a Hugging Face
`transformers` MoE model.

The model runs greedy (or, with --temperature, sampled) generation on the
prompts of a JSONL or CSV file, one request at a time (batch 1): one prefill forward over the prompt, then one
decode forward per generated token.  Forward hooks on the router modules
record, for every token row and MoE layer, the router's full softmax
distribution and the router's own top-k selection; a hook on the input
embedding layer records the per-iteration semantic embedding (mean over the
prompt for prefill, the current token for decode); with --spec-depth S the
router of MoE layer l+d is also applied to layer l's router input h_l
(gate_{l+d}(h_l), d = 1..S), the speculative routing that speculative and
HybriMoE-style prefetchers use.

Usage:
  record.py (--model-id ID | --config ARCH) --prompts FILE -o OUT.h5
            [--max-new-tokens N] [--spec-depth S] [--seed N] [--interval S]
            [--temperature T] [--train-steps N --train-text FILE]

--config ARCH builds a tiny randomly initialised model from the architecture's
config class (2 MoE layers, 4 experts, hidden 32; nothing is downloaded) and
tokenises prompts as UTF-8 bytes (--train-steps N trains it first on the bytes
of --train-text, train_tiny.py); --model-id loads a model and its tokenizer
with from_pretrained (a hub id or a local folder).  See docs/recorder.md.

Errors print one line `record.py: ...` on stderr and exit 1 (2 for usage).
"""
import argparse
import csv
import json
import math
import os
import sys

sys.dont_write_bytecode = True

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracefile import TraceFileError, check_output, clip_utf8, write_trace  # noqa: E402

PROG = "record.py"
TINY_VOCAB = 512


class RecordError(Exception):
    """A one-line error for the user."""


def stdout_failed(prog, e):
    """Ends the tool after a failed write to standard output (a closed pipe,
    a full disk): one line on stderr, exit 1, as moesim does.  stdout is
    pointed at /dev/null first, so the interpreter's last flush cannot fail
    again with a traceback."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    print(f"{prog}: standard output: {e.strerror or e}", file=sys.stderr)
    sys.exit(1)


def say(line, prog="record.py"):
    """Prints one line of the tool's report on stdout, flushed and checked."""
    try:
        print(line, flush=True)
    except OSError as e:
        stdout_failed(prog, e)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, `PROG: error: ...`, exit 2
    (argparse prints the whole usage first); --help prints the usage, checked
    like every line the tools print."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def print_help(self, file=None):
        try:
            super().print_help(file)
            (file or sys.stdout).flush()
        except OSError as e:
            stdout_failed(self.prog, e)


# ---------------------------------------------------------------- tiny configs

TINY_COMMON = dict(vocab_size=TINY_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                   pad_token_id=None, bos_token_id=None, eos_token_id=None, tie_word_embeddings=False)

# ARCH -> (config class, model class, config overrides).  Router modules of
# transformers 5.x: *TopKRouter / *TopkRouter returning (logits, scores,
# indices); Switch's Top1Router returns (one-hot dispatch, max prob, logits).
ARCHS = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                       shared_expert_intermediate_size=32, decoder_sparse_step=1)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, head_dim=8,
                       decoder_sparse_step=1)),
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                    dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
                         num_key_value_heads=4, first_k_dense_replace=0, topk_method="greedy", kv_lora_rank=16, q_lora_rank=None,
                         qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, head_dim=8)),
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", dict(num_experts=4, num_experts_per_tok=2)),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM",
                dict(num_local_experts=4, num_experts_per_tok=2, head_dim=8, sliding_window=16, max_position_embeddings=131072,
                     layer_types=["sliding_attention", "full_attention"])),
    "switch_transformers": ("SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration",
                            dict(vocab_size=TINY_VOCAB, d_model=32, d_kv=8, d_ff=64, num_heads=4, num_layers=2,
                                 num_decoder_layers=2, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
                                 num_experts=4, expert_capacity=4096, router_jitter_noise=0.0,
                                 pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                                 tie_word_embeddings=False)),
}


def parse_tiny_set(items):
    """--tiny-set KEY=INT ... -> dict; one-line errors."""
    out = {}
    for item in items or []:
        key, eq, val = item.partition("=")
        if not eq or not key or not val.lstrip("-").isdigit():
            raise RecordError(f"--tiny-set '{item}': expected KEY=INTEGER (e.g. num_local_experts=16)")
        out[key] = int(val)
    return out


def tiny_model(arch, seed, overrides=None):
    import torch
    import transformers
    if arch not in ARCHS:
        raise RecordError(f"--config: unknown architecture '{arch}' (known: {', '.join(ARCHS)})")
    cfg_name, model_name, extra = ARCHS[arch]
    cfg_cls = getattr(transformers, cfg_name, None)
    model_cls = getattr(transformers, model_name, None)
    if cfg_cls is None or model_cls is None:
        raise RecordError(f"--config {arch}: transformers {transformers.__version__} has no {model_name}")
    kw = dict(extra) if arch == "switch_transformers" else {**TINY_COMMON, **extra}
    for key in overrides or {}:
        if key not in kw:
            raise RecordError(f"--tiny-set {key}: not a key of the tiny {arch} config (known: {', '.join(sorted(kw))})")
    kw.update(overrides or {})
    torch.manual_seed(seed)
    model = model_cls(cfg_cls(**kw))
    # Random routers: some architectures initialise router weights to zero,
    # which would make every expert tie.
    with torch.no_grad():
        for _, mod in find_routers(model):
            w = router_weight(mod)
            w.normal_(0.0, 1.0 / math.sqrt(w.shape[1]))
    return model.float().eval()


# ---------------------------------------------------------------- routers

def find_routers(model):
    """[(name, module)] of the router modules, in execution order of the layers."""
    out = []
    for name, mod in model.named_modules():
        cls = type(mod).__name__
        if cls.endswith(("TopKRouter", "TopkRouter", "Top1Router")):
            out.append((name, mod))
    return out


def router_weight(mod):
    if hasattr(mod, "classifier"):
        return mod.classifier.weight
    return mod.weight


def is_top1_dispatch(mod):
    return type(mod).__name__.endswith("Top1Router")


def router_logits_and_ids(mod, output, n_rows):
    """(logits [n, J], the router's own selected ids [n, K]) from a router output."""
    import torch
    if is_top1_dispatch(mod):
        dispatch, _, logits = output
        logits = logits.reshape(n_rows, -1)
        dispatch = dispatch.reshape(n_rows, -1)
        # Tokens over the expert capacity get no expert: their choice is still the argmax.
        ids = torch.where(dispatch.sum(-1) > 0, dispatch.argmax(-1), logits.argmax(-1)).unsqueeze(-1)
        return logits, ids
    logits, _, ids = output
    return logits.reshape(n_rows, -1), ids.reshape(n_rows, -1)


def embedding_modules(model):
    """The input embedding layer(s): the encoder's and the decoder's in an encoder-decoder."""
    mods = [model.get_input_embeddings()]
    if model.config.is_encoder_decoder:
        mods += [model.get_encoder().get_input_embeddings(), model.get_decoder().get_input_embeddings()]
    return list({id(m): m for m in mods}.values())


def layer_prefix(name):
    """'model.layers.3.mlp.gate' -> 'model.layers.3' (the first numbered module)."""
    parts = name.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[:i + 1])
    return name


# ---------------------------------------------------------------- recording

class Recorder:
    """Hooks on the routers and the embedding layer; one forward = one iteration."""

    def __init__(self, model, spec_depth):
        self.model = model
        self.routers = find_routers(model)
        if not self.routers:
            raise RecordError(f"{type(model).__name__}: no router module found (a *TopKRouter / *Top1Router)")
        self.L = len(self.routers)
        self.index = {id(m): i for i, (_, m) in enumerate(self.routers)}
        self.spec_depth = spec_depth
        self.active = False
        self.handles = [m.register_forward_hook(self._on_router) for _, m in self.routers]
        self.handles += [m.register_forward_hook(self._on_embed) for m in embedding_modules(model)]
        self.J = self.K = None

    def begin(self, n_rows):
        self.n_rows = n_rows
        self.cells = [None] * self.L
        self.spec = [None] * self.L
        self.embed = None
        self.active = True

    def end(self):
        self.active = False
        return self.cells, self.spec, self.embed

    def _on_embed(self, _mod, _inp, out):
        if self.active:
            self.embed = out.detach().reshape(-1, out.shape[-1]).float()

    def _on_router(self, mod, inp, out):
        if not self.active:
            return
        import torch
        h = inp[0].detach()
        h = h.reshape(-1, h.shape[-1])
        n = h.shape[0]
        logits, ids = router_logits_and_ids(mod, out, n)
        probs = torch.softmax(logits.detach().float(), dim=-1)
        l = self.index[id(mod)]
        self.cells[l] = (probs.numpy().astype(np.float64), ids.detach().numpy().astype(np.int64))
        if self.spec_depth:
            self.spec[l] = self._speculate(l, h)

    def _speculate(self, l, h):
        """[(ids [n, K], probs [n, J])] of gate_{l+d}(h_l), d = 1..S (None past the last layer)."""
        import torch
        out = []
        self.active = False
        try:
            for d in range(1, self.spec_depth + 1):
                if l + d >= self.L:
                    out.append(None)
                    continue
                mod = self.routers[l + d][1]
                with torch.no_grad():
                    logits, ids = router_logits_and_ids(mod, mod(h), h.shape[0])
                out.append((ids.numpy().astype(np.int64), torch.softmax(logits.float(), -1).numpy()))
        finally:
            self.active = True
        return out


def ordered_topk(probs, ids):
    """The selected ids of each row sorted by descending probability (ties: lower id), and their probabilities."""
    w = np.take_along_axis(probs, ids, axis=1)
    order = np.lexsort((ids, -w), axis=-1)
    return np.take_along_axis(ids, order, axis=1), np.take_along_axis(w, order, axis=1)


# ---------------------------------------------------------------- prompts

def read_prompts(path):
    """[(id, arrival_s, text)] from JSONL ({"text"|"prompt", "id"?, "arrival_s"?}) or CSV (header)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            raw = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}")
    rows = []
    if path.endswith(".csv"):
        reader = csv.DictReader(raw.splitlines())
        key = next((k for k in ("text", "prompt") if k in (reader.fieldnames or [])), None)
        if key is None:
            raise RecordError(f"{path}: line 1: the CSV header needs a 'text' or 'prompt' column")
        for i, row in enumerate(reader):
            rows.append((i + 2, row, key))
    else:
        for i, line in enumerate(raw.splitlines()):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}: line {i + 1}: not JSON ({e.msg})")
            if not isinstance(obj, dict):
                raise RecordError(f"{path}: line {i + 1}: expected a JSON object")
            key = next((k for k in ("text", "prompt") if k in obj), None)
            if key is None:
                raise RecordError(f"{path}: line {i + 1}: no 'text' or 'prompt' field")
            rows.append((i + 1, obj, key))
    if not rows:
        raise RecordError(f"{path}: no prompts")
    return [prompt_of(path, n, i, obj, key) for i, (n, obj, key) in enumerate(rows)]


def prompt_of(path, line, index, obj, key):
    text = obj[key]
    if not isinstance(text, str) or not text:
        raise RecordError(f"{path}: line {line}: '{key}' must be a non-empty string")
    try:
        rid = int(obj.get("id", index))
        arrival = float(obj.get("arrival_s", math.nan))
    except (TypeError, ValueError):
        raise RecordError(f"{path}: line {line}: 'id' must be an integer and 'arrival_s' a number")
    if rid < 0:
        raise RecordError(f"{path}: line {line}: id {rid} is negative")
    return rid, arrival, text


# ---------------------------------------------------------------- generation

class Request:
    def __init__(self, rid, arrival, text, prompt_ids):
        self.rid, self.arrival, self.text, self.prompt_ids = rid, arrival, text, prompt_ids
        self.iters = []      # (phase, n_rows, embedding [H])
        self.cells = []      # per iteration: list over layers of (probs, ids) or None
        self.spec = []
        self.generated = []  # generated token ids (the decode rows' tokens)


def next_token_picker(temperature, seed):
    """logits -> next token id: the argmax (greedy) for temperature 0, else a
    draw from softmax(logits / temperature) with a generator seeded by SEED
    (one stream over all the prompts, in file order)."""
    import torch
    if temperature == 0:
        return lambda logits: int(logits.argmax())
    gen = torch.Generator().manual_seed(seed)
    return lambda logits: int(torch.multinomial(torch.softmax(logits.float() / temperature, dim=-1), 1,
                                                generator=gen))


def run_request(model, rec, req, max_new, eos_id, pick):
    import torch
    ids = torch.tensor([req.prompt_ids], dtype=torch.long)
    with torch.no_grad():
        if model.config.is_encoder_decoder:
            step = seq2seq_steps(model, ids, pick)
        else:
            step = causal_steps(model, ids, pick)
        rec.begin(len(req.prompt_ids))
        nxt = step(None)
        store_iteration(rec, req, 0)
        for _ in range(max_new):
            if eos_id is not None and nxt == eos_id:
                break
            req.generated.append(nxt)
            rec.begin(1)
            nxt = step(nxt)
            store_iteration(rec, req, 1)


def causal_steps(model, prompt, pick):
    import torch
    state = {}

    def step(tok):
        if tok is None:
            out = model(input_ids=prompt, use_cache=True)
        else:
            out = model(input_ids=torch.tensor([[tok]]), past_key_values=state["past"], use_cache=True)
        state["past"] = out.past_key_values
        return pick(out.logits[0, -1])
    return step


def seq2seq_steps(model, prompt, pick):
    """Prefill = the encoder over the prompt; decode d feeds decoder token d
    (the start token, then the generated ones)."""
    import torch
    state = {}

    def step(tok):
        if tok is None:
            state["enc"] = model.get_encoder()(input_ids=prompt)
            state["past"] = None
            state["next_in"] = model.config.decoder_start_token_id
            return state["next_in"]
        out = model(encoder_outputs=state["enc"], decoder_input_ids=torch.tensor([[tok]]),
                    past_key_values=state["past"], use_cache=True)
        state["past"] = out.past_key_values
        return pick(out.logits[0, -1])
    return step


def store_iteration(rec, req, phase):
    cells, spec, embed = rec.end()
    if embed is None:
        raise RecordError("the input embedding layer did not run in a forward pass")
    req.iters.append((phase, rec.n_rows, (embed.mean(0) if phase == 0 else embed[-1]).numpy()))
    req.cells.append(cells)
    req.spec.append(spec)


# ---------------------------------------------------------------- trace assembly

def model_geometry(model, rec):
    """(J, K, expert_bytes [L], dense_bytes [L], shared_experts) from the modules."""
    names = dict(model.named_modules())
    J = router_weight(rec.routers[0][1]).shape[0]
    cfg = model.config
    K = int(getattr(cfg, "num_experts_per_tok", 1) or 1)
    expert_bytes, dense_bytes = [], []
    for name, _ in rec.routers:
        block = names[name.rsplit(".", 1)[0]]
        experts = getattr(block, "experts", None)
        eb = sum(p.numel() * p.element_size() for p in experts.parameters()) // J if experts is not None else 0
        layer = names[layer_prefix(name)]
        total = sum(p.numel() * p.element_size() for p in layer.parameters())
        expert_bytes.append(max(eb, 1))
        dense_bytes.append(total - eb * J)
    shared = int(getattr(cfg, "n_shared_experts", 0) or 0)
    if getattr(cfg, "shared_expert_intermediate_size", 0):
        shared = 1
    return J, K, expert_bytes, dense_bytes, shared


def assemble(requests, L, J, K, S, full):
    """Numpy arrays of every dataset of the trace."""
    R = sum(len(r.prompt_ids) + len(r.generated) for r in requests)
    topk_ids = np.full((R, L, K), -1, dtype=np.int32)
    topk_w = np.zeros((R, L, K), dtype=np.float32)
    probs = np.zeros((R, L, J), dtype=np.float32) if full else None
    spec_ids = np.full((R, L, S, K), -1, dtype=np.int32) if S else None
    spec_w = np.zeros((R, L, S, K), dtype=np.float32) if S else None
    row = 0
    for req in requests:
        for cells, spec, (_, n, _) in zip(req.cells, req.spec, req.iters):
            for l, cell in enumerate(cells):
                if cell is None:
                    continue  # layer not traversed by this iteration (encoder-decoder)
                p, ids = cell
                if p.shape[0] != n or ids.shape[1] != K:
                    raise RecordError(f"router {l}: {p.shape[0]} rows x {ids.shape[1]} ids, expected {n} x {K}")
                sid, sw = ordered_topk(p, ids)
                topk_ids[row:row + n, l] = sid
                topk_w[row:row + n, l] = sw
                if full:
                    probs[row:row + n, l] = p
                for d in range(S):
                    if spec[l] is None or spec[l][d] is None:
                        continue
                    gid, gp = spec[l][d]
                    sid, sw = ordered_topk(gp.astype(np.float64), gid)
                    spec_ids[row:row + n, l, d] = sid
                    spec_w[row:row + n, l, d] = sw
            row += n
    return topk_ids, topk_w, probs, spec_ids, spec_w


def build_trace(model, rec, requests, model_name, source, S):
    J, K, expert_bytes, dense_bytes, shared = model_geometry(model, rec)
    L = rec.L
    # Encoder-decoder: a row traverses only the encoder or the decoder layers,
    # so some cells are missing, which `full` forbids: store the top-k only.
    full = not model.config.is_encoder_decoder
    topk_ids, topk_w, probs, spec_ids, spec_w = assemble(requests, L, J, K, S, full)
    n_iters = [len(r.iters) for r in requests]
    n_rows = [len(r.prompt_ids) + len(r.generated) for r in requests]
    n_tok = [len(r.prompt_ids) for r in requests]
    H = requests[0].iters[0][2].shape[0]
    cfg = model.config
    attrs = {"model_name": clip_utf8(model_name, 127),
             "source": clip_utf8(source, 511), "L": np.uint32(L), "J": np.uint32(J), "K": np.uint32(K),
             "shared_experts": np.uint32(shared),
             "hidden_size": np.uint32(getattr(cfg, "hidden_size", None) or getattr(cfg, "d_model", 0) or 0),
             "probs_kind": "full" if full else "topk_raw", "embed_dim": np.uint32(H),
             "spec_depth": np.uint32(S), "flags": np.uint32(1 | 2)}
    data = {
        "layers/expert_bytes": np.array(expert_bytes, dtype=np.uint64),
        "layers/dense_bytes": np.array(dense_bytes, dtype=np.uint64),
        "requests/id": np.array([r.rid for r in requests], dtype=np.uint64),
        "requests/arrival_s": np.array([r.arrival for r in requests], dtype=np.float64),
        "requests/prompt_len": np.array(n_tok, dtype=np.uint32),
        "requests/output_len": np.array([len(r.generated) for r in requests], dtype=np.uint32),
        "requests/iter_start": np.cumsum([0] + n_iters[:-1]).astype(np.uint64),
        "requests/n_iters": np.array(n_iters, dtype=np.uint32),
        "requests/row_start": np.cumsum([0] + n_rows[:-1]).astype(np.uint64),
        "requests/n_rows": np.array(n_rows, dtype=np.uint64),
        "requests/token_start": np.cumsum([0] + n_tok[:-1]).astype(np.uint64),
        "requests/n_tokens": np.array(n_tok, dtype=np.uint32),
        "requests/text": [r.text for r in requests],
        "tokens/ids": np.concatenate([np.array(r.prompt_ids, dtype=np.int32) for r in requests]),
    }
    phase, it_start, it_rows, emb = [], [], [], []
    row = 0
    for r in requests:
        for ph, n, e in r.iters:
            phase.append(ph)
            it_start.append(row)
            it_rows.append(n)
            emb.append(e)
            row += n
    data["iterations/phase"] = np.array(phase, dtype=np.uint8)
    data["iterations/row_start"] = np.array(it_start, dtype=np.uint64)
    data["iterations/n_rows"] = np.array(it_rows, dtype=np.uint32)
    data["iterations/embedding"] = np.stack(emb).astype(np.float32)
    data["rows/topk_ids"] = topk_ids
    data["rows/topk_w"] = topk_w
    if full:
        data["rows/probs"] = probs
    if S:
        data["rows/spec_ids"] = spec_ids
        data["rows/spec_w"] = spec_w
    return attrs, data


# ---------------------------------------------------------------- entry points

def load_model(args):
    """(model, tokenize(text) -> ids, eos id or None, model name)."""
    if args.config:
        model = tiny_model(args.config, args.seed, parse_tiny_set(getattr(args, "tiny_set", None) or []))
        if getattr(args, "train_steps", 0):
            train_model(model, args)
        vocab = model.config.vocab_size
        return model, (lambda t: [b % vocab for b in t.encode("utf-8")]), None, f"tiny-{args.config}"
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, AutoConfig
    torch.manual_seed(args.seed)
    try:
        cfg = AutoConfig.from_pretrained(args.model_id)
        cls = AutoModelForSeq2SeqLM if getattr(cfg, "is_encoder_decoder", False) else AutoModelForCausalLM
        model = cls.from_pretrained(args.model_id, dtype=getattr(torch, args.dtype)).eval()
        tok = AutoTokenizer.from_pretrained(args.model_id)
    except (OSError, ValueError) as e:
        raise RecordError(f"--model-id {args.model_id}: {str(e).splitlines()[0]}")
    return model, (lambda t: tok(t)["input_ids"]), tok.eos_token_id, args.model_id


def train_model(model, args):
    """--train-steps N --train-text FILE: trains the tiny model (train_tiny.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import train_tiny
    try:
        first, last = train_tiny.train(model, args.train_text, args.train_steps, args.seed,
                                       log=say)
    except train_tiny.TrainError as e:
        raise RecordError(str(e))
    say(f"trained {args.train_steps} steps on {', '.join(args.train_text)}: loss {first:.3f} -> {last:.3f} "
          f"(mean of the last 10 %)")
    model.eval()


def record(args):
    """Records ARGS.prompts; returns (model, requests, attrs, data) and writes ARGS.output.
    Raises RecordError, or TraceFileError for the output (-o checks, the write)."""
    check_output(args.output, [args.prompts] + list(getattr(args, "train_text", None) or []))
    prompts = read_prompts(args.prompts)
    model, tokenize, eos_id, name = load_model(args)
    rec = Recorder(model, args.spec_depth)
    if args.spec_depth >= rec.L and args.spec_depth:
        raise RecordError(f"--spec-depth {args.spec_depth}: the model has {rec.L} MoE layers (at most {rec.L - 1})")
    if args.spec_depth and model.config.is_encoder_decoder:
        raise RecordError("--spec-depth: not supported for encoder-decoder models")
    pick = next_token_picker(args.temperature, args.seed)
    requests, last = [], 0.0
    for i, (rid, arrival, text) in enumerate(prompts):
        arrival = i * args.interval if math.isnan(arrival) else arrival
        if not math.isfinite(arrival) or arrival < last:
            raise RecordError(f"{args.prompts}: prompt {i}: arrival_s {arrival} is not finite and non-decreasing")
        last = arrival
        ids = tokenize(text)
        if not ids:
            raise RecordError(f"{args.prompts}: prompt {i}: tokenises to no tokens")
        req = Request(rid, arrival, text, ids)
        run_request(model, rec, req, args.max_new_tokens, eos_id, pick)
        requests.append(req)
    if len({r.rid for r in requests}) != len(requests):
        raise RecordError(f"{args.prompts}: request ids are not unique")
    source = (f"traces/record/record.py {'--config ' + args.config if args.config else '--model-id ' + name} "
              + "".join(f"--tiny-set {t} " for t in (getattr(args, "tiny_set", None) or []))
              + f"--prompts {os.path.basename(args.prompts)} --max-new-tokens {args.max_new_tokens} "
              f"--spec-depth {args.spec_depth} --seed {args.seed}"
              + (f" --temperature {args.temperature:g}" if args.temperature else "")
              + (f" --train-steps {args.train_steps} --train-text "
                 + " --train-text ".join(os.path.basename(t) for t in args.train_text) if args.train_steps else ""))
    attrs, data = build_trace(model, rec, requests, name, source, args.spec_depth)
    write_trace(args.output, attrs, data)
    return model, requests, attrs, data


def parse_args(argv):
    p = OneLineParser(prog=PROG, description="Record a moesim trace (format v2) from a transformers MoE model.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model-id", help="hub id or local folder, loaded with from_pretrained")
    src.add_argument("--config", metavar="ARCH", help=f"tiny random model of ARCH: {', '.join(ARCHS)}")
    p.add_argument("--tiny-set", action="append", metavar="KEY=INT",
                   help="with --config: override an integer key of the tiny config (e.g. num_local_experts=16)")
    p.add_argument("--prompts", required=True, help="JSONL ({\"text\": ...}) or CSV with a text/prompt column")
    p.add_argument("--max-new-tokens", type=int, default=8, help="decode iterations per prompt (default 8)")
    p.add_argument("--spec-depth", type=int, default=0, help="speculative gates gate_{l+d}(h_l), d = 1..S (0..3)")
    p.add_argument("-o", "--output", required=True, help="trace file to write (OUT.h5)")
    p.add_argument("--seed", type=int, default=0, help="torch seed (tiny models' weights)")
    p.add_argument("--interval", type=float, default=0.0, help="arrival gap in seconds when the prompts give none")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sample each next token from softmax(logits / T), seeded by --seed (default 0: greedy)")
    p.add_argument("--train-steps", type=int, default=0,
                   help="with --config: train the tiny model N steps on --train-text first (default 0: random)")
    p.add_argument("--train-text", action="append", metavar="FILE",
                   help="with --train-steps: a text file to train on (repeatable; its UTF-8 bytes)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="weights dtype for --model-id")
    args = p.parse_args(argv)
    if args.max_new_tokens < 0:
        p.error(f"--max-new-tokens {args.max_new_tokens}: must be >= 0")
    if not 0 <= args.spec_depth <= 3:
        p.error(f"--spec-depth {args.spec_depth}: must be in 0..3")
    if not (math.isfinite(args.interval) and args.interval >= 0):
        p.error(f"--interval {args.interval}: must be finite and >= 0")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        p.error(f"--temperature {args.temperature}: must be finite and >= 0")
    if args.train_steps < 0:
        p.error(f"--train-steps {args.train_steps}: must be >= 0")
    if args.train_steps and not args.config:
        p.error("--train-steps: only with --config (a --model-id model is used as trained)")
    if args.train_steps and not args.train_text:
        p.error("--train-steps: give the text to train on with --train-text FILE")
    if args.train_text and not args.train_steps:
        p.error("--train-text: give the number of steps with --train-steps N")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        _, requests, attrs, data = record(args)
    except (RecordError, TraceFileError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    say(f"{args.output}: {len(requests)} requests, {len(data['iterations/phase'])} iterations, "
        f"{data['rows/topk_ids'].shape[0]} rows, L={attrs['L']} J={attrs['J']} K={attrs['K']}, "
        f"probs {attrs['probs_kind']}, embed_dim {attrs['embed_dim']}, spec_depth {attrs['spec_depth']}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    sys.exit(main())
