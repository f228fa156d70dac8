#!/bin/sh
# Every policy `moesim list` prints has a row "| `NAME` | KIND |" in
# docs/policies.md, and every such row names a registered policy.
# Usage: docs_policies.sh MOESIM PATH_OF_docs_policies.md
M=$1; DOC=$2
listed=$("$M" list | awk '/^(prefetch|cache|sched) policies/ {kind=$1; next} /^[a-z]/ {kind=""} kind && /^  [a-z]/ {print kind, $1}' | sort)
documented=$(grep -E '^\| `[a-z0-9-]+` \| (prefetch|cache|sched) \|' "$DOC" | sed -E 's/^\| `([a-z0-9-]+)` \| ([a-z]+) \|.*/\2 \1/' | sort)
[ -n "$listed" ] || { echo "moesim list printed no policies"; exit 1; }
missing=$(printf '%s\n' "$listed" | grep -vxF "$documented")
extra=$(printf '%s\n' "$documented" | grep -vxF "$listed")
[ -z "$missing" ] || { echo "registered but not in $DOC:"; echo "$missing"; exit 1; }
[ -z "$extra" ] || { echo "in $DOC but not registered:"; echo "$extra"; exit 1; }
echo "ok: $(printf '%s\n' "$listed" | wc -l) policies documented"
