#!/bin/sh
# `moesim claims --jobs N`: claims run in worker processes give the bytes of
# --jobs 1 (table, claims.csv, claims_values.csv), sensitivity runs included.
# Usage: claims_jobs.sh MOESIM DIR
M=$1; D=$2
set -u
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$D" && mkdir -p "$D" && cd "$D" || exit 1
only=fmoe-entropy,fmoe-caches,fmoe-store-size,moeinf-eamc-search
for n in 1 3; do
    "$M" claims --out j$n --requests 4 --only $only --jobs $n > j$n.txt 2> j$n.err || fail "--jobs $n: $(cat j$n.err)"
done
grep -q '^4 claims: ' j1.txt || fail "no summary line: $(cat j1.txt)"
grep -q 'sensitivity: ' j1.txt || fail "no sensitivity run in the set (the test would miss the memo path)"
cmp j1.txt j3.txt || fail "the table differs between --jobs 1 and --jobs 3"
for f in claims.csv claims_values.csv; do
    cmp j1/$f j3/$f || fail "$f differs between --jobs 1 and --jobs 3"
done
"$M" claims --jobs 0 2>&1 | grep -q "claims: --jobs 0: expected a whole number in \[1, 4096\]" || fail "--jobs 0 accepted"
# a claim that cannot run ends the command with the same line from a worker as in-process
for n in 1 2; do
    "$M" claims --out e$n --requests 4 --only fmoe-entropy,fmoe-store-size --platform nope --jobs $n > /dev/null 2> e$n.err
    [ $? = 1 ] || fail "--platform nope --jobs $n: not exit 1"
done
grep -q "^moesim: claim fmoe-entropy: unknown platform 'nope'" e1.err || fail "error line: $(cat e1.err)"
cmp e1.err e2.err || fail "the error differs between --jobs 1 and --jobs 2"
echo "ok: --jobs 3 gives the bytes of --jobs 1"
