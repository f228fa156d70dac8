#!/usr/bin/env python3
"""The Python package's speed (issue 33 item 6; figures in docs/python.md "Speed").

Host timing, never a test.  Three figures, each the best of REPEAT:
  1. a Python LRU (moesim.Cache, OrderedDict) against the built-in `lru` on
     the same trace and cache (the Python hooks' cost: target within 30x);
  2. moesim.run against `moesim run --json` in a new process, on a small
     trace (the package's overhead per run, and the process start it saves);
  3. moesim.sweep against `moesim sweep` on the same spec, jobs 1 and 2.
The Python LRU's metrics are checked equal to lru's on the way.

usage: PYTHONPATH=build/python python3 bench/python.py build/moesim [WORKDIR]
"""
import collections
import os
import subprocess
import sys
import tempfile
import time

import moesim

REPEAT = 3


class PyLRU(moesim.Cache):
    name = "bench_lru"

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


def best(fn):
    ts = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    exe = os.path.abspath(sys.argv[1])
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="moesim-bench-py-")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    big, small = "big.h5", "small.h5"
    if not os.path.exists(big):
        subprocess.run([exe, "trace", "gen", "--model", "mixtral-8x7b", "-o", big, "--seed", "1", "--requests", "64"],
                       check=True, capture_output=True)
    if not os.path.exists(small):
        subprocess.run([exe, "trace", "gen", "--model", "mixtral-8x7b", "-o", small, "--seed", "2", "--requests", "2",
                        "--set", "prompt_max=16", "--set", "output_max=16"], check=True, capture_output=True)
    kw = dict(model="mixtral-8x7b", cache_experts=64, record=())
    c = moesim.run(big, cache="lru", **kw)
    p = moesim.run(big, cache=PyLRU, **kw)
    assert p.metrics == c.metrics, "the Python LRU's metrics differ from lru's"
    tc, tp = best(lambda: moesim.run(big, cache="lru", **kw)), best(lambda: moesim.run(big, cache=PyLRU, **kw))
    steps = c.metrics["layer_steps"]
    print(f"1. Python LRU vs lru on {big} ({steps} layer steps, {c.metrics['activations']} activations): "
          f"C {tc:.3f} s, Python {tp:.3f} s, {tp / tc:.1f}x ({(tp - tc) / steps * 1e6:.2f} us per layer step)")

    cli = [exe, "run", "--trace", small, "--model", "mixtral-8x7b", "--cache-experts", "64", "--json"]
    n = 20
    t_cli = best(lambda: [subprocess.run(cli, check=True, capture_output=True) for _ in range(n)]) / n
    t_py = best(lambda: [moesim.run(small, **kw) for _ in range(n)]) / n
    t_py_rec = best(lambda: [moesim.run(small, model="mixtral-8x7b", cache_experts=64) for _ in range(n)]) / n
    print(f"2. one run of {small}: moesim run --json (new process) {t_cli * 1e3:.1f} ms, moesim.run "
          f"{t_py * 1e3:.1f} ms, with iterations+requests tables {t_py_rec * 1e3:.1f} ms")

    with open("spec.ini", "w") as f:
        f.write(f"[sweep]\noutput = out.csv\ntrace = {big}\nmodel = mixtral-8x7b\ncache = lru, lfu, fifo\n"
                "prefetch = none, oracle\ncache_experts = 32:64:16\n")
    for jobs in (1, 2):
        def cli_sweep():
            if os.path.exists("out.csv"):
                os.remove("out.csv")
            subprocess.run([exe, "sweep", "spec.ini", "--jobs", str(jobs)], check=True, capture_output=True)
        t_cli = best(cli_sweep)
        t_py = best(lambda: moesim.sweep("spec.ini", jobs=jobs))
        print(f"3. sweep of 18 points on {big}, jobs {jobs}: moesim sweep {t_cli:.2f} s, moesim.sweep {t_py:.2f} s")


if __name__ == "__main__":
    main()
