#!/usr/bin/env bash
# The GEMV's device check (issue 4): build, the linear GPU tests, memcheck and racecheck
# of the GEMV tests, and the M = 1..4 model tables for every path against cuBLAS.
# Usage (device tool): bash scripts/device_gemv_probe.sh COMMIT
export KBIT_COMMIT=$1
KBIT_STEPS="test:GpuLinear.* memcheck:GpuLinear.Gemv* racecheck:GpuLinear.Gemv* model_bench" KBIT_TEST_TIMEOUT=200 \
  KBIT_BENCH_TIMEOUT=240 KBIT_SANITIZER_TIMEOUT=120 \
  KBIT_BENCH_ARGS="--m 1,2,3,4 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear,kbit_gemv,kbit_fused_mma --repeats 7" \
  bash scripts/device_quick.sh
tar xzf $OUT/results.tgz -C $OUT && rm -f $OUT/results.tgz
grep -E "^M =|^glm47|^kimi|^TOTAL" $OUT/model_bench.txt | head -80
