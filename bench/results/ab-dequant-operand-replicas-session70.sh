#!/usr/bin/env bash
# A/B: operand dequantize pair table with fewer replicas (b), and with four warps per unit too (d), against main (a).
set -u
O=${OUT:-/tmp/kbit-out}
B=build-dev
for v in b d; do
  timeout 40 $B/tests_$v --gtest_brief=1 --gtest_filter='GpuMma16.Operand*:GpuLinearDense.*:GpuLinear.AwkwardShapes*' > $O/tests_$v.log 2>&1; echo "tests $v rc=$?"; tail -n 1 $O/tests_$v.log
done
for v in b d; do for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests_$v --gtest_brief=1 --gtest_filter='GpuMma16.Operand*' > $O/${tool}_$v.log 2>&1; echo "$tool $v rc=$?"; tail -n 1 $O/${tool}_$v.log
done; done
for round in 1 2; do
  for v in a b d; do
    timeout 40 $B/kbit_$v bench --model qwen3_coder_next --m 512,4096 --bits 2,3,4,5 --backend kbit_dequant_cublas \
      --no-routed-moe --repeats 5 --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "$v round $round rc=$?"
  done
done
python3 "$(dirname "$0")/ab_summary.py" forced "$O" bd
