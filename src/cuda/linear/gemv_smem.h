// Where the CUDA-core GEMV keeps its table, x and x's scales in a CTA's dynamic shared
// memory (host arithmetic: the planner and the CPU tests use it without a GPU).
#pragma once

#include <algorithm>
#include <cstdint>

#include "gemv_args.h"

namespace kbit::cuda::detail {

// Dynamic shared memory map of one CTA (offsets from the dynamic base): the pair
// table, x (M rows of supertiles * 128 fp16 values), x's power-of-two scales
// ([M][supertiles] floats, 2^-e), the grouped tile table, the mbarrier of x's bulk copies
// (kGemvXBarBytes), and the local pieces.
struct GemvSmem {
  int64_t lut = 0, x = 0, x_scales = 0, tile_table = 0, x_bar = 0, local = 0, total = 0;  // local -1: none
};
inline constexpr int64_t kGemvXBarBytes = 16;

// Split stripes whose warps are all in one CTA meet in shared memory: a head and a tail
// piece slot per warp ([2 * kGemvWarps][16][kGemvMaxM] floats), then per warp an arrival
// counter (4 bytes) and an mbarrier (8 bytes), for the split stripe its range starts.
constexpr int64_t kGemvLocalPieceFloats = 2 * kGemvWarps * 16 * kGemvMaxM;
constexpr int64_t gemv_local_bytes() { return kGemvLocalPieceFloats * 4 + kGemvWarps * (4 + 8); }

// Lookup tables, all replicated per lane so that lookups never conflict on a bank:
// k = 2: 256 quad codes (two pairs) x 32 lanes x 8 bytes; k = 3, 4: 256 pair-code bytes
// x 32 lanes x 4 bytes at a 256-byte stride (k = 3 ignores bits 6-7 of the byte); all
// 64 KB on a 64 KB boundary, addressed by one prmt. k = 5: 1024 pair codes x 32 lanes
// x 4 bytes (128 KB).
constexpr bool gemv_prmt_table(int bits) { return bits <= 4; }
constexpr int64_t gemv_lut_bytes(int bits) {
  if (gemv_prmt_table(bits)) return 65536;
  return (int64_t(1) << (2 * bits)) * 32 * 4;
}

// The grouped tile table (build_gemv_tile_table): each expert's first tile and first row
// ([experts + 1] ints each), then one tile count per warp for the scan; with 1-row tiles
// the same region holds the expert of each staged row (x_rows ints) instead; tiles by
// expert (mixed) have both, the staged rows' sources after the table.
constexpr int64_t gemv_tile_table_bytes(int64_t experts, int64_t x_rows, bool mixed = false) {
  if (!experts) return 0;
  const int64_t table = 2 * (experts + 1) + kGemvWarps;
  return ((mixed ? table + x_rows : std::max(table, x_rows)) + 3) / 4 * 16;
}

// x_rows: rows of x staged per CTA; experts: the grouped tile table's size (0: dense).
// dyn_base: the shared-window address where dynamic shared memory starts (the prmt
// tables must sit on a 64 KB boundary of the window).
inline GemvSmem gemv_smem_map(int bits, int64_t x_rows, int64_t k, int64_t dyn_base, int64_t experts = 0,
                              bool mixed = false) {
  GemvSmem s;
  const int64_t supertiles = (k + 127) / 128;
  const int64_t x_bytes = x_rows * supertiles * 128 * 2, scale_bytes = (x_rows * supertiles * 4 + 15) / 16 * 16;
  const int64_t table_bytes = gemv_tile_table_bytes(experts, x_rows, mixed);
  const int64_t xs_bytes = x_bytes + scale_bytes + table_bytes + kGemvXBarBytes, local_bytes = gemv_local_bytes();
  if (gemv_prmt_table(bits)) {
    // The table on the first 64 KB boundary of the window; x, then the local pieces, before
    // it where they fit (the local pieces alone when x does not), else after it.
    s.lut = (dyn_base + 65535) / 65536 * 65536 - dyn_base;
    const int64_t after = s.lut + 65536;
    s.x = xs_bytes <= s.lut ? 0 : after;
    if (s.x == 0) {
      s.local = xs_bytes + local_bytes <= s.lut ? xs_bytes : after;
    } else {
      s.local = local_bytes <= s.lut ? 0 : after + xs_bytes;
    }
    s.total = std::max({after, s.x + xs_bytes, s.local + local_bytes});
  } else {
    s.lut = 0;
    s.x = gemv_lut_bytes(bits);
    s.local = s.x + xs_bytes;
    s.total = s.local + local_bytes;
  }
  // No room (k = 5 with long rows of x): every split stripe takes the global path.
  if (s.local + local_bytes > kGemvMaxSmem) {
    s.local = -1;
    s.total = gemv_prmt_table(bits) ? std::max(s.lut + 65536, s.x + xs_bytes) : s.x + xs_bytes;
  }
  s.x_scales = s.x + x_bytes;
  s.tile_table = s.x_scales + scale_bytes;
  s.x_bar = s.tile_table + table_bytes;
  return s;
}

}  // namespace kbit::cuda::detail
