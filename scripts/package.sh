#!/usr/bin/env bash
# Builds the Debian package (tmaguard_<version>_<arch>.deb, installing under /usr) into the build directory and
# prints its path. Install it with: sudo apt install ./tmaguard_*.deb
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TMAGUARD_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
(cd "$build" && cpack -G DEB >/dev/null) || { echo "package: cpack failed (see $build/_CPack_Packages)" >&2; exit 1; }
ls -t "$build"/tmaguard_*.deb | head -1
