#!/usr/bin/env bash
# Checks that the pure core stays pure, the failures it prevents in brackets:
#  - shim/core and include/tmaguard include only each other and system/library headers     [core depending on the shim]
#  - no <dlfcn.h>, getenv, <cuda.h> or spdlog in the core                                    [a core that cannot be unit-tested
#                                                                                             or fuzzed without a process/driver]
#  - the stand-in driver (tests/fake_cuda) exports every row of shim/entry_points.def       [tests that skip an entry point]
#  - the shim's units include only units of their own layer or below (the order below; no cycle)
#                                                                                            [a structure that erodes]
#  - every driver wrapper enters through TG_ENTER (intercept.h): no wrapper returns CUDA_ERROR_NOT_INITIALIZED or
#    opens a HookScope of its own                                                           [preambles that drift apart]
#  - the README's list of wrapped entry points names every TG_ENTRY row (_ptsz and _v2 under their base name)
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
wrong=$(grep -HnE '#include "' $core_files | grep -vE '#include "(tmaguard/[a-z_]+\.(h|inc)|rules_model\.h)"' || true)
if [ -z "$wrong" ]; then pass "core includes only tmaguard/*.h, tmaguard/*.inc and its own rules_model.h"
else bad "core includes a header outside the core:"; echo "$wrong" | sed 's/^/    /'
     echo "    fix: move what the core needs into include/tmaguard/ (pure), or move the code into shim/"; fi

impure=$(grep -HnE '<dlfcn\.h>|getenv|<cuda\.h>|<cudaTypedefs\.h>|spdlog' $core_files || true)
if [ -z "$impure" ]; then pass "core uses no dlfcn, getenv, CUDA header or spdlog"
else bad "core is not pure:"; echo "$impure" | sed 's/^/    /'
     echo "    fix: take the value as a parameter (config.h's EnvLookup shows how) and keep the call in shim/"; fi

want=$(grep -oE '^TG_(ENTRY|REAL_ONLY)\([A-Za-z0-9_]+' "$root/shim/entry_points.def" | sed -E 's/^TG_[A-Z_]+\(//' | sort)
have=$(nm -D --defined-only "$fake" | awk '{print $NF}' | sed 's/@.*//' | sort)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
if [ -z "$missing" ]; then pass "the stand-in driver exports all $(echo "$want" | wc -l) entry points of entry_points.def"
else bad "the stand-in driver lacks: $(echo $missing)"; echo "    fix: define them in tests/fake_cuda/fake_cuda.cpp"; fi
# The shim's layers, bottom first: a unit (its .h and .cpp) may include units of its own layer or lower ones.
layers=(
  "hot cuda_names fork_locks graph_node stderr_io"  # words, names and leaves
  "driver"                                          # the real driver (the only dlfcn user)
  "counters provenance device_arch allocations"     # facts kept per process
  "reporter"                                        # log, dedupe, actions, summary
  "runtime"                                         # initialisation, armed(), the rules in force
  "intercept kernel_cache"                          # the wrapper entry; kernel facts
  "launch_check device_audit"                       # collect -> judge -> report; maps read back after a kernel
  "hooks_launch hooks_graph hooks_encode hooks_getproc hooks_dlsym hooks_module hooks_memory"  # the wrappers
)
declare -A level
for i in "${!layers[@]}"; do for u in ${layers[$i]}; do level[$u]=$i; done; done
up=""
for f in "$root"/shim/*.cpp "$root"/shim/*.h; do
  u=$(basename "$f"); u=${u%.*}
  [ -n "${level[$u]+x}" ] || { up+="    $u: in no layer (add it to scripts/check_layers.sh)"$'\n'; continue; }
  for inc in $(grep -oE '^#include "[a-z_]+\.h"' "$f" | sed -E 's/#include "([a-z_]+)\.h"/\1/'); do
    [ "$inc" = "$u" ] && continue
    [ -n "${level[$inc]+x}" ] || continue
    [ "${level[$inc]}" -le "${level[$u]}" ] || up+="    $(basename "$f") includes $inc.h, a higher layer"$'\n'
  done
done
if [ -z "$up" ]; then pass "the shim's ${#level[@]} units include only their own layer or lower ones (${#layers[@]} layers)"
else bad "the shim's layering is broken:"; printf '%s' "$up"
     echo "    fix: move what the lower unit needs down (stderr_io.h shows how), or pass it in"; fi

own=$(grep -HnE 'return CUDA_ERROR_NOT_INITIALIZED|HookScope' "$root"/shim/*.cpp "$root"/shim/*.h |
      grep -vE '^[^:]*/(intercept|runtime)\.h:' | grep -v '^[^:]*:[0-9]*: *//' || true)
if [ -z "$own" ]; then pass "every wrapper enters through TG_ENTER (no preamble of its own)"
else bad "a wrapper has a preamble of its own:"; echo "$own" | sed 's/^/    /'
     echo "    fix: start the wrapper with TG_ENTER(name) and ask \`call\` (intercept.h)"; fi

wrapped=$(grep -oE '^TG_ENTRY\([A-Za-z0-9_]+' "$root/shim/entry_points.def" | sed -E 's/^TG_ENTRY\(//; s/_(ptsz|v2)$//' |
          sort -u)
readme=$(sed -n '/^## How it works/,/^## /p' "$root/README.md")
unlisted=$(for n in $wrapped; do echo "$readme" | grep -q "\`$n\`" || echo "$n"; done)
if [ -z "$unlisted" ]; then pass "the README's How it works names all $(echo "$wrapped" | wc -l) wrapped entry points"
else bad "the README's How it works does not name: $(echo $unlisted)"; echo "    fix: list them where it says Wrapped:"; fi
exit $fail
