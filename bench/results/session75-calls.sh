#!/usr/bin/env bash
# Session 75 device calls. Carried (scripts/carry_pack.sh): kbit_b = main (6c0736a in call 1; c146e93, the unsigned
# divisions, from call 6 on, with tests_b), kbit_t and tests_t = main + gemv-two-level-ranges-dropped-session75.patch.
# FULL=1: every GPU test of tests_b (Gpu*) and memcheck / racecheck on a GEMV and a fused-kernel test, any card. On an H200: the steps of
# h200-m4096-and-m3-15-main-session72.sh named by H200_STEPS (g = GLM-4.7 experts T = 1..16 k = 4 first: issue 5's
# 3x at T = 4), with kbit_b. With AB=1 (any card): the two-level ranges A/B
# (ab-gemv-even-ranges-session74.sh with V=t) and gemv-probe of glm47 kv k = 4 for both builds.
set -u
R=${OUT:-/tmp/kbit-out}
h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
if h200 && [ -n "${H200_STEPS:-}" ]; then
  mkdir -p $R/h; OUT=$R/h STEPS=$H200_STEPS bash bench/results/h200-m4096-and-m3-15-main-session72.sh
  tar -C $R/h -cJf $R/h200-steps.tar.xz . && rm -rf $R/h
fi
h200 || echo "not an H200: no H200 steps"
if [ "${FULL:-0}" = 1 ]; then
  timeout ${FULL_TIMEOUT:-400} build-dev/tests_b --gtest_filter='Gpu*' > $R/gpu-tests-full.log 2>&1
  echo "full GPU tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $R/gpu-tests-full.log | head -20 | tr '\n' ' ')"
fi
if [ "${FULL:-0}" = 1 ]; then  # and the sanitizers on the GEMV and the fused kernel (udiv, session 75)
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 build-dev/tests_b \
      --gtest_filter='GpuLinear.GemvDecodesEveryWeightPosition:GpuLinear.TwoTokenTileCtaItemsAlone' > $R/$tool.log 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool.log | tail -1)"
  done
fi
if [ "${AB:-0}" = 1 ]; then
  V=t bash bench/results/ab-gemv-even-ranges-session74.sh
  mkdir -p $R/p
  for v in b t; do
    timeout 60 build-dev/kbit_$v bench gemv-probe --shape glm47.kv --bits 4 --per-cta > $R/p/probe_${v}_kv.txt 2>&1
    echo "probe $v kv rc=$? $(grep -E 'first entry to last exit' $R/p/probe_${v}_kv.txt)"
  done
  tar -C $R/p -cJf $R/probes.tar.xz . && rm -rf $R/p
fi
