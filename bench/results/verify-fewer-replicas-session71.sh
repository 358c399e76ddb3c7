#!/usr/bin/env bash
# Session 71: main with the 4 KB operand pair tables (kbit_b, tests_b) on a GPU: every GPU test, then
# Qwen3 M = 512 / 4096 against cuBLAS bf16 beside the previous main (kbit_a), rounds a b a b.
set -u
O=${OUT:-/tmp/kbit-out}
B=build-dev
timeout 300 $B/tests_b --gtest_brief=1 > $O/gpu_tests.log 2>&1; echo "gpu tests rc=$?"; tail -n 3 $O/gpu_tests.log
for round in 1 2; do
  for v in a b; do
    timeout 60 $B/kbit_$v bench --model qwen3_coder_next --m 512,4096 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear \
      --no-routed-moe --repeats 5 --json $O/v_${v}_$round.jsonl > $O/v_${v}_$round.txt 2>&1; echo "$v round $round rc=$?"
  done
done
python3 "$(dirname "$0")/ab_summary.py" vs-cublas "$O" ab
