"""moesim.run, the listings and the errors against the CLI of the same build."""
import json
import os

import pandas as pd
import pytest

import moesim


def test_version_is_the_cli_version(cli):
    out = cli("--version").stdout.split()
    assert out[0] == "moesim" and out[1] == moesim.__version__
    assert moesim.__commit__ in cli("--version").stdout


def test_policies_are_the_registry(cli):
    listed = cli("list").stdout
    names = [(p["kind"], p["name"]) for p in moesim.policies()]
    assert ("cache", "lru") in names and ("prefetch", "fmoe") in names and ("sched", "gpu") in names
    for kind, name in names:
        assert f"  {name} " in listed
    lfu = next(p for p in moesim.policies() if p["name"] == "lfu")
    assert lfu["params"]["reset"]["default"] == "1" and lfu["params"]["reset"]["type"] == "int"


def test_models_and_platforms():
    mix = next(m for m in moesim.models() if m["name"] == "mixtral-8x7b")
    assert (mix["L"], mix["J"], mix["K"]) == (32, 8, 2)
    plat = next(p for p in moesim.platforms() if p["name"] == "rtx3090-pcie4")
    assert plat["h2d_bw"] > 1e9 and plat["gpu_mem_bytes"] > 1e9


@pytest.mark.parametrize("args,kw", [
    (["--cache", "lru", "--cache-experts", "64", "--model", "mixtral-8x7b"],
     dict(cache="lru", cache_experts=64, model="mixtral-8x7b")),
    (["--prefetch", "oracle", "--cache", "lfu:reset=0", "--cache-bytes", "4000MiB", "--distance", "2", "--batch", "4"],
     dict(prefetch="oracle", cache="lfu:reset=0", cache_bytes="4000MiB", distance=2, batch=4)),
    (["--cache-experts", "64", "--set", "platform.h2d_bw=16GB/s", "--offline", "--seed", "7", "--topk-fill", "even"],
     dict(cache_experts=64, set={"platform.h2d_bw": "16GB/s"}, offline=True, seed=7, topk_fill="even")),
    (["--cache-gb", "20", "--h2d-gbps", "12.5", "--train", "0.5", "--prefetch", "eam"],
     dict(cache_gb=20, h2d_gbps=12.5, train=0.5, prefetch="eam")),
])
def test_run_is_run_json(traces, cli_json, args, kw):
    want = cli_json("--trace", traces["mix"], *args)
    got = moesim.run(traces["mix"], **kw)
    assert json.dumps(got.metrics, sort_keys=True) == json.dumps(want["metrics"], sort_keys=True)
    assert got.config == want["config"]
    assert got.provenance == want["provenance"]
    assert got.metrics["hit_rate"] is not None and got.metrics["hits"] > 0


def test_tables_are_the_cli_csvs(traces, cli, tmp_path):
    ev, it, rq = tmp_path / "e.csv", tmp_path / "i.csv", tmp_path / "r.csv"
    cli("run", "--trace", traces["qwen"], "--cache-experts", 400, "--events", ev)
    r = moesim.run(traces["qwen"], cache_experts=400, record=("events", "iterations", "requests"))
    want = pd.read_csv(ev, comment=None, skiprows=1)
    pd.testing.assert_frame_equal(r.events(), want)
    its = r.iterations()
    assert len(its) == r.metrics["iterations"]
    assert int(its["hits"].sum()) == r.metrics["hits"] and int(its["misses"].sum()) == r.metrics["misses"]
    assert len(r.requests()) == r.metrics["requests"]
    assert list(r.requests().columns) == ["request", "arrival_s", "ttft_s", "tpot_s", "latency_s", "queue_s",
                                          "ttft_service_s", "latency_service_s"]


def test_tables_not_recorded_raise(traces):
    r = moesim.run(traces["gptoss"], cache_experts=200, record=())
    with pytest.raises(moesim.Error, match="events: not recorded"):
        r.events()


def test_run_error_is_the_cli_message(traces, cli):
    p = cli("run", "--trace", traces["qwen"], "--cache-experts", 64, check=False)
    assert p.returncode == 1
    msg = p.stderr.strip().removeprefix("moesim: ")
    with pytest.raises(moesim.Error) as e:
        moesim.run(traces["qwen"], cache_experts=64)
    assert str(e.value) == msg and "found no victim" in msg
    assert not isinstance(e.value, moesim.ArgumentError)


def test_bad_profile_and_policy_are_errors(traces):
    with pytest.raises(moesim.Error, match="nosuchmodel"):
        moesim.run(traces["mix"], model="nosuchmodel", cache_experts=64)
    with pytest.raises(moesim.Error, match="unknown cache policy 'nope'"):
        moesim.run(traces["mix"], cache="nope", cache_experts=64)
    with pytest.raises(moesim.Error, match="reset"):
        moesim.run(traces["mix"], cache="lfu:reset=7", cache_experts=64)
    with pytest.raises(moesim.Error, match="no-such.h5"):
        moesim.run("no-such.h5", cache_experts=64)


@pytest.mark.parametrize("kw,match", [
    (dict(cache_experts=64, nosuch=1), "unknown key 'nosuch'"),
    (dict(cache_experts=[64]), r"cache_experts=\[64\]: expected"),
    (dict(cache_experts=0), "cache_experts=0: expected a whole number"),
    (dict(cache_experts=1.5), "cache_experts=1.5"),
    (dict(cache_experts=64, distance=-1), "distance=-1"),
    (dict(cache_experts=64, cache_gb=2), "exactly one of"),
    (dict(), "exactly one of"),
    (dict(cache_experts=64, topk_fill="half"), "topk_fill=half: expected zero or even"),
    (dict(cache_experts=64, set={"gpu_mem_bytes": "1GB"}), "expected 'platform.KEY' or 'model.KEY'"),
    (dict(cache_experts=64, set=["platform.h2d_bw=1GB/s"]), "expected a dict"),
    (dict(cache_experts=64, record=("everything",)), "record 'everything'"),
    (dict(cache_experts=64, cache=3), "expected a policy spec"),
    (dict(cache_experts=64, offline="yes"), "offline=yes: expected 0 or 1"),
])
def test_bad_arguments_raise_before_work(traces, kw, match):
    with pytest.raises(moesim.ArgumentError, match=match):
        moesim.run(traces["mix"], **kw)


def test_outputs_are_not_left_behind_on_failure(traces, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(moesim.Error):
        moesim.run(traces["qwen"], cache_experts=64, record=("events", "iterations"))
    assert os.listdir(tmp_path) == []


def test_set_override_is_validated(traces):
    with pytest.raises(moesim.Error, match="h2d_bw"):
        moesim.run(traces["mix"], cache_experts=64, set={"platform.h2d_bw": "fast"})
    slow = moesim.run(traces["mix"], cache_experts=64, set={"platform.h2d_bw": "1GB/s"})
    fast = moesim.run(traces["mix"], cache_experts=64)
    assert slow.metrics["makespan_s"] > fast.metrics["makespan_s"]
    assert slow.config["overrides"] == {"platform.h2d_bw": "1GB/s"}


def test_ctrl_c_after_a_run_is_a_keyboard_interrupt(traces, tmp_path):
    # the checked outputs install signal handlers of their own; the module gives the interpreter's back
    import subprocess
    import sys
    code = ("import os, signal, moesim\n"
            f"moesim.run({str(traces['gptoss'])!r}, cache_experts=200, record=('events',))\n"
            f"moesim.write_trace({str(tmp_path / 'w.h5')!r}, experts=8, layers=2, topk=1, expert_bytes=1000,\n"
            "                   requests=[{'topk_ids': [[[0], [1]]], 'topk_w': [[[1.0], [1.0]]]}])\n"
            "try:\n    os.kill(os.getpid(), signal.SIGINT)\n    import time; time.sleep(5)\n"
            "except KeyboardInterrupt:\n    print('interrupted')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "interrupted", p.stderr


def test_run_takes_a_trace_object(traces):
    t = moesim.Trace(traces["gptoss"])
    assert moesim.run(t, cache_experts=200, record=()).metrics == \
        moesim.run(traces["gptoss"], cache_experts=200, record=()).metrics
