#!/bin/sh
# A profile override as a sweep key (platform.h2d_bw = 1000GB/s in [sweep])
# gives exactly the counts of `run --set platform.h2d_bw=1000GB/s`, and they
# differ from the file's own bandwidth.  Usage: overrides_sweep.sh MOESIM DIR
# (DIR holds t.h5).
M=$1
cd "$2" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
printf '[sweep]\noutput = sw.csv\ntrace = t.h5\nmodel = mixtral-8x7b\nplatform.h2d_bw = 1000GB/s\nprefetch = oracle\ncache_experts = 32\n' > sw.ini
rm -f sw.csv
"$M" sweep sw.ini >/dev/null || fail "sweep"
col() { head -1 sw.csv | tr ',' '\n' | grep -nx "$1" | cut -d: -f1; }
row=$(sed -n 2p sw.csv)
s=$(echo "$row" | cut -d, -f"$(col hits)"),$(echo "$row" | cut -d, -f"$(col late)"),$(echo "$row" | cut -d, -f"$(col misses)")
counts() {
    "$M" run --trace t.h5 --model mixtral-8x7b --prefetch oracle --cache-experts 32 --json "$@" | tr -d ' \t\n' |
        grep -o '"metrics":{"hit_rate":[^,]*,"hits":[0-9]*,"late":[0-9]*,"misses":[0-9]*' |
        sed 's/.*"hits":\([0-9]*\),"late":\([0-9]*\),"misses":\([0-9]*\)/\1,\2,\3/'
}
r=$(counts --set platform.h2d_bw=1000GB/s)
o=$(counts)
[ -n "$r" ] || fail "no counts from run"
[ "$s" = "$r" ] || fail "sweep gives $s, run --set $r"
[ "$o" != "$r" ] || fail "the override changed nothing ($o)"
echo "ok: hits,late,misses $r at 1000GB/s (file's bandwidth: $o)"
