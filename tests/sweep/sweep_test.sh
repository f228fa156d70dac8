#!/bin/sh
# Checks of `moesim sweep` (tests/sweep.cmake): sweep_test.sh MOESIM DIR CASE [args]
# DIR holds the fixture traces made by the `setup` case; every case writes
# its own files under DIR/CASE.
set -u
M=$1; D=$2; CASE=$3; shift 3
FAIL_SH=$(dirname "$0")/../cli/expect_fail.sh
die() { echo "FAIL: $*"; exit 1; }
rows() { if [ -e "$1" ]; then wc -l < "$1"; else echo 0; fi; }

# 2 traces x 3 prefetchers x 3 caches x 6 sizes x 2 distances = 216 points
big_spec() {
  cat > "$1" <<EOF2
[sweep]
output = full.csv
trace = $D/a.h5, $D/b.h5
model = mixtral-8x7b
prefetch = none, oracle, traced-topk:k=2
cache = lru, lfu:reset=0, fifo
cache_experts = 16:56:8
distance = 1,2
EOF2
}

case $CASE in
setup)
  rm -rf "$D" && mkdir -p "$D" || die "mkdir $D"
  "$M" trace gen --model mixtral-8x7b -o "$D/a.h5" --seed 3 --requests 3 >/dev/null || die "gen a"
  "$M" trace gen --model mixtral-8x7b -o "$D/b.h5" --seed 4 --requests 2 >/dev/null || die "gen b"
  big_spec "$D/big.ini"
  (cd "$D" && "$M" sweep big.ini --jobs 1 >/dev/null) || die "full sweep"
  [ "$(rows "$D/full.csv")" = 217 ] || die "full.csv has $(rows "$D/full.csv") lines, expected 217"
  echo "ok: 216 points";;
jobs)      # --jobs 2 gives the bytes of --jobs 1
  W=$D/jobs; rm -rf "$W"; mkdir -p "$W"
  "$M" sweep "$D/big.ini" --jobs 2 -o "$W/j2.csv" >/dev/null || die "jobs 2"
  cmp "$D/full.csv" "$W/j2.csv" || die "--jobs 2 differs from --jobs 1"
  echo "ok: identical";;
shards)    # two shards merged give the unsharded bytes
  W=$D/shards; rm -rf "$W"; mkdir -p "$W"; cp "$D/big.ini" "$W/big.ini"
  (cd "$W" && "$M" sweep big.ini --shard 0/2 >/dev/null && "$M" sweep big.ini --shard 1/2 --jobs 2 >/dev/null) || die "shards"
  [ "$(rows "$W/full.shard-0-of-2.csv")" = 109 ] || die "shard 0 has $(rows "$W/full.shard-0-of-2.csv") lines"
  "$M" sweep --merge "$W/merged.csv" "$W/full.shard-1-of-2.csv" "$W/full.shard-0-of-2.csv" >/dev/null || die merge
  cmp "$D/full.csv" "$W/merged.csv" || die "merged shards differ from the full sweep"
  sh "$FAIL_SH" 1 "point 1 is in none of the inputs" "$M" sweep --merge "$W/m2.csv" "$W/full.shard-0-of-2.csv" >/dev/null || die "merge of one shard accepted"
  echo "ok: merged";;
kill)      # killed twice with kill -9, resumed: the uninterrupted bytes
  W=$D/kill; rm -rf "$W"; mkdir -p "$W"; O=$W/k.csv
  prev=1
  for round in 1 2; do
    if [ $round = 1 ]; then "$M" sweep "$D/big.ini" -o "$O" --jobs 2 >/dev/null &
    else "$M" sweep "$D/big.ini" -o "$O" --jobs 2 --resume >/dev/null & fi
    pid=$!; want=$((prev + 30)); n=0
    while [ "$(rows "$O")" -lt $want ] && [ $n -lt 20000 ]; do sleep 0.002; n=$((n + 1)); done
    kill -9 $pid; wait $pid 2>/dev/null
    got=$(rows "$O")
    [ "$got" -ge $want ] && [ "$got" -lt 217 ] || die "round $round: $got lines after kill -9, expected $want..216 (not killed mid-way)"
    echo "round $round: killed with $got lines"; prev=$got
  done
  "$M" sweep "$D/big.ini" -o "$O" --jobs 2 --resume >/dev/null || die "final resume"
  cmp "$D/full.csv" "$O" || die "resumed CSV differs from the uninterrupted one"
  # a partial last line (a half-written row) is cut, then the row is redone
  head -n 51 "$D/full.csv" > "$W/p.csv"; sed -n 52p "$D/full.csv" | head -c 40 >> "$W/p.csv"
  "$M" sweep "$D/big.ini" -o "$W/p.csv" --resume >/dev/null || die "resume after a partial line"
  cmp "$D/full.csv" "$W/p.csv" || die "partial-line resume differs"
  echo "ok: resumed";;
lock)      # a second sweep on an output being written ends at once naming the first's pid;
           # a lock left by a killed sweep (kill -9) does not stop --resume
  W=$D/lock; rm -rf "$W"; mkdir -p "$W"; O=$W/l.csv
  "$M" sweep "$D/big.ini" -o "$O" >/dev/null &
  pid=$!; n=0
  while [ "$(rows "$O")" -lt 3 ] && [ $n -lt 20000 ]; do sleep 0.002; n=$((n + 1)); done
  kill -0 $pid 2>/dev/null || die "the first sweep ended before the second started"
  sh "$FAIL_SH" 1 "^moesim: sweep: output $O: is being written by process $pid \\(lock file $W/\\.l\\.csv\\.lock\\); wait for it to end or stop it$" \
    "$M" sweep "$D/big.ini" -o "$O" --resume || { kill -9 $pid; die "a second --resume ran beside the first"; }
  kill -0 $pid 2>/dev/null || die "the first sweep ended before the check (make big.ini larger)"
  kill -9 $pid; wait $pid 2>/dev/null
  [ -e "$W/.l.csv.lock" ] || die "kill -9 removed the lock file (the case below tests nothing)"
  "$M" sweep "$D/big.ini" -o "$O" --resume >/dev/null || die "resume after a killed holder"
  cmp "$D/full.csv" "$O" || die "resumed CSV differs from the uninterrupted one"
  [ ! -e "$W/.l.csv.lock" ] || die "the lock file was left behind"
  # the outputs written through a temporary are locked too: a lock held by another process (python's
  # fcntl.lockf, the same kind of lock) refuses --events, naming that process
  command -v python3 >/dev/null || { echo "ok: sweep (no python3: --events not checked)"; exit 0; }
  python3 -c 'import fcntl,os,sys,time; f=open(sys.argv[1],"w"); fcntl.lockf(f,fcntl.LOCK_EX); print(os.getpid(),flush=True); time.sleep(60)' \
    "$W/.e.csv.lock" > "$W/holder" &
  hp=$!; n=0
  while [ ! -s "$W/holder" ] && [ $n -lt 5000 ]; do sleep 0.002; n=$((n + 1)); done
  sh "$FAIL_SH" 1 "^moesim: --events $W/e.csv: is being written by process $(cat "$W/holder") " \
    "$M" run --trace "$D/a.h5" --cache-experts 16 --events "$W/e.csv" || { kill $hp; die "--events ignored the lock"; }
  kill $hp; wait $hp 2>/dev/null
  [ ! -e "$W/e.csv" ] || die "e.csv was written"
  "$M" run --trace "$D/a.h5" --cache-experts 16 --events "$W/e.csv" >/dev/null || die "--events after the holder ended"
  echo "ok: locked";;
strict)    # a failed point: its row is written and the sweep exits 0; with --strict it exits 1
  W=$D/strict; rm -rf "$W"; mkdir -p "$W"
  printf '[sweep]\noutput = s.csv\ntrace = %s/a.h5\ncache_experts = 1, 16\n' "$D" > "$W/s.ini"
  out=$("$M" sweep "$W/s.ini") || die "a sweep with a failed point exited $? without --strict"
  [ "$out" = "sweep: 2 points in $W/s.csv (2 run now, 0 already there; 1 failed)" ] || die "summary: $out"
  [ "$(rows "$W/s.csv")" = 3 ] || die "s.csv has $(rows "$W/s.csv") lines"
  rm -f "$W/s.csv"
  sh "$FAIL_SH" 1 "^moesim: sweep: 1 of the 2 points run now failed \\(--strict; their rows hold the errors\\)$" \
    "$M" sweep "$W/s.ini" --strict || die "--strict exited 0 with a failed point"
  [ "$(rows "$W/s.csv")" = 3 ] || die "--strict: s.csv has $(rows "$W/s.csv") lines"
  rm -f "$W/s.csv"
  printf '[sweep]\noutput = s.csv\ntrace = %s/a.h5\ncache_experts = 16\n' "$D" > "$W/ok.ini"
  "$M" sweep "$W/ok.ini" --strict >/dev/null || die "--strict failed a sweep without failed points"
  echo "ok: strict";;
resume_bad) # a file that is not ours, or rows of another spec
  W=$D/resume_bad; rm -rf "$W"; mkdir -p "$W"
  printf 'a,b,c\n1,2,3\n' > "$W/other.csv"
  sh "$FAIL_SH" 1 "other.csv: --resume: the header is not that of a moesim sweep CSV of this version$" "$M" sweep "$D/big.ini" -o "$W/other.csv" --resume || die "foreign header accepted"
  # a sweep CSV of another moesim version (a column renamed): refused, saying so
  sed '1s/,trace_content_sha256,/,trace_digest,/' "$D/full.csv" > "$W/old.csv"; cp "$W/old.csv" "$W/old.keep"
  sh "$FAIL_SH" 1 "old.csv: --resume: the header is not that of a moesim sweep CSV of this version \\(another version's columns: resume with that version, or write a new file\\)$" "$M" sweep "$D/big.ini" -o "$W/old.csv" --resume || die "another version's header accepted"
  cmp "$W/old.csv" "$W/old.keep" || die "old.csv was changed"
  head -n 11 "$D/full.csv" > "$W/f.csv"
  sed 's/^cache_experts = .*/cache_experts = 24:56:8/' "$D/big.ini" > "$W/changed.ini"
  sh "$FAIL_SH" 1 "row 1 is not point 0 of this spec" "$M" sweep "$W/changed.ini" -o "$W/f.csv" --resume || die "changed spec accepted"
  sh "$FAIL_SH" 1 "f.csv exists; use --resume or remove it" "$M" sweep "$D/big.ini" -o "$W/f.csv" || die "existing output overwritten"
  [ "$(rows "$W/f.csv")" = 11 ] || die "f.csv was changed"
  echo "ok";;
bad)       # bad.ini holds the given [sweep] body; must fail with one line and run nothing
  code=$1; regex=$2; body=$3; shift 3
  W=$D/bad; mkdir -p "$W"; rm -f "$W/out.csv" "$W/bad.ini"
  printf '[sweep]\noutput = out.csv\n%b\n' "$body" | sed "s|@D@|$D|g" > "$W/bad.ini"
  sh "$FAIL_SH" "$code" "$regex" "$M" sweep "$W/bad.ini" "$@" || die "bad spec: $(cat "$W/bad.ini")"
  [ ! -e "$W/out.csv" ] || die "out.csv was created"
  echo "ok";;
dry)       # a good spec: --dry-run prints the expected number of points
  want=$1; body=$2
  W=$D/dry; mkdir -p "$W"
  printf '[sweep]\noutput = out.csv\n%b\n' "$body" | sed "s|@D@|$D|g" > "$W/dry.ini"
  out=$("$M" sweep "$W/dry.ini" --dry-run) || die "dry run failed: $(cat "$W/dry.ini")"
  [ "$out" = "$want points ($want in this shard) -> $W/out.csv" ] || die "dry run printed '$out', expected $want points"
  echo "ok: $out";;
cache)     # the trace cache: one decompression of the trace per worker process,
           # results identical without the cache.  $1 = LD_PRELOAD shim counting ZSTD_decompress
  W=$D/cache; rm -rf "$W"; mkdir -p "$W"
  open=$(LD_PRELOAD=$1 "$M" trace info "$D/a.h5" 2>&1 >/dev/null | sed -n 's/^ZSTD_decompress calls: //p')
  whole=$(LD_PRELOAD=$1 "$M" trace validate "$D/a.h5" 2>&1 >/dev/null | sed -n 's/^ZSTD_decompress calls: //p')
  # one none+lru run streams what it reads: the top-k ids and iterations, not
  # the weights, probabilities, embeddings or speculative gates (issue 18)
  run1=$(LD_PRELOAD=$1 "$M" run --trace "$D/a.h5" --cache-experts 16 2>&1 >/dev/null | sed -n 's/^ZSTD_decompress calls: //p')
  [ "$run1" -lt "$whole" ] || die "a none+lru run decompressed $run1 chunks, the whole trace is $whole: it reads more than it uses"
  printf '[sweep]\noutput = on.csv\ntrace = %s\ncache_experts = 16:64:8\n' "$D/a.h5" > "$W/on.ini"
  printf '[sweep]\noutput = off.csv\ntrace = %s\ncache_experts = 16:64:8\ntrace_cache = 0\n' "$D/a.h5" > "$W/off.ini"
  on=$(LD_PRELOAD=$1 "$M" sweep "$W/on.ini" --jobs 2 2>&1 >/dev/null | sed -n 's/^ZSTD_decompress calls: //p' | sort -n | tr '\n' ' ')
  off=$(LD_PRELOAD=$1 "$M" sweep "$W/off.ini" --jobs 2 2>&1 >/dev/null | sed -n 's/^ZSTD_decompress calls: //p' | sort -n | tr '\n' ' ')
  # the parent opens the trace to check it (open); each forked worker inherits
  # that count and decompresses the whole trace once (whole)
  want="$open $((open + whole)) $((open + whole)) "
  echo "open $open, whole trace $whole, one run $run1; with the cache: $on; without: $off"
  [ "$on" = "$want" ] || die "with the cache: counts '$on', expected '$want'"
  # without the cache: the parent's open, inherited by both workers, then 7 runs
  off_sum=0; for c in $off; do off_sum=$((off_sum + c)); done
  [ $off_sum = $((3 * open + 7 * run1)) ] || die "without the cache: total $off_sum, expected $((3 * open + 7 * run1))"
  tail -n +2 "$W/on.csv" > "$W/on.rows"; tail -n +2 "$W/off.csv" > "$W/off.rows"
  cmp "$W/on.rows" "$W/off.rows" || die "results differ with and without the trace cache"
  echo "ok";;
mpi)       # --mpi under mpirun (-DMOESIM_MPI=ON): $1 = mpirun's flag for the number of
           # ranks, the rest the mpirun command line (mpirun --allow-run-as-root --oversubscribe -q)
  NP=$1; shift
  W=$D/mpi; rm -rf "$W"; mkdir -p "$W"
  # 3 ranks: two workers finish out of order, the leader must reorder
  "$@" $NP 3 "$M" sweep "$D/big.ini" --mpi -o "$W/m3.csv" >/dev/null || die "mpirun -np 3 sweep failed"
  cmp "$D/full.csv" "$W/m3.csv" || die "--mpi CSV at 3 ranks differs from --jobs 1"
  set -- "$@" $NP 2
  "$@" "$M" sweep "$D/big.ini" --mpi -o "$W/m.csv" > "$W/m.out" || die "mpirun sweep failed: $(cat "$W/m.out")"
  cmp "$D/full.csv" "$W/m.csv" || die "--mpi CSV differs from --jobs 1"
  grep -q "^sweep: 216 points in $W/m.csv (216 run now, 0 already there; 0 failed)\$" "$W/m.out" ||
    die "summary: $(cat "$W/m.out") (printed by every rank?)"
  [ "$(wc -l < "$W/m.out")" = 1 ] || die "more than one rank printed a summary: $(cat "$W/m.out")"
  # --resume after a partial file (100 whole rows and half a row) gives the same bytes
  head -n 101 "$D/full.csv" > "$W/r.csv"; sed -n 102p "$D/full.csv" | head -c 40 >> "$W/r.csv"
  "$@" "$M" sweep "$D/big.ini" --mpi -o "$W/r.csv" --resume > "$W/r.out" || die "mpirun --resume failed"
  cmp "$D/full.csv" "$W/r.csv" || die "--mpi --resume CSV differs from --jobs 1"
  grep -q "(116 run now, 100 already there; 0 failed)" "$W/r.out" || die "resume summary: $(cat "$W/r.out")"
  # errors are checked on rank 0 before anything runs: one line, every rank stops
  printf '[sweep]\noutput = out.csv\ntrace = %s\ncache_experts = 16\nprefetch = none, orcale\n' "$D/a.h5" > "$W/bad.ini"
  sh "$FAIL_SH" 1 "bad.ini:5: unknown prefetch policy 'orcale'" "$@" "$M" sweep "$W/bad.ini" --mpi || die "bad spec under mpirun"
  [ ! -e "$W/out.csv" ] || die "out.csv was created for a bad spec"
  sh "$FAIL_SH" 1 "m.csv exists; use --resume or remove it" "$@" "$M" sweep "$D/big.ini" --mpi -o "$W/m.csv" || die "existing output under mpirun"
  sh "$FAIL_SH" 2 "sweep: --mpi and --jobs exclude each other" "$@" "$M" sweep "$D/big.ini" --mpi --jobs 2 || die "--mpi --jobs accepted"
  cmp "$D/full.csv" "$W/m.csv" || die "m.csv was changed"
  echo "ok: identical, resumed, errors";;
*) die "unknown case $CASE";;
esac
