// Work schedule of the 256-token warp-specialised tile kernel (tile_linear.cuh): plain C++,
// shared by its launcher and the CPU tests.
//
// The kernel's CTAs (one per SM) loop over tiles of 128 rows x 256 tokens. When the tiles
// leave the last wave part-empty (glm47 q at M = 512: 192 tiles on 132 SMs, the second wave
// 45% full; kv: 32 tiles, a quarter of the SMs busy), the tiles of that last wave ("the
// tail") are split along K into S units each, so that they finish in a fraction of a
// tile's time. Each unit stores its fp32 partial tile in the workspace; the last of a tile's S units
// to arrive (a counter, no float atomics) sums the S partials in split order, so results are
// bit-identical run to run.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kbit::cuda::detail {

// Floats in one partial tile (128 rows x 256 tokens).
inline constexpr int64_t kWsPartialTileFloats = 128 * 256;
// The most splits of a tail tile, and what a split unit costs beyond its share of a whole
// tile, in supertiles (128 columns) of work: ~14 us on the H200 (2026-12-01, A/B at M = 512
// in one binary, k = 2..5: pipeline refill, the partial's round trip, the epilogue), about 8
// supertiles at ~1.6-2 us each. Fitted on: glm47 kv (32 tiles of 40 supertiles, quarters)
// 62.6 -> 31.6 us, q (60 of 192 tiles in halves) 130.4 -> 108.7, o (80 tiles of 96, thirds in
// two waves) 141.1 -> 123.0; against: glm47 moe_dn (80 tiles of 12, thirds) 24.0 -> 40.4,
// qwen3 2048 x 512 (quarters of 1 supertile) 12.8 -> 18.6.
inline constexpr int kWsMaxTailSplits = 4;
inline constexpr int kWsSplitOverheadSupertiles = 8;

struct WsSchedule {
  int full_items = 0;   // tiles 0 .. full_items - 1 run whole, in waves of `ctas`
  int tail_tiles = 0;   // tiles full_items .. + tail_tiles - 1 run as tail_splits units each
  int tail_splits = 1;  // 1: no tail split (then tail_tiles = 0)
  int per_split = 0;    // supertiles per tail unit (the last may have fewer, never none)
  constexpr int work() const { return full_items + tail_tiles * tail_splits; }  // units in all
};

// items: tiles; ctas: resident CTAs (SMs); supertiles: K / 128 rounded up; slots: partial
// tiles the workspace holds (tail_tiles * tail_splits never exceeds it).
inline WsSchedule ws_schedule(int64_t items, int64_t ctas, int supertiles, int64_t slots) {
  WsSchedule s;
  s.full_items = int(items);
  s.per_split = supertiles;
  if (items <= 0 || ctas <= 0 || supertiles < 2) return s;
  const int64_t tail = items % ctas;  // items < ctas: every tile is in the tail
  if (tail == 0) return s;
  // The tail's time in supertiles: one whole tile, or ceil(tail * S / ctas) waves of units
  // of ceil(supertiles / S) supertiles plus the split overhead; the cheapest S wins.
  auto cost = [&](int splits, int per) {
    return splits == 1 ? int64_t(supertiles)
                       : (tail * splits + ctas - 1) / ctas * (int64_t(per) + kWsSplitOverheadSupertiles);
  };
  int best = 1;
  for (int splits = 2; splits <= kWsMaxTailSplits; ++splits) {
    const int per = (supertiles + splits - 1) / splits;
    if ((supertiles + per - 1) / per != splits) continue;  // an empty split
    if (tail * splits > slots) break;
    if (cost(splits, per) < cost(best, (supertiles + best - 1) / best)) best = splits;
  }
  if (best == 1) return s;
  s.full_items = int(items - tail);
  s.tail_tiles = int(tail);
  s.tail_splits = best;
  s.per_split = (supertiles + best - 1) / best;
  return s;
}

}  // namespace kbit::cuda::detail
