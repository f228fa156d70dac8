"""Fixtures of the Python package's tests (ctest python.pytest runs them with
PYTHONPATH at the build tree's python/ folder, MOESIM_BIN the CLI of the same
build and MOESIM_SHARED_DIR the shared folder with the real traces)."""
import json
import os
import subprocess

import pytest


def _bin():
    b = os.environ.get("MOESIM_BIN")
    if not b:
        raise RuntimeError("MOESIM_BIN must name the moesim executable of the build under test")
    return b


@pytest.fixture(scope="session")
def cli():
    """Runs the moesim CLI; returns its stdout (check=True)."""
    def run(*args, check=True):
        p = subprocess.run([_bin(), *map(str, args)], capture_output=True, text=True)
        if check and p.returncode:
            raise AssertionError(f"moesim {' '.join(map(str, args))}: {p.stderr}")
        return p
    return run


@pytest.fixture(scope="session")
def traces(tmp_path_factory, cli):
    """A generated Mixtral-shaped trace and the two real route-csv traces, imported."""
    d = tmp_path_factory.mktemp("traces")
    out = {"mix": d / "mix.h5"}
    cli("trace", "gen", "--model", "mixtral-8x7b", "-o", out["mix"], "--seed", 1, "--requests", 6)
    shared = os.environ.get("MOESIM_SHARED_DIR", "")
    for name in ("qwen", "gptoss"):
        src = os.path.join(shared, "traces", "bigmoeonedge", f"{name}.route.csv")
        if not os.path.exists(src):
            raise AssertionError(f"{src}: missing (MOESIM_SHARED_DIR={shared!r})")
        out[name] = d / f"{name}.h5"
        cli("trace", "import", "--format", "route-csv", src, out[name])
    return out


@pytest.fixture(scope="session")
def cli_json(cli):
    def run(*args):
        return json.loads(cli("run", *args, "--json").stdout)
    return run
