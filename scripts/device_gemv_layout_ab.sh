#!/usr/bin/env bash
# A/B of GEMV variants against main with carried binaries, on the device:
#   scripts/device_carried.sh 'bash scripts/device_gemv_layout_ab.sh'
# Binaries (scripts/carry_pack.sh NAME=PATH...): kbit_main and kbit_gpu_tests_main (main), kbit and kbit_gpu_tests
# (variant 1), and optionally kbit_d and kbit_gpu_tests_d (variant 2: dense timings and its dense GEMV tests only).
# Written for bench/results/gemv-piece-loop-dropped-session64.patch (variant 1: the GEMV's finish out of the
# unrolled unit slots) and gemv-piece-loop-deeper-ring-dropped-session64.patch (variant 2: that, plus one more unit
# of weight loads in flight at dense k = 3, 4). Stages, most needed first, each appended to $OUT/results.tar as it
# ends (a call cut short at the device tool's 600 s still brings back the stages done; only 8 files come back, so
# nothing else stays):
#   1. every GPU test of variant 1 (4 shards; it holds all of main, so this also runs the sixty-second session's
#      untested test additions);
#   2. two alternating rounds, main then the variants: dense glm47 M = 1, 2, 4, k = 2..5 (all three), MoE glm47
#      T = 1, 16, k = 4 (main and variant 1; variant 2 changes dense kernels only);
#   3. together: memcheck and racecheck of variant 1's GEMV tests (dense, every weight position and split stripes;
#      grouped) and of the operand dequantize test (changed in the sixty-second session, never sanitized), and
#      variant 2's dense linear tests;
#   4. if time is left, ncu of variant 1's dense GEMV (glm47 q, k = 4, M = 1) with per-SASS counters
#      (stall_no_inst is the one to watch: 24.4% on main).
# The binaries (built 2026-12-05 from ff10f03 with each patch and without) are packed in build-gz/ on the CPU
# machine: scripts/carry_pack.sh kbit=build-ab/piece/kbit kbit_main=build-ab/main/kbit
# kbit_gpu_tests=build-ab/piece/kbit_gpu_tests kbit_gpu_tests_main=build-ab/main/kbit_gpu_tests
# kbit_d=build-ab/pieceD/kbit kbit_gpu_tests_d=build-ab/pieceD/kbit_gpu_tests
set -u
O=${OUT:-/tmp/kbit-out}
stash() {  # append the named files of $O that exist to results.tar and drop them
  local f have=()
  for f in "$@"; do [ -e "$O/$f" ] && have+=("$f"); done
  [ ${#have[@]} -eq 0 ] || (cd "$O" && tar -rf results.tar "${have[@]}" && rm -f "${have[@]}")
}

( for s in 0 1 2 3; do GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$s timeout 150 build-dev/kbit_gpu_tests > $O/gtest_$s.log 2>&1 & done; wait )
for s in 0 1 2 3; do grep -E "^\[  PASSED|^\[  FAILED|FAILED TEST" $O/gtest_$s.log | tail -4; done
# A failure: the same tests on main's binary tell the variant's from main's own (the sixty-second session's test
# additions never ran on a GPU).
failed=$(cat $O/gtest_?.log | sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_]*\.[A-Za-z0-9_]*\).*/\1/p' | sort -u | paste -sd: -)
if [ -n "$failed" ] && [ -x build-dev/kbit_gpu_tests_main ]; then
  timeout 120 build-dev/kbit_gpu_tests_main --gtest_filter="$failed" > $O/gtest_main_failed.log 2>&1
  echo "variant's failures on main: $(grep -E '^\[  PASSED|^\[  FAILED' $O/gtest_main_failed.log | tr '\n' ' ')"
fi
stash gtest_0.log gtest_1.log gtest_2.log gtest_3.log gtest_main_failed.log

for r in 1 2; do for b in kbit_main kbit kbit_d; do
  [ -x build-dev/$b ] || continue
  timeout 60 build-dev/$b bench --model glm47 --m 1,2,4 --bits 2,3,4,5 --backend kbit_linear --no-routed-moe \
    --settle-ms 30 --repeats 7 --json $O/gemv_${b}_$r.jsonl > $O/gemv_${b}_$r.txt 2>&1; echo "gemv $b $r rc=$? at ${SECONDS}s"
  if [ $b != kbit_d ]; then
    timeout 60 build-dev/$b bench moe --model glm47 --tokens 1,16 --bits 4 --settle-ms 50 --repeats 7 \
      --json $O/moe_${b}_$r.jsonl > $O/moe_${b}_$r.txt 2>&1; echo "moe $b $r rc=$? at ${SECONDS}s"
  fi
  stash gemv_${b}_$r.jsonl gemv_${b}_$r.txt moe_${b}_$r.jsonl moe_${b}_$r.txt
done; done

F='GpuLinear.GemvDecodesEveryWeightPosition:GpuExpertLinear.GroupedGemvOnLargerExperts:GpuMma16.OperandDequantizeMatchesTheExactValues'
FD='GpuLinear.AwkwardShapesEveryMEveryPath:GpuLinear.ModelShapes:GpuLinear.Gemv*:GpuLinear.BitIdentical*:GpuLinear.BiasResidual*:GpuLinear.PdlChainMatchesPlainLaunches'
( timeout 120 compute-sanitizer --tool memcheck build-dev/kbit_gpu_tests --gtest_filter="$F" > $O/memcheck.log 2>&1 &
  timeout 120 compute-sanitizer --tool racecheck build-dev/kbit_gpu_tests --gtest_filter="$F" > $O/racecheck.log 2>&1 &
  if [ -x build-dev/kbit_gpu_tests_d ]; then
    timeout 120 build-dev/kbit_gpu_tests_d --gtest_filter="$FD" > $O/gtest_d.log 2>&1 &
  fi
  wait )
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $O/memcheck.log $O/racecheck.log | tail -6
[ -f $O/gtest_d.log ] && grep -E "^\[  PASSED|^\[  FAILED|FAILED TEST" $O/gtest_d.log | tail -4
stash memcheck.log racecheck.log gtest_d.log

if [ "$SECONDS" -lt 430 ]; then
  timeout 90 ncu --set full --import-source no -k regex:gemv_kernel -s 2 -c 1 -o $O/gemv_k4 build-dev/kbit bench \
    --model glm47 --m 1 --bits 4 --backend kbit_linear --repeats 1 --no-routed-moe > $O/ncu_run.txt 2>&1; echo "ncu rc=$?"
  ncu -i $O/gemv_k4.ncu-rep > $O/ncu_gemv_k4.txt 2>&1
  ncu -i $O/gemv_k4.ncu-rep --page source --csv --print-source sass 2>&1 | xz > $O/ncu_gemv_k4_sass.csv.xz
  grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  " $O/ncu_gemv_k4.txt | head
  rm -f $O/gemv_k4.ncu-rep
  stash ncu_run.txt ncu_gemv_k4.txt ncu_gemv_k4_sass.csv.xz
else
  echo "ncu skipped at ${SECONDS}s"
fi
