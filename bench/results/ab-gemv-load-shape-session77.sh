#!/usr/bin/env bash
# Session 77, TIMING-ONLY A/B of the GEMV's weight loads (wrong results by design; not for landing): does the number of
# load instructions per unit cost time? Lead: the LUT probe's "loads at entry" rows (session 77, H100), where dropping a
# 2-byte scale load beside each 16-byte key load took 8.55-9.08 us to 7.67-8.45 (a bare read 7.13-7.52).
# Carried: kbit_b (main), kbit_s (no scale loads: scales from the unit index), kbit_w (words as 16-byte loads, two words
# per lane per load: the same bytes in the wrong order), kbit_x (both). gemv-timing-only-wide-words-no-scale-loads-session77.patch
# (both macros defined; each build kept one or both). kbit_gemv forced, glm47 and Qwen3 M = 1, 4, k = 2..5, two rounds.
set -u
R=${OUT:-/tmp/kbit-out}
O=$R/ls; mkdir -p $O
D=build-dev
for round in 1 2; do
  for v in b s w x; do
    timeout 60 $D/kbit_$v bench --model glm47 --m 1,4 --bits 2,3,4,5 --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "glm47 $v round $round rc=$? $(date -u +%T)"
    timeout 40 $D/kbit_$v bench --model qwen3_coder_next --m 1 --bits 2,4 --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/abq_${v}_$round.jsonl > /dev/null 2>&1; echo "qwen3 $v round $round rc=$? $(date -u +%T)"
  done
done
for v in s w x; do python3 bench/results/ab_summary.py pair "$O" b$v > $O/summary_b$v.txt; echo "== $v/b"; grep geomean $O/summary_b$v.txt; done
grep -E "glm47\.(q|shared_gu) .*M/T=1 " $O/summary_bx.txt $O/summary_bs.txt $O/summary_bw.txt
tar -C $O -cJf $R/ab-gemv-load-shape.tar.xz . && rm -rf $O
