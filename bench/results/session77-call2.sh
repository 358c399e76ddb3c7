#!/usr/bin/env bash
# Session 77, second device call (carried: kbit_b = main, kbit_s / kbit_w / kbit_x = the timing-only load variants).
# On an H200: issue 5's GLM-4.7 T = 1..16 k = 4 first (session76-calls.sh, H200_STEPS=g; it runs kbit_b). Then the
# timing-only load-shape A/B (ab-gemv-load-shape-session77.sh) where time allows.
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then H200_STEPS=g bash bench/results/session76-calls.sh; fi
[ $SECONDS -lt 360 ] && bash bench/results/ab-gemv-load-shape-session77.sh
echo "done at ${SECONDS}s"
