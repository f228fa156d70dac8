#!/bin/sh
# `moesim claims` kinds that sweep the batch size (fMoE Fig. 14b: lowest in
# most cases) and MoE-Infinity's EAMC capacity (Fig. 12: where latency levels
# off), on a small trace: each verdict must follow from the values printed
# beside it, and the batch axis must reach the engine (batch 4 replays the
# requests in fewer, larger iterations than batch 1, so the TPOTs differ).
# Usage: claims_axes.sh MOESIM DIR
M=$1; D=$2
set -u
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$D" && mkdir -p "$D" && cd "$D" || exit 1
"$M" trace gen --model mixtral-8x7b --requests 16 --seed 3 --set prompt_max=48 --set output_max=24 -o t.h5 \
    > gen.txt 2>&1 || fail "gen: $(cat gen.txt)"
"$M" claims --trace t.h5 --only fmoe-batch-tpot,moeinf-eamc-capacity-switch,fmoe-store-semantic --no-sensitivity --out c > c.txt 2>&1 ||
    fail "claims: $(cat c.txt)"
# lowest: "fMoE: 1: X vs Y ms (S); 2: ...; lowest at W of 4"
line=$(grep -A1 '^fmoe-batch-tpot' c.txt | tail -1)
wins=$(echo "$line" | tr ';' '\n' | awk '/ vs / { for (i = 1; i <= NF; i++) if ($i == "vs") { if ($(i-1) + 0 < $(i+1) + 0) w++ } }
    END { print w + 0 }')
said=$(echo "$line" | sed -n 's/.*lowest at \([0-9]*\) of 4.*/\1/p')
[ "$wins" = "$said" ] || fail "batch: $wins wins in the values, the line says $said: $line"
verdict=$(grep '^fmoe-batch-tpot' c.txt | awk '{print $2}')
want=$(awk -v w="$wins" 'BEGIN { print (2 * w > 4) ? "holds" : (w > 0) ? "direction" : "does" }')
[ "$verdict" = "$want" ] || fail "batch: verdict $verdict, $wins of 4 say $want"
t1=$(echo "$line" | sed -n 's/.*fMoE: 1: \([0-9.]*\) vs.*/\1/p')
t4=$(echo "$line" | sed -n 's/.*; 4: \([0-9.]*\) vs.*/\1/p')
[ -n "$t1" ] && [ "$t1" != "$t4" ] || fail "batch 1 and 4 give the same TPOT ($t1): the batch does not reach the run"
# plateau: where the values level off (every later value within TOL % of the last), in the
# claim's direction (lower times, higher similarities), and the verdict that follows
plateau() { # ID AXIS KNEE TOL HIGHER_IS_BETTER
    line=$(grep -A1 "^$1 " c.txt | tail -1)
    vals=$(echo "$line" | sed 's/ (tolerance.*//; s/.*: //; s/ ms//g; s/,//g')
    want=$(echo "$vals" | awk -v axis="$2" -v knee="$3" -v tol="$4" -v up="$5" '{ n = NF; last = $n
        band = (last < 0 ? -last : last) * tol / 100; k = n
        while (k > 1) { d = $(k-1) - last; if (d < 0) d = -d; if (d > band) break; k-- }
        split(axis, ax, " "); gain = up ? last - $1 : $1 - last
        if (gain > band && ax[k] == knee) print "holds"; else if (gain > band && k < n) print "direction"; else print "does" }')
    verdict=$(grep "^$1 " c.txt | awk '{print $2}')
    [ "$verdict" = "$want" ] || fail "$1: verdict $verdict, values $vals say $want"
}
plateau moeinf-eamc-capacity-switch "25 50 100 200" 100 1 0
plateau fmoe-store-semantic "125 250 500 1000 2000 4000" 1000 2 1
echo "ok: batch $wins of 4; plateaus as printed"
