#!/bin/sh
# Usage: check_worse.sh MOESIM_WORSE MOESIM GOLDEN
# moesim_worse (LFU evicting the most frequently used expert) must fail
# `moesim regress` with exit code 1 and a diff that lists only LFU points, at
# least one of them a REGRESSION with hits going down; the real moesim must
# pass on the same golden.
worse=$1; good=$2; golden=$3
fail() { echo "check_worse: $*"; exit 1; }
out=$("$worse" regress --golden "$golden" 2>&1); rc=$?
printf '%s\n' "$out"
[ "$rc" = 1 ] || fail "moesim_worse regress exited $rc, expected 1"
# the diff rows: between the column header and the blank line
rows=$(printf '%s\n' "$out" | awk '/^status +line +point/ {on=1; next} /^$/ {on=0} on')
[ -n "$rows" ] || fail "no diff table"
other=$(printf '%s\n' "$rows" | grep -v ' none+lfu\(:reset=0\)\?+gpu ')
[ -z "$other" ] || fail "points other than LFU's in the diff: $other"
printf '%s\n' "$rows" | grep -Eq '^REGRESSION .* none\+lfu.* hits +[0-9]+ +[0-9]+ +-[0-9]+$' ||
  fail "no REGRESSION row of an LFU point with hits going down"
printf '%s\n' "$rows" | grep -Eq '^REGRESSION .* hit_rate +0\.[0-9]{6} +0\.[0-9]{6} +-0\.[0-9]{6}$' ||
  fail "no REGRESSION row with the hit rate going down"
printf '%s\n' "$out" | tail -n 1 | grep -Eq '[1-9][0-9]* regressed.*: FAIL$' || fail "summary does not say FAIL"
gout=$("$good" regress --golden "$golden" 2>&1); grc=$?
[ "$grc" = 0 ] || fail "moesim regress exited $grc on the same golden: $gout"
printf '%s\n' "$gout" | grep -q ': PASS$' || fail "moesim regress did not PASS: $gout"
echo "ok: moesim_worse fails with an LFU diff, moesim passes"
