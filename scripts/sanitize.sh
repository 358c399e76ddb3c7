#!/usr/bin/env bash
# The host tests and the CLI tests under sanitizers, built with KBIT_SANITIZE. Needs no GPU; each build is as
# long as scripts/test.sh's (the kernels still compile). Any sanitizer report fails the run, also in the CLI
# tests that pass on a message.
#   scripts/sanitize.sh           AddressSanitizer + UndefinedBehaviorSanitizer, into build-sanitize/
#   scripts/sanitize.sh thread    ThreadSanitizer (the CPU reference's and the streamer's threads), into build-sanitize-thread/
# Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh  # packages and nvcc on the PATH, as for the normal build
mode=address,undefined
dir=build-sanitize
if [ "${1:-}" = thread ]; then
  mode=thread
  dir=build-sanitize-thread
  shift
fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKBIT_SANITIZE="$mode" \
      -DKBIT_CUDA_ARCHS="${KBIT_CUDA_ARCHS:-90a}" >/dev/null
cmake --build "$dir" --target kbit_cpu_tests kbit_cli
# The CUDA runtime reserves address ranges ASan also wants; leak checks would only report the runtime's own.
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
cd "$dir"
status=0
ctest --output-on-failure --timeout 1800 -L "cpu|cli" "$@" || status=$?
if grep -E "ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer" Testing/Temporary/LastTest.log; then
  echo "sanitize: sanitizer reports above" >&2
  status=1
fi
exit $status
