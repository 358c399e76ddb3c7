#!/usr/bin/env bash
# The main job: set up, build, then run `kbit` with the given arguments
# (no arguments: `kbit demo`, which uses the GPU when there is one and the CPU otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/kbit "$@"
