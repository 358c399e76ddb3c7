#!/usr/bin/env bash
# Session 75 A/B: the fused mma.sync kernel's per-item divisions unsigned (udiv / umod, f) against main c146e93 (b).
# Carried: kbit_b, kbit_f, tests_f. Any card. GPU tests of f (the fused and dispatcher paths), then two alternating
# rounds of kbit_linear (the tuned plans) on glm47 at M = 8, 16 and Qwen3 at M = 16, k = 2..5.
set -u
R=${OUT:-/tmp/kbit-out}
O=$R/w; mkdir -p $O
D=build-dev
echo "== GPU tests of f $(date -u +%T)"
timeout 120 $D/tests_f --gtest_filter="${TESTS:-GpuLinear.AwkwardShapesEveryMEveryPath:GpuLinear.ModelShapes:GpuLinear.BitIdenticalRunToRunAndUnderGraphCapture:GpuLinear.PdlChainMatchesPlainLaunches:GpuLinear.BiasResidualPairStores:GpuExpertLinear.MatchesPerExpertFp64ForAnyRouting:GpuExpertLinear.TileKernelsGrouped}" \
  > $O/tests_f.log 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $O/tests_f.log | head -12 | tr '\n' ' ')"
for round in 1 2; do
  for v in b f; do
    timeout 60 $D/kbit_$v bench --model glm47 --m 8,16 --bits 2,3,4,5 --backend kbit_linear --no-routed-moe --repeats 7 \
      --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "glm47 $v round $round rc=$? $(date -u +%T)"
    timeout 40 $D/kbit_$v bench --model qwen3_coder_next --m 16 --bits 2,3,4,5 --backend kbit_linear --no-routed-moe --repeats 7 \
      --json $O/abq_${v}_$round.jsonl > /dev/null 2>&1; echo "qwen3 $v round $round rc=$? $(date -u +%T)"
  done
done
python3 bench/results/ab_summary.py pair "$O" bf > $O/summary_bf.txt; grep -E 'geomean' $O/summary_bf.txt
tar -C $O -cJf $R/ab-fused-unsigned-div.tar.xz . && rm -rf $O
