"""Out-of-tree C policies from Python: cache="plugin:path=..." (the plugins
ctest builds: MOESIM_TEST_PLUGINS names their folder)."""
import os

import pytest

import moesim


def plugin(name):
    d = os.environ.get("MOESIM_TEST_PLUGINS")
    if not d:
        raise AssertionError("MOESIM_TEST_PLUGINS must name the folder of the test plugins")
    return os.path.join(d, f"libtest_plugin_{name}.so")


def test_refused_plugins_are_errors_not_crashes(traces):
    with pytest.raises(moesim.Error, match=r"built for policy ABI version \d+, this moesim has version \d+"):
        moesim.run(traces["mix"], cache=f"plugin:path={plugin('bad_abi')}", cache_experts=64)
    with pytest.raises(moesim.Error, match="no symbol ms_policy_abi"):
        moesim.run(traces["mix"], cache=f"plugin:path={plugin('no_symbol')}", cache_experts=64)
    with pytest.raises(moesim.Error, match="cannot load it"):
        moesim.sweep({"trace": traces["mix"], "cache": "plugin:path=/nonexistent.so", "cache_experts": 64})


@pytest.mark.parametrize("trace,cap", [("mix", 64), ("qwen", 400), ("gptoss", 200)])
def test_example_plugin_is_lru(traces, trace, cap):
    kw = dict(model="mixtral-8x7b" if trace == "mix" else None, cache_experts=cap, record=())
    got = moesim.run(traces[trace], cache=f"plugin:path={plugin('lru')}", **kw)
    assert got.metrics == moesim.run(traces[trace], cache="lru", **kw).metrics
    assert got.config["cache"]["name"] == "lru_plugin"
    import hashlib
    want_sha = hashlib.sha256(open(plugin("lru"), "rb").read()).hexdigest()
    assert got.config["cache"]["plugin"] == {"path": plugin("lru"), "sha256": want_sha}
    with pytest.raises(moesim.Error, match="a cache policy, not a prefetch policy"):
        moesim.run(traces[trace], prefetch=f"plugin:path={plugin('lru')}", **kw)
