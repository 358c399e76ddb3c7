#!/usr/bin/env bash
# Session 75 A/B: the GEMV's range arithmetic (uq, owner) in unsigned 32-bit divisions, every kernel (u) or only the
# mixed grouped kernel (x), against main 6c0736a (b; signed divisions). The lead: both dropped range patches
# (sessions 74, 75) ran GLM-4.7 moe_gu at T = 4 6-7% faster although their distribution there was main's.
# Carried: kbit_b, kbit_u, tests_u, kbit_x (VS=v: kbit_b = main 89c66d3, kbit_v and tests_v = every runtime
# division in the GEMV's setup, staging and tile steps unsigned as well, udiv / umod). Any card. Two alternating rounds: kbit_gemv forced on glm47 M = 1, 4 and
# Qwen3 M = 1 (k = 2..5); kbit bench moe GLM-4.7 k = 4 at T = 1, 2, 3, 4, 6, 8, 12, 16.
set -u
R=${OUT:-/tmp/kbit-out}
O=$R/w; mkdir -p $O
D=build-dev
VS=${VS:-u x}
TV=${VS%% *}
echo "== GPU tests of $TV $(date -u +%T)"
timeout 170 $D/tests_$TV --gtest_filter="${TESTS:-GpuLinear.Gemv*:GpuLinear.BitIdenticalRunToRunAndUnderGraphCapture:GpuExpertLinear*:GpuMoe*}" \
  > $O/tests_$TV.log 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $O/tests_$TV.log | head -12 | tr '\n' ' ')"
for round in 1 2; do
  for v in b $VS; do
    timeout 100 $D/kbit_$v bench --model glm47 --m 1,4 --bits 2,3,4,5 --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "glm47 $v round $round rc=$? $(date -u +%T)"
    timeout 60 $D/kbit_$v bench --model qwen3_coder_next --m 1 --bits 2,3,4,5 --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/abq_${v}_$round.jsonl > /dev/null 2>&1; echo "qwen3 $v round $round rc=$? $(date -u +%T)"
    timeout 150 $D/kbit_$v bench moe --model glm47 --tokens 1,2,3,4,6,8,12,16 --bits 4 --json $O/abm_${v}_$round.jsonl \
      > $O/abm_${v}_$round.txt 2>&1; echo "moe $v round $round rc=$? $(date -u +%T)"
  done
done
for v in $VS; do python3 bench/results/ab_summary.py pair "$O" b$v > $O/summary_b$v.txt; grep -E 'geomean|expert_linear' $O/summary_b$v.txt; done
tar -C $O -cJf $R/ab-unsigned-div.tar.xz . && rm -rf $O
