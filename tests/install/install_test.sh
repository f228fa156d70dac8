#!/bin/sh
# A relocatable install, end to end (ctest install.relocated):
#   install_test.sh SRC BUILD_MOESIM VERSION GENERATOR C_COMPILER BUILD_TYPE
# copies the sources moesim's build reads into a scratch folder, configures and
# builds the moesim target there (-DMOESIM_CUDA=OFF -DBUILD_TESTING=OFF),
# installs it with `cmake --install --prefix`, deletes both the copied sources
# and that build tree, moves the prefix, and runs the installed binary from an
# unrelated folder with no MOESIM_* variable set: --version, list, trace gen,
# run (metrics equal to BUILD_MOESIM's on the same trace) and one figure.
# Nothing the binary was built from exists any more, so a path compiled in
# (source or build tree) would fail here.
set -eu
src=$1 build_moesim=$2 version=$3 generator=$4 cc=$5 build_type=$6
unset MOESIM_DATA_DIR MOESIM_PROFILE_DIR MOESIM_WORKLOAD_DIR MOESIM_PYTHON
work=$(mktemp -d "${TMPDIR:-/tmp}/moesim-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }
now() { date +%s.%N; }
t0=$(now)

mkdir "$work/src"
for p in CMakeLists.txt cmake sim traces policies kernels bench plots docs; do
    cp -R "$src/$p" "$work/src/"
done
cmake -S "$work/src" -B "$work/build" -G "$generator" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$build_type" \
    -DMOESIM_CUDA=OFF -DMOESIM_MPI=OFF -DBUILD_TESTING=OFF >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; fail "configure failed"; }
t1=$(now)
cmake --build "$work/build" --target moesim -j2 >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; fail "build failed"; }
t2=$(now)
cmake --install "$work/build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "install failed"; }
rm -rf "$work/src" "$work/build"
mv "$work/prefix" "$work/moved"
p=$work/moved
for f in bin/moesim share/moesim/profiles/models/mixtral-8x7b.ini share/moesim/profiles/platforms/rtx3090-pcie4.ini \
         share/moesim/profiles/serverless/aws-lambda-x86.ini share/moesim/plots/fig_common.gp \
         share/moesim/plots/fig_entropy_layer.gp share/moesim/tools/npy2trace.py share/moesim/record/record.py \
         share/moesim/record/requirements.txt; do
    [ -s "$p/$f" ] || fail "$f missing from the install"
done
[ -x "$p/share/moesim/tools/npy2trace.py" ] || fail "tools/npy2trace.py is not executable"

mkdir "$work/run" && cd "$work/run"
out=$("$p/bin/moesim" --version)
[ "$out" = "moesim $version (commit unknown)" ] || fail "--version of a build outside git: '$out'"
"$p/bin/moesim" list >list.txt || fail "list failed"
grep -qx "models ($p/share/moesim/profiles/models):" list.txt || fail "list does not read the installed profiles: $(grep '^models' list.txt)"
grep -q '^  mixtral-8x7b ' list.txt || fail "list shows no mixtral-8x7b"
"$p/bin/moesim" trace gen --model mixtral-8x7b -o t.h5 --seed 3 --requests 4 >/dev/null || fail "trace gen failed"
args="run --trace t.h5 --model mixtral-8x7b --platform rtx3090-pcie4 --prefetch oracle --cache lru --sched gpu --cache-experts 64 --json"
"$p/bin/moesim" $args >installed.json || fail "run failed"
"$build_moesim" $args >built.json || fail "run with the build tree's moesim failed"
sed -n '/"metrics":/,$p' installed.json >installed.metrics
sed -n '/"metrics":/,$p' built.json >built.metrics
grep -Eq '"hits":[[:space:]]+[1-9][0-9]*,' installed.metrics || fail "no hits in the installed run: $(head -5 installed.metrics)"
cmp -s installed.metrics built.metrics || fail "installed and build-tree runs differ: $(diff installed.metrics built.metrics | head -5)"
"$p/bin/moesim" figures --trace t.h5 --model mixtral-8x7b --out figs --only entropy-layer >/dev/null || fail "figures failed"
[ -s figs/entropy-layer.png ] && [ -s figs/entropy-layer.pdf ] || fail "figures wrote no entropy-layer.png / .pdf"
# the header and one row per MoE layer (32); '#' lines are provenance comments
rows=$(grep -vc '^#' figs/entropy_layer.csv)
[ "$rows" -eq 33 ] || fail "entropy_layer.csv has $rows lines (without comments), not 33"
# through a symbolic link, the binary still finds its own share/ (/proc/self/exe is resolved)
ln -s "$p/bin/moesim" ./moesim-link
./moesim-link list | grep -qx "models ($p/share/moesim/profiles/models):" || fail "a symlinked binary lost its data"
t3=$(now)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN {
    printf "install test ok: configure %.1f s, build moesim %.1f s, install + runs %.1f s, total %.1f s\n",
           b - a, c - b, d - c, d - a }'
