#!/bin/sh
# Usage: expect_fail.sh CODE REGEX command [args...]
# Passes when the command exits with CODE and its stderr is exactly one line
# matching REGEX (extended grep), and it wrote no core dump / sanitizer report.
code=$1; regex=$2; shift 2
err=$("$@" 2>&1 >/dev/null); rc=$?
lines=$(printf '%s\n' "$err" | grep -c .)
if [ "$rc" != "$code" ]; then echo "exit code $rc, expected $code; stderr: $err"; exit 1; fi
if [ "$lines" != 1 ]; then echo "expected one line on stderr, got $lines: $err"; exit 1; fi
if ! printf '%s\n' "$err" | grep -Eq -- "$regex"; then echo "stderr '$err' does not match '$regex'"; exit 1; fi
echo "ok: $err"
