#!/usr/bin/env bash
# Issue 4's full table on one commit, in three device calls (each under the tool's 10 minutes; the first
# builds, the others reuse build-dev): kbit bench --model all, cuBLAS bf16 against kbit::linear, k = 2..5,
# routed MoE rows included. Usage: bash scripts/device_full_table.sh a|b|c COMMIT
#   a: M = 1, 2, 4, 8, 16   b: M = 32, 64, 512   c: M = 4096
# Then, here: kbit report speedups on the three JSON files, and the tables into BENCHMARKS.md.
export KBIT_COMMIT=$2
case $1 in
  a) ms=1,2,4,8,16 ;;
  b) ms=32,64,512 ;;
  c) ms=4096 ;;
  *) echo "usage: $0 a|b|c COMMIT"; exit 2 ;;
esac
KBIT_STEPS="model_bench" KBIT_BENCH_TIMEOUT=500 \
  KBIT_BENCH_ARGS="--m $ms --bits 2,3,4,5 --backend cublas_bf16,kbit_linear --settle-ms 100 --repeats 9" \
  bash scripts/device_quick.sh > /dev/null
tar xzf "$OUT/results.tgz" -C "$OUT" && rm -f "$OUT/results.tgz"
for f in model_bench.txt model_bench.jsonl; do mv "$OUT/$f" "$OUT/full-table-$1-${f}"; done
build-dev/kbit report speedups "$OUT/full-table-$1-model_bench.jsonl" --backend kbit_linear --baseline cublas_bf16 \
  --max-m 65536 | tail -12
exit 0
