#!/usr/bin/env bash
# A short device session: build the CLI and the GPU tests only, then run the steps
# named in KBIT_STEPS (each under its own timeout), logs under $OUT. Steps: ctest,
# hadamard, skinny_sweep, skinny_selected, model_bench, stream_bench, moe_bench,
# moe_bench2, test:FILTER, memcheck:/racecheck:/synccheck:FILTER, ncu:KERNEL_REGEX,
# cmd (KBIT_CMD: any command, e.g. several `build-dev/kbit bench gemv-probe` runs),
# ab (KBIT_AB_TARGET, KBIT_AB_OLD, KBIT_AB_CMD, KBIT_AB_ROUNDS: A/B of source files),
# abn (KBIT_ABN_DIRS, KBIT_AB_CMD, KBIT_AB_ROUNDS: several whole-file variants, scripts/ab_variants.sh),
# tune (KBIT_TUNE_ARGS, e.g. "--model glm47 --m 1,16 --bits 4": kbit tune merged into a
# copy of data/linear_configs.json under $OUT; copy it back into data/ to compile it in).
set -uo pipefail
OUT=${OUT:-/tmp/kbit-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
COMMIT=${KBIT_COMMIT:-unknown}
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(date -u +%FT%TZ) commit $COMMIT"
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DKBIT_GIT_COMMIT="$COMMIT" -DCMAKE_CUDA_FLAGS="-Xptxas=-v" \
  > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C build-dev ${KBIT_TARGETS:-kbit tests/kbit_gpu_tests} > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
echo "== built; kernels with spills: $(grep -c -E '[1-9][0-9]* bytes spill' "$OUT/build.log")"
for step in ${KBIT_STEPS:-}; do
  case $step in
    ctest) echo "== ctest -L gpu"
      (cd build-dev && timeout 150 ctest -L gpu --output-on-failure --timeout 120 -j4) > "$OUT/ctest_gpu.log" 2>&1
      echo "rc=$?"; grep -E "tests passed|Failed|FAILED|Timeout" "$OUT/ctest_gpu.log" | head -12 ;;
    model_bench) echo "== kbit bench --model all ${KBIT_BENCH_ARGS:-}"
      timeout "${KBIT_BENCH_TIMEOUT:-100}" build-dev/kbit bench --model all ${KBIT_BENCH_ARGS:-} --json "$OUT/model_bench.jsonl" \
        > "$OUT/model_bench.txt" 2> "$OUT/model_bench_progress.txt"; echo "rc=$?" ;;
    moe_bench) echo "== kbit bench moe ${KBIT_MOE_ARGS:-}"
      timeout "${KBIT_MOE_TIMEOUT:-150}" build-dev/kbit bench moe ${KBIT_MOE_ARGS:-} --json "$OUT/moe_bench.jsonl" \
        > "$OUT/moe_bench.txt" 2>&1; echo "rc=$?"; cat "$OUT/moe_bench.txt" ;;
    moe_bench2) echo "== kbit bench moe ${KBIT_MOE_ARGS2:-}"
      timeout "${KBIT_MOE_TIMEOUT:-150}" build-dev/kbit bench moe ${KBIT_MOE_ARGS2:-} --json "$OUT/moe_bench2.jsonl" \
        > "$OUT/moe_bench2.txt" 2>&1; echo "rc=$?"; cat "$OUT/moe_bench2.txt" ;;
    stream_bench) echo "== kbit stream-bench ${KBIT_STREAM_ARGS:-}"
      timeout "${KBIT_STREAM_TIMEOUT:-100}" build-dev/kbit stream-bench ${KBIT_STREAM_ARGS:-} > "$OUT/stream_bench.txt" 2>&1
      echo "rc=$?"; cat "$OUT/stream_bench.txt" | tail -30 ;;
    test:*) f=${step#test:}; echo "== gtest $f"
      KBIT_TEST_TRACE=${KBIT_TEST_TRACE:-} timeout "${KBIT_TEST_TIMEOUT:-120}" build-dev/tests/kbit_gpu_tests --gtest_filter="$f" > "$OUT/test_${f//[^A-Za-z0-9]/_}.log" 2>&1
      echo "rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure|ms\)$" "$OUT/test_${f//[^A-Za-z0-9]/_}.log" | tail -12; tail -3 "$OUT/test_${f//[^A-Za-z0-9]/_}.log" ;;
    hadamard) echo "== kbit bench hadamard"
      timeout 150 build-dev/kbit bench hadamard --json "$OUT/hadamard.jsonl" > "$OUT/hadamard.txt" 2>&1; echo "rc=$?"; cat "$OUT/hadamard.txt" ;;
    skinny_selected) echo "== kbit tune skinny --mode selected"
      timeout "${KBIT_SKINNY_TIMEOUT:-100}" build-dev/kbit tune skinny --mode selected --json "$OUT/skinny_selected.jsonl" \
        > "$OUT/skinny_selected.txt" 2>&1; echo "rc=$?"; cat "$OUT/skinny_selected.txt" ;;
    tune) echo "== kbit tune ${KBIT_TUNE_ARGS:-}"
      cp data/linear_configs.json "$OUT/linear_configs.json"
      timeout "${KBIT_TUNE_TIMEOUT:-300}" build-dev/kbit tune ${KBIT_TUNE_ARGS:-} --out "$OUT/linear_configs.json" \
        > "$OUT/tune.txt" 2> "$OUT/tune_progress.txt"
      echo "rc=$?"; cat "$OUT/tune.txt" ;;
    skinny_sweep) echo "== kbit tune skinny --mode sweep"
      cp data/linear_configs.json "$OUT/linear_configs.json"
      timeout "${KBIT_SKINNY_TIMEOUT:-100}" build-dev/kbit tune skinny --mode sweep --table-out "$OUT/linear_configs.json" \
        --json "$OUT/skinny_sweep.jsonl" > "$OUT/skinny_sweep.txt" 2> "$OUT/skinny_sweep_progress.txt"
      echo "rc=$?"; tail -3 "$OUT/skinny_sweep_progress.txt" ;;
    ncu:*) k=${step#ncu:}; echo "== ncu on kernels matching $k in: kbit ${KBIT_NCU_ARGS:-bench hadamard}"
      timeout "${KBIT_NCU_TIMEOUT:-150}" ncu ${KBIT_NCU_FLAGS:-} --kernel-name "regex:$k" --launch-skip "${KBIT_NCU_SKIP:-3}" \
        --launch-count 1 --set full build-dev/kbit ${KBIT_NCU_ARGS:-bench hadamard} > "$OUT/ncu_$k.txt" 2>&1
      echo "rc=$?"; grep -E "Duration|Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Block Size|Grid Size|  hadamard|==PROF==|==ERROR==" "$OUT/ncu_$k.txt" | head -40 ;;
    racecheck:*) f=${step#racecheck:}; echo "== racecheck $f"
      timeout "${KBIT_SANITIZER_TIMEOUT:-100}" compute-sanitizer --tool racecheck --error-exitcode 9 build-dev/tests/kbit_gpu_tests --gtest_filter="$f" > "$OUT/racecheck.log" 2>&1
      echo "rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)" ;;
    synccheck:*) f=${step#synccheck:}; echo "== synccheck $f"
      timeout "${KBIT_SANITIZER_TIMEOUT:-100}" compute-sanitizer --tool synccheck --error-exitcode 9 build-dev/tests/kbit_gpu_tests --gtest_filter="$f" > "$OUT/synccheck.log" 2>&1
      echo "rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/synccheck.log" | tail -1)" ;;
    ab) # A/B of source files: the working tree's ("base") against KBIT_AB_OLD (untracked copies
        # placed in the tree before the call; KBIT_AB_TARGET and KBIT_AB_OLD are lists of the
        # same length, matched in order), KBIT_AB_CMD run after each build of the CLI,
        # KBIT_AB_ROUNDS alternating rounds: scripts/ab_variants.sh with one variant folder.
      echo "== A/B of ${KBIT_AB_TARGET:-?} against ${KBIT_AB_OLD:-?}: ${KBIT_AB_CMD:-?}"
      read -r -a ab_targets <<< "$KBIT_AB_TARGET"; read -r -a ab_olds <<< "$KBIT_AB_OLD"
      [ "${#ab_targets[@]}" = "${#ab_olds[@]}" ] || { echo "KBIT_AB_TARGET and KBIT_AB_OLD differ in length"; continue; }
      old_dir=/tmp/kbit-ab-old; rm -rf "$old_dir"
      for i in "${!ab_targets[@]}"; do
        mkdir -p "$old_dir/$(dirname "${ab_targets[$i]}")" && cp "${ab_olds[$i]}" "$old_dir/${ab_targets[$i]}"
      done
      scripts/ab_variants.sh "$OUT/ab.txt" "$old_dir"
      cat "$OUT/ab.txt" ;;
    abn) # A/B/n of whole-file variants (scripts/ab_variants.sh): the tree, then each folder of
         # KBIT_ABN_DIRS in turn, KBIT_AB_CMD after each build, KBIT_AB_ROUNDS rounds.
      echo "== A/B/n: base ${KBIT_ABN_DIRS:-?}: ${KBIT_AB_CMD:-?}"
      # shellcheck disable=SC2086  # a list of folders
      scripts/ab_variants.sh "$OUT/abn.txt" ${KBIT_ABN_DIRS:-}
      cat "$OUT/abn.txt" ;;
    cmd) echo "== $KBIT_CMD"; timeout "${KBIT_CMD_TIMEOUT:-120}" bash -c "$KBIT_CMD" > "$OUT/cmd.txt" 2>&1; echo "rc=$?"; cat "$OUT/cmd.txt" ;;
    memcheck:*) f=${step#memcheck:}; echo "== memcheck $f"
      timeout "${KBIT_SANITIZER_TIMEOUT:-100}" compute-sanitizer --tool memcheck --error-exitcode 9 build-dev/tests/kbit_gpu_tests --gtest_filter="$f" > "$OUT/memcheck.log" 2>&1
      echo "rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)" ;;
  esac
done
# The device tool returns only a handful of files per call: pack everything into one.
# (tar writes outside $OUT: an archive inside the folder it reads changes under it.)
(cd "$OUT" && tar czf /tmp/kbit-results.tgz . && find . -type f -delete && mv /tmp/kbit-results.tgz results.tgz)
echo "== results in \$OUT/results.tgz"
