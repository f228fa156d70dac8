#!/bin/sh
# regress killed by SIGTERM while it runs the points of a golden: the temp
# folder with its generated source0.h5 is removed (docs/safety.md).
# check_signal.sh MOESIM GOLDEN WORKDIR
M=$1; G=$2; W=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$W" && mkdir -p "$W/tmp" || fail "mkdir $W"
TMPDIR=$W/tmp "$M" regress --golden "$G" >/dev/null 2>&1 &
pid=$!; n=0
while ! ls "$W"/tmp/moesim-regress-*/source0.h5 >/dev/null 2>&1 && [ $n -lt 5000 ]; do sleep 0.002; n=$((n + 1)); done
ls "$W"/tmp/moesim-regress-*/source0.h5 >/dev/null 2>&1 || { kill $pid; fail "no source0.h5 seen"; }
kill -TERM $pid; wait $pid; rc=$?
[ "$rc" = 143 ] || fail "exit status $rc after SIGTERM (expected 143; did it end first?)"
left=$(ls -A "$W/tmp")
[ -z "$left" ] || fail "left behind in TMPDIR: $left $(ls -A "$W"/tmp/* 2>/dev/null)"
echo "ok: nothing left"
