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

namespace kbit::cuda::detail {

// The stream-K ranges' arithmetic, in 64 bits (StreamKSchedule) or 32 (StreamKRanges32): the
// first supertile of CTA b's range (b = ctas: the end), and the CTA whose range holds work index w.
template <typename I>
constexpr I stream_k_begin(I b, I per_cta, I extra) {
  return b * per_cta + (b < extra ? b : extra);
}
template <typename I>
constexpr I stream_k_cta_of(I w, I per_cta, I extra) {
  const I long_end = extra * (per_cta + 1);
  return w < long_end ? w / (per_cta + 1) : extra + (w - long_end) / per_cta;
}

// Stream-K schedule of the tile kernels (wgmma_stream items, 64, 128 or 256 tokens): the items' whole
// K work (items x supertiles, item-major) cut into `ctas` contiguous ranges of equal length
// (the first `extra` one supertile longer), one per persistent CTA. A CTA runs the pieces of
// its range item by item ("segments"); an item cut by range boundaries has 2 or more
// segments, which store fp32 partial tiles, and the last of them to arrive sums them in K
// order (bit-identical run to run). Why: glm47 q at M = 64 has 96 tiles of 40 supertiles for
// 132 SMs (0.73 waves); whole K splits give 192 items (1.45 waves), stream-K 29-30
// supertiles per CTA.
// A CTA's partial segments are at most two (its first and its last: any between are whole
// items), so the partials take 2 x ctas slots: slot 2b for CTA b's first segment, 2b + 1 for
// its last.
struct StreamKSchedule {
  int64_t work = 0;   // items x supertiles; 0: stream-K off
  int ctas = 0;       // CTAs (ranges)
  int supertiles = 0;
  int64_t per_cta = 0, extra = 0;  // work / ctas, work % ctas
  constexpr bool on() const { return work > 0; }
  constexpr int64_t begin(int64_t b) const { return stream_k_begin(b, per_cta, extra); }
  constexpr int64_t cta_of(int64_t w) const { return stream_k_cta_of(w, per_cta, extra); }
  constexpr int64_t first_cta(int64_t item) const { return cta_of(item * supertiles); }
  constexpr int64_t last_cta(int64_t item) const { return cta_of(item * supertiles + supertiles - 1); }
  // The partial slot of CTA b's segment of `item` (an item cut into 2 or more segments).
  constexpr int64_t slot(int64_t b, int64_t item) const {
    return 2 * b + (begin(b) / supertiles == item ? 0 : 1);
  }
};

// The same ranges in 32-bit arithmetic, for a kernel whose work fits (the 256-token kernel
// checks it at launch): its 128 accumulators per thread leave no registers for 64-bit
// divisions (it spilled at k = 2).
struct StreamKRanges32 {
  int per_cta = 0, extra = 0, supertiles = 0;
  constexpr explicit StreamKRanges32(const StreamKSchedule& s)
      : per_cta(int(s.per_cta)), extra(int(s.extra)), supertiles(s.supertiles) {}
  constexpr int begin(int b) const { return stream_k_begin(b, per_cta, extra); }
  constexpr int first_cta(int item) const { return stream_k_cta_of(item * supertiles, per_cta, extra); }
  constexpr int last_cta(int item) const { return stream_k_cta_of(item * supertiles + supertiles - 1, per_cta, extra); }
};

// items: tiles (stripe groups x token tiles); max_ctas: resident CTAs; supertiles per item.
inline StreamKSchedule stream_k_schedule(int64_t items, int64_t max_ctas, int supertiles) {
  StreamKSchedule s;
  if (items <= 0 || max_ctas <= 0 || supertiles <= 0) return s;
  s.work = items * supertiles;
  s.ctas = int(std::min<int64_t>(max_ctas, s.work));
  s.supertiles = supertiles;
  s.per_cta = s.work / s.ctas;
  s.extra = s.work % s.ctas;
  return s;
}

}  // namespace kbit::cuda::detail
