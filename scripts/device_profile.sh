#!/usr/bin/env bash
# Quick performance loop on the GPU machine: build, a few kbit bench rows and an
# Nsight Compute report of one fused-linear launch. Writes under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/kbit-out}
cd "$(dirname "$0")/.."
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DKBIT_GIT_COMMIT="${KBIT_COMMIT:-wip}" > /dev/null 2>&1
ninja -C build-dev kbit_cli ${TESTS:+kbit_gpu_tests} > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head; exit 1; }
if [ -n "${TESTS:-}" ]; then
  build-dev/tests/kbit_gpu_tests --gtest_filter="$TESTS" > "$OUT/tests.txt" 2>&1; echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|error" "$OUT/tests.txt" | head -20
fi
build-dev/kbit bench --model "${MODEL:-glm47}" --m "${MS:-1,16}" --bits "${BITS:-2,4}" --backend "${BACKENDS:-cublas_bf16,kbit_linear}" \
  --repeats 7 --json "$OUT/bench.jsonl" 2> "$OUT/bench_progress.txt" | tee "$OUT/bench.txt" | grep -v "^$" | head -60
if [ -n "${NCU_BITS:-}" ]; then
  for b in $NCU_BITS; do
    timeout 200 ncu --set full -k regex:fused_linear_kernel -s 2 -c 1 build-dev/kbit bench --model glm47 --m "${NCU_M:-1}" --bits $b \
      --backend kbit_linear --repeats 1 > "$OUT/ncu_k$b.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc A|No Eligible|One or More|Warp Cycles Per Issued|Stall|L1/TEX Hit|L2 Hit|Block Limit" "$OUT/ncu_k$b.txt" | head -40
  done
fi
