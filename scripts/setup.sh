#!/usr/bin/env bash
# One command from a fresh clone: installs what is missing, builds, and runs the demo against the stand-in driver
# (a clean FA4-shaped run, then a dK layout violation caught in log and abort mode).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
exec "$root/scripts/demo.sh"
