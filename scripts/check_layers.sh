#!/usr/bin/env bash
# Checks that the pure core stays pure, the failures it prevents in brackets:
#  - shim/core and include/tmaguard include only each other and system/library headers     [core depending on the shim]
#  - no <dlfcn.h>, getenv, <cuda.h> or spdlog in the core                                    [a core that cannot be unit-tested
#                                                                                             or fuzzed without a process/driver]
#  - the stand-in driver (tests/fake_cuda) exports every row of shim/driver/entry_points.def       [tests that skip an entry point]
#  - every folder of shim/ is a room of shim/rooms.txt, and its files include headers of their own room or rooms
#    below it (the file's order; no cycle)                                                   [a structure that erodes]
#  - every driver wrapper enters through TG_ENTER (intercept.h): no wrapper returns CUDA_ERROR_NOT_INITIALIZED or
#    opens a HookScope of its own                                                           [preambles that drift apart]
#  - docs/how-it-works.md's list of wrapped entry points names every TG_ENTRY row (_ptsz and _v2 under their base name)
#                                                                                            [docs that drift from the code]
# (The export list and the stand-in's cuGetProcAddress table are generated from the rows; check_exports.sh reads the
# library's exports against them.)
# Usage: scripts/check_layers.sh SOURCE_ROOT STAND_IN_LIBCUDA
set -u
root=${1:?source root}; fake=${2:?stand-in libcuda.so.1}
fail=0
pass() { echo "[PASS] $*"; }
bad() { echo "[FAIL] $*"; fail=1; }

core_files=$(ls "$root"/shim/core/*.cpp "$root"/shim/core/*.h "$root"/shim/core/*.in "$root"/include/tmaguard/*.h "$root"/include/tmaguard/*.inc)
wrong=$(grep -HnE '#include "' $core_files | grep -vE '#include "(tmaguard/[a-z_]+\.(h|inc)|rules_model\.h|struct_search\.h|launch_key\.h|tensormap_words\.h|reserved_words\.h)"' || true)
if [ -z "$wrong" ]; then pass "core includes only tmaguard/*.h, tmaguard/*.inc and its own internal headers (rules_model.h, struct_search.h, launch_key.h, tensormap_words.h, reserved_words.h)"
else bad "core includes a header outside the core:"; echo "$wrong" | sed 's/^/    /'
     echo "    fix: move what the core needs into include/tmaguard/ (pure), or move the code into shim/"; fi

impure=$(grep -HnE '<dlfcn\.h>|getenv|<cuda\.h>|<cudaTypedefs\.h>|spdlog' $core_files || true)
if [ -z "$impure" ]; then pass "core uses no dlfcn, getenv, CUDA header or spdlog"
else bad "core is not pure:"; echo "$impure" | sed 's/^/    /'
     echo "    fix: take the value as a parameter (config.h's EnvLookup shows how) and keep the call in shim/"; fi

want=$(grep -oE '^TG_(ENTRY|REAL_ONLY)\([A-Za-z0-9_]+' "$root/shim/driver/entry_points.def" | sed -E 's/^TG_[A-Z_]+\(//' | sort)
have=$(nm -D --defined-only "$fake" | awk '{print $NF}' | sed 's/@.*//' | sort)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
if [ -z "$missing" ]; then pass "the stand-in driver exports all $(echo "$want" | wc -l) entry points of entry_points.def"
else bad "the stand-in driver lacks: $(echo $missing)"; echo "    fix: define them in tests/fake_cuda/fake_cuda.cpp"; fi
# The shim's rooms, bottom first (shim/rooms.txt): a file includes headers of its own room or of rooms listed before
# it. Every folder under shim/ must be a room, and every room a folder.
mapfile -t rooms < <(grep -E '^[a-z]' "$root/shim/rooms.txt" | awk '{print $1}')
declare -A level
for i in "${!rooms[@]}"; do level[${rooms[$i]}]=$i; done
up=""
for d in "$root"/shim/*/; do
  r=$(basename "$d")
  [ -n "${level[$r]+x}" ] || up+="    shim/$r/: a folder that is no room (add it to shim/rooms.txt, in its place)"$'\n'
done
for r in "${rooms[@]}"; do [ -d "$root/shim/$r" ] || up+="    $r: a room of shim/rooms.txt without a folder"$'\n'; done
for f in "$root"/shim/*/*.cpp "$root"/shim/*/*.h; do
  r=$(basename "$(dirname "$f")")
  [ -n "${level[$r]+x}" ] || continue
  for inc in $(grep -oE '^#include "[a-z_]+/[a-z_]+\.(h|def)"' "$f" | sed -E 's/#include "([a-z_]+)\/.*/\1/'); do
    if [ "$inc" = tmaguard ]; then inc=core; fi
    [ -n "${level[$inc]+x}" ] || { up+="    ${f#$root/} includes from $inc/, which is no room"$'\n'; continue; }
    [ "${level[$inc]}" -le "${level[$r]}" ] || up+="    ${f#$root/} includes from $inc/, a room above $r/"$'\n'
  done
  stray=$(grep -nE '^#include "[^/]+"' "$f" | grep -vE '"(rules_model\.h|struct_search\.h|launch_key\.h|tensormap_words\.h|reserved_words\.h|tmaguard_version\.h)"' || true)
  [ -z "$stray" ] || up+="    ${f#$root/} includes a header without its room: $stray"$'\n'
done
if [ -z "$up" ]; then pass "the shim's files include only their own room or rooms below it (${#rooms[@]} rooms: ${rooms[*]})"
else bad "the shim's rooms are broken:"; printf '%s' "$up"
     echo "    fix: move what the lower room needs down (process/stderr_io.h shows how), or pass it in"; fi

own=$(grep -HnE 'return CUDA_ERROR_NOT_INITIALIZED|HookScope' "$root"/shim/*/*.cpp "$root"/shim/*/*.h |
      grep -vE '^[^:]*/runtime/(intercept|runtime)\.h:' | grep -v '^[^:]*:[0-9]*: *//' || true)
if [ -z "$own" ]; then pass "every wrapper enters through TG_ENTER (no preamble of its own)"
else bad "a wrapper has a preamble of its own:"; echo "$own" | sed 's/^/    /'
     echo "    fix: start the wrapper with TG_ENTER(name) and ask \`call\` (intercept.h)"; fi

wrapped=$(grep -oE '^TG_ENTRY\([A-Za-z0-9_]+' "$root/shim/driver/entry_points.def" | sed -E 's/^TG_ENTRY\(//; s/_(ptsz|v2)$//' |
          sort -u)
readme=$(sed -n '/^## The path of a launch/,/^## /p' "$root/docs/how-it-works.md")
unlisted=$(for n in $wrapped; do echo "$readme" | grep -q "\`$n\`" || echo "$n"; done)
if [ -z "$unlisted" ]; then pass "docs/how-it-works.md names all $(echo "$wrapped" | wc -l) wrapped entry points"
else bad "docs/how-it-works.md (The path of a launch) does not name: $(echo $unlisted)"
     echo "    fix: list them where it says Wrapped:"; fi
exit $fail
