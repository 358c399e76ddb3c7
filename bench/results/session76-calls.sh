#!/usr/bin/env bash
# Session 76 device calls. Carried (scripts/carry_pack.sh): kbit_b and tests_b = main (ad41855, the unsigned divisions'
# final build), lut_gemv = bench/calibration/lut_gemv.cu (nvcc -O3 -arch=sm_90a -cudart static).
# LUT=1: the tables-of-x GEMV probe (glm47 q, M = 1, k = 2, 4), its SASS (if cuobjdump is there), and kbit_b's glm47
# M = 1 rows (kbit_linear, kbit_gemv, cuBLAS bf16) on the same card. Then session75-calls.sh: FULL=1 (every Gpu* test of
# tests_b, memcheck / racecheck on a GEMV and a fused-kernel test) and, on an H200, the H200_STEPS.
set -u
R=${OUT:-/tmp/kbit-out}
if [ "${LUT:-0}" = 1 ]; then
  mkdir -p $R/l
  timeout 120 build-dev/lut_gemv > $R/l/lut_gemv.txt 2>&1; echo "lut rc=$?"; cat $R/l/lut_gemv.txt
  command -v cuobjdump > /dev/null && cuobjdump -sass build-dev/lut_gemv > $R/l/lut_gemv.sass 2>&1
  [ -x build-dev/kbit_b ] && timeout 100 build-dev/kbit_b bench --model glm47 --m 1 --bits 2,4 --backend cublas_bf16,kbit_linear,kbit_gemv --no-routed-moe \
    --repeats 9 --json $R/l/glm47_m1.jsonl > $R/l/glm47_m1.txt 2>&1; echo "bench rc=$?"; grep -E "glm47\.(q|o|shared)" $R/l/glm47_m1.txt | head -30
  tar -C $R/l -cJf $R/lut.tar.xz . && rm -rf $R/l
fi
bash bench/results/session75-calls.sh
