#!/usr/bin/env bash
# Checks that the one fork handler knows every lock tmaguard declares [a lock held by another thread at fork() stays
# held in the child, which then hangs on its first use]: each ForkLock row of shim/process/fork_locks.h is registered by
# exactly one module, and every shim source that declares a mutex registers one.
# Usage: scripts/check_fork_locks.sh SOURCE_ROOT
set -u
root=$(cd "${1:?source root}" && pwd)
shim=$root/shim
fail=0
rows=$(sed -n '/^enum class ForkLock/,/^};/p' "$shim/process/fork_locks.h" | grep -oE '^ +k[A-Za-z]+' | tr -d ' ' |
       grep -v '^kCount$' | sort)
registered=$(grep -ohE 'register_fork_lock\(ForkLock::k[A-Za-z]+' "$shim"/*/*.cpp | sed 's/.*:://' | sort)
if [ "$rows" != "$(echo "$registered" | sort -u)" ]; then
  echo "[FAIL] ForkLock rows and register_fork_lock calls differ:"
  diff <(echo "$rows") <(echo "$registered" | sort -u) | sed 's/^/    /'
  fail=1
fi
dups=$(echo "$registered" | uniq -d)
[ -n "$dups" ] && { echo "[FAIL] registered by more than one module: $dups"; fail=1; }
for f in "$shim"/*/*.cpp; do
  if grep -qE '^(static )?std::(timed_|recursive_)?mutex [A-Za-z_]+;' "$f" && ! grep -q 'register_fork_lock(' "$f"; then
    echo "[FAIL] $(basename "$f") declares a mutex but registers no fork lock (shim/process/fork_locks.h)"
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "[PASS] $(echo "$rows" | wc -l) locks, each registered once with the fork handler"
exit "$fail"
