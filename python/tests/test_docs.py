"""docs/python.md's examples run as written (in a folder holding the mix.h5
its comment makes), and the worked example writes its figure."""
import os
import re

import moesim

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_docs_examples_run(cli, tmp_path, monkeypatch):
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 3
    gen = re.search(r"# traces come from the CLI for now: moesim (trace gen [^\n]+)", text)
    monkeypatch.chdir(tmp_path)
    cli(*gen.group(1).split())
    import matplotlib
    matplotlib.use("Agg")
    ns = {}
    for b in blocks:
        exec(compile(b, DOC, "exec"), ns)
    assert os.path.getsize(tmp_path / "hit_rate.png") > 1000
    assert isinstance(ns["r"], moesim.Result) and ns["r"].metrics["prefetch"]["issued"] > 0
