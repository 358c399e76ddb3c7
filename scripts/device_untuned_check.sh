#!/usr/bin/env bash
# The sixty-first session's device checks, in two calls of the device tool (the build of the first
# stays on the machine for the second). Usage: bash scripts/device_untuned_check.sh tests|bench|bench62 COMMIT
#   tests: every GPU test, memcheck of the MoE checkpoint test and of the operand dequantize test, racecheck
#          of the latter (the operand dequantize changed in the sixty-second session);
#   bench: the refit untuned plans against the tuned ones and cuBLAS on every dense shape at M = 5, 8, 12,
#          16, 48, 64, 96, 128 (M = 48..128: the tile kernel for small W on Hopper, new),
#          k = 2..5 (kbit_linear_untuned against kbit_linear: the untuned plans should be within a few
#          percent by geomean, bench/analysis/untuned_plans.py predicts 1.01x at M = 8..16).
export KBIT_COMMIT=$2
case $1 in
  tests)
    KBIT_STEPS="ctest memcheck:GpuMoeForward.LayerFromAQuantizedCheckpoint:GpuMma16.OperandDequantizeMatchesTheExactValues racecheck:GpuMma16.OperandDequantizeMatchesTheExactValues" KBIT_SANITIZER_TIMEOUT=120 \
      bash scripts/device_quick.sh > /dev/null ;;
  bench)
    KBIT_STEPS="model_bench" KBIT_BENCH_TIMEOUT=540 \
      KBIT_BENCH_ARGS="--m 5,8,12,16,48,64,96,128 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear,kbit_linear_untuned --no-routed-moe --settle-ms 100 --repeats 9" \
      bash scripts/device_quick.sh > /dev/null ;;
  bench62)  # the sixty-second session's untimed plans: small W at M = 17..32 (CTA items on >= 128 stripes) and large W
            # at M = 257..512 (the 256-token tile kernel), against the tuned plans and dequantize + cuBLAS
    KBIT_STEPS="model_bench" KBIT_BENCH_TIMEOUT=400 \
      KBIT_BENCH_ARGS="--m 17,24,32,384,512 --bits 2,3,4,5 --backend kbit_linear,kbit_linear_untuned,kbit_dequant_cublas --no-routed-moe --settle-ms 50 --repeats 7" \
      bash scripts/device_quick.sh > /dev/null ;;
  *) echo "usage: $0 tests|bench|bench62 COMMIT"; exit 2 ;;
esac
tar xzf "$OUT/results.tgz" -C "$OUT" && rm -f "$OUT/results.tgz"
grep -E "tests passed|Failed|FAILED|Timeout" "$OUT/ctest_gpu.log" 2>/dev/null | head -12
grep -E "ERROR SUMMARY" "$OUT/memcheck.log" 2>/dev/null | tail -1
grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/racecheck.log" 2>/dev/null | tail -1
if [ -f "$OUT/model_bench.jsonl" ]; then
  build-dev/kbit report speedups "$OUT/model_bench.jsonl" --backend kbit_linear --baseline kbit_linear_untuned \
    > "$OUT/tuned_over_untuned.txt" 2>&1
  build-dev/kbit report speedups "$OUT/model_bench.jsonl" --backend kbit_linear_untuned --baseline cublas_bf16 \
    > "$OUT/untuned_over_cublas.txt" 2>&1
  tail -8 "$OUT/tuned_over_untuned.txt" "$OUT/untuned_over_cublas.txt"
fi
exit 0
