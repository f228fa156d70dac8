#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine (docs/real-execution.md "CUDA backend").
#
#   kernels/gpu-check.sh pack [BUILD [DEST]]   (here, after building with CUDA)
#     copies moesim, the CUDA tests, the shared libraries they need that a bare
#     CUDA image lacks (HDF5, GSL, cJSON, inih, zstd, ...: not glibc, libstdc++
#     or the CUDA libraries), the profiles and this script into DEST (default
#     .gpu): a relocatable folder of a few MiB to carry to the GPU machine.
#   kernels/gpu-check.sh run [DIR [STEP...]]   (on the GPU machine)
#     from the packed DIR (default .gpu), runs the STEPs (default: all of
#     tests calibrate validate) and writes under $OUT (default ./gpu-out):
#       summary.txt      one line per step: its exit status and what it was
#       calibrated.ini   the platform profile `moesim calibrate` wrote
#       gpu-check.tgz    every log, CSV and trace of the run
#     (few files: the device tool brings back at most 8).  Exit status: the
#     number of steps that failed.
#
# The steps:
#   tests      test_cuda_map_search, test_cuda_backend (exit 0 needed; 77 = no device)
#   calibrate  moesim calibrate --backend cuda --out calibrated.ini
#   validate   moesim validate --backend cuda --platform calibrated.ini for
#              none+lru, eam+eam and fmoe+fmoe on a Mixtral-shaped trace
#              (experts scaled by 0.25: a 21 GiB pinned store) and a
#              Qwen1.5-MoE-shaped one (full size: 25 GiB)
# Each step runs under `timeout` so that the whole run ends inside one
# 10-minute device call.
set -u

pack() {
    local build=${1:-build} dest=${2:-.gpu}
    local bins=("$build/moesim" "$build/tests/test_cuda_backend" "$build/tests/test_cuda_map_search")
    local here
    here=$(cd "$(dirname "$0")/.." && pwd)
    for b in "${bins[@]}"; do
        [ -x "$b" ] || { echo "gpu-check: $b is missing (build with CUDA first: cmake -S . -B $build && cmake --build $build)" >&2; exit 2; }
    done
    rm -rf "$dest" && mkdir -p "$dest/lib" || exit 2
    [ -f "$build/libmoesim_cuda.so" ] || { echo "gpu-check: $build/libmoesim_cuda.so is missing" >&2; exit 2; }
    cp "${bins[@]}" "$dest/" && cp -r "$here/sim/profiles" "$dest/profiles" && cp "$0" "$dest/gpu-check.sh" || exit 2
    # the CUDA module: beside moesim (where it dlopens it) and in lib/ (the CUDA tests link it)
    cp "$build/libmoesim_cuda.so" "$dest/" && cp "$build/libmoesim_cuda.so" "$dest/lib/" || exit 2
    bins+=("$build/libmoesim_cuda.so")
    for b in "${bins[@]}"; do strip --strip-debug "$dest/$(basename "$b")" 2>/dev/null; done
    # libraries outside glibc, the compiler runtime and CUDA: a bare CUDA image lacks them
    ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libresolv)\.so' |
        while read -r lib; do cp -L "$lib" "$dest/lib/"; done
    du -sh "$dest"
    echo "gpu-check: packed into $dest; carry it and run: bash $dest/gpu-check.sh run $dest"
}

STATUS=0
LIBPATH=
SUMMARY=
WORK=

step() { # step NAME SECONDS COMMAND...: runs it, logs to $WORK/NAME.log, notes its status
    local name=$1 secs=$2
    shift 2
    echo "== $name: $*"
    LD_LIBRARY_PATH="$LIBPATH" timeout "$secs" "$@" >"$WORK/$name.log" 2>&1
    local rc=$?
    tail -n 5 "$WORK/$name.log"
    printf '%-34s rc=%-3d %s\n' "$name" "$rc" "$*" >>"$SUMMARY"
    [ "$rc" -eq 0 ] || STATUS=$((STATUS + 1))
    return "$rc"
}

run_tests() {
    step test_cuda_map_search 120 "$DIR/test_cuda_map_search"
    step test_cuda_backend 180 "$DIR/test_cuda_backend"
}

run_calibrate() {
    step calibrate 300 "$DIR/moesim" calibrate --backend cuda --out "$WORK/calibrated.ini" &&
        cp "$WORK/calibrated.ini" "$OUT/calibrated.ini"
}

run_validate() {
    local platform=h100-pcie5
    [ -f "$WORK/calibrated.ini" ] && platform="$WORK/calibrated.ini"
    # model, trace seed, --expert-scale, GPU cache (experts)
    local cases=("mixtral-8x7b 1 0.25 64" "qwen1.5-moe-a2.7b 2 1 360")
    for c in "${cases[@]}"; do
        read -r model seed scale cache <<<"$c"
        local trace="$WORK/$model.h5"
        step "gen_$model" 60 "$DIR/moesim" trace gen --model "$model" --requests 4 --seed "$seed" -o "$trace" || continue
        for pc in none:lru eam:eam fmoe:fmoe; do
            local p=${pc%%:*} k=${pc##*:}
            step "validate_${model}_${p}_${k}" 150 "$DIR/moesim" validate --backend cuda --trace "$trace" \
                --model "$model" --platform "$platform" --prefetch "$p" --cache "$k" --cache-experts "$cache" \
                --expert-scale "$scale"
        done
    done
}

run() {
    DIR=$(cd "${1:-.gpu}" && pwd) || exit 2
    shift
    local steps=("$@")
    [ ${#steps[@]} -gt 0 ] || steps=(tests calibrate validate)
    OUT=${OUT:-$PWD/gpu-out}
    mkdir -p "$OUT"
    WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
    SUMMARY="$WORK/summary.txt"
    export MOESIM_PROFILE_DIR="$DIR/profiles"
    # only moesim and the tests see the packed libraries (step), not the system's tools
    LIBPATH="$DIR/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    { nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv; } >"$WORK/gpu.txt" 2>&1
    grep -E '^(MemTotal|MemAvailable)' /proc/meminfo >>"$WORK/gpu.txt"
    echo "gpu-check $(date -u +%FT%TZ) on $(head -n 1 "$WORK/gpu.txt")" >"$SUMMARY"
    for s in "${steps[@]}"; do
        case "$s" in
        tests) run_tests ;;
        calibrate) run_calibrate ;;
        validate) run_validate ;;
        *) echo "gpu-check: unknown step '$s' (tests, calibrate, validate)" >&2; exit 2 ;;
        esac
    done
    cp "$SUMMARY" "$OUT/summary.txt"
    tar -czf "$OUT/gpu-check.tgz" -C "$WORK" --exclude='*.h5' . && du -h "$OUT/gpu-check.tgz"
    echo "---- summary ($STATUS failed)"
    cat "$SUMMARY"
    exit "$STATUS"
}

case "${1:-}" in
pack) shift; pack "$@" ;;
run) shift; run "$@" ;;
*) echo "usage: $0 pack [BUILD [DEST]] | run [DIR [tests|calibrate|validate]...]" >&2; exit 2 ;;
esac
