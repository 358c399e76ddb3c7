#!/usr/bin/env bash
# Installs kbit's Debian packages (when missing), configures and builds into build/.
# Needs the CUDA toolkit (13.x) under /usr/local/cuda or nvcc on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh

# One GPU architecture keeps the build short; override with KBIT_CUDA_ARCHS="90a;100a".
# KBIT_WERROR=ON (CI sets it): compiler warnings and ptxas warnings, a register spill among them, fail the build.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKBIT_CUDA_ARCHS="${KBIT_CUDA_ARCHS:-90a}" \
  ${KBIT_WERROR:+-DKBIT_WERROR="$KBIT_WERROR"} >/dev/null
cmake --build build
