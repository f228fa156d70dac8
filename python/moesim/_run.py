"""moesim.run and the listings."""
from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
from typing import Any, Iterable, Mapping, Optional, Union

from . import _core
from ._core import ArgumentError
from ._policy import policy_spec
from ._trace import Trace

_KEYS = {k: (kind, default, help) for k, kind, default, help in _core.runkeys()}
# run's own arguments, and keys that are not numbers or texts of their own
_NAMED = ("trace", "model", "platform", "prefetch", "cache", "sched")
_OUTPUTS = ("events", "iterations", "requests")


def _text(key, v):
    """A run key's value as the text `moesim run --KEY` takes."""
    kind = _KEYS[key][0]
    if isinstance(v, bool):
        if kind == "enum" and key in ("offline", "cache_per_gpu"):
            return "1" if v else "0"
        raise ArgumentError(f"run: {key}={v!r}: expected {_expected(kind)}")
    if isinstance(v, Trace):
        v = v.path
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ArgumentError(f"run: {key}={v!r}: expected a finite number")
        return repr(v)
    if isinstance(v, str):
        if not v:
            raise ArgumentError(f"run: {key}='': expected {_expected(kind)}")
        return v
    raise ArgumentError(f"run: {key}={v!r}: expected {_expected(kind)}, not {type(v).__name__}")


def _expected(kind):
    return {"int": "an int", "bytes": "a size (int bytes or text such as '4000MiB')", "gb": "a number",
            "positive": "a number", "train": "'auto' or a fraction", "path": "a path", "enum": "a choice",
            }.get(kind, "a name or path")


class Result:
    """One run: ``metrics``, ``config`` and ``provenance`` are the objects of
    ``moesim run --json`` (the same names and values); ``warnings`` what the
    run could not use; ``events()``, ``iterations()``, ``requests()`` the
    per-sample CSVs of docs/engine.md as pandas DataFrames (recorded when
    named in ``run(..., record=...)``)."""

    def __init__(self, report, warnings, csvs):
        self.metrics = report["metrics"]
        self.config = report["config"]
        self.provenance = report["provenance"]
        self.warnings = list(warnings)
        self._csvs = csvs

    def _frame(self, name):
        import pandas as pd
        if name not in self._csvs:
            raise _core.Error(f"{name}: not recorded; run(..., record=('{name}', ...)) records it")
        text = self._csvs[name]
        # the first line is the provenance comment (docs/safety.md)
        if text.startswith("#"):
            text = text.split("\n", 1)[1] if "\n" in text else ""
        return pd.read_csv(io.StringIO(text))

    def events(self) -> "pandas.DataFrame":  # noqa: F821
        """Every copy, hit, miss and compute interval (``run --events``)."""
        return self._frame("events")

    def iterations(self) -> "pandas.DataFrame":  # noqa: F821
        """One row per replayed iteration."""
        return self._frame("iterations")

    def requests(self) -> "pandas.DataFrame":  # noqa: F821
        """One row per finished request."""
        return self._frame("requests")

    def __repr__(self):
        return f"<moesim.Result hit_rate={self.metrics.get('hit_rate')} trace={self.config.get('trace')!r}>"


def _collect(trace, model, platform, prefetch, cache, sched, keys):
    if trace is None:
        raise ArgumentError("run: a trace is required")
    texts = {"trace": _text("trace", trace)}
    if model is not None:
        texts["model"] = _text("model", model)
    if platform is not None:
        texts["platform"] = _text("platform", platform)
    for key, v in (("prefetch", prefetch), ("cache", cache), ("sched", sched)):
        texts[key] = policy_spec(key, v, key)
    for key, v in keys.items():
        if key not in _KEYS or key in _NAMED or key == "events":
            known = ", ".join(k for k in _KEYS if k not in _NAMED and k != "events")
            raise ArgumentError(f"run: unknown key '{key}' (run keys: {known}; set=, record=)")
        if v is None:
            continue
        texts[key] = _text(key, v)
    return texts


def _sets(set):
    out = {}
    if set is None:
        return out
    if not isinstance(set, dict):
        raise ArgumentError(f"run: set={set!r}: expected a dict such as {{'platform.h2d_bw': '16GB/s'}}")
    for k, v in set.items():
        if not isinstance(k, str) or not (k.startswith("platform.") or k.startswith("model.")):
            raise ArgumentError(f"run: set key {k!r}: expected 'platform.KEY' or 'model.KEY'")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ArgumentError(f"run: set {k}={v!r}: expected a str or number")
        out[k] = v if isinstance(v, str) else repr(v) if isinstance(v, float) else str(v)
    return out


PathLike = Union[str, "os.PathLike[str]"]
PolicyArg = Union[str, type, object]


def run(trace: Union[PathLike, Any], model: Optional[PathLike] = None, platform: Optional[PathLike] = None,
        prefetch: PolicyArg = "none", cache: PolicyArg = "lru", sched: PolicyArg = "gpu", *,
        set: Optional[Mapping[str, Union[str, int, float]]] = None,
        record: Union[str, Iterable[str]] = ("iterations", "requests"), **keys: Any) -> Result:
    """Runs one simulation, as ``moesim run --json``.

    ``trace``: a trace file (or a :class:`Trace`); ``model``, ``platform``: profile names or .ini
    paths; ``prefetch``, ``cache``, ``sched``: a spec ``"name[:k=v,...]"`` or a
    policy written in Python (a :class:`Prefetcher`, :class:`Cache` or
    :class:`Scheduler` subclass or object).  ``keys`` are the other keys of
    ``moesim run`` with ``_`` for ``-``: exactly one of ``cache_experts``,
    ``cache_bytes`` (int or text such as ``"4000MiB"``), ``cache_gb``; and
    ``distance``, ``batch``, ``host_bytes``, ``h2d_gbps``, ``train``,
    ``topk_fill``, ``offline``, ``seed``, ``gpus``, ``placement``,
    ``cache_per_gpu``, ``framework``.  ``set`` overrides profile keys
    (``{"platform.h2d_bw": "16GB/s"}``); ``record`` names the per-sample
    tables to keep (``"events"``, ``"iterations"``, ``"requests"``).

    Bad arguments raise :class:`ArgumentError` before any work; a failing run
    raises :class:`Error` with the command line's one-line message; a Python
    policy's hook that raises ends the run with :class:`PolicyError`.
    """
    texts = _collect(trace, model, platform, prefetch, cache, sched, keys)
    sets = _sets(set)
    if isinstance(record, str):
        record = (record,)
    record = tuple(record)
    for r in record:
        if r not in _OUTPUTS:
            raise ArgumentError(f"run: record {r!r}: expected events, iterations or requests")
    tmp = tempfile.mkdtemp(prefix="moesim-run-") if record else None
    try:
        paths = {r: os.path.join(tmp, r + ".csv") for r in record}
        report, warnings = _core.run(texts, sets, paths.get("events"), paths.get("iterations"),
                                     paths.get("requests"))
        csvs = {}
        for r, p in paths.items():
            with open(p, encoding="utf-8") as f:
                csvs[r] = f.read()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return Result(json.loads(report), warnings, csvs)


def policies() -> list:
    """Every built-in policy: a list of dicts {name, kind, summary, params}."""
    return _core.policies()


def models() -> list:
    """Every shipped model profile: a list of dicts (name, L, J, K, dtype, expert_bytes, ...)."""
    return _core.profiles("models")


def platforms() -> list:
    """Every shipped platform profile: a list of dicts (name, gpu_mem_bytes, h2d_bw, gpus, ...)."""
    return _core.profiles("platforms")


def _spec_value(key, v):
    """One sweep axis as the spec's text: a list is a comma list."""
    vals = v if isinstance(v, (list, tuple)) else [v]
    if not vals:
        raise ArgumentError(f"sweep: {key}: an empty list")
    out = []
    for x in vals:
        if key in ("prefetch", "cache", "sched"):
            out.append(policy_spec(key, x, key))
            continue
        if key not in _KEYS or key in ("events",):
            known = ", ".join(k for k in _KEYS if k != "events")
            raise ArgumentError(f"sweep: unknown key '{key}' (sweep keys: {known}; output, mode, trace_cache, points)")
        t = _text(key, x) if key in _KEYS else str(x)
        if key in ("trace", "placement") or (key in ("model", "platform", "framework") and t.endswith(".ini")):
            if os.path.exists(t):
                t = os.path.abspath(t)  # the spec lives in a temporary folder
        if "\n" in t:
            raise ArgumentError(f"sweep: {key}={t!r}: a value holds a newline")
        out.append(t)
    return ", ".join(out)


def _spec_text(spec):
    lines = ["[sweep]"]
    points = None
    for k, v in spec.items():
        if k == "points":
            points = v
            continue
        if k in ("output",):
            raise ArgumentError("sweep: output: moesim.sweep returns the table; write it with DataFrame.to_csv")
        if k in ("mode", "trace_cache"):
            lines.append(f"{k} = {v}")
            continue
        lines.append(f"{k} = {_spec_value(k, v)}")
    if points is not None:
        if not isinstance(points, (list, tuple)) or not all(isinstance(p, dict) for p in points):
            raise ArgumentError("sweep: points: expected a list of dicts")
        if "mode" not in spec:
            lines.append("mode = list")
        for p in points:
            lines.append("[point]")
            lines.extend(f"{k} = {_spec_value(k, v)}" for k, v in p.items())
    lines.append("output = unused.csv")
    return "\n".join(lines) + "\n"


def sweep(spec: Union[PathLike, Mapping[str, Any]], jobs: int = 1) -> "pandas.DataFrame":  # noqa: F821
    """Runs every point of a sweep spec, as ``moesim sweep``, and returns its
    CSV as a pandas DataFrame (the same columns and values; no file is
    written).  ``spec`` is a spec file (docs/sweeps.md) or a dict of axes:
    ``{"trace": ["a.h5", "b.h5"], "cache": ["lru", MyCache], "cache_experts": [32, 64]}``
    (a list is an axis; ``points`` a list of dicts for ``mode = list``).
    ``jobs`` worker processes run the points.  A point that fails has its
    one-line error in the ``error`` column, as in the CSV."""
    import pandas as pd
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= 1024:
        raise ArgumentError(f"sweep: jobs={jobs!r}: expected an int in [1, 1024]")
    tmp = None
    try:
        if isinstance(spec, dict):
            tmp = tempfile.mkdtemp(prefix="moesim-sweep-")
            path = os.path.join(tmp, "spec.ini")
            with open(path, "w", encoding="utf-8") as f:
                f.write(_spec_text(spec))
        elif isinstance(spec, (str, os.PathLike)):
            path = os.fspath(spec)
        else:
            raise ArgumentError(f"sweep: {spec!r}: expected a spec file or a dict")
        text = _core.sweep(path, jobs)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return pd.read_csv(io.StringIO(text), dtype={"key": str, "error": str}, keep_default_na=False,
                       na_values=[""])


def claims(only: Union[None, str, Iterable[str]] = None, *, trace: Optional[PathLike] = None,
           model: Optional[str] = None, platform: Optional[PathLike] = None, requests: int = 8, seed: int = 1,
           sensitivity: bool = True, out_dir: Optional[PathLike] = None) -> "pandas.DataFrame":  # noqa: F821
    """Checks the seed papers' quantitative claims, as ``moesim claims``
    (docs/claims.md): one row per claim (id, paper, verdict, the paper's
    and moesim's values, the sensitivity) as a pandas DataFrame.  ``only``:
    claim ids or paper names (a str with commas, or a list); ``trace``
    replaces every claim's synthetic trace (with ``model`` for its sizes);
    ``platform`` every testbed.  With ``out_dir`` the synthetic traces and
    claims.csv, claims_values.csv and claims.png are kept there; without, a
    temporary folder is used and removed."""
    import pandas as pd
    if isinstance(only, (list, tuple)):
        only = ",".join(only)
    for k, v in (("only", only), ("trace", trace), ("model", model), ("platform", platform),
                 ("out_dir", out_dir)):
        if v is not None and not isinstance(v, (str, os.PathLike)):
            raise ArgumentError(f"claims: {k}={v!r}: expected a str")
    for k, v, lo, hi in (("requests", requests, 4, 100000), ("seed", seed, 0, 4294967294)):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ArgumentError(f"claims: {k}={v!r}: expected an int in [{lo}, {hi}]")
    tmp = tempfile.mkdtemp(prefix="moesim-claims-") if out_dir is None else None
    try:
        text = _core.claims(os.fspath(out_dir) if out_dir is not None else tmp, out_dir is not None,
                            None if trace is None else os.fspath(trace), model,
                            None if platform is None else os.fspath(platform), only, requests, seed,
                            bool(sensitivity))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return pd.DataFrame(json.loads(text))
