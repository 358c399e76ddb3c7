#!/usr/bin/env bash
# Session 71: the operand dequantize's pair-table replicas. a = 4f4076f (32 KB), b = main 5c28e17 (4 at k = 3, 4;
# 1 at k = 5), c = 1 at every k, e = 2 at k = 3, 4. GPU tests of c and e, then kbit_dequant_cublas forced on Qwen3
# at M = 512 (where the dequantize is visible), rounds a b c e x 2. On an H200 also the dispatcher against cuBLAS
# bf16 at M = 4096 for a and b (issue 4's nine short rows).
set -u
O=${OUT:-/tmp/kbit-out}
B=build-dev
for v in c e; do
  timeout 60 $B/tests_$v --gtest_brief=1 --gtest_filter='GpuMma16.Operand*:GpuLinear.AwkwardShapes*:GpuLinear.DequantCublas*' > $O/tests_$v.log 2>&1; echo "tests $v rc=$?"; tail -n 1 $O/tests_$v.log
done
for round in 1 2; do
  for v in a b c e; do
    timeout 40 $B/kbit_$v bench --model qwen3_coder_next --m 512 --bits 2,3,4,5 --backend kbit_dequant_cublas \
      --no-routed-moe --repeats 5 --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "$v round $round rc=$?"
  done
done
if [ "${AB_H200_M4096:-1}" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  for round in 1 2; do
    for v in a b; do
      timeout 60 $B/kbit_$v bench --model qwen3_coder_next --m 4096 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear \
        --no-routed-moe --repeats 5 --json $O/v_${v}_$round.jsonl > /dev/null 2>&1; echo "h200 m4096 $v round $round rc=$?"
    done
  done
fi
python3 "$(dirname "$0")/ab_summary.py" forced "$O" bce
ls $O/v_*.jsonl > /dev/null 2>&1 && python3 "$(dirname "$0")/ab_summary.py" vs-cublas "$O" ab
