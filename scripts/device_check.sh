#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): build, GPU tests, sanitizers,
# register/spill report, benchmarks. Writes logs and JSON under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/kbit-out}
LOGS=$OUT/logs
mkdir -p "$LOGS"
cd "$(dirname "$0")/.."
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader)"
COMMIT=${KBIT_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
log "date: $(date -u +%FT%TZ) commit: $COMMIT"

cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DKBIT_GIT_COMMIT="$COMMIT" \
  -DCMAKE_CUDA_FLAGS="-Xptxas=-v" > "$LOGS/configure.log" 2>&1 || { log "configure failed"; tail -30 "$LOGS/configure.log"; exit 1; }
if ! ninja -C build-dev > "$LOGS/build.log" 2>&1; then log "build failed"; grep -E "error" "$LOGS/build.log" | head -30; exit 1; fi
grep -E "ptxas info|spill" "$LOGS/build.log" | grep -B1 -E "spill stores|Used" | grep -E "Compiling|Used|spill" > "$LOGS/ptxas.txt" || true
log "spills: $(grep -c -E '[1-9][0-9]* bytes spill' "$LOGS/ptxas.txt") kernels with nonzero spill bytes"

log "GPU tests"
(cd build-dev && ctest -L gpu --output-on-failure --timeout 600 -j4 ${KBIT_CTEST_ARGS:-}) > "$LOGS/ctest_gpu.log" 2>&1
tail -5 "$LOGS/ctest_gpu.log" | tee -a "$OUT/summary.txt"
grep -E "Failed|FAILED" "$LOGS/ctest_gpu.log" | head -20 | tee -a "$OUT/summary.txt"

if [ "${KBIT_SKIP_FORMAT:-0}" != 1 ]; then
  log "benchmark: kbit bench format"
  build-dev/kbit bench format --json "$OUT/format_bench.jsonl" > "$OUT/format_bench.txt" 2>&1
  cat "$OUT/format_bench.txt" | tee -a "$OUT/summary.txt"
  log "demo on the GPU"
  build-dev/kbit demo --out /tmp/kbit-demo > "$LOGS/demo.txt" 2>&1; tail -8 "$LOGS/demo.txt" | tee -a "$OUT/summary.txt"
fi

if [ "${KBIT_SKIP_MODEL_BENCH:-0}" != 1 ]; then
if [ "${KBIT_SKIP_CALIBRATE:-0}" != 1 ]; then
log "timing-core calibration: kbit bench calibrate"
build-dev/kbit bench calibrate --repeats 7 > "$OUT/calibrate.txt" 2>&1
log "calibrate rc=$?"; cat "$OUT/calibrate.txt" | tee -a "$OUT/summary.txt"
fi

# The model tables, one model per run (a time-out loses one model at most; each row settles
# 200 ms first, --settle-ms, so a full glm47 table takes ~2 min more than it did unsettled).
BENCH_ARGS=${KBIT_BENCH_ARGS:---m 1,2,4,8,16,32,64,512,4096 --bits 2,3,4,5}
: > "$OUT/bench.txt"; : > "$OUT/bench.jsonl"
for model in ${KBIT_BENCH_MODELS:-glm47 qwen3_coder_next kimi_k3_latent}; do
  log "benchmark: kbit bench --model $model $BENCH_ARGS"
  timeout "${KBIT_BENCH_TIMEOUT:-480}" build-dev/kbit bench --model "$model" $BENCH_ARGS ${KBIT_BENCH_BACKENDS:+--backend $KBIT_BENCH_BACKENDS} --json "$LOGS/bench_$model.jsonl" \
    --svg "$OUT/bench_glm47_q.svg.$model" > "$LOGS/bench_$model.txt" 2> "$LOGS/bench_progress_$model.txt"
  log "bench $model rc=$?"
  cat "$LOGS/bench_$model.txt" >> "$OUT/bench.txt"; cat "$LOGS/bench_$model.jsonl" >> "$OUT/bench.jsonl" 2>/dev/null
done
mv "$OUT/bench_glm47_q.svg.glm47" "$OUT/bench_glm47_q.svg" 2>/dev/null; rm -f "$OUT"/bench_glm47_q.svg.*
grep -A14 "^M = 1, \|^M = 16, " "$OUT/bench.txt" | head -120
fi

if [ "${KBIT_HADAMARD_BENCH:-0}" = 1 ]; then
  log "benchmark: kbit bench hadamard"
  timeout 180 build-dev/kbit bench hadamard --json "$OUT/hadamard.jsonl" > "$OUT/hadamard.txt" 2>&1
  log "bench hadamard rc=$?"; cat "$OUT/hadamard.txt" | tee -a "$OUT/summary.txt"
fi

if [ "${KBIT_STREAM_BENCH:-0}" = 1 ]; then
  log "kbit stream-bench ${KBIT_STREAM_ARGS:-}"
  timeout 240 build-dev/kbit stream-bench ${KBIT_STREAM_ARGS:-} > "$OUT/stream_bench.txt" 2>&1
  log "stream-bench rc=$?"; cat "$OUT/stream_bench.txt" | tee -a "$OUT/summary.txt"
fi

if [ "${KBIT_TUNE:-0}" = 1 ]; then
  log "kbit tune ${KBIT_TUNE_ARGS:-}"
  cp data/linear_configs.json "$OUT/linear_configs.json"
  timeout "${KBIT_TUNE_TIMEOUT:-300}" build-dev/kbit tune ${KBIT_TUNE_ARGS:-} --out "$OUT/linear_configs.json" \
    > "$OUT/tune.txt" 2> "$LOGS/tune_progress.txt"
  log "tune rc=$?"; tail -3 "$OUT/tune.txt" | tee -a "$OUT/summary.txt"
fi

if [ "${KBIT_SKINNY:-0}" = 1 ]; then
  log "kbit tune skinny ${KBIT_SKINNY_ARGS:---mode selected}"
  [ -f "$OUT/linear_configs.json" ] || cp data/linear_configs.json "$OUT/linear_configs.json"  # for --table-out
  timeout "${KBIT_SKINNY_TIMEOUT:-240}" build-dev/kbit tune skinny ${KBIT_SKINNY_ARGS:---mode selected} \
    --json "$OUT/skinny.jsonl" > "$OUT/skinny.txt" 2> "$LOGS/skinny_progress.txt"
  log "tune skinny rc=$?"; cat "$OUT/skinny.txt" | tee -a "$OUT/summary.txt"
fi

if [ "${KBIT_SKIP_SANITIZER:-0}" != 1 ]; then
  log "compute-sanitizer memcheck / racecheck (GPU tests without the 778M-weight one)"
  F="--gtest_filter=${KBIT_MEMCHECK_FILTER:--GpuFormat.LargeEmbedding*:GpuLinear.ModelShapes:GpuLinear.Awkward*:GpuSkinny.MatchesFp64*}"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 build-dev/tests/kbit_gpu_tests "$F" > "$LOGS/memcheck.log" 2>&1
  log "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$LOGS/memcheck.log" | tail -1)"
  timeout 180 compute-sanitizer --tool racecheck --error-exitcode 9 build-dev/tests/kbit_gpu_tests \
    --gtest_filter="${KBIT_RACECHECK_FILTER:-GpuQuantize.Tiled*:GpuRepack.*:GpuFormat.QuantizationError*:GpuLinear.Bias*:GpuLinear.BitIdentical*:GpuSkinny.EveryKernel*}" > "$LOGS/racecheck.log" 2>&1
  log "racecheck rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/racecheck.log" | tail -1)"
  timeout 120 compute-sanitizer --tool synccheck --error-exitcode 9 build-dev/tests/kbit_gpu_tests \
    --gtest_filter="${KBIT_SYNCCHECK_FILTER:-GpuWeightStreamer.*:GpuSkinny.Programmatic*}" > "$LOGS/synccheck.log" 2>&1
  log "synccheck rc=$? $(grep -E 'ERROR SUMMARY' "$LOGS/synccheck.log" | tail -1)"
fi

cuobjdump -sass build-dev/CMakeFiles/kbit.dir/src/cuda/quantize.cu.o > "$LOGS/quantize.sass" 2>&1 || true
cuobjdump -sass build-dev/CMakeFiles/kbit.dir/src/cuda/dequantize.cu.o > "$LOGS/dequantize.sass" 2>&1 || true
for k in 2 4; do
  cuobjdump -sass -fun "${KBIT_SASS_FUN:-_ZN4kbit4cuda6detail19fused_linear_kernelILi${k}E13__nv_bfloat16Li1ELi4EEEvNS1_9FusedArgsE}" \
    build-dev/CMakeFiles/kbit.dir/src/cuda/linear/fused_linear_k$k.cu.o > "$LOGS/fused_k$k.sass" 2>&1 || true
done
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"
