#!/bin/sh
# CLI tests of the trace writers' data safety (issue 13), one case per call:
#   cli.sh CASE MOESIM WORKDIR QWEN_CSV SMALL_CSV
# Cases: out_is_input out_device out_folder sigterm disk_full estimate.
# Every refusal must be exit 1 with exactly one line "moesim: ..." on stderr
# and leave the files as they were; exit 77 = skipped (needs root for a
# tmpfs / a device node), with the reason on stdout.
set -u
case_name=$1 M=$2 W=$3 QWEN=$4 SMALL=$5
GEN_SMALL="--model mixtral-8x7b --requests 4 --set prompt_median=16 --set output_median=8"
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# expect_refusal REGEX CMD...: exit 1, one stderr line matching REGEX.
expect_refusal() {
    regex=$1
    shift
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    lines=$(printf '%s\n' "$err" | grep -c .)
    if [ "$rc" != 1 ] || [ "$lines" != 1 ] || ! printf '%s\n' "$err" | grep -Eq -- "$regex"; then
        fail "$* -> exit $rc, $lines lines: $err (wanted exit 1, one line matching '$regex')"
    else
        echo "ok: $err"
    fi
}

# expect_ok CMD...: exit 0.
expect_ok() {
    out=$("$@" 2>&1)
    rc=$?
    [ "$rc" = 0 ] || fail "$* -> exit $rc: $out"
}

# no_leftovers DIR: no temporary (.NAME.tmp.*) and no file other than the listed ones.
no_leftovers() {
    dir=$1
    shift
    for f in "$dir"/.* "$dir"/*; do
        base=${f##*/}
        case $base in .|..|'*'|'.*') continue ;; esac
        keep=0
        for k in "$@"; do [ "$base" = "$k" ] && keep=1; done
        [ $keep = 1 ] || fail "left behind in $dir: $base"
    done
}

is_root() { [ "$(id -u)" = 0 ]; }

rm -rf "$W"
mkdir -p "$W"
cd "$W" || exit 2

case $case_name in
out_is_input)
    cp "$SMALL" in.csv
    cp in.csv in.orig
    expect_refusal "OUT in.csv: is the input file in.csv; refusing to overwrite it" \
        "$M" trace import --format route-csv in.csv in.csv
    ln -s in.csv link.h5
    expect_refusal "OUT link.h5: is the input file in.csv" "$M" trace import --format route-csv in.csv link.h5
    ln in.csv hard.h5
    expect_refusal "OUT hard.h5: is the input file in.csv" "$M" trace import --format route-csv in.csv hard.h5
    cmp -s in.csv in.orig || fail "in.csv changed"
    [ -L link.h5 ] || fail "link.h5 is no longer a symbolic link"
    expect_ok "$M" trace import --format route-csv in.csv t.h5
    cp t.h5 t.orig
    ln -s t.h5 t_link.h5
    expect_refusal "OUT t.h5: is the input file t.h5" "$M" trace upgrade t.h5 t.h5
    expect_refusal "OUT t_link.h5: is the input file t.h5" "$M" trace upgrade t.h5 t_link.h5
    expect_refusal "-o t.h5: is the input file t.h5" "$M" trace workload t.h5 --poisson 1 -o t.h5
    expect_refusal "-o t_link.h5: is the input file t.h5" "$M" trace fit t.h5 -o t_link.h5
    expect_refusal "-o in.orig: is the input file in.orig" "$M" trace gen --params in.orig -o in.orig --model mixtral-8x7b
    cmp -s t.h5 t.orig || fail "t.h5 changed"
    cmp -s in.csv in.orig || fail "in.csv changed"
    no_leftovers . in.csv in.orig link.h5 hard.h5 t.h5 t.orig t_link.h5
    ;;
out_device)
    cp "$SMALL" in.csv
    expect_ok "$M" trace import --format route-csv in.csv t.h5
    mkfifo fifo.h5
    expect_refusal "-o fifo.h5: is a fifo, not a regular file; refusing to write it" "$M" trace gen $GEN_SMALL -o fifo.h5
    expect_refusal "OUT fifo.h5: is a fifo" "$M" trace import --format route-csv in.csv fifo.h5
    expect_refusal "OUT fifo.h5: is a fifo" "$M" trace upgrade t.h5 fifo.h5
    expect_refusal "-o fifo.h5: is a fifo" "$M" trace workload t.h5 --poisson 1 -o fifo.h5
    expect_refusal "-o fifo.h5: is a fifo" "$M" trace fit t.h5 -o fifo.h5
    [ -p fifo.h5 ] || fail "fifo.h5 is no longer a fifo"
    mkdir dir.h5
    expect_refusal "-o dir.h5: is a directory" "$M" trace gen $GEN_SMALL -o dir.h5
    expect_refusal "OUT dir.h5: is a directory" "$M" trace import --format route-csv in.csv dir.h5
    [ -d dir.h5 ] || fail "dir.h5 is no longer a directory"
    # character devices: private copies of /dev/null and /dev/full (root), so
    # that a regression could never rename a file over the system's nodes
    if mknod null c 1 3 2>/dev/null && mknod full c 1 7 2>/dev/null; then
        expect_refusal "-o full: is a character device, not a regular file; refusing to write it" \
            "$M" trace gen $GEN_SMALL -o full
        expect_refusal "OUT null: is a character device" "$M" trace import --format route-csv in.csv null
        expect_refusal "OUT full: is a character device" "$M" trace upgrade t.h5 full
        expect_refusal "-o null: is a character device" "$M" trace workload t.h5 --poisson 1 -o null
        expect_refusal "-o full: is a character device" "$M" trace fit t.h5 -o full
        [ -c null ] && [ -c full ] || fail "a device node was replaced"
        no_leftovers . in.csv t.h5 fifo.h5 dir.h5 null full
    else
        no_leftovers . in.csv t.h5 fifo.h5 dir.h5
        echo "skipped the device-node part: mknod needs root"
    fi
    ;;
out_folder)
    cp "$SMALL" in.csv
    expect_ok "$M" trace import --format route-csv in.csv t.h5
    expect_refusal "-o missing/x.h5: folder missing: No such file or directory" "$M" trace gen $GEN_SMALL -o missing/x.h5
    expect_refusal "OUT missing/x.h5: folder missing: No such file or directory" \
        "$M" trace import --format route-csv in.csv missing/x.h5
    expect_refusal "OUT missing/x.h5: folder missing" "$M" trace upgrade t.h5 missing/x.h5
    # trace fit finds out before fitting (it took 69 s to fail before)
    t0=$(date +%s)
    expect_refusal "-o missing/x.ini: folder missing: No such file or directory" "$M" trace fit t.h5 -o missing/x.ini
    [ $(($(date +%s) - t0)) -le 5 ] || fail "trace fit took more than 5 s to refuse its output"
    mkdir ro
    if is_root && mount -t tmpfs -o ro,size=64k tmpfs ro 2>/dev/null; then
        why="Read-only file system"
    else
        chmod 555 ro
        why="Permission denied"
        is_root && echo "(no read-only mount: a mode-555 folder does not stop root)"
    fi
    if ! is_root || [ "$why" = "Read-only file system" ]; then
        expect_refusal "-o ro/x.h5: folder ro is not writable: $why" "$M" trace gen $GEN_SMALL -o ro/x.h5
        expect_refusal "OUT ro/x.h5: folder ro is not writable: $why" "$M" trace import --format route-csv in.csv ro/x.h5
        expect_refusal "-o ro/x.ini: folder ro is not writable: $why" "$M" trace fit t.h5 -o ro/x.ini
    fi
    mountpoint -q ro 2>/dev/null && umount ro
    no_leftovers . in.csv t.h5 ro
    ;;
sigterm)
    # a big generation killed while writing: its temporary goes with it
    "$M" trace gen --model mixtral-8x7b --requests 100000 --force -o big.h5 >/dev/null 2>&1 &
    pid=$!
    tries=0
    while [ $tries -lt 400 ]; do
        tmp=$(ls -A | grep '^\.big\.h5\.tmp\.' | head -n 1)
        [ -n "$tmp" ] && [ -s "$tmp" ] && break
        sleep 0.05
        tries=$((tries + 1))
    done
    [ -n "$tmp" ] || fail "no temporary .big.h5.tmp.* appeared within 20 s"
    sleep 0.3
    kill -TERM $pid
    wait $pid
    rc=$?
    [ "$rc" = 143 ] || fail "trace gen ended with status $rc after SIGTERM, expected 143 (killed by the signal)"
    echo "temporary $tmp seen, SIGTERM, exit status $rc"
    no_leftovers .
    # SIGINT (Ctrl-C): a shell's background job ignores it, so Python starts the
    # writer with the default disposition
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$M" <<'PY'
import os, signal, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "trace", "gen", "--model", "mixtral-8x7b", "--requests", "100000", "--force",
                      "-o", "big.h5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(400):
    tmp = [f for f in os.listdir(".") if f.startswith(".big.h5.tmp.") and os.path.getsize(f) > 0]
    if tmp:
        break
    time.sleep(0.05)
time.sleep(0.3)
p.send_signal(signal.SIGINT)
rc = p.wait()
print(f"temporary {tmp} seen, SIGINT, exit status {rc}")
sys.exit(0 if tmp and rc == -signal.SIGINT else 1)
PY
        [ $? = 0 ] || fail "SIGINT: no temporary seen or not killed by the signal"
        no_leftovers .
    else
        echo "(no python3: the SIGINT check is skipped)"
    fi
    ;;
disk_full)
    if ! is_root; then
        echo "skipped: mounting a small tmpfs needs root"
        exit 77
    fi
    mkdir full small
    if ! mount -t tmpfs -o size=4m tmpfs full 2>/dev/null || ! mount -t tmpfs -o size=512k tmpfs small 2>/dev/null; then
        echo "skipped: cannot mount a tmpfs here"
        exit 77
    fi
    trap 'umount "$W/full" "$W/small" 2>/dev/null' EXIT
    # 64 short Mixtral requests: ~29 MiB estimated (uncompressed), 4 MiB of room
    G64="--model mixtral-8x7b --requests 64 --set prompt_median=64 --set output_median=32 --seed 2"
    expect_refusal "-o full/x.h5: estimated output [0-9.]+ MiB \(uncompressed, from the knobs' expected lengths\) is more than the 4.0 MiB free in full; free some space, write elsewhere or pass --force" \
        "$M" trace gen $G64 -o full/x.h5
    # with --force it runs until the disk is full, mid-write
    expect_refusal "^moesim: full/x.h5: No space left on device \([0-9.]+ MiB written after [1-9][0-9]* requests, about [0-9.]+ MiB more needed; nothing is left behind\)$" \
        "$M" trace gen $G64 --force -o full/x.h5
    no_leftovers full
    # the real Qwen3 trace (1.3 MB of CSV, 233 KB as v2) into 512 KiB
    expect_refusal "OUT small/q.h5: estimated output 1.3 MiB \(at most, from the input's 1.3 MiB\) is more than the 512.0 KiB free in small" \
        "$M" trace import --format route-csv "$QWEN" small/q.h5
    expect_refusal "^moesim: small/q.h5: No space left on device \(" "$M" trace import --format route-csv --force "$QWEN" small/q.h5
    no_leftovers small
    # an existing trace stays as it was when its replacement does not fit
    expect_ok "$M" trace import --format route-csv "$SMALL" full/keep.h5
    cp full/keep.h5 keep.orig
    expect_refusal "^moesim: full/keep.h5: No space left on device" "$M" trace gen $G64 --force -o full/keep.h5
    cmp -s full/keep.h5 keep.orig || fail "full/keep.h5 changed"
    no_leftovers full keep.h5
    expect_ok "$M" trace validate full/keep.h5
    ;;
estimate)
    t0=$(date +%s)
    expect_refusal "-o huge.h5: estimated output [0-9.]+ TiB \(uncompressed, from the knobs' expected lengths\) is more than the [0-9.]+ [KMGTP]?i?B free in \.; free some space, write elsewhere or pass --force" \
        "$M" trace gen --model mixtral-8x7b --requests 100000000 -o huge.h5
    [ $(($(date +%s) - t0)) -le 5 ] || fail "the refusal took more than 5 s"
    # --force is a flag of gen, import, upgrade and workload
    expect_ok "$M" trace gen $GEN_SMALL --force -o g.h5
    expect_ok "$M" trace import --force --format route-csv "$SMALL" i.h5
    expect_ok "$M" trace upgrade --force i.h5 u.h5
    expect_ok "$M" trace workload i.h5 --poisson 2 --force -o w.h5
    for f in g.h5 i.h5 u.h5 w.h5; do
        expect_ok "$M" trace validate $f
    done
    # on a terminal the estimate comes first (not otherwise: stderr stays one line)
    if command -v script >/dev/null 2>&1; then
        out=$(script -qec "'$M' trace gen $GEN_SMALL -o tty.h5" /dev/null 2>&1)
        printf '%s\n' "$out" | grep -Eq "moesim: -o tty.h5: estimated output [0-9.]+ KiB \(uncompressed, from the knobs' expected lengths\), [0-9.]+ [KMGTP]?i?B free in \." ||
            fail "no estimate line on a terminal: $out"
        err=$("$M" trace gen $GEN_SMALL -o notty.h5 2>&1 >/dev/null)
        [ -z "$err" ] || fail "stderr not empty without a terminal: $err"
    else
        echo "(no script(1): the terminal check is skipped)"
    fi
    rm -f tty.h5 notty.h5
    no_leftovers . g.h5 i.h5 u.h5 w.h5
    ;;
*)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
[ $failures = 0 ] || exit 1
echo "$case_name: all checks passed"
