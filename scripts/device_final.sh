#!/usr/bin/env bash
# End-of-session GPU check: every GPU test, memcheck of the GEMV tests, and glm47 at
# M = 1, 2 for every linear path against cuBLAS. Usage: bash scripts/device_final.sh COMMIT
export KBIT_COMMIT=$1
KBIT_STEPS="ctest memcheck:GpuLinear.Gemv* model_bench" KBIT_SANITIZER_TIMEOUT=60 KBIT_BENCH_TIMEOUT=100 \
  KBIT_BENCH_ARGS="--model glm47 --m 1,2 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear,kbit_gemv,kbit_fused_mma --repeats 7" \
  bash scripts/device_quick.sh > /dev/null
tar xzf $OUT/results.tgz -C $OUT && rm -f $OUT/results.tgz
grep -E "tests passed|Failed|FAILED|Timeout" $OUT/ctest_gpu.log | head -12
grep -E "ERROR SUMMARY" $OUT/memcheck.log | tail -1
grep -E "^M =|^glm47.(q|kv|o|shared_gu|shared_dn) " $OUT/model_bench.txt
