"""moesim.Trace and moesim.write_trace: traces as NumPy arrays."""
from __future__ import annotations

import itertools
import json
import os
from typing import Any, Iterable, Iterator, Mapping, Optional, Union

import numpy as np

from . import _core
from ._core import ArgumentError

_PROBS_KINDS = ("full", "topk_renorm", "topk_raw", "topk_ids")


class Request:
    """One request of a trace.  Arrays: ``topk_ids`` int32 and ``topk_w``
    float32 of shape (rows, L, K) (id -1: a cell the source did not record);
    ``probs`` float32 (rows, L, J) on a full-probability trace, else None;
    ``embedding`` float32 (iterations, embed_dim) or None; ``phases`` uint8
    per iteration (0 prefill, 1 decode) with ``row0`` and ``n_rows``, its
    token rows."""

    __slots__ = ("id", "arrival_s", "prompt_len", "output_len", "phases", "row0", "n_rows", "topk_ids", "topk_w",
                 "probs", "embedding", "spec_ids", "spec_w", "recorded_hit", "token_ids", "text")

    def __repr__(self):
        return (f"<moesim.Request id={self.id} rows={self.topk_ids.shape[0]} iterations={len(self.phases)} "
                f"prompt_len={self.prompt_len}>")


def _arr(b, dtype, shape):
    return None if b is None else np.frombuffer(b, dtype=dtype).reshape(shape)


class Trace:
    """A trace file (format v2, or v1).  ``info``: its metadata (L, J, K,
    probs_kind, requests, ... as ``moesim trace info``); ``stats()``: ``moesim
    trace stats --json``'s report; ``len(t)``, ``t[i]`` and iteration give
    :class:`Request` objects with NumPy arrays.  Every request read is
    checked (checksums, ids, weights) as the CLI checks it."""

    def __init__(self, path: Union[str, "os.PathLike[str]"]):
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentError(f"Trace: {path!r}: expected a path")
        self.path = os.fspath(path)
        self._r = _core.Reader(self.path)
        self.info = self._r.meta()

    def __len__(self):
        return self.info["requests"]

    def __getitem__(self, i: int) -> Request:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"Trace indices are ints, not {type(i).__name__}")
        if i < 0:
            i += len(self)
        d = self._r.read(int(i))
        L, J, K, D, S = (self.info[k] for k in ("L", "J", "K", "embed_dim", "spec_depth"))
        n_it = len(d["phases"])
        rows = len(d["topk_ids"]) // (4 * L * K) if L and K else 0
        r = Request()
        r.id, r.arrival_s, r.prompt_len, r.output_len = d["id"], d["arrival_s"], d["prompt_len"], d["output_len"]
        r.phases = _arr(d["phases"], np.uint8, (n_it,))
        r.row0 = _arr(d["row0"], np.uint32, (n_it,))
        r.n_rows = _arr(d["n_rows"], np.uint32, (n_it,))
        r.topk_ids = _arr(d["topk_ids"], np.int32, (rows, L, K))
        r.topk_w = _arr(d["topk_w"], np.float32, (rows, L, K))
        r.probs = _arr(d["probs"], np.float32, (rows, L, J))
        r.embedding = _arr(d["embedding"], np.float32, (n_it, D))
        r.spec_ids = _arr(d["spec_ids"], np.int32, (rows, L, S, K))
        r.spec_w = _arr(d["spec_w"], np.float32, (rows, L, S, K))
        r.recorded_hit = _arr(d["recorded_hit"], np.int8, (rows, L, K))
        r.token_ids = _arr(d["token_ids"], np.int32, (-1,))
        r.text = d["text"]
        return r

    def __iter__(self) -> Iterator[Request]:
        for i in range(len(self)):
            yield self[i]

    def stats(self) -> dict:
        """The report of ``moesim trace stats --json`` (entropy, reuse, co-activation, popularity)."""
        return json.loads(self._r.stats())

    def close(self):
        self._r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        i = self.info
        return f"<moesim.Trace {self.path!r} L={i['L']} J={i['J']} K={i['K']} requests={i['requests']}>"


def _get(req, key):
    if isinstance(req, dict):
        return req.get(key)
    return getattr(req, key, None)


def _request_dict(req, idx, L, J, K, kind, D):
    where = f"write_trace: request {idx}"
    probs = _get(req, "probs")
    ids = _get(req, "topk_ids")
    w = _get(req, "topk_w")
    if probs is not None:
        probs = np.ascontiguousarray(probs, dtype=np.float32)
        if probs.ndim != 3 or probs.shape[1:] != (L, J):
            raise ArgumentError(f"{where}: probs has shape {probs.shape}, expected (rows, {L}, {J})")
    if ids is None:
        if probs is None:
            raise ArgumentError(f"{where}: give topk_ids (rows, L, K) or probs (rows, L, J)")
        ids = np.argsort(-probs, axis=2, kind="stable")[:, :, :K].astype(np.int32)
        w = np.take_along_axis(probs, ids, axis=2)
    ids = np.ascontiguousarray(ids, dtype=np.int32) if np.issubdtype(np.asarray(ids).dtype, np.integer) else None
    if ids is None:
        raise ArgumentError(f"{where}: topk_ids must hold integers")
    if ids.ndim != 3 or ids.shape[1:] != (L, K):
        raise ArgumentError(f"{where}: topk_ids has shape {ids.shape}, expected (rows, {L}, {K})")
    rows = ids.shape[0]
    if rows == 0:
        raise ArgumentError(f"{where}: no token rows")
    if w is None:
        if kind != "topk_ids":
            raise ArgumentError(f"{where}: topk_w is required for probs_kind {kind}")
        w = np.where(ids >= 0, np.float32(1.0 / K), np.float32(0))
    w = np.ascontiguousarray(w, dtype=np.float32)
    if w.shape != ids.shape:
        raise ArgumentError(f"{where}: topk_w has shape {w.shape}, expected {ids.shape}")
    prompt = _get(req, "prompt_len")
    prompt = rows if prompt is None else int(prompt)
    if not 1 <= prompt <= rows:
        raise ArgumentError(f"{where}: prompt_len {prompt}: expected 1 to the {rows} rows")
    # the prompt's rows are one prefill iteration; every later row one decode iteration
    n_dec = rows - prompt
    phases = np.array([0] + [1] * n_dec, dtype=np.uint8)
    row0 = np.array([0] + list(range(prompt, rows)), dtype=np.uint32)
    n_rows = np.array([prompt] + [1] * n_dec, dtype=np.uint32)
    emb = _get(req, "embedding")
    if D:
        if emb is None:
            raise ArgumentError(f"{where}: embedding (iterations, {D}) is required (embed_dim={D})")
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        if emb.shape != (len(phases), D):
            raise ArgumentError(f"{where}: embedding has shape {emb.shape}, expected ({len(phases)}, {D})")
    out_len = _get(req, "output_len")
    d = {"topk_ids": ids, "topk_w": w, "probs": probs if kind == "full" else None, "embedding": emb if D else None,
         "phases": phases, "row0": row0, "n_rows": n_rows, "n_rows_total": rows, "n_iters": len(phases),
         "prompt_len": prompt, "output_len": n_dec if out_len is None else int(out_len),
         "arrival_s": float(_get(req, "arrival_s") or 0.0)}
    if kind == "full" and probs is None:
        raise ArgumentError(f"{where}: probs is required for probs_kind full")
    if _get(req, "id") is not None:
        d["id"] = int(_get(req, "id"))
    return d


def write_trace(path: Union[str, "os.PathLike[str]"], model: Optional[str] = None,
                requests: Iterable[Union[Mapping[str, Any], Request]] = (), *, experts: Optional[int] = None,
                layers: Optional[int] = None, topk: Optional[int] = None, expert_bytes: Optional[int] = None,
                dense_bytes: Optional[int] = None, probs_kind: Optional[str] = None, embed_dim: int = 0,
                source: str = "moesim.write_trace") -> int:
    """Writes a trace (format v2) from NumPy arrays through the writer the
    importers use: every request checked, chunks checksummed, the content
    digest stored, the file written atomically (a failure leaves ``path`` as
    it was).  Dimensions come from ``model`` (a profile name or .ini) and/or
    ``experts``, ``layers``, ``topk``, ``expert_bytes`` (as the importers'
    flags).  Each request is a dict (or a :class:`Request`) with
    ``topk_ids`` (rows, L, K) and ``topk_w``, or ``probs`` (rows, L, J) from
    which the top-k is taken; ``prompt_len`` (default: every row) rows form
    the prefill iteration, each later row one decode iteration;
    ``arrival_s``, ``output_len``, ``embedding`` optional.  ``probs_kind``
    defaults to ``full`` when the first request has probs, ``topk_renorm``
    with weights, else ``topk_ids``.  Returns the number of requests."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"write_trace: {path!r}: expected a path")
    it = iter(requests if not isinstance(requests, dict) else [requests])
    first = next(it, None)
    if first is None:
        raise ArgumentError("write_trace: no requests")
    if probs_kind is None:
        probs_kind = "full" if _get(first, "probs") is not None else \
            "topk_renorm" if _get(first, "topk_w") is not None else "topk_ids"
    if probs_kind not in _PROBS_KINDS:
        raise ArgumentError(f"write_trace: probs_kind {probs_kind!r}: expected one of {', '.join(_PROBS_KINDS)}")
    dims = {"model": model, "experts": experts or 0, "layers": layers or 0, "topk": topk or 0,
            "expert_bytes": expert_bytes, "dense_bytes": dense_bytes, "probs_kind": _PROBS_KINDS.index(probs_kind),
            "embed_dim": int(embed_dim), "source": str(source)}
    for k in ("experts", "layers", "topk", "embed_dim"):
        if isinstance(dims[k], bool) or not isinstance(dims[k], int) or dims[k] < 0:
            raise ArgumentError(f"write_trace: {k}={dims[k]!r}: expected an int >= 0")
    if model is not None and not isinstance(model, str):
        raise ArgumentError(f"write_trace: model={model!r}: expected a profile name or .ini path")
    L = layers or (_profile(model)["L"] if model else None)
    J = experts or (_profile(model)["J"] if model else None)
    K = topk or (_profile(model)["K"] if model else None)
    if not L or not J or not K:
        first_ids = _get(first, "topk_ids")
        if first_ids is not None and np.ndim(first_ids) == 3:
            L = L or np.shape(first_ids)[1]
            K = K or np.shape(first_ids)[2]
            dims["layers"], dims["topk"] = int(L), int(K)
    if not J:
        raise ArgumentError("write_trace: the number of experts is unknown: give model= or experts=")
    if not L or not K:
        raise ArgumentError("write_trace: the layers and top-k are unknown: give model= or layers= and topk=")
    reqs = (_request_dict(r, i, L, J, K, probs_kind, int(embed_dim))
            for i, r in enumerate(itertools.chain([first], it)))
    return _core.write_trace(os.fspath(path), dims, reqs)


def _profile(name):
    if not name.endswith(".ini"):
        for m in _core.profiles("models"):
            if m["name"] == name:
                return m
    return {"L": None, "J": None, "K": None}  # the C side loads and reports it
