#!/bin/sh
# moesim trace fit --against MODEL (traces/synth/fit_targets.h): a short fit
# writes a [routing] section and its [source] lines that a profile takes as
# they are, the search lowers its cost, the same flags give the same file,
# and bad flags are one line.
# usage: fit_against.sh MOESIM SOURCE_DIR WORK_DIR
set -u
moesim=$1; src=$2; work=$3
mkdir -p "$work" && cd "$work" || exit 2
fail=0
flags="--trial-requests 2 --trial-seeds 1 --max-evals 8"
"$moesim" trace fit --against mixtral-8x7b -o r1.ini $flags > out1.txt || { echo "FAIL: fit failed"; fail=1; }
"$moesim" trace fit --against mixtral-8x7b -o r2.ini $flags > /dev/null
cmp -s r1.ini r2.ini || { echo "FAIL: the same flags gave another file"; fail=1; }
grep -q '^\[routing\]$' r1.ini && grep -q '^routing.decode_recall = fitted to targets/mixtral-8x7b.ini' r1.ini &&
    grep -q '^pref_drift = [0-9]' r1.ini && grep -q '^routing.pref_drift = fitted to targets/mixtral-8x7b.ini' r1.ini ||
    { echo "FAIL: no [routing] section or sources in r1.ini"; fail=1; }
# cost start -> result, from the summary line: the search may not make it worse
awk '/cost/ { for (i = 1; i <= NF; i++) if ($i == "->") { a = $(i-1); b = $(i+1); sub(/;.*/, "", b) } }
     END { exit !(b + 0 <= a + 0) }' out1.txt || { echo "FAIL: cost went up: $(grep cost out1.txt)"; fail=1; }
# the section goes into a copy of the profile as it is
base="$src/sim/profiles/models/mixtral-8x7b.ini"
# (the shipped profile's own [routing] section and citations replaced)
{ sed '/^\[routing\]/,/^$/d; /^\[source\]/,$d' "$base"; sed -n '/^\[routing\]/,/^$/p' r1.ini;
  sed -n '/^\[source\]/,$p' "$base" | grep -v '^routing\.'; sed -n '/^\[source\]/,$p' r1.ini | grep '^routing\.'; } > fitted.ini
"$moesim" trace gen --model fitted.ini -o t.h5 --requests 2 --set prompt_median=8 --set output_median=8 > /dev/null ||
    { echo "FAIL: the fitted section does not load"; fail=1; }
one() { # RC WANT ARGS...: exit RC and one line of stderr holding WANT
    rc=$1; want=$2; shift 2
    err=$("$moesim" trace fit "$@" 2>&1 >/dev/null); got=$?
    [ "$got" = "$rc" ] || { echo "FAIL $*: exit $got, expected $rc"; fail=1; }
    case $err in *"$want"*) ;; *) echo "FAIL $*: '$err' lacks '$want'"; fail=1 ;; esac
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || { echo "FAIL $*: more than one line"; fail=1; }
}
one 2 "no TRACE ('x.h5')" --against mixtral-8x7b x.h5 -o a.ini
one 2 "--passes and --decode-phases go with a TRACE" --against mixtral-8x7b --passes 2 -o a.ini
one 2 "--trial-requests and --max-evals go with --against MODEL" x.h5 --max-evals 3 -o a.ini
one 2 "--trial-requests '0' is not an integer in [1, 4096]" --against mixtral-8x7b --trial-requests 0 -o a.ini
one 1 "no-such-model" --against no-such-model -o a.ini
one 1 "targets/gpt-oss-120b.ini" --against gpt-oss-120b -o a.ini
[ ! -e a.ini ] || { echo "FAIL: a.ini written by a failed fit"; fail=1; }
# the model profile is an input: -o naming it is refused before any work, the file unchanged
cp "$base" own.ini && cp own.ini own.bak
one 1 "own.ini: is the input file" --against "$work/own.ini" -o "$work/own.ini"
cmp -s own.ini own.bak || { echo "FAIL: the profile was changed"; fail=1; }
[ "$fail" = 0 ] && echo "fit_against: all checks passed"
exit $fail
