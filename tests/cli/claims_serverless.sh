#!/bin/sh
# The serverless claim (seed 002 Fig. 14) against `moesim serverless` on the
# same trace: the three values the claim prints must be the ones computed by
# hand from serverless.csv (cost below LambdaML, throughput below LambdaML,
# cost below the CPU cluster, in percent), and the verdict must follow from
# them and the paper's bounds (>= 43.41, <= 18.76, >= 75.67).
# Usage: claims_serverless.sh MOESIM DIR
M=$1; D=$2
set -u
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$D" && mkdir -p "$D" && cd "$D" || exit 1
"$M" claims --only serverless-cost --requests 4 --no-sensitivity --out c > c.txt 2>&1 || fail "claims: $(cat c.txt)"
# the claim plans under a latency target that does not bind (3600 s), seed 1, 20 BO iterations
"$M" serverless --trace c/claims-bert-moe-4e.h5 --profile aws-lambda-x86 --latency-target 3600000 \
    --seed 1 --bo-iters 20 --out s > s.txt 2>&1 || fail "serverless: $(cat s.txt)"
want=$(awk -F, '/^predicted\+BO,/ {cb=$2; tb=$4} /^LambdaML,/ {cl=$2; tl=$4} /^CPU-cluster,/ {cc=$2}
    END {printf "%.1f %.1f %.1f", 100*(1-cb/cl), 100*(1-tb/tl), 100*(1-cb/cc)}' s/serverless.csv)
line=$(grep -A1 '^serverless-cost' c.txt | tail -1)
got=$(echo "$line" | sed -n 's/.*moesim: \([-0-9.]*\) % cheaper than LambdaML.*throughput \([-0-9.]*\) % below it.*, \([-0-9.]*\) % cheaper than the CPU.*/\1 \2 \3/p')
[ -n "$got" ] || fail "no values in: $line"
[ "$got" = "$want" ] || fail "claim values '$got', serverless.csv gives '$want'"
verdict=$(grep '^serverless-cost' c.txt | awk '{print $2}')
expect=$(echo "$got" | awk '{ if ($1 >= 43.41 && $2 <= 18.76 && $3 >= 75.67) print "holds";
                              else if ($1 > 0 && $3 > 0) print "direction"; else print "does" }')
[ "$verdict" = "$expect" ] || fail "verdict $verdict, values $got say $expect"
grep -q '^"serverless-cost","Serverless",' c/claims.csv || fail "claims.csv lacks the claim"
echo "ok: $got -> $verdict"
