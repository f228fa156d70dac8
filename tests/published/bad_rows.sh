#!/bin/sh
# Every bad-row case of docs/published.md "Row files": each file below is the
# good row with one change; moesim published must exit 1 with one line
# naming the file, the row and the key (tests/cli/expect_fail.sh).
# Usage: bad_rows.sh MOESIM EXPECT_FAIL WORKDIR
moesim=$1; expect=$2; d=$3
rm -rf "$d" && mkdir -p "$d" || exit 1
good='[row r]
source = test
system = no-cache
model = mixtral-8x7b
platform = a5000-pcie4
batch = 1
prompt_len = 8
output_len = 4
requests = 1
metric = tpot_ms
value = 500
read = text
role = evaluation'
fails=0
n=0
# case: sed expression applied to the good row, then the expected stderr (extended regex, after the path)
check() {
    n=$((n + 1))
    f="$d/bad$n.ini"
    printf '%s\n' "$good" | sed "$1" > "$f"
    if ! out=$(sh "$expect" 1 "^moesim: $f$2" "$moesim" published --rows "$f" --out "$d/out$n"); then
        echo "case $n ($1): $out"
        fails=$((fails + 1))
    fi
}
check '$a colour = red' ': row r: colour = red: unknown key$'
check '1a\  set = platform.h2d_bw=12GB/s' ': row r: set = platform.h2d_bw=12GB/s: an indented \(continuation\) line without its key.s line before it$'
check 's/^system = .*/system = nosuch/' ': row r: system = nosuch: unknown system \(known: no-cache, mixtral-offloading,'
check 's/^model = .*/model = nosuch/' ": row r: model = nosuch: unknown model 'nosuch'"
check 's/^platform = .*/platform = nosuch/' ": row r: platform = nosuch: unknown platform 'nosuch'"
check 's/^batch = .*/batch = 0/' ': row r: batch = 0: expected a whole number in \[1, 4096\]$'
check 's/^batch = .*/batch = 1.5/' ': row r: batch = 1.5: expected a whole number in \[1, 4096\]$'
check 's/^batch = .*/batch = one/' ': row r: batch = one: not a number$'
check 's/^value = .*/value = -1/' ': row r: value = -1: expected a number in \(0, 1e\+12\]$'
check 's/^value = .*/value = 0/' ': row r: value = 0: expected a number in \(0, 1e\+12\]$'
check '/^value = /d' ': row r: value: missing \(required\)$'
check '/^source = /d' ': row r: source: missing \(required\)$'
check '/^role = /d' ': row r: role: missing \(required\)$'
check '$a cpu_moe_layers = 2' ': row r: cpu_moe_layers = 2: system no-cache does not read this knob$'
check '$a slots_per_layer = 2' ': row r: slots_per_layer = 2: system no-cache does not read this knob$'
check '$a set = gpu.x=1' ": row r: set = gpu.x=1: entry 'gpu.x=1' is not platform.KEY=VALUE or model.KEY=VALUE$"
check '$a set = platform.h2d_bw' ": row r: set = platform.h2d_bw: entry 'platform.h2d_bw' is not platform.KEY=VALUE"
check '$a set = platform.nokey=1' ": row r: set = platform.nokey=1: unknown platform key 'nokey'"
check '$a set = platform.h2d_bw=-3GB/s' ': row r: set = platform.h2d_bw=-3GB/s: .*not a bandwidth'
check 's/^metric = .*/metric = speed/' ': row r: metric = speed: expected one of decode_tok_s, tpot_ms, ttft_ms, e2e_tok_s$'
check 's/^read = .*/read = guess/' ': row r: read = guess: expected one of text, table, plot$'
check 's/^role = .*/role = both/' ': row r: role = both: expected one of calibration, evaluation$'
check '$a batch = 2' ': row r: batch = 2: given twice \(first: 1\)$'
check '$a trace = nosuch.h5' ": row r: trace = nosuch.h5: no readable file $d/nosuch.h5$"
check '$a expert_bits = 0' ': row r: expert_bits = 0: expected a number in \(0, 64\]$'
check '$a dense_bits = 65' ': row r: dense_bits = 65: expected a number in \(0, 64\]$'
check 's/^requests = .*/requests = 0/' ': row r: requests = 0: expected a whole number in \[1, 100000\]$'
check '$a uncertainty = -1' ': row r: uncertainty = -1: expected a number in \[0, 1e\+12\]$'
check 's/^output_len = .*/output_len = 1/' ': row r: output_len = 1: metric tpot_ms needs at least 2 output tokens$'
check 's/^system = .*/system = moe-infinity/; $a gpu_expert_gb = -1' ': row r: gpu_expert_gb = -1: expected a number in \[0, 1e\+06\]$'
check 's/^system = .*/system = mixtral-offloading/; $a slots_per_layer = 9' ': row r: slots_per_layer = 9: more than the model.s 8 experts per layer$'
check 's/^system = .*/system = mixtral-offloading/; $a prefetch = 2' ': row r: prefetch = 2: expected a whole number in \[0, 1\]$'
check 's/^system = .*/system = llama-cpp/; $a cpu_moe_layers = 33' ': row r: cpu_moe_layers = 33: more than the model.s 32 MoE layers$'
check '1i x = 1' ':1: x = 1: outside a \[row NAME\] section$'
check 's/^\[row r\]/[rows r]/' ':1: \[rows r\]: expected \[row NAME\]$'
check 's/^\[row r\]/[row r\/1]/' ":1: \[row r/1\]: a row name is letters, digits, '.', '-' and '_'$"
check '$a [row r]' ':14: \[row r\]: row r is also in '
check 's/^batch = .*/batch = 2/' ': row r: requests = 1: fewer requests than batch = 2: the batch would never fill$'
check 's/^batch = .*/batch = 8/; /^requests = /d' ': row r: requests = 4: fewer requests than batch = 8: the batch would never fill \(4 is the default\)$'
echo "$n cases, $fails failed"
[ "$fails" = 0 ]
