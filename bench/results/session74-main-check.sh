#!/usr/bin/env bash
# Session 74, first device call (any card): main's own build of the GEMV split rule (9540f03 / fbb8991, never run on
# a GPU before) - its GPU tests, memcheck and racecheck of the GEMV, then the split-rule A/B on glm47 shared_gu (q, o
# controls) at M = 1..4, k = 2..5: kbit_b = main (1.33x at k = 2, 3, 2x at k = 4, 5), kbit_s = 1.33x at every k.
# Then, on an H200 only, the steps of bench/results/h200-m4096-and-m3-15-main-session72.sh named by H200_STEPS.
# Carried (scripts/carry_pack.sh): kbit_b, kbit_s, tests_b.
set -u
R=${OUT:-/tmp/kbit-out}
O=$R/w; mkdir -p $O  # everything under w/, tarred at the end (8 files come back)
D=build-dev
echo "== main's GPU tests $(date -u +%T)"
timeout 200 $D/tests_b --gtest_filter="${TESTS:-GpuLinear*:GpuGemv*:GpuExpert*:GpuMoe*}" > $O/tests_b.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $O/tests_b.log | head -12 | tr '\n' ' ')"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $D/tests_b --gtest_filter='GpuLinear.GemvDecodesEveryWeightPosition' > $O/memcheck_b.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_b.log | tail -1)"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $D/tests_b --gtest_filter='GpuLinear.GemvDecodesEveryWeightPosition' > $O/racecheck_b.log 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $O/racecheck_b.log | tail -1)"
for round in 1 2; do
  for v in b s; do
    timeout 100 $D/kbit_$v bench --model glm47 --shapes bench/results/shapes-split-rule-session73.json --m 1,2,3,4 \
      --bits 2,3,4,5 --backend kbit_gemv,kbit_linear --no-routed-moe --repeats 7 --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1
    echo "glm47 $v round $round rc=$? $(date -u +%T)"
  done
done
python3 bench/results/ab_summary.py pair "$O" bs
if [ -n "${H200_STEPS:-}" ]; then OUT=$O STEPS=$H200_STEPS bash bench/results/h200-m4096-and-m3-15-main-session72.sh; fi
tar -C $O -cJf $R/session74.tar.xz . && rm -rf $O
