#!/usr/bin/env bash
# Sixty-first session, call 1 (untracked): GPU tests of main on the carried binaries, the user-table CLI
# test, memcheck of the two new GPU tests, then the untuned plans against the tuned ones at M = 8, 12, 16.
set -uo pipefail
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date -u; } > $R/device.txt
cd build-dev
t0=$(date +%s)
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 240 ./kbit_gpu_tests > $R/gpu_tests_$i.log 2>&1 &
done
wait
echo "gpu tests $(( $(date +%s) - t0 ))s" | tee -a $R/summary.txt
grep -hE "^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST|tests? ran" $R/gpu_tests_*.log | tee -a $R/summary.txt
cd ..
timeout 90 cmake -DKBIT=$PWD/build-dev/kbit -DWORK=/tmp/ut -P tests/tools/user_table_test.cmake > $R/user_table.log 2>&1
echo "user table rc=$?" | tee -a $R/summary.txt; tail -3 $R/user_table.log | tee -a $R/summary.txt
for f in GpuMoeForward.LayerFromAQuantizedCheckpoint GpuLinear.UntunedPlansOnUnseenShapes; do
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 build-dev/kbit_gpu_tests --gtest_filter=$f > $R/memcheck_$f.log 2>&1
  echo "memcheck $f rc=$? $(grep 'ERROR SUMMARY' $R/memcheck_$f.log | tail -1)" | tee -a $R/summary.txt
done
echo "elapsed $(( $(date +%s) - t0 ))s" | tee -a $R/summary.txt
timeout $(( 540 - ($(date +%s) - t0) )) build-dev/kbit bench --model all --m 8,12,16 --bits 2,3,4,5 \
  --backend cublas_bf16,kbit_linear,kbit_linear_untuned --no-routed-moe --settle-ms 100 --repeats 7 \
  --json $R/untuned.jsonl > $R/untuned.txt 2> $R/untuned_progress.txt
echo "bench rc=$? elapsed $(( $(date +%s) - t0 ))s" | tee -a $R/summary.txt
build-dev/kbit report speedups $R/untuned.jsonl --backend kbit_linear --baseline kbit_linear_untuned > $R/tuned_over_untuned.txt 2>&1
tail -12 $R/tuned_over_untuned.txt
(cd $OUT && tar czf /tmp/r.tgz r && rm -rf r && mv /tmp/r.tgz r.tgz)
