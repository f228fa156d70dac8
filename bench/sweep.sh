#!/bin/sh
# bench/sweep.sh: sweep throughput (points/s) at --jobs 1 and --jobs 2 on a
# fixed 96-point spec (a generated 8-request mixtral-8x7b trace; 4 prefetchers
# x 4 caches x 6 cache sizes), and the speed-up.  Host wall-clock timing: a
# benchmark, not a test.   usage: bench/sweep.sh [BUILD_DIR] [REPEAT]
set -eu
B=${1:-build}; R=${2:-3}
M=$(cd "$B" && pwd)/moesim
W=$(mktemp -d /tmp/moesim-bench-sweep.XXXXXX)
trap 'rm -rf "$W"' EXIT
"$M" trace gen --model mixtral-8x7b -o "$W/t.h5" --seed 7 --requests 8 >/dev/null
cat > "$W/spec.ini" <<EOF2
[sweep]
output = out.csv
trace = t.h5
model = mixtral-8x7b
prefetch = none, oracle, traced-topk, transition
cache = lru, lfu, fifo, belady
cache_experts = 16:56:8
EOF2
n=$("$M" sweep "$W/spec.ini" --dry-run | cut -d' ' -f1)
best() { # best wall time of R runs of --jobs $1
  b=
  for i in $(seq "$R"); do
    rm -f "$W/out.csv"
    t0=$(date +%s.%N); "$M" sweep "$W/spec.ini" --jobs "$1" >/dev/null; t1=$(date +%s.%N)
    b=$(echo "$t0 $t1 ${b:-1e9}" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
    cp "$W/out.csv" "$W/out.j$1.csv"
  done
  echo "$b"
}
t1=$(best 1); t2=$(best 2)
cmp -s "$W/out.j1.csv" "$W/out.j2.csv" || { echo "bench_sweep: CSVs differ between --jobs 1 and 2"; exit 1; }
echo "$n $t1 $t2" | awk '{printf "points %d\n--jobs 1: %.3f s, %.1f points/s\n--jobs 2: %.3f s, %.1f points/s\nspeed-up %.2f\n", $1, $2, $1 / $2, $3, $1 / $3, $2 / $3}'
