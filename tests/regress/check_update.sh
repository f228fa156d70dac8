#!/bin/sh
# Usage: check_update.sh MOESIM GOLDEN WORKDIR
# `moesim regress --update` on a copy of GOLDEN (tolerance.csv: lru's and
# fifo's hits are off by 20) rewrites exactly those two rows with the counts
# moesim gives, keeps comments and the other rows byte for byte, leaves no
# temp file, and the updated copy then passes.
moesim=$1; golden=$2; dir=$3
fail() { echo "check_update: $*"; exit 1; }
copy=$dir/update.csv
rm -f "$copy" "$copy".tmp.* "$dir"/.update.csv.tmp.*
cp "$golden" "$copy" || fail "cannot copy $golden"
"$moesim" regress --golden "$copy" --update || fail "--update exited $?"
G="gen:model=mixtral-8x7b,seed=3,requests=4"
[ "$(sed -n 5p "$copy")" = "$G;mixtral-8x7b;none;lru;gpu;64;;1;auto;13712;0;33904;0;0.287970" ] || fail "line 5: $(sed -n 5p "$copy")"
[ "$(sed -n 6p "$copy")" = "$G;mixtral-8x7b;none;fifo;gpu;64;;1;auto;10465;0;37151;0;0.219779" ] || fail "line 6: $(sed -n 6p "$copy")"
[ "$(sed '5,6d' "$copy")" = "$(sed '5,6d' "$golden")" ] || fail "lines other than 5 and 6 changed"
[ "$(wc -l < "$copy")" = "$(wc -l < "$golden")" ] || fail "line count changed"
ls "$copy".tmp.* "$dir"/.update.csv.tmp.* >/dev/null 2>&1 && fail "a temp file was left behind"
out=$("$moesim" regress --golden "$copy") || fail "the updated golden does not pass: $out"
echo "ok: $out"
