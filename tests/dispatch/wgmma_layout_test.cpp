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

}  // namespace
}  // namespace kbit::cuda::detail
