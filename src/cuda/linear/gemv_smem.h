// Where the CUDA-core GEMV keeps its table, x and x's scales in a CTA's dynamic shared
// memory (host arithmetic: the planner and the CPU tests use it without a GPU).
#pragma once

#include <algorithm>
#include <cstdint>

namespace kbit::cuda::detail {

// Dynamic shared memory map of one CTA (offsets from the dynamic base): the pair
// table, x (M rows of supertiles * 128 fp16 values) and x's power-of-two scales
// ([M][supertiles] floats, 2^-e).
struct GemvSmem {
  int64_t lut = 0, x = 0, x_scales = 0, tile_table = 0, total = 0;
};

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

// x_rows: rows of x staged per CTA; experts: the grouped tile table's size (0: dense).
// dyn_base: the shared-window address where dynamic shared memory starts (the prmt
// tables must sit on a 64 KB boundary of the window).
inline GemvSmem gemv_smem_map(int bits, int64_t x_rows, int64_t k, int64_t dyn_base, int64_t experts = 0) {
  GemvSmem s;
  const int64_t supertiles = (k + 127) / 128;
  const int64_t x_bytes = x_rows * supertiles * 128 * 2, scale_bytes = (x_rows * supertiles * 4 + 15) / 16 * 16;
  const int64_t table_bytes = experts ? (experts + 1 + 3) / 4 * 16 : 0;
  const int64_t xs_bytes = x_bytes + scale_bytes + table_bytes;
  if (gemv_prmt_table(bits)) {  // the table on the first 64 KB boundary of the window; x before it if it fits
    s.lut = (dyn_base + 65535) / 65536 * 65536 - dyn_base;
    s.x = xs_bytes <= s.lut ? 0 : s.lut + 65536;
    s.total = std::max(s.lut + 65536, s.x + xs_bytes);
  } else {
    s.lut = 0;
    s.x = gemv_lut_bytes(bits);
    s.total = s.x + xs_bytes;
  }
  s.x_scales = s.x + x_bytes;
  s.tile_table = s.x_scales + scale_bytes;
  return s;
}

}  // namespace kbit::cuda::detail
