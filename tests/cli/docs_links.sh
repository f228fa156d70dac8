#!/bin/sh
# Every document the code and the docs cite is in the repository:
#  - a path ending in .md written in a source, script, CMake file, profile or
#    doc page (docs/engine.md, tests/data/record/README.md, ...) exists; a
#    path in another repository, cited as OWNER/REPO@COMMIT PATH, is not ours;
#  - a Markdown link [text](target) in README.md or docs/ points at a file
#    that exists (anchors and URLs aside);
#  - nothing cites the design documents that live outside the repository
#    (DESIGN.md, POLICIES.md, REFERENCE.md);
#  - every source id a profile cites ([S1], [H4], ...) is listed in
#    docs/sources.md.
# One line per problem; exit 1 if any.
# usage: docs_links.sh SOURCE_DIR
root=${1:?usage: docs_links.sh SOURCE_DIR}
cd "$root" || exit 2
out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT

files=$(find README.md docs sim traces policies kernels bench plots tests CMakeLists.txt cmake \
             -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.py' -o -name '*.sh' \
             -o -name '*.cmake' -o -name 'CMakeLists.txt' -o -name '*.ini' -o -name '*.md' \
             -o -name '*.gp' \) \
             -not -path 'tests/fuzz/corpus/*' -not -path 'tests/layers/fixtures/*' 2>/dev/null)

# paths with a folder part that end in .md
for f in $files; do
    sed -E 's#[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+@[0-9a-f]{7,40} [^ ,;]+##g' "$f" |
        grep -oE '[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+\.md' | sort -u | while read -r p; do
        case $p in
            ../shared/*|http*|*://*) continue ;;
        esac
        [ -e "$p" ] || [ -e "$(dirname "$f")/$p" ] || echo "$f: cites $p, which is not in the repository"
    done
done > "$out"
# Markdown links in README.md and docs/
for f in README.md docs/*.md; do
    grep -oE '\]\([^)#[:space:]]+' "$f" | sed 's/^](//' | sort -u | while read -r t; do
        case $t in http*|mailto:*) continue ;; esac
        [ -e "$(dirname "$f")/$t" ] || echo "$f: links to $t, which does not exist"
    done
done >> "$out"
# documents outside the repository
for f in $files; do
    case $f in docs/sources.md|tests/cli/docs_links.sh) continue ;; esac
    grep -nE '(^|[^/A-Za-z0-9_.-])(DESIGN|POLICIES|REFERENCE)\.md' "$f" | sed "s|^|$f:|; s|\$| (a document outside the repository)|"
done >> "$out"
# profile source ids
for id in $(grep -rhoE '\[[A-Z][0-9]+[a-z]?\]' sim/profiles | sort -u | tr -d '[]'); do
    grep -q "\*\*$id\*\*" docs/sources.md || echo "sim/profiles: source id [$id] is not listed in docs/sources.md"
done >> "$out"
if [ -s "$out" ]; then cat "$out"; exit 1; fi
echo "docs_links: every cited document and source id resolves"
