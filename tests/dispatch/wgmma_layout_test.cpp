// The wgmma items' shared-memory layout of x (src/cuda/linear/wgmma_layout.h): the core
// matrix element that wgmma reads for (k16 step, token, k slot) is where the kernel's copy
// put the column that the mma16 layout multiplies there; the copy fills each slot exactly
// once; a warp's 32 stores hit 32 banks.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "cuda/linear/wgmma_layout.h"

namespace kbit::cuda::detail {
namespace {

TEST(WgmmaLayout, WgmmaReadsTheColumnTheMma16LayoutMultiplies) {
  for (int tokens : {32, 64}) {
    std::vector<int> column_at(size_t(tokens) * 256 / 2, -1), token_at(column_at.size(), -1);  // per 16-bit element
    for (int t = 0; t < tokens; ++t)
      for (int col = 0; col < 128; col += 2) {
        const uint32_t off = wgmma_pair_offset(t, col);
        ASSERT_EQ(off % 4, 0u);
        ASSERT_LT(off / 2 + 1, column_at.size());
        for (int e = 0; e < 2; ++e) {
          ASSERT_EQ(column_at[off / 2 + e], -1) << "two pairs in one place";
          column_at[off / 2 + e] = col + e, token_at[off / 2 + e] = t;
        }
      }
    for (int q = 0; q < 8; ++q)
      for (int n = 0; n < tokens; ++n)
        for (int kappa = 0; kappa < 16; ++kappa) {
          const uint32_t off = wgmma_b_element_offset(q, n, kappa);
          ASSERT_EQ(off % 2, 0u);
          EXPECT_EQ(token_at[off / 2], n) << "q=" << q << " kappa=" << kappa;
          EXPECT_EQ(column_at[off / 2], wgmma_column_of(q, kappa)) << "q=" << q << " n=" << n << " kappa=" << kappa;
        }
  }
}

TEST(WgmmaLayout, TheMma16ColumnsOfAStepAreItsSixteenColumns) {
  for (int q = 0; q < 8; ++q) {
    std::set<int> cols;
    for (int kappa = 0; kappa < 16; ++kappa) cols.insert(wgmma_column_of(q, kappa));
    EXPECT_EQ(cols.size(), 16u);
    // lane c's k slots 2c, 2c + 1, 2c + 8, 2c + 9 are 4 consecutive columns from 32j + 8c + 4s
    for (int c = 0; c < 4; ++c) {
      const int base = 32 * (q / 2) + 8 * c + 4 * (q % 2);
      EXPECT_EQ(wgmma_column_of(q, 2 * c), base);
      EXPECT_EQ(wgmma_column_of(q, 2 * c + 1), base + 1);
      EXPECT_EQ(wgmma_column_of(q, 2 * c + 8), base + 2);
      EXPECT_EQ(wgmma_column_of(q, 2 * c + 9), base + 3);
    }
  }
}

TEST(WgmmaLayout, AWarpsStoresHitEveryBankOnce) {
  // the kernel's thread i copies token (i >> 7) * 8 + ((i >> 2) & 7), chunk 4 * ((i >> 5) & 3) + (i & 3)
  for (int warp = 0; warp < 16; ++warp)
    for (int p = 0; p < 4; ++p) {
      std::set<uint32_t> banks;
      for (int lane = 0; lane < 32; ++lane) {
        const int i = warp * 32 + lane, cq = i & 3, r_lo = (i >> 2) & 7, j = (i >> 5) & 3, r_hi = i >> 7;
        banks.insert((wgmma_pair_offset(r_hi * 8 + r_lo, 32 * j + 8 * cq + 2 * p) / 4) % 32);
      }
      EXPECT_EQ(banks.size(), 32u) << "warp " << warp << " pair " << p;
    }
}

// The tile kernel's x ring slot (tile_linear.cuh, copy_x_tile): thread i copies 16-byte chunk
// i & 7 of token (i >> 3) % tokens in 64-column half (i >> 3) / tokens. Every chunk lands in
// its own place, each quarter warp's 8 copies hit 8 different bank groups, and the wgmma
// descriptors of k16 step q (half q / 4, 32 bytes per step inside it) read column 16q + k.
TEST(WgmmaLayout, TileRingIsCoveredOnceConflictFreeAndReadInColumnOrder) {
  for (int tokens : {64, 128}) {
    const uint32_t half_bytes = uint32_t(tokens) * 128;
    std::vector<int> seen(size_t(tokens) * 16, 0);
    std::vector<int> column_at(size_t(tokens) * 128, -1), token_at(column_at.size(), -1);
    for (int i = 0; i < tokens * 16; ++i) {
      const int chunk = i & 7, r = i >> 3, tok = r % tokens, half = r / tokens;
      const uint32_t off = uint32_t(half) * half_bytes + sw128_offset(tok, chunk);
      ASSERT_EQ(off % 16, 0u);
      ASSERT_LT(off / 16, seen.size());
      ASSERT_EQ(seen[off / 16]++, 0) << "two chunks in one place";
      for (int e = 0; e < 8; ++e) column_at[off / 2 + e] = half * 64 + chunk * 8 + e, token_at[off / 2 + e] = tok;
    }
    for (int i0 = 0; i0 < tokens * 16; i0 += 8) {  // quarter warps
      std::set<uint32_t> banks;
      for (int i = i0; i < i0 + 8; ++i) {
        const int chunk = i & 7, r = i >> 3, tok = r % tokens, half = r / tokens;
        banks.insert(((uint32_t(half) * half_bytes + sw128_offset(tok, chunk)) % 128) / 16);
      }
      EXPECT_EQ(banks.size(), 8u) << "bank conflict at thread " << i0;
    }
    for (int q = 0; q < 8; ++q)
      for (int n = 0; n < tokens; ++n)
        for (int k = 0; k < 16; ++k) {
          const uint32_t off = sw128_read_offset(uint32_t(q / 4) * half_bytes + uint32_t(q % 4) * 32, n, k);
          ASSERT_EQ(column_at[off / 2], 16 * q + k) << "q=" << q << " n=" << n << " k=" << k;
          ASSERT_EQ(token_at[off / 2], n);
        }
  }
}

// The tile kernel's A buffer (one warpgroup: 4 warps x 16 rows x 128 columns): lane (g, c) of
// warp wl stores its stripe rows g and g + 8, columns 32 j + 8c .. + 7 (block j = 2h + jb in
// half h), at A rows 16 wl + a(g) (+ 8), a the inverse of tile_row_of. Every store lands in
// its own place, a quarter warp's 8 stores hit 8 bank groups, wgmma reads row r, column
// 16q + k at step q, and A row r holds the stripe's row tile_row_of(r % 8) + 8 (r % 16 / 8).
TEST(WgmmaLayout, TileWeightBufferIsCoveredOnceConflictFreeAndReadInColumnOrder) {
  constexpr uint32_t half_bytes = 64 * 128;
  auto a_row = [](int g) { return (g >> 1) | ((g & 1) << 2); };  // tile_linear.cuh's tile_a_row
  auto row_of = [](int r) { return ((r & 3) << 1) | (r >> 2); };  // fused_linear.cuh's tile_row_of
  std::vector<int> column_at(64 * 128, -1), row_at(column_at.size(), -1);
  for (int h = 0; h < 2; ++h)
    for (int jb = 0; jb < 2; ++jb)
      for (int hi = 0; hi < 2; ++hi)
        for (int wl = 0; wl < 4; ++wl) {
          std::set<uint32_t> banks[4];
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane >> 2, c = lane & 3, j = 2 * h + jb;
            const int row = 16 * wl + a_row(g) + 8 * hi, stripe_row = 16 * wl + g + 8 * hi;
            const uint32_t off = uint32_t(h) * half_bytes + sw128_offset(row, 4 * jb + c);
            banks[lane / 8].insert((off % 128) / 16);
            for (int e = 0; e < 8; ++e) {
              ASSERT_EQ(column_at[off / 2 + e], -1) << "two stores in one place";
              column_at[off / 2 + e] = 32 * j + 8 * c + e, row_at[off / 2 + e] = stripe_row;
            }
          }
          for (const auto& b : banks) EXPECT_EQ(b.size(), 8u) << "bank conflict: h=" << h << " jb=" << jb;
        }
  for (int g = 0; g < 8; ++g) EXPECT_EQ(row_of(a_row(g)), g);
  for (int q = 0; q < 8; ++q)
    for (int r = 0; r < 64; ++r)
      for (int k = 0; k < 16; ++k) {
        const uint32_t off = sw128_read_offset(uint32_t(q / 4) * half_bytes + uint32_t(q % 4) * 32, r, k);
        ASSERT_EQ(column_at[off / 2], 16 * q + k) << "q=" << q << " r=" << r << " k=" << k;
        ASSERT_EQ(row_at[off / 2], 16 * (r / 16) + row_of(r % 8) + 8 * (r % 16 / 8));
      }
}

}  // namespace
}  // namespace kbit::cuda::detail
