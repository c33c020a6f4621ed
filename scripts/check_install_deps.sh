#!/usr/bin/env bash
# Checks that scripts/install-deps.sh lists every external program the project's scripts call [a fresh machine where
# scripts/test.sh or scripts/package.sh stops on a missing tool, as cpack's DEB generator did without `file`].
# A program counts as called when a script names it as a command word; the vocabulary below is every tool that a
# minimal Debian might lack. Usage: scripts/check_install_deps.sh SOURCE_ROOT
set -u
root=$(cd "${1:?source root}" && pwd)
listed=$(sed -n '/^programs=(/,/)/p' "$root/scripts/install-deps.sh" | grep -oE '[a-z+-]+:' | tr -d ':' | sort -u)
vocabulary="cmake cpack ctest ninja readelf nm objdump strip dpkg dpkg-deb dpkg-architecture dpkg-shlibdeps file git
  clang clang++ g++
  debootstrap chroot python3 sbatch srun slurmctld slurmd munged pip"
fail=0
for tool in $vocabulary; do
  # a command word: at the start of a line or after a separator, followed by a space (not part of a longer word)
  users=$(grep -lE "(^|[;&|(\`\$]|then |do |&& |\|\| )[[:space:]]*\"?$tool\"?[[:space:]]" "$root"/scripts/*.sh \
            "$root"/scripts/tmaguard "$root"/.ci/run 2>/dev/null |
          grep -v "/check_install_deps.sh$" | sort -u)
  [ -n "$users" ] || continue
  if grep -qx -- "$tool" <<<"$listed"; then
    echo "[PASS] $tool (called by $(echo $users | sed "s#$root/##g"))"
  else
    echo "[FAIL] $tool is called by $(echo $users | sed "s#$root/##g") but scripts/install-deps.sh does not list it"
    fail=1
  fi
done
[ "$fail" -eq 0 ] || echo "fix: add PROGRAM:PACKAGE to 'programs' (and the package to 'pkgs') in scripts/install-deps.sh"
exit "$fail"
