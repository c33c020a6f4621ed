#!/usr/bin/env bash
# Checks that scripts/install-deps.sh lists every external program the project's scripts call (scripts/*, but the
# GPU machine's gpu-* ones) [a fresh machine where
# scripts/test.sh or scripts/package.sh stops on a missing tool, as cpack's DEB generator did without `file`].
# A program counts as called when a script names it as a command word; the vocabulary below is every tool that a
# minimal Debian might lack. Usage: scripts/check_install_deps.sh SOURCE_ROOT
set -u
root=$(cd "${1:?source root}" && pwd)
listed=$(sed -n '/^programs=(/,/)/p' "$root/scripts/install-deps.sh" | grep -oE '[a-z0-9+-]+:' | tr -d ':' | sort -u)
vocabulary="cmake cpack ctest ninja readelf nm objdump strip dpkg dpkg-deb dpkg-architecture dpkg-shlibdeps file git
  clang clang++ g++
  debootstrap chroot python3 sbatch srun sinfo slurmctld slurmd munged pgrep prometheus promtool
  prometheus-node-exporter curl unshare"
fail=0
for tool in $vocabulary; do
  # a command word: at the start of a line or after a separator, followed by a space (not part of a longer word)
  users=""
  for f in "$root"/scripts/* "$root"/.ci/run; do
    # the GPU scripts run on a GPU machine, which install-deps.sh does not set up
    case "$(basename "$f")" in check_install_deps.sh|gpu-*) continue ;; esac
    # comment lines do not call anything
    if sed '/^[[:space:]]*#/d' "$f" | grep -qE "(^|[;&|(\`\$]|then |do |&& |\|\| )[[:space:]]*\"?$tool\"?[[:space:]]"; then
      users+=" ${f#$root/}"
    fi
  done
  [ -n "$users" ] || continue
  if grep -qx -- "$tool" <<<"$listed"; then
    echo "[PASS] $tool (called by$users)"
  else
    echo "[FAIL] $tool is called by$users but scripts/install-deps.sh does not list it"
    fail=1
  fi
done
[ "$fail" -eq 0 ] || echo "fix: add PROGRAM:PACKAGE to 'programs' (and the package to 'pkgs') in scripts/install-deps.sh"
exit "$fail"
