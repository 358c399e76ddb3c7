#!/usr/bin/env bash
# The whole test suite: set up, build, run every ctest test. GPU tests (label gpu)
# report "skipped" on machines without a GPU; any failure exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure --timeout 900 "$@"
