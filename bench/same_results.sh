#!/bin/sh
# bench/same_results.sh OLD_MOESIM NEW_MOESIM [OUTDIR]
#
# Do two builds give the same results?  The check that every speed change must
# pass before it is merged (docs/performance.md, "Same results").  It
#  1. makes its traces with both builds, deterministically: two synthetic ones
#     (`trace gen`, fixed seeds: mx60 = Mixtral-8x7B seed 3, 60,000
#     layer-steps; qw20 = Qwen1.5-MoE seed 4, 20,000) and, when the shared data
#     folder has them, the two real ones (qwen, gptoss: `trace import` of
#     traces/bigmoeonedge/*.route.csv); each pair must hold the same content
#     (equal bytes, or equal `trace info` but for the file name with NEW's
#     copy passing `trace validate`; one run each); the replays read NEW's;
#  2. replays each trace with both builds, 36 runs a trace: 13 policy
#     combinations (eam, lru, none, hybrimoe+mrs+hybrid, fmoe, transition,
#     lfu, belady, traced-topk; --batch 4; --gpus 2 with a peer_bw) and 7
#     more (topk-id, lru-slots, neighbor, static, code modes, fiddler),
#     comparing stdout (--json), stderr and the --events CSV; then 16 fMoE
#     variants (mode, store, track, semantic, capacity, with --batch 4 and
#     --gpus 2), comparing stdout and stderr;
#  3. prints one line per run that differs and `runs N diffs M` (N = 148
#     with the real traces, 74 without).
# Exit status: 0 when M is 0, 1 when runs differ, 2 on a setup error or a run
# that fails in one build only (one line on stderr).  A run that fails in both
# builds with the same exit status and messages counts as identical; the
# script says so.
#
# Compared exactly, but for these lines (what legitimately differs between two
# builds replaying the same file; everything else, warnings and the profiles'
# sha256 included, must match byte for byte):
#   run --json:   provenance.moesim (the version), provenance.commit (the git
#                 commit), provenance.trace.sha256 or .content_sha256 only
#                 when the two builds name the trace differently (a hash of
#                 the file before 2026-11-25, the stored content digest
#                 after; both runs read the same file: two builds that name
#                 it the same way must give the same digest),
#                 provenance.trace.verified (new in issue 32; the trace
#                 object's lines are compared without their trailing comma),
#                 provenance.model.path and provenance.platform.path
#                 (where each build found its data folder: its own build tree
#                 unless MOESIM_DATA_DIR is set).  There is no "build" key.
#   --events CSV: the same fields in its first line (`# moesim V commit C;
#                 trace P DIGEST H[ (stored, unverified)]; [model P sha256 H; ]platform P sha256 H`
#                 becomes `# moesim; trace P; [model sha256 H; ]platform
#                 sha256 H`); every other line exactly.
#   stderr:       exactly.
#
# Environment: MOESIM_DATA_DIR is handed to both builds (set it when a binary
# is a lone copy without its build tree's share/moesim).  MOESIM_SHARED_DIR:
# the shared data folder, only read (default: the one NEW's build tree was
# configured with, -DMOESIM_SHARED_DIR, else ../shared beside the
# repository, as README.md uses it).  TMPDIR: where the work folder goes when
# no OUTDIR is given.
#
# Writes only under OUTDIR (which must not exist: it is created) or a new
# folder under TMPDIR; each moesim runs inside its own folder there.  Runs
# that match are deleted as they go; a differing run's outputs stay in
# runs/NNN/{old,new}/ (a temp folder is then kept and named).  A
# benchmark-side tool, not a ctest test: about two minutes on 2 cores.
# shellcheck disable=SC2086,SC2317 # $M, $G, $ev split into words on purpose; the filters run through differ
set -u
TMPW= # set below when this script makes its own work folder (never inherited: die removes it)
LC_ALL=C
export LC_ALL
ME=same_results

die() { # one-line error, exit 2; a work folder holding differing runs is kept
    if [ -n "$TMPW" ] && [ "${diffs:-0}" -gt 0 ]; then
        echo "$ME: $* (outputs of the differing runs kept under $TMPW)" >&2
    else
        echo "$ME: $*" >&2
        [ -n "$TMPW" ] && rm -rf "$TMPW"
    fi
    exit 2
}

# An executable given as a path, or a name found on PATH; printed absolute.
executable() {
    case $1 in
    */*) p=$1 ;;
    *) p=$(command -v "$1" 2>/dev/null) || p= ;;
    esac
    [ -n "$p" ] && [ -f "$p" ] && [ -x "$p" ] || return 1
    case $p in /*) echo "$p" ;; *) echo "$PWD/$p" ;; esac
}

[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: bench/same_results.sh OLD_MOESIM NEW_MOESIM [OUTDIR]"
OLD=$(executable "$1") || die "OLD_MOESIM '$1' is not an executable file"
NEW=$(executable "$2") || die "NEW_MOESIM '$2' is not an executable file"
HERE=$(cd "$(dirname "$0")" && pwd)
# The shared data folder: MOESIM_SHARED_DIR, else the one NEW's build tree was
# configured with (-DMOESIM_SHARED_DIR, default ../shared beside the
# repository), else ../shared beside this repository.
shared_dir() {
    [ -n "${MOESIM_SHARED_DIR:-}" ] && { echo "$MOESIM_SHARED_DIR"; return; }
    c=$(sed -n 's/^MOESIM_SHARED_DIR:PATH=//p' "$(dirname "$NEW")/CMakeCache.txt" 2>/dev/null)
    [ -n "$c" ] && { echo "$c"; return; }
    echo "$HERE/../../shared"
}
SHARED=$(shared_dir)
[ -d "$SHARED" ] && SHARED=$(cd "$SHARED" && pwd)

if [ $# -eq 3 ]; then
    W=$3
    [ -e "$W" ] || [ -L "$W" ] && die "OUTDIR '$W' exists: give a new path (nothing is written over)"
    mkdir "$W" || die "cannot create OUTDIR '$W'"
    TMPW=
else
    W=$(mktemp -d "${TMPDIR:-/tmp}/moesim-same-results.XXXXXX") || die "cannot create a work folder"
    TMPW=$W
fi
W=$(cd "$W" && pwd)
mkdir "$W/traces" "$W/runs" || die "cannot write under $W"

runs=0
diffs=0
both_failed=0
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; die "interrupted"' INT TERM

first_line() { # the first line of a file (a stderr), or "(nothing on stderr)"
    if [ -s "$1" ]; then head -n 1 "$1"; else echo "(nothing on stderr)"; fi
}

# run --json minus the provenance lines named above, by their path in the
# object (cJSON prints one key a line, nested by tabs).
json_filter() {
    awk '
    {
        n = match($0, /[^\t]/) - 1
        key = ""
        if (match($0, /^\t*"[^"]*":/)) { key = substr($0, n + 2, RLENGTH - n - 3) }
        path = ""
        for (i = 1; i < n; i++) path = path stack[i] "."
        path = path key
        if ($0 ~ /[{[]$/) stack[n] = (key == "" ? "[]" : key)
        if (path == "provenance.moesim" || path == "provenance.commit" ||
            path == "provenance.model.path" || path == "provenance.platform.path") next
        if (path == "provenance.trace.verified") next
        if (!keep_digest && (path == "provenance.trace.sha256" || path == "provenance.trace.content_sha256")) next
        if (path ~ /^provenance\.trace\./) sub(/,$/, "")
        print
    }' keep_digest="$KEEP_DIGEST" "$1"
}

# How a run --json names its trace: "sha256", "content_sha256" or "" (none).
digest_kind() {
    sed -n '/^\t\t"trace":/,/^\t\t}/s/^\t\t\t"\(sha256\|content_sha256\)":.*/\1/p' "$1" 2>/dev/null | head -n 1
}

# An --events CSV with the same fields of its first (provenance) line dropped.
events_filter() {
    digest='s/; trace \([^;]*\) [a-z0-9_]* [0-9a-f]*/; trace \1/'
    [ "$KEEP_DIGEST" = 1 ] && digest=
    sed "1{
s/^# moesim [^ ]* commit [^;]*;/# moesim;/
s/ (stored, unverified);/;/
$digest
s/; model [^;]* sha256 /; model sha256 /
s/; platform [^;]* sha256 /; platform sha256 /
}" "$1"
}

# run_both DIR ARGS...: the same moesim command line with both builds side by
# side (2 cores), each in its own folder DIR/old, DIR/new (so a relative
# output path names a file of its own): stdout in out, stderr in err, the
# exit status in rc.
run_both() {
    d=$1
    shift
    mkdir "$d" "$d/old" "$d/new" || die "cannot write under $W"
    (cd "$d/old" && exec "$OLD" "$@" > out 2> err) &
    pid=$!
    (cd "$d/new" && exec "$NEW" "$@" > out 2> err)
    echo $? > "$d/new/rc"
    wait $pid
    echo $? > "$d/old/rc"
    pid=
}

# failed_alike DIR WHAT, after run_both: 1 when both builds succeeded; 0 when
# both failed alike (same status and stderr: identical, and said so); 2 when
# both failed differently.  A failure in one build only stops the check.
failed_alike() {
    ro=$(cat "$1/old/rc")
    rn=$(cat "$1/new/rc")
    [ "$ro" = 0 ] && [ "$rn" = 0 ] && return 1
    [ "$ro" = 0 ] && die "$2: fails with NEW only (exit $rn): $(first_line "$1/new/err")"
    [ "$rn" = 0 ] && die "$2: fails with OLD only (exit $ro): $(first_line "$1/old/err")"
    if [ "$ro" = "$rn" ] && cmp -s "$1/old/err" "$1/new/err"; then
        both_failed=$((both_failed + 1))
        echo "same failure in both builds (exit $ro), counted as identical: $2: $(first_line "$1/new/err")"
        return 0
    fi
    return 2
}

# done_run DIR WHAT PARTS: count the run; PARTS (what differs) empty = identical.
done_run() {
    runs=$((runs + 1))
    if [ -z "$3" ]; then
        rm -rf "$1"
    else
        diffs=$((diffs + 1))
        echo "DIFF $2:$3 (outputs: $1)"
    fi
}

# differ NAME FILTER FILE: " NAME (line N)" when FILE, through FILTER (cat,
# json_filter, events_filter), differs between the builds of the current run.
differ() {
    "$2" "$d/old/$3" > "$d/old/$3.cmp"
    "$2" "$d/new/$3" > "$d/new/$3.cmp"
    cmp -s "$d/old/$3.cmp" "$d/new/$3.cmp" && return 0
    l=$(cmp "$d/old/$3.cmp" "$d/new/$3.cmp" 2>&1 | sed -n 's/.* line \([0-9]*\).*/\1/p')
    echo " $1 (line ${l:-?})"
}

next_dir() { printf '%s/runs/%03d' "$W" $((runs + 1)); }

# one [--events] TRACE ARGS...: `moesim run` on NEW's trace with both builds;
# compares stdout (--json), stderr and, with --events, the events CSV.
one() {
    ev=
    [ "$1" = --events ] && { ev="--events events.csv"; shift; }
    t=$1
    shift
    d=$(next_dir)
    what="$t $*"
    run_both "$d" run --trace "$W/traces/$t.h5" "$@" --json $ev
    failed_alike "$d" "$what"
    case $? in
    0) done_run "$d" "$what" "" ; return ;;
    2) done_run "$d" "$what" " fails in both builds, not alike (OLD exit $(cat "$d/old/rc"), NEW exit $(cat "$d/new/rc"))"; return ;;
    esac
    # both builds name the trace the same way (both after 2026-11-25): its digest must match too
    KEEP_DIGEST=0
    old_kind=$(digest_kind "$d/old/out")
    [ -n "$old_kind" ] && [ "$old_kind" = "$(digest_kind "$d/new/out")" ] && KEEP_DIGEST=1
    parts="$(differ json json_filter out)$(differ stderr cat err)"
    [ -n "$ev" ] && parts="$parts$(differ events events_filter events.csv)"
    done_run "$d" "$what" "$parts"
}

# make_trace NAME gen|import ARGS...: the trace with both builds; NEW's goes to
# traces/NAME.h5, the runs' input.  The same content (equal bytes, or the same
# `trace info` but the file line, NEW's copy passing `trace validate`) is one
# identical run; a failure stops the check.
make_trace() {
    t=$1
    kind=$2
    shift 2
    d=$(next_dir)
    what="trace $kind $t"
    if [ "$kind" = gen ]; then
        run_both "$d" trace gen "$@" -o "$t.h5"
    else
        run_both "$d" trace import --format route-csv "$@" "$t.h5"
    fi
    ro=$(cat "$d/old/rc")
    rn=$(cat "$d/new/rc")
    [ "$ro" = 0 ] || [ "$rn" != 0 ] || die "$what: fails with OLD only (exit $ro): $(first_line "$d/old/err")"
    [ "$rn" = 0 ] || die "$what: fails with NEW (exit $rn; OLD: exit $ro): $(first_line "$d/new/err")"
    parts=
    if ! cmp -s "$d/old/$t.h5" "$d/new/$t.h5"; then
        "$NEW" trace info "$d/old/$t.h5" 2>&1 | grep -v '^file:' > "$d/old/info"
        "$NEW" trace info "$d/new/$t.h5" 2>&1 | grep -v '^file:' > "$d/new/info"
        parts=$(differ "trace info" cat info)
        "$NEW" trace validate "$d/new/$t.h5" > "$d/new/validate" 2>&1 || parts="$parts NEW's trace fails trace validate"
    fi
    ln "$d/new/$t.h5" "$W/traces/$t.h5" 2>/dev/null || cp "$d/new/$t.h5" "$W/traces/$t.h5" ||
        die "cannot write under $W"
    done_run "$d" "$what" "$parts"
}

# The runs on one trace: runs_on TRACE C K S [MODEL].  C: its cache size in
# experts; K: an fMoE store capacity below its iteration count; S: a cache
# size with room for the top-k experts of every layer (lru-slots needs it);
# MODEL: the model profile that gives a real trace its hidden size, which
# --gpus 2 needs (without it both builds refuse those runs alike).
runs_on() {
    t=$1
    c=$2
    k=$3
    s=$4
    M="--cache-experts $c --set platform.gpu_mem_bytes=1TiB"
    G="--gpus 2 --set platform.peer_bw=50GB/s${5:+ --model $5}"
    # policy combinations (JSON and events)
    for pc in "eam eam" "eam lru" "none lru" "hybrimoe mrs" "fmoe fmoe" "transition lru" \
        "none lfu" "oracle belady" "traced-topk fifo"; do
        set -- $pc
        if [ "$1" = hybrimoe ]; then
            one --events "$t" --prefetch "$1" --cache "$2" $M --sched hybrid
        else
            one --events "$t" --prefetch "$1" --cache "$2" $M
        fi
    done
    one --events "$t" --prefetch eam --cache eam $M --batch 4
    one --events "$t" --prefetch none --cache lru $M --batch 4
    one --events "$t" --prefetch hybrimoe --cache mrs --sched hybrid $M --batch 4
    one --events "$t" --prefetch transition --cache lru $M $G
    # more policies, modes and schedulers
    one --events "$t" --prefetch topk-id --cache lru-slots --cache-experts "$s" --set platform.gpu_mem_bytes=1TiB
    one --events "$t" --prefetch oracle --cache neighbor $M
    one --events "$t" --prefetch transition --cache static $M
    one --events "$t" --prefetch eam:mode=code --cache eam:mode=code $M
    one --events "$t" --prefetch hybrimoe:mode=code --cache mrs:mode=code --sched hybrid:mode=code $M
    one --events "$t" --prefetch none --cache lru --sched fiddler $M
    one --events "$t" --prefetch oracle --cache belady --batch 4 $G $M
    # fMoE variants (JSON and stderr)
    one "$t" --prefetch fmoe:mode=code --cache fmoe:mode=code $M
    one "$t" --prefetch fmoe:store=online --cache fmoe $M
    one "$t" --prefetch fmoe:track=hitcount --cache fmoe $M
    one "$t" --prefetch fmoe:semantic=off --cache fmoe $M
    one "$t" --prefetch fmoe:capacity=50 --cache fmoe $M
    one "$t" --prefetch fmoe:store=online,capacity=50 --cache fmoe $M
    one "$t" --prefetch fmoe:mode=code,capacity=50 --cache fmoe:mode=code $M
    one "$t" --prefetch fmoe --cache fmoe --batch 4 $M
    one "$t" --prefetch fmoe --cache fmoe $G $M
    one "$t" --prefetch fmoe:store=online,capacity=50 --cache fmoe --batch 4 $M
    one "$t" --prefetch fmoe:capacity="$k" --cache fmoe $M
    one "$t" --prefetch fmoe:capacity="$k",mode=code --cache fmoe:mode=code $M
    one "$t" --prefetch fmoe:capacity="$k",semantic=off --cache fmoe $M
    one "$t" --prefetch fmoe:capacity="$k" --cache fmoe --batch 4 $M
    one "$t" --prefetch fmoe:capacity="$k" --cache fmoe $G $M
    one "$t" --prefetch fmoe:store=online,capacity="$k" --cache fmoe $M
}

echo "OLD $OLD: $("$OLD" --version 2>&1 | head -n 1)"
echo "NEW $NEW: $("$NEW" --version 2>&1 | head -n 1)"
echo "work folder $W"
traces="mx60 qw20"
make_trace mx60 gen --model mixtral-8x7b --seed 3 --layer-steps 60000
make_trace qw20 gen --model qwen1.5-moe-a2.7b --seed 4 --layer-steps 20000
R=$SHARED/traces/bigmoeonedge
if [ -r "$R/qwen.route.csv" ] && [ -r "$R/gptoss.route.csv" ]; then
    make_trace qwen import "$R/qwen.route.csv"
    make_trace gptoss import "$R/gptoss.route.csv"
    traces="$traces qwen gptoss"
else
    echo "no real traces ($R/qwen.route.csv, gptoss.route.csv; set MOESIM_SHARED_DIR): their runs are skipped"
fi
for t in $traces; do
    case $t in
    mx60) runs_on mx60 64 100 64 ;;
    qw20) runs_on qw20 256 100 256 ;;
    qwen) runs_on qwen 180 70 288 qwen3-30b-a3b ;;
    gptoss) runs_on gptoss 96 40 96 gpt-oss-120b ;;
    esac
done

[ $both_failed -gt 0 ] && echo "($both_failed runs fail in both builds alike)"
echo "runs $runs diffs $diffs"
if [ $diffs -eq 0 ]; then
    rm -rf "$W/runs"
    [ -n "$TMPW" ] && rm -rf "$TMPW"
    exit 0
fi
echo "outputs of the differing runs kept under $W"
exit 1
