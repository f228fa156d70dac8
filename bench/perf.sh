#!/bin/sh
# bench/perf.sh: the replay benchmark of issue 18 (docs/performance.md).
#   bench/perf.sh [BUILD_DIR] [LAYER_STEPS] [REPEAT]      (defaults: build 1000000 3)
# 1. bench_replay on a Mixtral-8x7B shape (cache 64 experts) and a Qwen1.5-MoE
#    shape (cache 256): read-only (ids, all parts), each combination's
#    layer-steps/s and its time over none+lru's, the process's peak RSS.
# 2. Where valgrind is present: instructions per layer-step of each
#    combination, counted by callgrind inside ms_run only (no start-up or
#    profile loading), on a trace of IR_STEPS layer-steps (default 100000;
#    fmoe+fmoe takes a few minutes under callgrind).
# 3. `moesim figures` wall time (its default trace and figures), and
#    bench/sweep.sh (a 96-point sweep at --jobs 1 and 2).
# Host wall-clock timing: a benchmark, never a test.  Set SKIP_REPLAY=1,
# SKIP_IR=1, SKIP_FIGURES=1 or SKIP_SWEEP=1 to leave a part out.
set -eu
B=${1:-build}; N=${2:-1000000}; R=${3:-3}
IR_STEPS=${IR_STEPS:-100000}
M=$(cd "$B" && pwd)/moesim
BR=$(cd "$B" && pwd)/bench/bench_replay
COMBOS="none+lru eam+eam hybrimoe+mrs+hybrid fmoe+fmoe oracle+belady none+lfu"
W=$(mktemp -d /tmp/moesim-bench-perf.XXXXXX)
trap 'rm -rf "$W"' EXIT

shapes="mixtral-8x7b:64 qwen1.5-moe-a2.7b:256"
if [ "${SKIP_REPLAY:-0}" != 1 ]; then
  echo "== replay throughput ($N layer-steps, best of $R)"
  for s in $shapes; do
    "$BR" --model "${s%%:*}" --cache-experts "${s##*:}" --layer-steps "$N" --repeat "$R"
    echo
  done
fi

if [ "${SKIP_IR:-0}" != 1 ] && command -v valgrind >/dev/null 2>&1; then
  echo "== instructions per layer-step inside ms_run (callgrind, $IR_STEPS layer-steps)"
  for s in $shapes; do
    model=${s%%:*}; cap=${s##*:}
    "$M" trace gen --model "$model" -o "$W/$model.h5" --seed 7 --layer-steps "$IR_STEPS" >/dev/null
    steps=$("$M" trace info "$W/$model.h5" | sed -n 's/^layer-steps: *//p')
    for c in $COMBOS; do
      pf=${c%%+*}; rest=${c#*+}; cache=${rest%%+*}; sched=gpu
      [ "$rest" != "$cache" ] && sched=${rest#*+}
      valgrind --tool=callgrind --toggle-collect=ms_run --callgrind-out-file="$W/cg.out" \
        "$M" run --trace "$W/$model.h5" --model "$model" --cache-experts "$cap" \
        --prefetch "$pf" --cache "$cache" --sched "$sched" >/dev/null 2>"$W/cg.err"
      ir=$(sed -n 's/.*Collected : *//p' "$W/cg.err")
      printf '%-20s %-22s %14s instructions  %8.0f per layer-step\n' "$model" "$c" "$ir" \
        "$(echo "$ir $steps" | awk '{print $1 / $2}')"
    done
  done
  echo
fi

if [ "${SKIP_FIGURES:-0}" != 1 ]; then
  echo "== moesim figures (default trace, every figure)"
  t0=$(date +%s.%N)
  "$M" figures --out "$W/figs" >/dev/null
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "figures: %.1f s wall\n", $2 - $1}'
  echo
fi

if [ "${SKIP_SWEEP:-0}" != 1 ]; then
  echo "== 96-point sweep"
  sh "$(dirname "$0")/sweep.sh" "$B" "$R"
fi
