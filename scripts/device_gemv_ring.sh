#!/usr/bin/env bash
# GEMV check after a kernel change: the linear GPU tests, glm47 at M = 1, 2, 4 for the
# GEMV and the fused kernel, and the GEMV's SASS (k = 4, bf16, M = 1) for instruction counts.
export KBIT_COMMIT=$1
KBIT_STEPS="test:GpuLinear.* model_bench" KBIT_TEST_TIMEOUT=200 KBIT_BENCH_TIMEOUT=150 \
  KBIT_BENCH_ARGS="--model glm47 --m 1,2,4 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear,kbit_gemv,kbit_fused_mma --repeats 7" \
  bash scripts/device_quick.sh > /dev/null
tar xzf $OUT/results.tgz -C $OUT && rm -f $OUT/results.tgz
grep -E "OK|FAILED" $OUT/test_GpuLinear__.log | head -9
grep -E "^M =|^glm47.(q|kv|o|shared_gu|shared_dn) " $OUT/model_bench.txt
f=$(cuobjdump -symbols build-dev/kbit 2>/dev/null | grep -o "_ZN4kbit4cuda6detail11gemv_kernelILi4E13__nv_bfloat16Li1EEE[A-Za-z0-9_]*" | head -1)
cuobjdump -sass -fun "$f" build-dev/kbit > $OUT/sass_gemv_k4_bf16_m1.txt 2>&1
grep -oE "^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+" $OUT/sass_gemv_k4_bf16_m1.txt | awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -12 | tr '\n' ' '
