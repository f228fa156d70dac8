"""moesim.Trace and moesim.write_trace."""
import json

import numpy as np
import pytest

import moesim


def test_trace_info_and_requests_are_the_cli(traces, cli):
    t = moesim.Trace(traces["qwen"])
    info = cli("trace", "info", traces["qwen"]).stdout
    assert f"L={t.info['L']}" in info.replace(" ", "") or str(t.info["L"]) in info
    assert (t.info["L"], t.info["J"], t.info["K"], len(t)) == (48, 128, 6, 1)
    assert t.info["probs_kind"] == "topk_renorm" and t.info["has_recorded_hits"]
    r = t[0]
    assert r.topk_ids.shape == (t.info["rows"], 48, 6) and r.topk_ids.dtype == np.int32
    assert r.phases[0] == 0 and (r.phases[1:] == 1).all() and r.n_rows[0] == r.prompt_len == 28
    assert len(r.phases) == t.info["iterations"] == 129 and r.row0[1] == 28
    ok = r.topk_ids >= 0
    assert ((r.topk_ids < 128) | ~ok).all()
    assert np.allclose(np.where(ok, r.topk_w, 0).sum(axis=2)[ok.any(axis=2)], 1, atol=1e-3)
    assert r.recorded_hit.shape == r.topk_ids.shape and r.probs is None
    assert len(list(t)) == 1
    with pytest.raises(IndexError):
        t[1]


def test_stats_are_trace_stats_json(traces, cli):
    want = json.loads(cli("trace", "stats", traces["gptoss"], "--json").stdout)
    got = moesim.Trace(traces["gptoss"]).stats()
    for k in ("file", "provenance"):
        want.pop(k, None)
    assert got == want


def test_write_trace_round_trip_and_runs_the_same(traces, tmp_path, cli):
    src = moesim.Trace(traces["mix"])
    out = tmp_path / "copy.h5"
    n = moesim.write_trace(out, model="mixtral-8x7b", probs_kind=src.info["probs_kind"], requests=(
        {"topk_ids": r.topk_ids, "topk_w": r.topk_w, "probs": r.probs, "prompt_len": r.prompt_len,
         "arrival_s": r.arrival_s, "output_len": r.output_len, "id": r.id} for r in src))
    assert n == len(src) == 6
    cli("trace", "validate", out)
    copy = moesim.Trace(out)
    for a, b in zip(src, copy):
        assert (a.topk_ids == b.topk_ids).all() and (a.topk_w == b.topk_w).all()
        assert (a.phases == b.phases).all() and (a.n_rows == b.n_rows).all() and a.arrival_s == b.arrival_s
    kw = dict(model="mixtral-8x7b", cache="lfu", cache_experts=64, record=())
    assert moesim.run(out, **kw).metrics == moesim.run(traces["mix"], **kw).metrics


def test_write_trace_from_probabilities(tmp_path, cli):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(10, 4, 8)).astype(np.float32)  # HF output_router_logits: (tokens, layers, J)
    probs = np.exp(logits) / np.exp(logits).sum(axis=2, keepdims=True)
    out = tmp_path / "p.h5"
    moesim.write_trace(out, requests=[{"probs": probs, "prompt_len": 6}], layers=4, experts=8, topk=2,
                       expert_bytes=1 << 20)
    t = moesim.Trace(out)
    assert t.info["probs_kind"] == "full" and t.info["L"] == 4
    r = t[0]
    assert np.allclose(r.probs, probs) and (r.topk_ids == np.argsort(-probs, axis=2)[:, :, :2]).all()
    assert list(r.n_rows) == [6, 1, 1, 1, 1]
    cli("trace", "validate", out)  # checks the content digest and every request
    assert len(t.info["content_sha256"]) == 64


@pytest.mark.parametrize("req,kw,match", [
    ({"topk_ids": np.tile(np.arange(2, dtype=np.int32), (3, 32, 1))}, {"probs_kind": "topk_renorm"},
     "topk_w is required"),
    ({"topk_ids": np.zeros((3, 32, 2), np.int32), "topk_w": np.ones((3, 32, 2))}, {}, "duplicate expert 0"),
    ({"topk_ids": np.full((3, 32, 2), 9, np.int32), "topk_w": np.ones((3, 32, 2))}, {}, "expert|9"),
    ({"topk_ids": np.zeros((3, 31, 2), np.int32), "topk_w": np.ones((3, 31, 2))}, {}, r"expected \(rows, 32, 2\)"),
    ({"topk_ids": np.zeros((3, 32, 2)), "topk_w": np.ones((3, 32, 2))}, {}, "integers"),
    ({"topk_ids": np.zeros((3, 32, 2), np.int32), "topk_w": np.ones((3, 32, 2)), "prompt_len": 4}, {}, "prompt_len 4"),
])
def test_write_trace_refuses_bad_requests_and_leaves_nothing(tmp_path, req, kw, match):
    out = tmp_path / "bad.h5"
    with pytest.raises(moesim.Error, match=match):
        moesim.write_trace(out, model="mixtral-8x7b", requests=[req], **kw)
    assert list(tmp_path.iterdir()) == []


def test_write_trace_never_overwrites_its_input(traces, tmp_path):
    src = moesim.Trace(traces["gptoss"])
    before = open(traces["gptoss"], "rb").read()
    with pytest.raises(moesim.Error):
        moesim.write_trace(traces["gptoss"], requests=({"topk_ids": r.topk_ids, "topk_w": r.topk_w} for r in src),
                           experts=32, expert_bytes=1 << 20, layers=24, topk=4)
    assert open(traces["gptoss"], "rb").read() == before


def test_bad_trace_is_a_trace_error(tmp_path):
    p = tmp_path / "junk.h5"
    p.write_bytes(b"not hdf5")
    with pytest.raises(moesim.TraceError, match="junk.h5"):
        moesim.Trace(p)
