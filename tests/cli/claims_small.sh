#!/bin/sh
# `moesim claims` in a reduced form (the full run is bench/claims.sh): four
# claims on 4-request synthetic traces, no sensitivity runs.  Checks the
# outputs, that each ordering verdict agrees with the values printed beside
# it, and that a second run writes the same bytes.  Usage: claims_small.sh MOESIM DIR
M=$1; D=$2
set -u
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$D" && mkdir -p "$D" && cd "$D" || exit 1
run() { "$M" claims --out "$1" --requests 4 --no-sensitivity \
    --only fmoe-caches,fmoe-entropy,hybrimoe-decode,moeinf-belady-switch > "$1.txt" 2>&1; }
run a || fail "claims: $(cat a.txt)"
grep -q '^4 claims: ' a.txt || fail "no summary line"
[ "$(grep -vc '^#' a/claims.csv)" = 5 ] || fail "claims.csv rows"
grep -q '^"hybrimoe-decode","HybriMoE",' a/claims.csv || fail "claims.csv lacks hybrimoe-decode"
grep -q '^hybrimoe-decode vs kTransformers-style' a/claims_values.csv || fail "claims_values.csv"
grep -q '^moeinf-belady-switch gap to Belady' a/claims_values.csv || fail "claims_values.csv gap"
# every row of the figure's CSV has its four fields (an item name with a comma would shift them)
awk -F, '!/^#/ && NF != 4 { bad = 1 } END { exit bad }' a/claims_values.csv || fail "claims_values.csv: a row without 4 fields"
head -c 8 a/claims.png | od -An -c | tr -d ' \n' | grep -q 'PNG' || fail "claims.png is not a PNG"
# the entropy claim: the two means and the per-layer count decide the verdict
line=$(grep -A1 '^fmoe-entropy' a.txt)
v=$(echo "$line" | head -1 | awk '{print $2}')
if echo "$line" | tail -1 | grep -q 'below at 32 of 32 layers'; then want=holds; else want=other; fi
[ "$want" = holds ] && [ "$v" != holds ] && fail "entropy: below at every layer, verdict $v"
[ "$want" != holds ] && [ "$v" = holds ] && fail "entropy: not below at every layer, verdict $v"
# the ordering claim (LRU < LFU < fMoE cache): verdict from the printed values
vals=$(grep -A1 '^fmoe-caches' a.txt | tail -1 | sed 's/.*moesim: //')
want=$(echo "$vals" | awk -F' [|] ' '{ if ($1 < $2 && $2 < $3) print "holds"; else if ($3 > $1) print "direction"; else print "does" }')
got=$(grep '^fmoe-caches' a.txt | awk '{print $2}')
[ "$got" = "$want" ] || fail "fmoe-caches: verdict $got, values $vals say $want"
# deterministic
run b || fail "second run"
cmp -s a/claims.csv b/claims.csv && cmp -s a/claims_values.csv b/claims_values.csv || fail "two runs differ"
echo "ok: $(tail -1 a.txt)"
