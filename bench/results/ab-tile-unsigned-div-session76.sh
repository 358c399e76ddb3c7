#!/usr/bin/env bash
# Session 76 A/B: the wgmma tile kernels' per-item divisions unsigned (tile-unsigned-div-untested-session75.patch: item /
# units / splits, ws_unit, ws_next_unit in udiv / umod; the 64-bit stream-K next / supertiles kept), t, against main (b).
# Carried: kbit_b, kbit_t, tests_t. Any card. GPU tests of t (the tile kernels, dense and grouped), then two alternating
# rounds of the tile kernels forced (kbit_wgmma_tile, kbit_wgmma_stream) on glm47 at M = 64, 128 and Qwen3 at M = 64, k = 2..5.
# Ran in session 77 (h100-ab-tile-unsigned-div-session77.txt).
set -u
source bench/results/ab_common.sh
ab_start w
ab_tests t 90 GpuLinear.WgmmaTileOnModelShapes:GpuLinear.StreamKAlone:GpuLinear.Tile256*:GpuExpertLinear.TileKernelsGrouped:GpuLinear.BitIdenticalRunToRunAndUnderGraphCapture
tile=(--bits 2,3,4,5 --backend kbit_wgmma_tile,kbit_wgmma_stream --no-routed-moe --repeats 5 --settle-ms 50)
for round in 1 2; do
  for v in b t; do
    ab_bench glm47 ab $v $round 50 bench --model glm47 --m 64,128 "${tile[@]}"
    ab_bench qwen3 abq $v $round 30 bench --model qwen3_coder_next --m 64 "${tile[@]}"
  done
done
ab_summary bt
ab_tar ab-tile-unsigned-div
