#!/bin/sh
# A model profile's [routing] section (docs/generator.md "Per-model routing"):
# its knobs act as trace gen's defaults (the same bytes as --set with the same
# values), --set still overrides them, and every bad section is one line
# naming the file, line and knob.
# usage: routing_profile.sh MOESIM SOURCE_DIR WORK_DIR
set -u
moesim=$1; src=$2; work=$3
mkdir -p "$work" && cd "$work" || exit 2
fail=0
base="$src/sim/profiles/models/mixtral-8x7b.ini"
# prof NAME ROUTING_LINES SOURCE_LINES: the Mixtral profile with its own
# [routing] section and citations replaced by these
prof() {
    { sed '/^\[routing\]/,/^$/d; /^\[source\]/,$d' "$base"; printf '[routing]\n%b' "$2"; printf '\n';
      sed -n '/^\[source\]/,$p' "$base" | grep -v '^routing\.'; printf '%b' "$3"; } > "$1.ini"
}
gen() { "$moesim" trace gen --requests 3 --seed 5 --set prompt_median=8 --set output_median=8 "$@"; }
expect_err() { # NAME WANT: trace gen with NAME.ini fails with exit 1 and one line holding WANT
    out=$(gen --model "$1.ini" -o "$1.h5" 2>&1 >/dev/null); rc=$?
    n=$(printf '%s\n' "$out" | wc -l)
    case $out in *"$2"*) ;; *) echo "FAIL $1: '$out' lacks '$2'"; fail=1 ;; esac
    [ "$rc" = 1 ] && [ "$n" = 1 ] || { echo "FAIL $1: exit $rc, $n lines"; fail=1; }
    [ ! -e "$1.h5" ] || { echo "FAIL $1: output left behind"; fail=1; }
}
cited='routing.pref_alpha = fitted test\nrouting.decode_reuse = estimate test\n'
prof good 'pref_alpha = 6\ndecode_reuse = 0\n' "$cited"
gen --model good.ini -o good.h5 > /dev/null || { echo "FAIL good: trace gen failed"; fail=1; }
prof none '' ''
gen --model none.ini -o set.h5 --set pref_alpha=6 --set decode_reuse=0 > /dev/null
gen --model none.ini -o plain.h5 > /dev/null
gen --model good.ini -o over.h5 --set pref_alpha=0.3 --set decode_reuse=0.2 > /dev/null
"$moesim" trace stats good.h5 --json > good.json && "$moesim" trace stats set.h5 --json > set.json &&
    "$moesim" trace stats plain.h5 --json > plain.json && "$moesim" trace stats over.h5 --json > over.json
# the stats name the file; everything else is the routing
strip() { grep -v '"file"\|"path"\|sha256\|"provenance"\|"moesim' "$1"; }
[ "$(strip good.json)" = "$(strip set.json)" ] || { echo "FAIL: [routing] knobs differ from --set with the same values"; fail=1; }
[ "$(strip good.json)" != "$(strip plain.json)" ] || { echo "FAIL: [routing] knobs changed nothing"; fail=1; }
[ "$(strip over.json)" = "$(strip plain.json)" ] || { echo "FAIL: --set does not override [routing]"; fail=1; }

prof nosource 'pref_alpha = 6\ndecode_reuse = 0\n' 'routing.pref_alpha = fitted test\n'
expect_err nosource "nosource.ini:$(grep -n '^decode_reuse' nosource.ini | cut -d: -f1): [routing] decode_reuse: no [source] routing.decode_reuse entry"
prof unknown 'pref_alpha = 6\nbogus_knob = 1\n' 'routing.pref_alpha = fitted test\nrouting.bogus_knob = estimate x\n'
expect_err unknown "unknown.ini:$(grep -n '^bogus_knob' unknown.ini | cut -d: -f1): [routing] bogus_knob: unknown knob"
prof range 'pref_alpha = 1000\n' 'routing.pref_alpha = fitted test\n'
expect_err range "range.ini:$(grep -n '^pref_alpha' range.ini | cut -d: -f1): [routing] pref_alpha = 1000:"
prof drift 'pref_drift = 1.5\n' 'routing.pref_drift = fitted test\n'
expect_err drift "drift.ini:$(grep -n '^pref_drift' drift.ini | cut -d: -f1): [routing] pref_drift = 1.5: knob pref_drift=1.5 is out of range [0, 1]"
prof runknob 'seed = 3\n' 'routing.seed = estimate x\n'
expect_err runknob "runknob.ini:$(grep -n '^seed' runknob.ini | cut -d: -f1): [routing] seed: not a routing knob"
prof status 'pref_alpha = 6\n' 'routing.pref_alpha = guessed test\n'
expect_err status "[source] routing.pref_alpha = 'guessed test': expected 'fitted <target, command>' or 'estimate <why>'"
prof orphan 'pref_alpha = 6\n' 'routing.pref_alpha = fitted test\nrouting.gate_alpha = fitted test\n'
expect_err orphan "[source] routing.gate_alpha: no knob gate_alpha in [routing] above"
[ "$fail" = 0 ] && echo "routing_profile: all checks passed"
exit $fail
