#!/bin/sh
# The layers of docs/layout.md, checked on the sources: every project include
# is root-relative ("sim/core/err.h", never "../"), a folder includes only
# headers of its own layer or below, and the graph of folders (an edge F -> G
# when a file of F includes a header of G) has no cycle, not even inside one
# layer.  Usage: check_layers.sh SOURCE_DIR.  One line per violation, exit 1.
set -eu
cd "$1"
# folder rank: a file may include folders of a rank <= its own
RANKS='sim/core 0
traces/format 1
traces/stats 1
traces/import 1
traces/synth 1
policies 2
policies/lib 2
policies/prefetch 2
policies/cache 2
policies/sched 2
sim/engine 3
kernels 4
sim/apps 5
sim/serverless 5
sim/cli 6'
find sim traces policies kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort |
while read -r f; do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed "s|^|$f:|" || true
done | awk -v ranks="$RANKS" '
BEGIN {
    n = split(ranks, lines, "\n")
    for (i = 1; i <= n; i++) { split(lines[i], p, " "); rank[p[1]] = p[2] }
    bad = 0
}
function dir(path,   d) { d = path; sub(/\/[^\/]*$/, "", d); return d }
{
    file = $0; sub(/:.*/, "", file)
    line = $0; sub(/^[^:]*:/, "", line); num = line; sub(/:.*/, "", num)
    inc = line; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    from = dir(file)
    if (!(from in rank)) { printf "%s: folder %s is in no layer (tests/layers/check_layers.sh)\n", file, from; bad = 1; next }
    if (inc !~ /\//) {
        if (inc == "moesim_build_info.h") next   # generated at build time (sim/core/version.c)
        printf "%s:%s: include \"%s\" is not root-relative\n", file, num, inc; bad = 1; next
    }
    if (inc ~ /^\.\.?\//) { printf "%s:%s: include \"%s\" is relative\n", file, num, inc; bad = 1; next }
    to = dir(inc)
    if (!(to in rank)) { printf "%s:%s: include \"%s\": folder %s is in no layer\n", file, num, inc, to; bad = 1; next }
    if (rank[to] > rank[from]) {
        printf "%s:%s: %s (layer %d) includes %s (layer %d): includes go down only\n", file, num, from, rank[from], inc, rank[to]
        bad = 1
    }
    if (to != from && !((from, to) in edge)) { edge[from, to] = 1; out[from] = out[from] " " to; indeg[to]++; nodes[from]; nodes[to] }
}
END {
    # Kahn: peel folders nothing includes; what is left sits on a cycle
    for (v in nodes) if (!(v in indeg)) queue[++qn] = v
    for (h = 1; h <= qn; h++) {
        m = split(out[queue[h]], t, " ")
        for (i = 1; i <= m; i++) if (--indeg[t[i]] == 0) queue[++qn] = t[i]
    }
    cyc = ""
    for (v in nodes) if ((v in indeg) && indeg[v] > 0) cyc = cyc " " v
    if (cyc != "") { printf "folder cycle among:%s\n", cyc; bad = 1 }
    exit bad
}'
