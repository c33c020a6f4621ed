#!/usr/bin/env bash
# One command from a fresh clone: installs what the build and the demo need (the tests' own packages come with
# scripts/test.sh), builds the library, the command and the demo, and runs the demo against the stand-in driver (a
# clean FA4-shaped run, then a dK layout violation caught in log, abort and reject mode).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" --no-tests
exec "$root/scripts/demo.sh"
