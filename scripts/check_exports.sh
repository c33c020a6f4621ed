#!/usr/bin/env bash
# Checks the hygiene of the built preloaded library, the failures it prevents in brackets:
#  - exports = the TG_ENTRY rows of shim/driver/entry_points.def + dlsym + the TG_API rows of shim/interpose/api.def
#                                                                     [our symbols hijacking the host's]
#  - NEEDED within libc/libm/libdl/libpthread/ld-linux              [libstdc++/spdlog/fmt/libcuda pulled into every process]
#  - .init_array holds the toolchain's entries and tmaguard's one      [work at load time in processes that never use CUDA]
#    note of stderr and the working directory (shim/runtime/at_load.cpp)
#  - the non-CUDA dlsym forward is a tail jump                       [RTLD_NEXT resolved relative to tmaguard]
# Usage: scripts/check_exports.sh build/libtmaguard.so shim/driver/entry_points.def
set -u
lib=${1:?library}; def=${2:?entry_points.def}
fail=0
# An aarch64 library (scripts/build.sh --arch aarch64) is read with the cross binutils; its tail jump is a BR or B.
objdump=objdump; addr2line=addr2line; tail_jump='jmp +\*'
if [ "$(od -An -tu2 -j18 -N2 "$lib" | tr -d ' ')" = 183 ]; then
  objdump=aarch64-linux-gnu-objdump; addr2line=aarch64-linux-gnu-addr2line; tail_jump='(^|[[:space:]])(br[[:space:]]+x[0-9]+|b[[:space:]]+[0-9a-f]+ <)'
fi
pass() { echo "[PASS] $*"; }
bad() { echo "[FAIL] $*"; fail=1; }

api="$(dirname "$def")/../interpose/api.def"  # tmaguard's own functions (include/tmaguard/declare.h)
want=$( (grep -oE '^TG_ENTRY\([A-Za-z0-9_]+' "$def" | sed 's/TG_ENTRY(//'; echo dlsym
         grep -oE '^TG_API\([A-Za-z0-9_]+' "$api" | sed 's/TG_API(//') | sort)
have=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort)
if [ "$want" = "$have" ]; then pass "exports are exactly the $(echo "$want" | wc -l) declared entry points"
else bad "exports differ from entry_points.def + dlsym + api.def:"; diff <(echo "$want") <(echo "$have") | sed 's/^/    /'
     echo "    fix: export only through the generated version script; keep -fvisibility=hidden"; fi

needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
extra=$(echo "$needed" | grep -vE '^(libc\.so|libm\.so|libdl\.so|libpthread\.so|ld-linux|librt\.so)' || true)
if [ -z "$extra" ]; then pass "NEEDED: $(echo $needed)"
else bad "NEEDED has $(echo $extra); fix: link libstdc++/libgcc statically, use spdlog/fmt header-only"; fi

# Every .init_array entry must be the toolchain's frame_dummy, an initializer of the statically linked libstdc++
# runtime (its emergency exception pool, locale ids, ios_failure category), or tmaguard's one load-time note
# (at_load.cpp: descriptor 2's identity and the working directory); no other tmaguard code may run at load time. On
# aarch64 libgcc's init_have_lse_atomics (which atomic instructions the CPU has) is the toolchain's too.
init=$(readelf -x .init_array "$lib" 2>/dev/null | awk '/^ +0x/ {for (i=2;i<=5;i++) if (length($i)==8 && $i ~ /^[0-9a-f]+$/) printf "%s", $i} END {print ""}' | cut -c1-)
bad_init=""; n=0; notes=0
for ((i=0; i<${#init}; i+=16)); do
  le=${init:i:16}; be=""
  for ((j=14; j>=0; j-=2)); do be+=${le:j:2}; done
  fn=$("$addr2line" -f -e "$lib" "0x$be" | head -1)
  n=$((n+1))
  case "$fn" in
    frame_dummy|init_have_lse_atomics|_GLOBAL__sub_I_eh_alloc.cc|_GLOBAL__sub_I_*locale_inst.cc|_GLOBAL__sub_I_system_error.cc|_GLOBAL__sub_I_*ios_failure.cc) ;;
    *tmaguard_note_at_load*) notes=$((notes+1)) ;;
    *) bad_init+=" $fn" ;;
  esac
done
[ "$notes" -eq 1 ] || bad_init+=" (tmaguard_note_at_load found $notes times, not once)"
if [ -z "$bad_init" ]; then pass ".init_array: $n entries, the toolchain/libstdc++ runtime and tmaguard's one load-time note"
else bad ".init_array runs tmaguard code at load time:$bad_init";
     echo "    fix: make globals constant-initialised (atomics, raw pointers) or function-local"; fi

if "$objdump" -d --no-show-raw-insn "$lib" | awk '/<dlsym(@@[A-Z_0-9.]+)?>:/,/^$/' | grep -qE "$tail_jump"; then
  pass "dlsym forwards non-CUDA names with a tail jump"
else bad "dlsym has no tail jump to the real dlsym; fix: keep hooks_dlsym.cpp at -O2 -foptimize-sibling-calls"; fi
exit $fail
