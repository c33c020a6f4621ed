#!/usr/bin/env bash
# Runs a command for ctest and passes only when it exits 0 AND its output matches an extended regular expression
# (ctest's PASS_REGULAR_EXPRESSION alone would pass a command that crashed after printing the line).
#
#   expect_output.sh REGEX COMMAND [ARGS...]
set -uo pipefail
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "expect_output: '$1' exited $rc" >&2; exit 1; }
grep -Eq -- "$regex" <<<"$(tr '\n' ' ' <<<"$out")" || { echo "expect_output: '$1' printed nothing matching: $regex" >&2; exit 1; }
