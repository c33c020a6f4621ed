#!/usr/bin/env bash
# Release test (run by scripts/test.sh): what scripts/package.sh ships, where ML jobs live.
#  1. the symbol versions every shipped binary needs: GLIBC 2.31 at most (Debian 11, Ubuntu 20.04), and no library
#     but libc, libm, libdl, libpthread, librt; the .deb depends on libc6 only, the wheel's tag says manylinux_2_31
#     or lower
#  2. in a real Debian 11 root (glibc 2.31): the .deb installed with apt-get, `tmaguard --version` and the demo, then
#     apt-get remove leaves none of its files; the wheel pip-installed (--no-index) into a fresh venv, the demo and
#     `python -m tmaguard`, then pip uninstall leaves the venv as it was
#  3. on this machine: the wheel in a fresh venv, the same
# Needs root (debootstrap, chroot, mount): without it the test says so and is skipped, never faked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rel=${TMAGUARD_RELEASE_DIR:-$root/build-release}
sysroot="$rel/bullseye"
passed=0
ok() { passed=$((passed + 1)); echo "test-release: ok: $*"; }
fail() { echo "test-release: FAIL: $*" >&2; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
  echo "test-release: skipped: needs root (the release build runs in a Debian 11 root: debootstrap, chroot)"
  echo "test-release: 0 checks passed (skipped)"
  exit 0
fi
out=$("$root/scripts/package.sh")
deb=$(grep '_amd64\.deb$' <<<"$out")
whl=$(grep 'x86_64\.whl$' <<<"$out")
stage="$rel/stage"
[ -f "$deb" ] && [ -f "$whl" ] || fail "package.sh made no .deb or wheel: $out"

# 1. symbol versions and libraries
worst=0.0
while IFS= read -r f; do
  head -c 4 "$f" | grep -q ELF || continue
  v=$(objdump -T "$f" | { grep -oE 'GLIBC_[0-9]+\.[0-9]+' || true; } | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n | tail -1)
  [ -n "$v" ] || continue
  [ "$(printf '%s\n2.31\n' "$v" | sort -t. -k1,1n -k2,2n | tail -1)" = "2.31" ] || fail "$f needs GLIBC_$v (> 2.31)"
  worst=$(printf '%s\n%s\n' "$worst" "$v" | sort -t. -k1,1n -k2,2n | tail -1)
  extra=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
          grep -v -E '^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2)$' || true)
  [ -z "$extra" ] || fail "$f needs $extra"
done < <(find "$stage" -type f)
ok "every shipped binary needs GLIBC_$worst at most and only libc/libm/libdl/libpthread/librt"
depends=$(dpkg-deb -f "$deb" Depends)
[ "$depends" = "libc6 (>= 2.31)" ] || fail "the package depends on '$depends' (want libc6 (>= 2.31), the baseline)"
[[ "$(basename "$whl")" =~ -py3-none-manylinux_2_31_x86_64\.whl$ ]] || fail "the wheel's tag: $(basename "$whl") (want manylinux_2_31)"
ok "the package depends on $depends; the wheel is $(basename "$whl")"

# the wheel in a fresh venv of `python`, inside `chroot_cmd` (empty: this machine): installed with --no-index, the
# command and python -m work, the demo stops the bad launch, and pip uninstall leaves the venv as it was
wheel_check() {
  local where=$1 run=$2 py=$3 whl_path=$4 venv=$5
  $run "rm -rf $venv && $py -m venv $venv && find $venv | sort >$venv.before" || fail "$where: cannot make a venv"
  $run "$venv/bin/pip install -q --no-index $whl_path" || fail "$where: pip install --no-index of the wheel"
  $run "$venv/bin/tmaguard --version" | grep -q "library: $venv/.*/tmaguard/_install/lib/libtmaguard.so: tmaguard" ||
    fail "$where: tmaguard --version from the venv"
  $run "$venv/bin/python -m tmaguard --version" | grep -q "^tmaguard " || fail "$where: python -m tmaguard"
  # the launcher helper tries the preload here before it hands out an environment (a library that cannot load: PreloadError)
  $run "$venv/bin/python -c \"import tmaguard; print(tmaguard.environment(mode='abort')['LD_PRELOAD'])\"" |
    grep -Eq "^$venv/.*/tmaguard/_install/lib/libtmaguard\.so(:|\$)" || fail "$where: tmaguard.environment() from the venv"
  # the declaration helper, in a Python the wheel's library is preloaded into, loads its C extension (stable ABI)
  lib=$($run "$venv/bin/python -c \"import tmaguard; print(tmaguard.library_path())\"")
  $run "LD_PRELOAD=$lib $venv/bin/python -c \"import tmaguard; print(tmaguard._declare.backend())\"" 2>/dev/null |
    grep -qx speedups || fail "$where: the wheel's Python helper does not load its C extension ($py)"
  $run "$venv/bin/tmaguard demo" >"$rel/demo.$where.out" 2>&1 || fail "$where: the wheel's demo: $(tail -5 "$rel/demo.$where.out")"
  grep -q "fa4-dk-not-k-major" "$rel/demo.$where.out" || fail "$where: the wheel's demo reported nothing"
  $run "$venv/bin/pip uninstall -y -q tmaguard && find $venv | sort >$venv.after && diff $venv.before $venv.after" ||
    fail "$where: pip uninstall left files behind"
  ok "$where: the wheel from a fresh venv (--no-index): --version, python -m tmaguard, tmaguard.environment(), the helper's C extension, the demo; uninstalled cleanly"
}

# 2. a real Debian 11 root
mount -t proc proc "$sysroot/proc"
trap 'umount "$sysroot/proc" 2>/dev/null || true' EXIT
in_root() { chroot "$sysroot" /bin/bash -c "$1"; }
in_root "command -v python3 >/dev/null && dpkg -s python3-venv >/dev/null 2>&1" ||
  in_root "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1" ||
  fail "cannot install python3-venv in the Debian 11 root"
[ "$(in_root "ldd --version | head -1 | grep -oE '[0-9]+\.[0-9]+$'")" = "2.31" ] || fail "the root is not glibc 2.31"
cp "$deb" "$sysroot/tmp/" && cp "$whl" "$sysroot/tmp/"
in_root "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/$(basename "$deb") >/dev/null 2>&1" ||
  fail "apt-get install of the package in Debian 11"
in_root "tmaguard --version" | grep -q "library: /usr/lib/x86_64-linux-gnu/libtmaguard.so: tmaguard" ||
  fail "tmaguard --version in Debian 11: $(in_root "tmaguard --version" 2>&1)"
in_root "tmaguard demo" >"$rel/demo.deb.out" 2>&1 || fail "the package's demo in Debian 11: $(tail -5 "$rel/demo.deb.out")"
grep -q "fa4-dk-not-k-major" "$rel/demo.deb.out" || fail "the package's demo in Debian 11 reported nothing"
files=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\.##' | grep -v '/$')
in_root "DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq tmaguard >/dev/null 2>&1" || fail "apt-get remove"
for f in $files; do [ ! -e "$sysroot$f" ] || fail "apt-get remove left $f"; done
ok "Debian 11 (glibc 2.31): apt-get install of the package, --version, the demo; apt-get remove left none of its files"
wheel_check debian11 in_root python3 "/tmp/$(basename "$whl")" /tmp/tmaguard-venv

# 3. this machine
here_run() { bash -c "$1"; }
wheel_check host here_run /usr/bin/python3 "$whl" "$rel/venv"
echo "test-release: $passed checks passed (glibc baseline, the .deb in Debian 11, the wheel in Debian 11 and here)"
