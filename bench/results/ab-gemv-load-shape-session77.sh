#!/usr/bin/env bash
# Session 77, TIMING-ONLY A/B of the GEMV's weight loads (wrong results by design, so the bench marks the variants' rows
# invalid; not for landing): does the number of load instructions per unit cost time? Lead: the LUT probe's "loads at
# entry" rows (session 77, H100), where dropping a 2-byte scale load beside each 16-byte key load took 8.55-9.08 us to
# 7.67-8.45 (a bare read 7.13-7.52).
# Carried: kbit_b (main), kbit_s (no scale loads: scales from the unit index), kbit_w (words as 16-byte loads, two words
# per lane per load: the same bytes in the wrong order), kbit_x (both). gemv-timing-only-wide-words-no-scale-loads-session77.patch
# (both macros defined; each build kept one or both). kbit_gemv forced, glm47 M = 1, 4 and Qwen3 M = 1, two rounds.
set -u
source bench/results/ab_common.sh
ab_start ls
gemv=(--backend kbit_gemv --no-routed-moe --repeats 7)
for round in 1 2; do
  for v in b s w x; do
    ab_bench glm47 ab $v $round 60 bench --model glm47 --m 1,4 --bits 2,3,4,5 "${gemv[@]}"
    ab_bench qwen3 abq $v $round 40 bench --model qwen3_coder_next --m 1 --bits 2,4 "${gemv[@]}"
  done
done
for v in s w x; do ab_summary b$v timing-only; done
ab_tar ab-gemv-load-shape
