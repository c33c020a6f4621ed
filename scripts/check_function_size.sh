#!/usr/bin/env bash
# Checks that no function of the library (shim/) or the tool (tools/) is over 60 lines, from the first line of its
# definition to its closing brace, as universal-ctags reads them [functions that grow until nobody can change them].
# Usage: scripts/check_function_size.sh [SOURCE_ROOT [LIMIT]]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}; limit=${2:-60}
command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q Universal ||
  { echo "[FAIL] function size: universal-ctags is not installed (scripts/install-deps.sh installs it)"; exit 1; }
long=$(cd "$root" && ctags -x --_xformat='%{input} %{line} %{end} %{name}' --kinds-c++=f --languages=C++ \
         --map-C++=+.inc -R shim tools 2>/dev/null |
       awk -v lim="$limit" '$3 != "" && $3 - $2 + 1 > lim { printf "    %s:%s %s: %d lines\n", $1, $2, $4, $3 - $2 + 1 }' | sort)
if [ -z "$long" ]; then echo "[PASS] no function of shim/ or tools/ is over $limit lines"; exit 0; fi
echo "[FAIL] functions over $limit lines:"; echo "$long"
echo "    fix: split them into steps with names that say what each does"
exit 1
