#!/usr/bin/env bash
# Session 79 device call (H200 only; carried kbit_b = main f743b16's kbit, scripts/carry_pack.sh): issue 5's GLM-4.7
# experts at T = 1..16, k = 4 first (the 3x bar at T = 4, last measured on a clock-throttled H200), then issue 4's
# dense rows at M = 3, 5, 6, 7 (H200_STEPS1 and H200_STEPS2 pick other steps of h200-m4096-and-m3-15-main-session72.sh).
# Results tarred into $OUT/h200-steps.tar.xz (only 8 files come back from a call).
set -u
R=${OUT:-/tmp/kbit-out}
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
mkdir -p $R/h
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $R/h/clocks-start.txt
for s in ${H200_STEPS1:-g} ${H200_STEPS2:-a}; do
  OUT=$R/h STEPS=$s bash bench/results/h200-m4096-and-m3-15-main-session72.sh
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> $R/h/clocks-after-steps.txt
done
grep -E "glm47" $R/h/moe-glm47-t1-16-k4.txt 2>/dev/null | head -60
tar -C $R/h -cJf $R/h200-steps.tar.xz . && rm -rf $R/h
