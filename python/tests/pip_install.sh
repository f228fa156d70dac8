#!/bin/sh
# ctest python.pip_install: the package as a user installs it.  Builds the
# wheel from the checkout with scikit-build-core (from PY's environment, no
# download: --no-build-isolation), installs it into a fresh venv of Debian's
# python3 (Debian's numpy visible, nothing of the checkout), and checks from outside it that
# `import moesim` works, that moesim.__version__ is `moesim --version`'s and
# that a run gives `moesim run --json`'s metrics.
# usage: pip_install.sh SOURCE_DIR WORK_DIR PY MOESIM_BIN
set -eu
src=$1 work=$2 py=$3 bin=$4
rm -rf "$work"
mkdir -p "$work"
CMAKE_BUILD_PARALLEL_LEVEL=2 "$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
    -w "$work/wheel" "$src"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"   # numpy: Debian's python3-numpy
"$work/venv/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$work"/wheel/moesim-*.whl
cd "$work"
"$bin" trace gen --model mixtral-8x7b -o mix.h5 --seed 2 --requests 2 > /dev/null
"$bin" run --trace mix.h5 --model mixtral-8x7b --cache lfu --cache-experts 48 --json > cli.json
want=$("$bin" --version | cut -d' ' -f2)
"$work/venv/bin/python" - "$want" <<'PY'
import json, sys
import moesim
assert moesim.__file__.startswith(sys.prefix), moesim.__file__
assert moesim.__version__ == sys.argv[1], (moesim.__version__, sys.argv[1])
r = moesim.run("mix.h5", model="mixtral-8x7b", cache="lfu", cache_experts=48, record=())
assert r.metrics == json.load(open("cli.json"))["metrics"]
print("pip install: moesim", moesim.__version__, "from", moesim.__file__, "hit_rate", r.metrics["hit_rate"])
PY
