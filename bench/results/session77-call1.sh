#!/usr/bin/env bash
# Session 77, first device call (carried: kbit_b = main, kbit_t / tests_t = tile unsigned divisions, kbit_e / tests_e =
# grouped even ranges, lut_gemv). On an H200: issue 5's GLM-4.7 T = 1..16 k = 4 first (session76-calls.sh, H200_STEPS=g).
# Then, as time allows: the LUT probe's k = 2 rows (6, 7: loads at entry), the grouped even-ranges A/B, the tile A/B.
set -u
R=${OUT:-/tmp/kbit-out}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then H200_STEPS=g bash bench/results/session76-calls.sh; fi
timeout 40 build-dev/lut_gemv 2 > $R/lut.txt 2>&1; echo "lut rc=$?"; grep -E "loads|bare|full|k=2" $R/lut.txt | head -40
[ $SECONDS -lt 330 ] && bash bench/results/ab-gemv-even-ranges-grouped-session77.sh
[ $SECONDS -lt 330 ] && bash bench/results/ab-tile-unsigned-div-session76.sh
echo "done at ${SECONDS}s"
