#!/usr/bin/env bash
# Session 76 A/B: the wgmma tile kernels' per-item divisions unsigned (tile-unsigned-div-untested-session75.patch: item /
# units / splits, ws_unit, ws_next_unit in udiv / umod; the 64-bit stream-K next / supertiles kept), t, against main (b).
# Carried: kbit_b, kbit_t, tests_t. Any card. GPU tests of t (the tile kernels, dense and grouped), then two alternating
# rounds of the tile kernels forced (kbit_wgmma_tile, kbit_wgmma_stream) on glm47 at M = 64, 128 and Qwen3 at M = 64, k = 2..5.
set -u
R=${OUT:-/tmp/kbit-out}
O=$R/w; mkdir -p $O
D=build-dev
echo "== GPU tests of t $(date -u +%T)"
timeout 90 $D/tests_t --gtest_filter="${TESTS:-GpuLinear.WgmmaTileOnModelShapes:GpuLinear.StreamKAlone:GpuLinear.Tile256*:GpuExpertLinear.TileKernelsGrouped:GpuLinear.BitIdenticalRunToRunAndUnderGraphCapture}" \
  > $O/tests_t.log 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $O/tests_t.log | head -12 | tr '\n' ' ')"
for round in 1 2; do
  for v in b t; do
    timeout 50 $D/kbit_$v bench --model glm47 --m 64,128 --bits 2,3,4,5 --backend kbit_wgmma_tile,kbit_wgmma_stream --no-routed-moe \
      --repeats 5 --settle-ms 50 --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "glm47 $v round $round rc=$? $(date -u +%T)"
    timeout 30 $D/kbit_$v bench --model qwen3_coder_next --m 64 --bits 2,3,4,5 --backend kbit_wgmma_tile,kbit_wgmma_stream --no-routed-moe \
      --repeats 5 --settle-ms 50 --json $O/abq_${v}_$round.jsonl > /dev/null 2>&1; echo "qwen3 $v round $round rc=$? $(date -u +%T)"
  done
done
python3 bench/results/ab_summary.py pair "$O" bt > $O/summary_bt.txt; grep -E 'geomean' $O/summary_bt.txt
tar -C $O -cJf $R/ab-tile-unsigned-div.tar.xz . && rm -rf $O
