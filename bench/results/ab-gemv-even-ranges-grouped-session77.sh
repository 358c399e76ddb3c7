#!/usr/bin/env bash
# Session 77 A/B: the grouped GEMV's warp ranges at floor(w U / W) in the row-tile instances only (GROUPED, not the
# mixed kernel; dense unchanged), e, against main (b). Lead: session 74's and 75's even / two-level ranges made GLM-4.7
# moe_gu T = 4 0.933-0.945 but T = 1 1.02-1.07 (dense slower everywhere: those builds changed the dense loop's code).
# Carried: kbit_b, kbit_e, tests_e (gemv-even-ranges-grouped-only-session77.patch). Any card. GPU tests of the grouped
# GEMV, then two alternating rounds of kbit bench moe, GLM-4.7 T = 1..8 and Qwen3-Coder-Next T = 1, 4, 8, k = 4.
set -u
R=${OUT:-/tmp/kbit-out}
O=$R/g; mkdir -p $O
D=build-dev
echo "== GPU tests of e $(date -u +%T)"
timeout 120 $D/tests_e --gtest_filter="${TESTS:-GpuExpertLinear*:GpuMoe*}" > $O/tests_e.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $O/tests_e.log | head -12 | tr '\n' ' ')"
for round in 1 2; do
  for v in b e; do
    timeout 100 $D/kbit_$v bench moe --model glm47 --tokens 1,2,3,4,6,8 --bits 4 --json $O/abm_${v}_$round.jsonl > $O/abm_${v}_$round.txt 2>&1
    echo "glm47 moe $v round $round rc=$? $(date -u +%T)"
    timeout 60 $D/kbit_$v bench moe --model qwen3_coder_next --tokens 1,4,8 --bits 4 --json $O/abq_${v}_$round.jsonl > $O/abq_${v}_$round.txt 2>&1
    echo "qwen3 moe $v round $round rc=$? $(date -u +%T)"
  done
done
python3 bench/results/ab_summary.py pair "$O" be > $O/summary_be.txt; grep -E 'moe_|geomean' $O/summary_be.txt | head -40
tar -C $O -cJf $R/ab-even-ranges-grouped.tar.xz . && rm -rf $O
