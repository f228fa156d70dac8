#!/bin/sh
# --fit recovers known constants (docs/published.md "Fit"): rows whose
# measured values are moesim's own predictions with the mixtral-offloading
# framework at layer_s = 3e-3, iteration_s = 2e-2 (a profile folder holding
# that framework instead of the shipped one) are fitted from layer_s = 2e-3,
# iteration_s = 5e-3 (another such folder); the fit must find both within 1 %, write them with their
# provenance, and the evaluation row (never seen by the fit) must then be
# predicted within 0.1 %.
# Usage: fit_recovery.sh MOESIM PROFILES_DIR WORKDIR
moesim=$1; profiles=$2; d=$3
rm -rf "$d" && mkdir -p "$d" || exit 1
set_costs() { # folder layer_s iteration_s: the mixtral-offloading framework of a profile copy
    cp -rL "$profiles" "$1" && sed -i "/^\[source\]/,\$!{s/^layer_s = .*/layer_s = $2/; s/^iteration_s = .*/iteration_s = $3/}" "$1/frameworks/mixtral-offloading.ini"
}
set_costs "$d/prof" 3e-3 2e-2 && set_costs "$d/start" 2e-3 5e-3 || exit 1
row() { # name system model metric role extra
    printf '[row %s]\nsource = test\nsystem = %s\nmodel = %s\nplatform = a5000-pcie4\nbatch = 1\nprompt_len = 8\noutput_len = 4\nrequests = 1\nmetric = %s\nvalue = 1\nread = text\nrole = %s\n%s\n\n' "$@"
}
{
    row cal-mixtral no-cache mixtral-8x7b tpot_ms calibration ''
    row cal-qwen no-cache qwen1.5-moe-a2.7b tpot_ms calibration ''
    row cal-dsv2 no-cache deepseek-v2-lite ttft_ms calibration ''
    row eval-mo mixtral-offloading mixtral-8x7b decode_tok_s evaluation 'slots_per_layer = 2'
} > "$d/shape.ini"
MOESIM_PROFILE_DIR="$d/prof" "$moesim" published --rows "$d/shape.ini" --out "$d/truth" --json > "$d/truth.json" || exit 1
# the predictions, in row order, become the measured values
awk '/"predicted":/ { gsub(/[^0-9.e+-]/, "", $2); print $2 }' "$d/truth.json" > "$d/values.txt"
[ "$(wc -l < "$d/values.txt")" = 4 ] || { echo "expected 4 predictions"; cat "$d/truth.json"; exit 1; }
awk 'NR == FNR { v[++n] = $1; next } /^value = 1/ { print "value = " v[++k]; next } { print }' \
    "$d/values.txt" "$d/shape.ini" > "$d/rows.ini"
MOESIM_PROFILE_DIR="$d/start" "$moesim" published --rows "$d/rows.ini" --fit --out "$d/fit" > "$d/fit.txt" || { cat "$d/fit.txt"; exit 1; }
cat "$d/fit.txt"
fitted="$d/fit/frameworks/mixtral-offloading.ini"
[ -f "$fitted" ] || { echo "no $fitted"; exit 1; }
within() { # value target tolerance
    awk -v x="$1" -v t="$2" -v tol="$3" 'BEGIN { e = x / t - 1; if (e < 0) e = -e; exit !(e <= tol) }'
}
ls=$(sed -n '1,/^\[source\]/s/^layer_s = //p' "$fitted"); it=$(sed -n '1,/^\[source\]/s/^iteration_s = //p' "$fitted")
within "$ls" 3e-3 0.01 || { echo "layer_s $ls, expected 3e-3"; exit 1; }
within "$it" 2e-2 0.01 || { echo "iteration_s $it, expected 2e-2"; exit 1; }
grep -q '^layer_s = derived fitted by moesim published --fit' "$fitted" && tr '\n' ' ' < "$fitted" | sed 's/ ; fit: / /g' | grep -q 'fitted by `moesim published --rows .* --fit --out .*`: GSL Nelder-Mead.* of 3 calibration rows: cal-mixtral cal-qwen cal-dsv2;' || { echo "no provenance"; cat "$fitted"; exit 1; }
# the rest of the profile is the shipped one: its comments and kept keys with their sources
grep -q '^; host_memory: pinned: host storages made with pin_memory' "$fitted" && grep -q '^writeback = estimate 1: a load is a swap' "$fitted" && grep -q '^surplus = stream$' "$fitted" || { echo "the profile's comments or kept keys were lost"; cat "$fitted"; exit 1; }
ratio=$(awk -F, '$1 == "eval-mo" { print $7 }' "$d/fit/published.csv")
within "$ratio" 1 0.001 || { echo "evaluation ratio $ratio after the fit, expected 1"; exit 1; }
# the shipped profile is untouched
cmp -s "$profiles/frameworks/mixtral-offloading.ini" "$(dirname "$0")/../../sim/profiles/frameworks/mixtral-offloading.ini" || { echo "shipped profile changed"; exit 1; }
echo "ok: layer_s $ls, iteration_s $it, evaluation ratio $ratio"
