#!/usr/bin/env bash
# One device call on carried binaries (scripts/carry_pack.sh kbit=build/kbit
# kbit_gpu_tests=build/tests/kbit_gpu_tests, then carry ["build-gz"]): the steps named in
# VERIFY_STEPS, each under its own timeout, logs under $OUT. Run it through
# scripts/device_carried.sh so that the binaries are unpacked first:
#   scripts/device_carried.sh 'VERIFY_STEPS="bench tests" VERIFY_BENCH="--m 17,24,32 ..." scripts/device_verify.sh'
# Steps: tests (every GPU test, 4 gtest shards in parallel), bench (kbit bench --model all
# $VERIFY_BENCH, then `kbit report speedups` of $VERIFY_REPORT), read_floor (the plain-read ceiling
# at issue 4's and 6's byte counts, $VERIFY_READ_FLOOR_BYTES; chained too with VERIFY_READ_FLOOR_PDL=1), l2_slices
# (bench/calibration/l2_slices.py $VERIFY_L2_ARGS, PyTorch), gemm_algo (cuBLASLt's first candidate
# against its fastest, and a tune of the dequant_cublas path's GEMM algorithm: see the step), cmd (any command, $VERIFY_CMD, in
# the tree's root with the binaries under build-dev/, under $VERIFY_CMD_TIMEOUT).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kbit-out}
for step in ${VERIFY_STEPS:-tests}; do
  case $step in
    tests)
      for shard in 0 1 2 3; do
        GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$shard timeout "${VERIFY_TESTS_TIMEOUT:-240}" \
          build-dev/kbit_gpu_tests --gtest_brief=1 > "$OUT/gpu_tests_$shard.log" 2>&1 &
      done
      rcs=""
      for job in $(jobs -p); do wait "$job"; rcs="$rcs $?"; done
      echo "== GPU tests, 4 shards, exit codes:$rcs"
      grep -h -E "tests from .* ran|PASSED|FAILED|Failure" "$OUT"/gpu_tests_*.log | head -20 ;;
    bench)
      echo "== kbit bench --model all ${VERIFY_BENCH:-}"
      timeout "${VERIFY_BENCH_TIMEOUT:-240}" build-dev/kbit bench --model all ${VERIFY_BENCH:-} --json "$OUT/bench.jsonl" \
        > "$OUT/bench.txt" 2> "$OUT/bench_progress.txt"
      echo "rc=$?"
      if [ -n "${VERIFY_REPORT:-}" ]; then
        build-dev/kbit report speedups "$OUT/bench.jsonl" $VERIFY_REPORT > "$OUT/speedups.txt" 2>&1
        tail -12 "$OUT/speedups.txt"
      fi ;;
    l2_slices)
      echo "== bench/calibration/l2_slices.py ${VERIFY_L2_ARGS:-}"
      timeout "${VERIFY_L2_TIMEOUT:-150}" python3 bench/calibration/l2_slices.py ${VERIFY_L2_ARGS:-} \
        --json "$OUT/l2_slices.jsonl" > "$OUT/l2_slices.txt" 2>&1
      echo "rc=$?"; cat "$OUT/l2_slices.txt" ;;
    read_floor)
      # The fastest plain read of each size (bench/calibration/read_floor.cu, READ_FLOOR_BEST): issue 4's
      # M = 1 byte counts of glm47 q / o / shared_dn and shared_gu at k = 2..5, its small projections, and
      # Kimi-K3's 51.4 MB. Built here with nvcc unless carried as build-dev/read_floor.
      echo "== read_floor sweep"
      [ -x build-dev/read_floor ] || nvcc -std=c++17 -O3 -arch=sm_90a bench/calibration/read_floor.cu -o build-dev/read_floor
      sizes=${VERIFY_READ_FLOOR_BYTES:-294912 688128 1179648 1376256 17694720 25559040 33423360 41287680 35389440 51118080 66846720 82575360 51380224}
      for b in $sizes; do
        READ_FLOOR_BEST=1 timeout 60 build-dev/read_floor "$b"
      done > "$OUT/read_floor.txt" 2>&1
      echo "rc=$?"; grep "^best" "$OUT/read_floor.txt"
      # VERIFY_READ_FLOOR_PDL=1: the same sizes chained with PDL (READ_FLOOR_PDL), the ceiling in chains.
      if [ -n "${VERIFY_READ_FLOOR_PDL:-}" ]; then
        for b in $sizes; do
          READ_FLOOR_PDL=1 timeout 60 build-dev/read_floor "$b"
        done > "$OUT/read_floor_pdl.txt" 2>&1
        echo "rc=$?"; grep "^best" "$OUT/read_floor_pdl.txt"
      fi ;;
    gemm_algo)
      # The dequant_cublas path's GEMM algorithm (LinearPlan::gemm_algo): cuBLASLt's first heuristic
      # candidate (cublas_bf16) against the fastest of its first 8 (cublas_bf16_best) on every dense shape
      # at $VERIFY_ALGO_M (default 512, 4096), then kbit tune $VERIFY_TUNE (default Qwen3 at M = 4096) into a
      # copy of the compiled table ($OUT/linear_configs.json, whose entries name gemm_algo where it is not 0),
      # and kbit bench of those cases with that table ($KBIT_LINEAR_CONFIGS) beside both baselines.
      echo "== cuBLASLt candidates: kbit bench --m ${VERIFY_ALGO_M:-512,4096} --backend cublas_bf16,cublas_bf16_best"
      timeout "${VERIFY_ALGO_TIMEOUT:-200}" build-dev/kbit bench --model all --m "${VERIFY_ALGO_M:-512,4096}" --bits 4 \
        --backend cublas_bf16,cublas_bf16_best --no-routed-moe --repeats 9 --json "$OUT/algo_bench.jsonl" \
        > "$OUT/algo_bench.txt" 2> "$OUT/algo_bench_progress.txt"
      echo "rc=$?"; build-dev/kbit report speedups "$OUT/algo_bench.jsonl" --backend cublas_bf16_best --max-m 65536 2>&1 | tail -12
      cp data/linear_configs.json "$OUT/linear_configs.json"
      tune=${VERIFY_TUNE:---model qwen3_coder_next --m 4096 --bits 2,3,4,5}
      echo "== kbit tune $tune"
      timeout "${VERIFY_TUNE_TIMEOUT:-200}" build-dev/kbit tune $tune --out "$OUT/linear_configs.json" \
        > "$OUT/algo_tune.txt" 2> "$OUT/algo_tune_progress.txt"
      echo "rc=$?"; tail -45 "$OUT/algo_tune.txt"
      echo "== kbit bench $tune with the tuned table"
      KBIT_LINEAR_CONFIGS="$OUT/linear_configs.json" timeout "${VERIFY_ALGO_TIMEOUT:-200}" build-dev/kbit bench $tune \
        --backend cublas_bf16,cublas_bf16_best,kbit_linear --no-routed-moe --json "$OUT/algo_tuned_bench.jsonl" \
        > "$OUT/algo_tuned_bench.txt" 2> "$OUT/algo_tuned_bench_progress.txt"
      echo "rc=$?"; for base in cublas_bf16 cublas_bf16_best; do
        build-dev/kbit report speedups "$OUT/algo_tuned_bench.jsonl" --baseline $base --max-m 65536 2>&1 | tail -8
      done ;;
    cmd)
      echo "== $VERIFY_CMD"
      timeout "${VERIFY_CMD_TIMEOUT:-200}" bash -c "$VERIFY_CMD" > "$OUT/cmd.txt" 2>&1
      echo "rc=$?"; tail -40 "$OUT/cmd.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done
exit 0
