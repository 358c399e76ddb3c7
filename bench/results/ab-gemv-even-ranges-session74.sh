#!/usr/bin/env bash
# Session 74 A/B: the GEMV's warp ranges at floor(w U / W) (the longer ranges spread over the CTAs; GemvRanges)
# against main e3d162f (the first U % W warps take the longer ranges). Carried: kbit_b (main), kbit_$V, tests_$V
# (V=n, the default: gemv-even-ranges-dropped-session74.patch; V=t: gemv-two-level-ranges-dropped-session75.patch).
# Any card (an A/B within one call). Dense: kbit_gemv forced, glm47 every projection at M = 1, 2, 4 and Qwen3 at
# M = 1, k = 2..5; grouped: GLM-4.7 experts T = 1, 4, 16, k = 4. Two alternating rounds.
set -u
V=${V:-n}
R=${OUT:-/tmp/kbit-out}
O=$R/w; mkdir -p $O
D=build-dev
echo "== GPU tests of the new ranges $(date -u +%T)"
timeout 170 $D/tests_$V --gtest_filter="${TESTS:-GpuLinear.Gemv*:GpuLinear.BitIdenticalRunToRunAndUnderGraphCapture:GpuExpertLinear*}" \
  > $O/tests_$V.log 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $O/tests_$V.log | head -12 | tr '\n' ' ')"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $D/tests_$V --gtest_filter='GpuLinear.GemvDecodesEveryWeightPosition' > $O/memcheck_$V.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_$V.log | tail -1)"
for round in 1 2; do
  for v in b $V; do
    timeout 100 $D/kbit_$v bench --model glm47 --m 1,2,4 --bits 2,3,4,5 --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "glm47 $v round $round rc=$? $(date -u +%T)"
    timeout 60 $D/kbit_$v bench --model qwen3_coder_next --m 1 --bits 2,3,4,5 --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/abq_${v}_$round.jsonl > /dev/null 2>&1; echo "qwen3 $v round $round rc=$? $(date -u +%T)"
    timeout 120 $D/kbit_$v bench moe --model glm47 --tokens 1,4 --bits 4 --json $O/abm_${v}_$round.jsonl > $O/abm_${v}_$round.txt 2>&1
    echo "moe $v round $round rc=$? $(date -u +%T)"
  done
done
python3 bench/results/ab_summary.py pair "$O" b$V
tar -C $O -cJf $R/ab-even-ranges.tar.xz . && rm -rf $O
