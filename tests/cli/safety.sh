#!/bin/sh
# Data-safety checks of moesim's outputs (docs/safety.md), one case per
# ctest: safety.sh MOESIM WORKDIR CASE.  Each case prints what failed and
# exits 1, or exits 0; 77 means skipped (ctest SKIP_RETURN_CODE).
M=$1; W=$2; CASE=$3
set -u
mkdir -p "$W" && cd "$W" || exit 1
fail() { echo "FAIL ($CASE): $*"; exit 1; }

# A small trace (2 requests) generated once per case folder.
trace() {
    [ -s t.h5 ] || "$M" trace gen --model mixtral-8x7b -o t.h5 --seed 5 --requests 2 --set prompt_max=16 \
        --set output_max=8 >/dev/null 2>&1 || fail "cannot generate the fixture trace"
}

# expect_refused CODE REGEX cmd...: one line on stderr matching REGEX, exit CODE.
expect_refused() {
    code=$1; regex=$2; shift 2
    err=$("$@" 2>&1 >/dev/null); rc=$?
    [ "$rc" = "$code" ] || fail "exit $rc (expected $code) from: $*; stderr: $err"
    [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] || fail "not one line on stderr: $err"
    printf '%s\n' "$err" | grep -Eq -- "$regex" || fail "stderr '$err' does not match '$regex'"
}

# sweep_digests TRACE CACHE FILE_SHA CONTENT_SHA: a one-point sweep of TRACE has the cells
# trace_sha256 = FILE_SHA and trace_content_sha256 = CONTENT_SHA (one of them empty)
sweep_digests() {
    printf '[sweep]\noutput = s.csv\ntrace = %s/%s\ncache_experts = %s\n' "$W" "$1" "$2" > s.ini
    rm -f s.csv
    "$M" sweep s.ini >/dev/null 2>&1 || fail "sweep of $1 failed"
    for name in trace_sha256 trace_content_sha256; do
        col=$(head -1 s.csv | tr ',' '\n' | grep -nx $name | cut -d: -f1)
        [ -n "$col" ] || fail "no $name column"
        [ "$(sed -n 2p s.csv | cut -d, -f"$col")" = "$3" ] || fail "sweep row's $name is not '$3': $(sed -n 2p s.csv)"
        shift
    done
}

# no temporaries of ours left in the folder
no_temps() {
    left=$(ls -A | grep '\.tmp\.' || true)
    [ -z "$left" ] || fail "temporaries left behind: $left"
}

case $CASE in
output_is_input)
    # --events naming the trace (directly, through a symlink, through a hard link)
    trace; cp t.h5 keep.h5; rm -f sl.h5 hl.h5; ln -s t.h5 sl.h5; ln t.h5 hl.h5
    for out in t.h5 sl.h5 hl.h5 ./t.h5; do
        expect_refused 1 "^moesim: --events $out: is the input file .*; refusing to overwrite it$" \
            "$M" run --trace t.h5 --cache-experts 64 --events "$out"
    done
    expect_refused 1 "is the input file" "$M" run --trace sl.h5 --cache-experts 64 --events hl.h5
    cmp -s t.h5 keep.h5 || fail "the trace changed"
    # a profile is an input too
    cp "$4" plat.ini
    expect_refused 1 "^moesim: --events plat.ini: is the input file" \
        "$M" run --trace t.h5 --platform plat.ini --cache-experts 64 --events plat.ini
    # validate's CSVs (refused before the backend starts)
    expect_refused 1 "^moesim: --iterations-csv t.h5: is the input file" \
        "$M" validate --backend host --trace t.h5 --model mixtral-8x7b --platform "$4" --cache-experts 64 \
        --expert-scale 0.00390625 --iterations-csv t.h5
    cmp -s t.h5 keep.h5 || fail "the trace changed"
    no_temps ;;
device_output)
    trace
    expect_refused 1 "^moesim: --events /dev/null: is a character device, not a regular file; refusing to write it$" \
        "$M" run --trace t.h5 --cache-experts 64 --events /dev/null
    mkdir -p adir
    expect_refused 1 "^moesim: --events adir: is a directory" "$M" run --trace t.h5 --cache-experts 64 --events adir
    expect_refused 1 "names a folder" "$M" run --trace t.h5 --cache-experts 64 --events adir/
    rm -f fifo; mkfifo fifo
    expect_refused 1 "^moesim: --events fifo: is a fifo" "$M" run --trace t.h5 --cache-experts 64 --events fifo
    expect_refused 1 "^moesim: calibrate: --out /dev/null: is a character device" \
        "$M" calibrate --backend host --out /dev/null
    touch afile
    expect_refused 1 "^moesim: figures: --out afile: is a regular file, not a folder" \
        "$M" figures --trace t.h5 --model mixtral-8x7b --out afile --only entropy-layer
    expect_refused 1 "^moesim: demo: --out afile: is a regular file, not a folder" "$M" demo --out afile
    no_temps ;;
dev_full)
    # every command that prints a result fails when standard output cannot be written
    [ -w /dev/full ] || { echo "no writable /dev/full: skipped"; exit 77; }
    trace
    # a golden of this build's own results, so that regress itself passes
    grep -v '^gen:' "$5" > g.csv
    grep '^gen:' "$5" | grep ';none;lru;gpu;' >> g.csv
    "$M" regress --golden g.csv --update >/dev/null || fail "cannot make the golden"
    # --offline: the trace's arrivals overload this setup, and that warning is a second stderr line
    for cmd in "list" "--help" "run --trace t.h5 --cache-experts 64 --offline" "run --trace t.h5 --cache-experts 64 --offline --json" \
        "trace info t.h5" "trace validate t.h5" "trace stats t.h5" "trace stats t.h5 --json" "figures --list" \
        "regress --golden g.csv" "regress --golden g.csv --json" "sweep --help"; do
        # shellcheck disable=SC2086
        err=$("$M" $cmd 2>&1 >/dev/full); rc=$?
        [ "$rc" != 0 ] || fail "'moesim $cmd > /dev/full' exited 0"
        [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] || fail "'moesim $cmd > /dev/full': not one line: $err"
        printf '%s\n' "$err" | grep -Eq "^moesim: standard output: (No space left on device|Input/output error)$" ||
            fail "'moesim $cmd > /dev/full': stderr is not the write error: $err"
    done ;;
atomic_events)
    # an output appears only whole: a run that fails leaves no file and no temporary
    trace
    rm -f e.csv
    expect_refused 1 "oracle needs --distance >= 1" \
        "$M" run --trace t.h5 --prefetch oracle --distance 0 --cache-experts 64 --events e.csv
    [ ! -e e.csv ] || fail "a failed run left e.csv"
    # a successful one replaces an existing file, keeping its mode
    echo old > e.csv; chmod 640 e.csv
    "$M" run --trace t.h5 --cache-experts 64 --events e.csv >/dev/null || fail "run failed"
    [ "$(stat -c %a e.csv)" = 640 ] || fail "mode of e.csv changed to $(stat -c %a e.csv)"
    head -1 e.csv | grep -q '^# moesim ' || fail "no provenance line in e.csv"
    sed -n 2p e.csv | grep -q '^kind,start_s,end_s,iteration,layer,expert,phase,bytes' || fail "header is not line 2"
    no_temps ;;
signal_cleanup)
    # SIGTERM while --events is being written: the temporary is removed, the old file kept
    [ -s "$6" ] || { echo "no real trace $6: skipped"; exit 77; }
    "$M" trace import --format route-csv "$6" q.h5 >/dev/null 2>&1 || fail "cannot import $6"
    echo old > e.csv
    "$M" run --trace q.h5 --prefetch fmoe --cache fmoe --cache-bytes 4000MiB --train 0.5 --events e.csv \
        >/dev/null 2>&1 &
    pid=$!
    n=0
    while [ -z "$(ls -A | grep '^\.e\.csv\.tmp\.' || true)" ] && kill -0 $pid 2>/dev/null && [ $n -lt 400 ]; do
        sleep 0.05; n=$((n + 1))
    done
    [ -n "$(ls -A | grep '^\.e\.csv\.tmp\.' || true)" ] || { kill $pid 2>/dev/null; fail "no temporary seen"; }
    kill -TERM $pid; wait $pid; rc=$?
    [ "$rc" = 143 ] || fail "exit status $rc after SIGTERM (expected 143)"
    [ "$(cat e.csv)" = old ] || fail "e.csv was replaced or damaged"
    no_temps ;;
figures_disk_full)
    # a figure that does not fit: one line, exit 1, no partial image and no temporary
    [ "$(id -u)" = 0 ] || { echo "mounting a small tmpfs needs root: skipped"; exit 77; }
    trace
    mkdir -p full
    mount -t tmpfs -o size=24k tmpfs full 2>/dev/null || { echo "cannot mount a tmpfs here: skipped"; exit 77; }
    trap 'umount "$W/full" 2>/dev/null' EXIT
    expect_refused 1 "^moesim: figures: entropy-layer: gnuplot on plots/fig_entropy_layer.gp: full/entropy-layer.png: the plotting program left an incomplete PNG \([0-9]+ bytes; is the disk full\?\)$" \
        "$M" figures --trace t.h5 --model mixtral-8x7b --out full --only entropy-layer
    [ ! -e full/entropy-layer.png ] || fail "a partial PNG was left"
    left=$(ls -A full | grep '\.tmp\.' || true)
    [ -z "$left" ] || fail "temporaries left in full/: $left"
    ;;
events_stdout)
    # --events - would put the CSV and the table (or JSON) on one standard output: refused
    trace
    expect_refused 2 "^moesim: run: --events -: the run prints its table to standard output; write the events to a file$" \
        "$M" run --trace t.h5 --cache-experts 64 --events -
    expect_refused 2 "^moesim: run: --events -: the run prints its JSON to standard output" \
        "$M" run --trace t.h5 --cache-experts 64 --events - --json
    expect_refused 2 "^moesim: validate: --iterations-csv -: validate prints its report to standard output" \
        "$M" validate --backend host --trace t.h5 --model mixtral-8x7b --platform "$4" --cache-experts 64 \
        --expert-scale 0.00390625 --iterations-csv - ;;
events_disk_full)
    # --events on a full disk: the run stops at the first failed write and says why (ENOSPC, not
    # EIO), leaving no file and no temporary
    [ "$(id -u)" = 0 ] || { echo "mounting a small tmpfs needs root: skipped"; exit 77; }
    trace
    mkdir -p full
    mount -t tmpfs -o size=64k tmpfs full 2>/dev/null || { echo "cannot mount a tmpfs here: skipped"; exit 77; }
    trap 'umount "$W/full" 2>/dev/null' EXIT
    expect_refused 1 "^moesim: full/e.csv: write failed: No space left on device$" \
        "$M" run --trace t.h5 --cache-experts 64 --events full/e.csv
    [ -z "$(ls -A full)" ] || fail "left in full/: $(ls -A full)"
    # one failed write() only (strace, when there is one: the run used to go on and fail 47 more)
    if command -v strace >/dev/null 2>&1 && strace -o /dev/null true 2>/dev/null; then
        strace -f -e trace=write -o st.log "$M" run --trace t.h5 --cache-experts 64 --events full/e.csv 2>/dev/null
        [ "$(grep -c ENOSPC st.log)" = 1 ] || fail "$(grep -c ENOSPC st.log) writes failed with ENOSPC, expected 1"
    fi ;;
undefined_metrics)
    # a prefill-only trace: TPOT and the decode hit rate have no sample
    "$M" trace gen --model mixtral-8x7b -o p.h5 --seed 5 --requests 2 --set prompt_max=16 --set output_min=0 \
        --set output_max=0 >/dev/null 2>&1 || fail "cannot generate the prefill-only trace"
    j=$("$M" run --trace p.h5 --cache-experts 64 --json | tr -d ' \t\n') || fail "run failed"
    echo "$j" | grep -q '"tpot_ms_mean":null,"tpot_ms_p50":null,"tpot_ms_p99":null,"tpot_samples":0' ||
        fail "TPOT of a prefill-only trace is not null: $j"
    echo "$j" | grep -q '"ttft_samples":2,' || fail "ttft_samples is not 2"
    echo "$j" | grep -q '"decode":{"hit_rate":null,"hits":0,' || fail "decode hit rate over 0 activations is not null"
    t=$("$M" run --trace p.h5 --cache-experts 64) || fail "run failed"
    echo "$t" | grep -q 'TPOT mean n/a (p99 n/a)' || fail "table does not say n/a: $t"
    echo "$t" | grep -Eq '^ +decode +0 +0 +0 +0 +n/a ' || fail "decode row does not say n/a: $t"
    # a one-request trace whose prefill falls in the training split: no TTFT sample
    "$M" trace gen --model mixtral-8x7b -o one.h5 --seed 5 --requests 1 --set prompt_max=16 --set output_min=8 \
        --set output_max=8 >/dev/null 2>&1 || fail "cannot generate the one-request trace"
    j=$("$M" run --trace one.h5 --cache-experts 64 --train 0.5 --json | tr -d ' \t\n') || fail "run failed"
    echo "$j" | grep -q '"ttft_ms_mean":null,"ttft_ms_p50":null,"ttft_ms_p99":null,"ttft_samples":0' ||
        fail "TTFT without a replayed prefill is not null: $j"
    # no prefetcher: precision has no sample
    echo "$j" | grep -q '"precision":null' || fail "prefetch precision without copies is not null"
    # a sweep row leaves such cells empty
    printf '[sweep]\noutput = s.csv\ntrace = %s/p.h5\ncache_experts = 64\n' "$W" > s.ini
    rm -f s.csv
    "$M" sweep s.ini >/dev/null || fail "sweep failed"
    col=$(head -1 s.csv | tr ',' '\n' | grep -nx tpot_ms_mean | cut -d: -f1)
    [ -n "$col" ] || fail "no tpot_ms_mean column"
    [ -z "$(sed -n 2p s.csv | cut -d, -f"$col")" ] || fail "tpot_ms_mean cell is not empty: $(sed -n 2p s.csv)" ;;
provenance)
    # a format v2 trace is named by its stored content digest, the one `trace info` reports, never by
    # a hash of its bytes; the model and platform files by the SHA-256 of their bytes
    trace
    csum=$("$M" trace info t.h5 --json | tr -d ' \t\n' | sed -n 's/.*"version":2,"content_sha256":"\([0-9a-f]\{64\}\)".*/\1/p')
    [ -n "$csum" ] || fail "trace info --json reports no content_sha256"
    j=$("$M" run --trace t.h5 --cache-experts 64 --json | tr -d ' \t\n') || fail "run failed"
    echo "$j" | grep -q "\"provenance\":{\"moesim\":\"[0-9][^\"]*\",\"commit\":\"[^\"]*\",\"trace\":{\"path\":\"t.h5\",\"content_sha256\":\"$csum\",\"verified\":false}" ||
        fail "no provenance with the trace's content_sha256 $csum: $j"
    psum=$(sha256sum "$4" | cut -d' ' -f1)
    "$M" run --trace t.h5 --platform "$4" --cache-experts 64 --json | tr -d ' \t\n' |
        grep -q "\"platform\":{\"path\":\"$4\",\"sha256\":\"$psum\"}" || fail "no platform sha256 $psum"
    "$M" run --trace t.h5 --platform "$4" --cache-experts 64 --events ev.csv >/dev/null || fail "run --events failed"
    head -1 ev.csv | grep -q "^# moesim [^;]* commit [^;]*; trace t.h5 content_sha256 $csum (stored, unverified); platform $4 sha256 $psum\$" ||
        fail "events CSV's first line does not name the content digest $csum: $(head -1 ev.csv)"
    sweep_digests t.h5 64 "" "$csum"
    "$M" figures --trace t.h5 --model mixtral-8x7b --out fg --only entropy-layer >/dev/null || fail "figures failed"
    head -1 fg/entropy_layer.csv | grep -q "^# moesim [^;]* commit [^;]*; trace t.h5 content_sha256 $csum (stored, unverified); platform [^;]* sha256 [0-9a-f]\{64\}\$" ||
        fail "figures CSV's first line does not name the content digest $csum: $(head -1 fg/entropy_layer.csv)"
    for c in info stats; do
        "$M" trace $c t.h5 --json | tr -d ' \t\n' | grep -q "\"provenance\":{\"moesim\":\"[^\"]*\",\"commit\":\"[^\"]*\",\"trace\":{\"path\":\"t.h5\",\"content_sha256\":\"$csum\",\"verified\":false}}" ||
            fail "trace $c --json has no provenance with content_sha256 $csum"
    done
    v=$("$M" --version) || fail "--version failed"
    head -1 s.csv | grep -q moesim_commit || fail "no moesim_commit column"
    echo "$v" | grep -Eq '^moesim [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{40}(-dirty)?|unknown\)' ||
        fail "--version prints '$v'" ;;
provenance_v1)
    # a v1 trace has no content digest: it keeps the SHA-256 of its bytes, which sha256sum prints
    cp "$7" v1.h5 || fail "no v1 fixture $7"
    sum=$(sha256sum v1.h5 | cut -d' ' -f1)
    j=$("$M" run --trace v1.h5 --cache-experts 4 --json 2>/dev/null | tr -d ' \t\n') || fail "run failed"
    echo "$j" | grep -q "\"provenance\":{\"moesim\":\"[0-9][^\"]*\",\"commit\":\"[^\"]*\",\"trace\":{\"path\":\"v1.h5\",\"sha256\":\"$sum\",\"verified\":true}" ||
        fail "no provenance with the v1 trace's sha256 $sum: $j"
    "$M" run --trace v1.h5 --cache-experts 4 --events ev.csv >/dev/null 2>&1 || fail "run --events failed"
    head -1 ev.csv | grep -q "^# moesim [^;]* commit [^;]*; trace v1.h5 sha256 $sum; platform " ||
        fail "events CSV's first line does not name the file's sha256 $sum: $(head -1 ev.csv)"
    sweep_digests v1.h5 4 "$sum" ""
    for c in info stats; do
        "$M" trace $c v1.h5 --json 2>/dev/null | tr -d ' \t\n' | grep -q "\"provenance\":{\"moesim\":\"[^\"]*\",\"commit\":\"[^\"]*\",\"trace\":{\"path\":\"v1.h5\",\"sha256\":\"$sum\",\"verified\":true}}" ||
            fail "trace $c --json has no provenance with sha256 $sum"
    done ;;
provenance_unverified)
    # a trace whose content no longer matches its stored digest (a value rewritten with h5py, which
    # recomputes the chunk checksums): run does not read the whole trace to recompute it, so its
    # results say the digest is the stored, unverified one; `trace validate` is what verifies it
    PY=${8:-}
    [ -n "$PY" ] && "$PY" -c 'import h5py, hdf5plugin' 2>/dev/null || { echo "no python with h5py: skipped"; exit 77; }
    trace
    csum=$("$M" trace info t.h5 --json | tr -d ' \t\n' | sed -n 's/.*"version":2,"content_sha256":"\([0-9a-f]\{64\}\)".*/\1/p')
    cp t.h5 x.h5
    "$PY" -c 'import sys, h5py, hdf5plugin
f = h5py.File(sys.argv[1], "r+"); d = f["rows/topk_ids"]; a = d[...]
a[0, 0, 0] = next(e for e in range(8) if e not in a[0, 0]); d[...] = a; f.close()' x.h5 || fail "cannot rewrite x.h5"
    expect_refused 1 "^moesim: x.h5: " "$M" trace validate x.h5
    j=$("$M" run --trace x.h5 --cache-experts 64 --json | tr -d ' \t\n') || fail "run failed"
    echo "$j" | grep -q "\"trace\":{\"path\":\"x.h5\",\"content_sha256\":\"$csum\",\"verified\":false}" ||
        fail "run --json names the stored digest $csum without saying it is unverified: $j"
    "$M" run --trace x.h5 --cache-experts 64 --events ev.csv >/dev/null || fail "run --events failed"
    head -1 ev.csv | grep -q "; trace x.h5 content_sha256 $csum (stored, unverified); " ||
        fail "events CSV's first line does not say the digest is unverified: $(head -1 ev.csv)" ;;
*) fail "unknown case" ;;
esac
echo "ok: $CASE"
