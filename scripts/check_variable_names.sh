#!/usr/bin/env bash
# Checks that the library (shim/) and the tool (tools/) name no TMAGUARD_* variable by a string of their own: every
# name comes from the one table (include/tmaguard/flags.inc, through Config's members or kVariable; the command's own
# variables through kCommandVariables), so that a variable is added, renamed or documented in one place.
# Usage: scripts/check_variable_names.sh [SOURCE_ROOT]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
# a string that starts with a variable's name (a bare "TMAGUARD_" prefix is no name), outside // comments
found=$(cd "$root" && grep -rnE --include='*.cpp' --include='*.h' --include='*.inc' '"TMAGUARD_[A-Z]' shim tools |
        grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -z "$found" ]; then echo "[PASS] shim/ and tools/ take every TMAGUARD_ variable's name from flags.inc"; exit 0; fi
echo "[FAIL] a TMAGUARD_ variable named by a string of its own (take it from kVariable, include/tmaguard/config.h):"
echo "$found" | sed 's/^/    /'
exit 1
