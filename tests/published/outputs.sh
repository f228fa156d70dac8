#!/bin/sh
# moesim published's outputs (docs/published.md "Outputs"): checked before any
# run and written atomically.  Usage: outputs.sh MOESIM EXPECT_FAIL ROWS WORKDIR
moesim=$1; expect=$2; rows=$3; d=$4
rm -rf "$d" && mkdir -p "$d" || exit 1
# 1. an output that is a directory: refused before any run (no trace, no CSV made)
mkdir -p "$d/a/published.json"
sh "$expect" 1 "^moesim: published $d/a/published.json: " "$moesim" published --rows "$rows" --out "$d/a" || exit 1
[ -z "$(ls "$d/a" | grep -v '^published.json$')" ] || { echo "files written before the refusal: $(ls "$d/a")"; exit 1; }
# 2. a row file named like an output in --out: the input is never written over
mkdir -p "$d/b" && cp "$rows" "$d/b/published.csv" && cp "$rows" "$d/b/copy.ini"
sh "$expect" 1 "^moesim: published $d/b/published.csv: is the input file" "$moesim" published --rows "$d/b/published.csv" --out "$d/b" || exit 1
cmp -s "$d/b/published.csv" "$d/b/copy.ini" || { echo "the input was changed"; exit 1; }
# 3. a run that succeeds leaves the three outputs and no temporary or lock beside them
"$moesim" published --rows "$rows" --out "$d/c" > /dev/null || exit 1
for f in published.csv published.json published.png; do [ -s "$d/c/$f" ] || { echo "no $f"; exit 1; }; done
left=$(ls -A "$d/c" | grep -v -e '^published\.\(csv\|json\|png\)$' -e '^published-.*\.h5$')
[ -z "$left" ] || { echo "left behind: $left"; exit 1; }
echo ok
