"""Policies written in Python: byte-identical LRU / LFU, hook errors, bad hooks."""
import collections
import heapq
import json
import traceback

import numpy as np
import pytest

import moesim


class PyLRU(moesim.Cache):
    """lru: least recently used (layer, expert), one list for all layers."""
    name = "test_lru"

    def __init__(self):
        self.order = collections.OrderedDict()

    def on_insert(self, view, l, e):
        self.order[(l, e)] = None
        self.order.move_to_end((l, e))

    on_access = on_insert

    def on_evict(self, view, l, e):
        del self.order[(l, e)]

    def victim(self, view):
        for le in self.order:
            if view.evictable(*le):
                return le
        return None


class PyLFU(moesim.Cache):
    """lfu: fewest touches, ties to the least recent; reset=1 forgets on eviction."""
    name = "test_lfu"
    params = {"reset": 1}

    def __init__(self, reset=1):
        self.reset = reset
        self.count = collections.Counter()
        self.key = {}
        self.heap = []
        self.tick = 0

    def on_insert(self, view, l, e):
        self.count[(l, e)] += 1
        self.tick += 1
        self.key[(l, e)] = (self.count[(l, e)], self.tick)
        heapq.heappush(self.heap, (self.count[(l, e)], self.tick, l, e))

    on_access = on_insert

    def on_evict(self, view, l, e):
        del self.key[(l, e)]
        if self.reset:
            self.count[(l, e)] = 0

    def victim(self, view):
        skipped, found = [], None
        while self.heap:
            c, t, l, e = heapq.heappop(self.heap)
            if self.key.get((l, e)) != (c, t):
                continue  # stale entry
            skipped.append((c, t, l, e))
            if view.evictable(l, e):
                found = (l, e)
                break
        for item in skipped:
            heapq.heappush(self.heap, item)
        return found


CASES = [("mix", "mixtral-8x7b", 64), ("qwen", None, 400), ("gptoss", None, 200)]


def metrics_text(r):
    return json.dumps(r.metrics, sort_keys=True)


@pytest.mark.parametrize("trace,model,cap", CASES)
@pytest.mark.parametrize("builtin,py", [("lru", PyLRU), ("lfu", PyLFU), ("lfu:reset=0", (PyLFU, "test_lfu:reset=0"))])
def test_python_lru_lfu_are_byte_identical(traces, trace, model, cap, builtin, py):
    if isinstance(py, tuple):
        moesim.register(py[0])
        py = py[1]
    want = moesim.run(traces[trace], model=model, cache=builtin, cache_experts=cap, record=())
    got = moesim.run(traces[trace], model=model, cache=py, cache_experts=cap, record=())
    assert metrics_text(got) == metrics_text(want)
    assert got.metrics["hits"] > 0 and got.metrics["misses"] > 0
    assert got.config["cache"]["name"] == (py if isinstance(py, str) else py.name).split(":")[0]


def test_python_lru_with_a_prefetcher_and_batching(traces):
    kw = dict(model="mixtral-8x7b", prefetch="oracle", cache_experts=64, batch=4, distance=2, record=())
    assert metrics_text(moesim.run(traces["mix"], cache=PyLRU, **kw)) == \
        metrics_text(moesim.run(traces["mix"], cache="lru", **kw))


class MRU(PyLRU):
    name = "test_mru"

    def victim(self, view):
        for le in reversed(self.order):
            if view.evictable(*le):
                return le
        return None


def test_a_different_policy_gives_different_metrics(traces):
    a = moesim.run(traces["qwen"], cache=MRU, cache_experts=400, record=())
    b = moesim.run(traces["qwen"], cache="lru", cache_experts=400, record=())
    assert a.metrics["hits"] != b.metrics["hits"]


class Raises(PyLRU):
    name = "test_raises"

    def on_access(self, view, l, e):
        if view.iteration() == 3:
            raise KeyError("boom in on_access")
        PyLRU.on_access(self, view, l, e)


def test_hook_exception_names_the_hook_and_keeps_the_traceback(traces):
    with pytest.raises(moesim.PolicyError) as e:
        moesim.run(traces["mix"], cache=Raises, cache_experts=64)
    assert "cache policy 'test_raises': hook on_access raised KeyError" in str(e.value)
    cause = e.value.__cause__
    assert isinstance(cause, KeyError)
    frames = [f.name for f in traceback.extract_tb(cause.__traceback__)]
    assert frames[-1] == "on_access"


class BadVictim(PyLRU):
    name = "test_bad_victim"

    def victim(self, view):
        return view.incoming()  # the expert that needs the room: never evictable


@pytest.mark.parametrize("victim,match", [
    (lambda self, view: view.incoming(), "hook victim returned .* which is not evictable"),
    (lambda self, view: (0, 10**6), "hook victim returned .* which is not evictable"),
    (lambda self, view: "x", "hook victim returned something other than"),
])
def test_bad_victims_are_policy_errors(traces, victim, match):
    cls = type("Bad", (PyLRU,), {"name": "test_bad", "victim": victim})
    with pytest.raises(moesim.PolicyError, match=match):
        moesim.run(traces["mix"], cache=cls, cache_experts=64)


def test_wrong_hook_signature_raises_before_work(traces):
    cls = type("Sig", (PyLRU,), {"name": "test_sig", "on_access": lambda self, view: None})
    with pytest.raises(moesim.ArgumentError, match=r"hook on_access\(self, view\) does not take \(self, view, l, e\)"):
        moesim.run(traces["mix"], cache=cls, cache_experts=64)
    with pytest.raises(moesim.ArgumentError, match="needs a victim"):
        moesim.run(traces["mix"], cache=type("NoVictim", (moesim.Cache,), {}), cache_experts=64)
    with pytest.raises(moesim.ArgumentError, match="a cache policy, not a prefetch policy"):
        moesim.run(traces["mix"], prefetch=PyLRU, cache_experts=64)
    with pytest.raises(moesim.ArgumentError, match="a built-in cache policy has it"):
        moesim.register(type("L", (PyLRU,), {"name": "lru"}))
    with pytest.raises(moesim.ArgumentError, match="step_order"):
        moesim.register(type("O", (PyLRU,), {"name": "test_o", "step_order": "random"}))


def test_view_outside_a_hook_raises(traces):
    kept = []

    class Keep(PyLRU):
        name = "test_keep"

        def on_insert(self, view, l, e):
            kept.append(view)
            PyLRU.on_insert(self, view, l, e)

    moesim.run(traces["gptoss"], cache=Keep, cache_experts=200, record=())
    with pytest.raises(moesim.PolicyError, match="only inside a hook"):
        kept[0].resident(0, 0)


class GatePrefetcher(moesim.Prefetcher):
    """Prefetches the next layer's most probable experts by the current gate
    (the fMoE idea at its simplest); checks the gate is a view, not a copy."""
    name = "test_gate_prefetch"
    reads = ("gate",)
    params = {"top": 2}

    def __init__(self, top=2):
        self.top = top
        self.arrays = set()

    def on_gate(self, view, l):
        g = view.gate(l)
        assert g.dtype == np.float32 and g.shape == (view.J,)
        self.arrays.add(id(g))
        assert abs(float(g.sum()) - 1.0) < 1e-3 or g.sum() == 0
        if l + 1 < view.L:
            for e in np.argsort(-g, kind="stable")[: self.top]:
                view.prefetch(l + 1, int(e), float(g[e]))


def test_python_prefetcher_reads_the_gate_without_copy(traces):
    obj = GatePrefetcher(top=2)
    r = moesim.run(traces["mix"], model="mixtral-8x7b", prefetch=obj, cache_experts=64, record=())
    assert len(obj.arrays) == 1  # the same array every call: the view's buffer
    assert r.metrics["prefetch"]["issued"] > 0 and r.metrics["prefetch"]["useful"] > 0
    none = moesim.run(traces["mix"], model="mixtral-8x7b", cache_experts=64, record=())
    assert r.metrics["hits"] != none.metrics["hits"]


def test_gate_without_declaring_reads_is_an_error(traces):
    cls = type("G", (GatePrefetcher,), {"name": "test_noreads", "reads": ()})
    with pytest.raises(moesim.PolicyError, match="hook on_gate raised .*reads"):
        moesim.run(traces["mix"], prefetch=cls, cache_experts=64)


def test_cache_hooks_may_not_prefetch(traces):
    cls = type("P", (PyLRU,), {"name": "test_cache_prefetch",
                               "on_access": lambda self, view, l, e: view.prefetch(l, e, 1.0)})
    with pytest.raises(moesim.PolicyError, match="only a prefetcher's hooks"):
        moesim.run(traces["mix"], cache=cls, cache_experts=64)


class AllGPU(moesim.Scheduler):
    name = "test_all_gpu"

    def place(self, view, l, acts, cached):
        return [False] * len(acts)


class AllCPU(moesim.Scheduler):
    name = "test_all_cpu"

    def place(self, view, l, acts, cached):
        return [True] * len(acts)


def test_python_schedulers(traces):
    want = moesim.run(traces["gptoss"], cache_experts=200, record=())
    assert metrics_text(moesim.run(traces["gptoss"], sched=AllGPU, cache_experts=200, record=())) == metrics_text(want)
    cpu = moesim.run(traces["gptoss"], sched=AllCPU, cache_experts=200, record=())
    # every activated expert that is not cached runs on the CPU: no copy at all
    assert cpu.metrics["activations"] == want.metrics["activations"] == 6375
    assert cpu.metrics["on_cpu"] + cpu.metrics["hits"] == cpu.metrics["activations"]
    assert cpu.metrics["on_cpu"] > 0 and cpu.metrics["pcie_copies"] == 0


class NumpyLRU(PyLRU):
    """The LRU returning its victim as a list of NumPy integers."""
    name = "test_numpy_lru"

    def victim(self, view):
        for l, e in self.order:
            if view.evictable(np.int64(l), np.uint32(e)):
                return [np.int64(l), np.int32(e)]
        return None


def test_numpy_integers_are_ids(traces):
    kw = dict(cache_experts=200, record=())
    assert metrics_text(moesim.run(traces["gptoss"], cache=NumpyLRU, **kw)) == \
        metrics_text(moesim.run(traces["gptoss"], cache="lru", **kw))


def test_a_hook_may_not_start_another_run(traces):
    path = traces["gptoss"]
    cls = type("Re", (PyLRU,), {"name": "test_reenter",
                                "on_access": lambda self, view, l, e: moesim.run(path, cache_experts=200)})
    with pytest.raises(moesim.PolicyError, match="hook on_access raised Error: moesim.run: called from inside"):
        moesim.run(path, cache=cls, cache_experts=200)
    assert moesim.run(path, cache_experts=200, record=()).metrics["hits"] > 0  # and the next run works


def test_keyboard_interrupt_in_a_hook_is_a_keyboard_interrupt(traces):
    def on_access(self, view, l, e):
        raise KeyboardInterrupt
    cls = type("KI", (PyLRU,), {"name": "test_ki", "on_access": on_access})
    with pytest.raises(KeyboardInterrupt):
        moesim.run(traces["gptoss"], cache=cls, cache_experts=200)


def test_view_queries_agree(traces):
    seen = collections.Counter()

    class Probe(PyLRU):
        name = "test_probe"

        def on_access(self, view, l, e):
            # an accessed expert is cached; resident xor in flight
            assert view.cached(l, e) and view.resident(l, e) != view.in_flight(l, e)
            assert view.layer() == l and view.step() == view.iteration() * view.L + l
            assert any(a[0] == e for a in view.activated(l))
            seen["in_flight" if view.in_flight(l, e) else "resident"] += 1
            PyLRU.on_access(self, view, l, e)

    r = moesim.run(traces["mix"], model="mixtral-8x7b", prefetch="oracle", cache=Probe, cache_experts=64, record=())
    assert seen["resident"] > 0 and seen["in_flight"] > 0  # the oracle's late prefetches are in flight at the gate
    assert r.metrics == moesim.run(traces["mix"], model="mixtral-8x7b", prefetch="oracle", cache="lru",
                                   cache_experts=64, record=()).metrics
