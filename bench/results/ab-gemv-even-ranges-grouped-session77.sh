#!/usr/bin/env bash
# Session 77 A/B: the grouped GEMV's warp ranges at floor(w U / W) in the row-tile instances only (GROUPED, not the
# mixed kernel; dense unchanged), e, against main (b). Lead: session 74's and 75's even / two-level ranges made GLM-4.7
# moe_gu T = 4 0.933-0.945 but T = 1 1.02-1.07 (dense slower everywhere: those builds changed the dense loop's code).
# Carried: kbit_b, kbit_e, tests_e (gemv-even-ranges-grouped-only-session77.patch). Any card. GPU tests of the grouped
# GEMV, then two alternating rounds of kbit bench moe, GLM-4.7 T = 1..8 and Qwen3-Coder-Next T = 1, 4, 8, k = 4.
set -u
source bench/results/ab_common.sh
ab_start g
ab_tests e 120 'GpuExpertLinear*:GpuMoe*'
for round in 1 2; do
  for v in b e; do
    ab_bench "glm47 moe" abm $v $round 100 bench moe --model glm47 --tokens 1,2,3,4,6,8 --bits 4
    ab_bench "qwen3 moe" abq $v $round 60 bench moe --model qwen3_coder_next --tokens 1,4,8 --bits 4
  done
done
ab_summary be
ab_tar ab-even-ranges-grouped
