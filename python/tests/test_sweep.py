"""moesim.sweep against `moesim sweep` of the same build."""
import pandas as pd
import pytest

import moesim
from test_policies import PyLRU, Raises


def read_csv(path):
    return pd.read_csv(path, dtype={"key": str, "error": str}, keep_default_na=False, na_values=[""])


def test_sweep_is_the_cli_csv(traces, cli, tmp_path):
    spec = tmp_path / "s.ini"
    spec.write_text(f"[sweep]\noutput = out.csv\ntrace = {traces['qwen']}, {traces['gptoss']}\n"
                    "cache = lru, lfu:reset=0\ncache_experts = 64:400:336\nprefetch = none, oracle\n")
    cli("sweep", spec)
    want = read_csv(tmp_path / "out.csv")
    assert len(want) == 16
    got = moesim.sweep(spec, jobs=2)
    pd.testing.assert_frame_equal(got, want)
    got1 = moesim.sweep({"trace": [traces["qwen"], traces["gptoss"]], "cache": ["lru", "lfu:reset=0"],
                         "cache_experts": "64:400:336", "prefetch": ["none", "oracle"]}, jobs=1)
    pd.testing.assert_frame_equal(got1, want)
    failed = want[want["error"].notna()]
    assert len(failed) >= 4 and set(failed["cache_experts"]) == {64} and set(failed["trace"]) >= {str(traces["qwen"])}
    assert "found no victim" in failed["error"].iloc[0]
    assert want.loc[want["error"].isna(), "hit_rate"].notna().all()


def test_sweep_runs_python_policies(traces):
    df = moesim.sweep({"trace": traces["gptoss"], "cache": ["lru", PyLRU, Raises], "cache_experts": 200})
    assert list(df["cache"]) == ["lru", "test_lru", "test_raises"]
    hits = [c for c in df.columns if c == "hits" or c == "total_hits"][0]
    assert df[hits].iloc[0] == df[hits].iloc[1] > 0
    assert "hook on_access raised KeyError" in df["error"].iloc[2]


@pytest.mark.parametrize("spec,jobs,match", [
    ({"trace": "x.h5", "nosuch": 1, "cache_experts": 1}, 1, "unknown key 'nosuch'"),
    ({"cache_experts": []}, 1, "empty list"),
    ({"output": "a.csv"}, 1, "output"),
    ({"cache_experts": 4}, 0, "jobs=0"),
    (3, 1, "expected a spec file or a dict"),
])
def test_sweep_bad_arguments(spec, jobs, match):
    with pytest.raises(moesim.ArgumentError, match=match):
        moesim.sweep(spec, jobs=jobs)


def test_sweep_spec_errors_are_the_cli_message(tmp_path, cli):
    spec = tmp_path / "bad.ini"
    spec.write_text("[sweep]\noutput = o.csv\ntrace = missing.h5\ncache_experts = 8\nbogus = 1\n")
    p = cli("sweep", spec, check=False)
    with pytest.raises(moesim.Error) as e:
        moesim.sweep(spec)
    assert p.returncode != 0 and str(e.value) == p.stderr.strip().removeprefix("moesim: ")
