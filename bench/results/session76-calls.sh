#!/usr/bin/env bash
# Session 76 device calls. Carried (scripts/carry_pack.sh): kbit_b and tests_b = main (ad41855, the unsigned divisions'
# final build), lut_gemv = bench/calibration/lut_gemv.cu (nvcc -O3 -arch=sm_90a -cudart static).
# FULL=1: every GPU test of tests_b (Gpu*) and memcheck / racecheck on a GEMV and a fused-kernel test, any card.
# LUT=1: the tables-of-x GEMV probe (glm47 q, M = 1, k = 2), its SASS (if cuobjdump is there), memcheck of it, and
# kbit_b's glm47 M = 1 rows (kbit_linear, kbit_gemv, cuBLAS bf16) on the same card.
# On an H200 with H200_STEPS: the steps of h200-m4096-and-m3-15-main-session72.sh (g = GLM-4.7 experts T = 1..16 k = 4).
set -u
R=${OUT:-/tmp/kbit-out}
h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
if [ "${LUT:-0}" = 1 ]; then
  mkdir -p $R/l
  timeout 120 build-dev/lut_gemv > $R/l/lut_gemv.txt 2>&1; echo "lut rc=$?"; cat $R/l/lut_gemv.txt
  command -v cuobjdump > /dev/null && cuobjdump -sass build-dev/lut_gemv > $R/l/lut_gemv.sass 2>&1
  [ -x build-dev/kbit_b ] && timeout 100 build-dev/kbit_b bench --model glm47 --m 1 --bits 2,4 --backend cublas_bf16,kbit_linear,kbit_gemv --no-routed-moe \
    --repeats 9 --json $R/l/glm47_m1.jsonl > $R/l/glm47_m1.txt 2>&1; echo "bench rc=$?"; grep -E "glm47\.(q|o|shared)" $R/l/glm47_m1.txt | head -30
  tar -C $R/l -cJf $R/lut.tar.xz . && rm -rf $R/l
fi
if h200 && [ -n "${H200_STEPS:-}" ]; then
  mkdir -p $R/h; OUT=$R/h STEPS=$H200_STEPS bash bench/results/h200-m4096-and-m3-15-main-session72.sh
  tar -C $R/h -cJf $R/h200-steps.tar.xz . && rm -rf $R/h
fi
h200 || echo "not an H200: no H200 steps"
if [ "${FULL:-0}" = 1 ]; then
  timeout ${FULL_TIMEOUT:-400} build-dev/tests_b --gtest_filter='Gpu*' > $R/gpu-tests-full.log 2>&1
  echo "full GPU tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $R/gpu-tests-full.log | head -20 | tr '\n' ' ')"
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 build-dev/tests_b \
      --gtest_filter='GpuLinear.GemvDecodesEveryWeightPosition:GpuLinear.TwoTokenTileCtaItemsAlone' > $R/$tool.log 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tail -1)"
  done
fi
