#!/usr/bin/env bash
# The host tests and the CLI tests under AddressSanitizer + UndefinedBehaviorSanitizer (KBIT_SANITIZE=ON),
# built into build-sanitize/. Needs no GPU; about as long as scripts/test.sh (the kernels still compile).
# Any sanitizer report fails the run, also in the CLI tests that pass on a message.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh  # packages and nvcc on the PATH, as for the normal build
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKBIT_SANITIZE=ON \
      -DKBIT_CUDA_ARCHS="${KBIT_CUDA_ARCHS:-90a}" >/dev/null
cmake --build build-sanitize --target kbit_cpu_tests kbit_cli
# The CUDA runtime reserves address ranges ASan also wants; leak checks would only report the runtime's own.
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd build-sanitize
status=0
ctest --output-on-failure --timeout 1800 -L "cpu|cli" "$@" || status=$?
if grep -E "ERROR: AddressSanitizer|runtime error:" Testing/Temporary/LastTest.log; then
  echo "sanitize: sanitizer reports above" >&2
  status=1
fi
exit $status
