#!/bin/sh
# Runs libFuzzer harnesses of a MOESIM_FUZZ=ON build.
#   BUILD_DIR=build-fuzz SECONDS_PER_HARNESS=30 tests/fuzz/run.sh [NAME ...]
# NAME is a harness without its fuzz_ prefix (default: every harness built).
# Each one starts from a scratch copy of tests/fuzz/corpus/NAME/ (the
# committed corpus is never modified), runs -max_total_time seconds with
# -timeout=10 (a hang), -rss_limit_mb=2048 and LeakSanitizer; crash inputs
# land in $FUZZ_ARTIFACTS (default: the scratch dir, printed).  Exit 1 when
# any harness crashed, hung, leaked or ran out of memory.
# FUZZ_KEEP=DIR keeps each grown corpus in DIR/NAME (for the docs/fuzzing.md figures).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD_DIR:-build-fuzz}
secs=${SECONDS_PER_HARNESS:-30}
bin="$build/tests/fuzz"
[ -d "$bin" ] || { echo "run.sh: no $bin (configure with -DCMAKE_C_COMPILER=clang -DMOESIM_FUZZ=ON)" >&2; exit 2; }
if [ $# -eq 0 ]; then
    set --
    for f in "$bin"/fuzz_*; do [ -x "$f" ] && set -- "$@" "${f##*/fuzz_}"; done
fi

# room to grow past the seeds (the largest, trace_h5's template regions, < 8 KB)
max_len=16384

# the harnesses load shipped profiles by name: the build tree's data (sim/core/paths.h)
export MOESIM_DATA_DIR="${MOESIM_DATA_DIR:-$(cd "$build" && pwd)/share/moesim}"

# leaks inside the (uninstrumented) HDF5 library are not moesim's: lsan.supp
export LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

status=0
for name in "$@"; do
    exe="$bin/fuzz_$name"
    [ -x "$exe" ] || { echo "run.sh: no harness $exe" >&2; status=1; continue; }
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/moesim-fuzzrun-$name-XXXXXX")
    mkdir -p "$scratch/corpus"
    [ -d "$here/corpus/$name" ] && cp "$here/corpus/$name"/* "$scratch/corpus/" 2>/dev/null
    art=${FUZZ_ARTIFACTS:-$scratch}/
    mkdir -p "$art"
    echo "== fuzz_$name: ${secs} s, corpus $(ls "$scratch/corpus" | wc -l) seeds"
    "$exe" "$scratch/corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$art" \
        >"$scratch/log" 2>&1
    rc=$?
    grep -E '^#[0-9]+.*(DONE|pulse)|^stat::|ERROR|SUMMARY|^artifact_prefix|Test unit written' "$scratch/log" | tail -20
    if [ $rc -ne 0 ]; then
        echo "run.sh: fuzz_$name FAILED (exit $rc); log and crash input kept in $scratch" >&2
        tail -60 "$scratch/log" >&2
        status=1
        continue
    fi
    if [ -n "${FUZZ_KEEP:-}" ]; then
        rm -rf "${FUZZ_KEEP:?}/$name" && mkdir -p "$FUZZ_KEEP" && mv "$scratch/corpus" "$FUZZ_KEEP/$name"
        cp "$scratch/log" "$FUZZ_KEEP/$name.log"
    fi
    rm -rf "$scratch"
done
exit $status
