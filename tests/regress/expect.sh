#!/bin/sh
# Usage: expect.sh CODE REGEX command [args...]
# Passes when the command exits with CODE and some line of its standard
# output matches REGEX (extended grep); prints the output either way.
code=$1; regex=$2; shift 2
out=$("$@"); rc=$?
printf '%s\n' "$out"
[ "$rc" = "$code" ] || { echo "expect: exit code $rc, expected $code"; exit 1; }
printf '%s\n' "$out" | grep -Eq -- "$regex" || { echo "expect: no line matches '$regex'"; exit 1; }
