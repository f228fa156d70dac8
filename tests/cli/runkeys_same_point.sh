#!/bin/sh
# One point of the run configuration, given as CLI flags, as sweep spec keys
# and as regress golden columns (the same key names under one rule:
# --cache-experts is cache_experts), gives the same hits, late and misses.
# Usage: runkeys_same_point.sh MOESIM WORKDIR
M=$1; W=$2
set -u
mkdir -p "$W" && cd "$W" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
"$M" trace gen --model mixtral-8x7b -o t.h5 --seed 11 --requests 3 --set prompt_max=32 --set output_max=32 \
    >/dev/null 2>&1 || fail "trace gen"
# the point: trace, model, platform, prefetch, cache, sched, cache_experts, distance, train
cli=$("$M" run --trace t.h5 --model mixtral-8x7b --platform rtx3090-pcie4 --prefetch traced-topk:k=2 \
    --cache lfu:reset=0 --sched gpu --cache-experts 40 --distance 2 --train 0.34 --json | tr -d ' \t\n') ||
    fail "run"
counts=$(echo "$cli" | grep -o '"metrics":{"hit_rate":[^,]*,"hits":[0-9]*,"late":[0-9]*,"misses":[0-9]*')
num() { echo "$counts" | sed "s/.*\"$1\":\([0-9]*\).*/\1/"; }
h=$(num hits); l=$(num late); m=$(num misses)
[ -n "$h" ] && [ -n "$m" ] || fail "no counts in the run's JSON"
printf '[sweep]\noutput = s.csv\ntrace = t.h5\nmodel = mixtral-8x7b\nplatform = rtx3090-pcie4\nprefetch = traced-topk:k=2\ncache = lfu:reset=0\nsched = gpu\ncache_experts = 40\ndistance = 2\ntrain = 0.34\n' > s.ini
rm -f s.csv
"$M" sweep s.ini >/dev/null || fail "sweep"
col() { head -1 s.csv | tr ',' '\n' | grep -nx "$1" | cut -d: -f1; }
row=$(sed -n 2p s.csv)
sh_=$(echo "$row" | cut -d, -f"$(col hits)"); sl=$(echo "$row" | cut -d, -f"$(col late)"); sm=$(echo "$row" | cut -d, -f"$(col misses)")
[ "$sh_ $sl $sm" = "$h $l $m" ] || fail "sweep gives $sh_ $sl $sm, the CLI $h $l $m"
printf 'trace;model;platform;prefetch;cache;sched;cache_experts;distance;train;hits;late;misses;on_cpu;hit_rate\nt.h5;mixtral-8x7b;rtx3090-pcie4;traced-topk:k=2;lfu:reset=0;gpu;40;2;0.34;;;;;\n' > g.csv
"$M" regress --golden g.csv --update >/dev/null || fail "regress --update"
got=$(sed -n 2p g.csv | cut -d';' -f10-12)
[ "$got" = "$h;$l;$m" ] || fail "regress gives $got, the CLI $h;$l;$m"
"$M" regress --golden g.csv >/dev/null || fail "regress does not pass on its own golden"
# a value the engine refuses is named in the words of where it came from: the flag
# on the command line, the key in a sweep spec and in a golden file
e=$("$M" run --trace t.h5 --cache-experts 40 --train 0.9 2>&1 >/dev/null)
[ "$e" = "moesim: --train 0.9 of 3 requests leaves none to replay" ] || fail "CLI message: $e"
sed 's/^train = 0.34$/train = 0.9/' s.ini > s9.ini && rm -f s.csv
"$M" sweep s9.ini >/dev/null 2>&1
grep -q ',train 0.9 of 3 requests leaves none to replay' s.csv || fail "sweep message: $(sed -n 2p s.csv)"
sed 's/;0\.34;[0-9]*;[0-9]*;[0-9]*;[0-9]*;[^;]*$/;0.9;;;;;/' g.csv > g9.csv
e=$("$M" regress --golden g9.csv --update 2>&1)
echo "$e" | grep -q 'train 0.9 of 3 requests leaves none to replay' || fail "regress message: $e"
echo "$e" | grep -q -- '--train' && fail "regress message names the flag: $e"
echo "ok: hits $h late $l misses $m through CLI, sweep and regress; messages name flag or key"
