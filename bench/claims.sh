#!/bin/sh
# bench/claims.sh: the full `moesim claims` run (every claim, the
# sensitivity runs, 8-request synthetic traces per model), its wall and CPU
# time, and the table docs/claims.md shows; optionally on a real trace too.
# A benchmark, not a test (minutes, host timing).
# usage: bench/claims.sh [BUILD_DIR] [OUT_DIR] [TRACE]
set -eu
B=${1:-build}; O=${2:-moesim-claims}; T=${3:-}
M=$(cd "$B" && pwd)/moesim
start=$(date +%s)
/usr/bin/time -f "claims: %e s wall, %U s user, %M KB peak RSS" "$M" claims --out "$O" > "$O.txt"
end=$(date +%s)
cat "$O.txt"
echo "synthetic traces: $((end - start)) s"
if [ -n "$T" ]; then
    /usr/bin/time -f "claims --trace: %e s wall, %U s user" "$M" claims --out "$O-trace" --trace "$T" > "$O-trace.txt"
    cat "$O-trace.txt"
fi
