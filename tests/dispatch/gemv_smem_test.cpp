// The CUDA-core GEMV's shared-memory map (host only): regions apart, the prmt table on a
// 64 KB boundary of the window, and the decode shapes that must fit in one CTA.
#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "cuda/linear/gemv_args.h"
#include "cuda/linear/gemv_smem.h"

namespace kbit::cuda::detail {
namespace {

struct Region {
  int64_t begin, end;
};

bool apart(const Region& a, const Region& b) { return a.end <= b.begin || b.end <= a.begin || a.begin == a.end || b.begin == b.end; }

TEST(GemvSmem, RegionsAreApartAlignedAndInside) {
  for (int bits = 2; bits <= 5; ++bits)
    for (int64_t instance : {1, 8, 16})
      for (int64_t rows : {1, 2, 3, 4, 5, 8, 12, 16, 40})
        for (int64_t k = 128; k <= 16384; k += 384)
          for (int64_t base : {0, 1024, 3072})
            for (int64_t experts : {0, 8, 160, 512}) {
              if (instance > 1 && (experts || rows > instance || rows <= kGemvNarrowMaxM)) continue;  // dense only
              const GemvSmem s = gemv_smem_map(bits, rows, k, base, experts, instance);
              const int64_t row_bytes = (k + 127) / 128 * 256, supertiles = (k + 127) / 128;
              const int64_t table_bytes = experts ? (2 * (experts + 1) + kGemvWarps) * 4 : 0;
              SCOPED_TRACE(testing::Message() << "k=" << bits << " instance " << instance << " rows=" << rows
                                              << " K=" << k << " base=" << base << " experts=" << experts);
              ASSERT_GE(s.x_rows_first, 0);
              ASSERT_LE(s.x_rows_first, rows);
              if (instance <= kGemvNarrowMaxM) EXPECT_EQ(s.x_rows_first, rows);  // one region below 8 tokens
              const Region lut{s.lut, s.lut + gemv_lut_bytes(bits)};
              const Region x1{s.x, s.x + s.x_rows_first * row_bytes};
              const Region x2{s.x2, s.x2 + (rows - s.x_rows_first) * row_bytes};
              const Region scales{s.x_scales, s.x_scales + rows * supertiles * 4};
              const Region table{s.tile_table, s.tile_table + table_bytes};
              std::vector<Region> regions{lut, x1, x2, scales, table};
              if (s.local >= 0) {  // the local pieces, where they fit
                regions.push_back({s.local, s.local + gemv_local_bytes(instance)});
                EXPECT_EQ(s.local % 16, 0);
              } else {
                EXPECT_EQ(s.local, -1);
              }
              for (size_t i = 0; i < regions.size(); ++i) {
                EXPECT_GE(regions[i].begin, 0) << "region " << i;
                EXPECT_LE(regions[i].end, s.total) << "region " << i;
                for (size_t j = i + 1; j < regions.size(); ++j)
                  EXPECT_TRUE(apart(regions[i], regions[j])) << "regions " << i << " and " << j << " overlap";
              }
              if (s.x_rows_first == rows) EXPECT_GE(s.x_scales, x1.end);  // contiguous: x, then its scales
              EXPECT_EQ(s.x % 16, 0);
              EXPECT_EQ(s.x2 % 16, 0);
              EXPECT_EQ(s.x_scales % 16, 0);
              EXPECT_EQ(s.tile_table % 16, 0);
              if (gemv_prmt_table(bits)) EXPECT_EQ((base + s.lut) % 65536, 0);  // one prmt forms the address
            }
}

TEST(GemvSmem, DecodeShapesFitInOneCta) {
  // M = 1..4 on K up to 12288 (glm47 o and shared_dn) at k = 2..4; k = 5's 128 KB table
  // leaves room for M <= 3 there.
  for (int bits = 2; bits <= 5; ++bits)
    for (int64_t m = 1; m <= kGemvNarrowMaxM; ++m) {
      SCOPED_TRACE(testing::Message() << "k=" << bits << " M=" << m);
      const int64_t total = gemv_smem_map(bits, m, 12288, 1024).total;
      if (bits <= 4 || m <= 3) EXPECT_LE(total, kGemvMaxSmem);
      if (bits <= 4) EXPECT_GE(gemv_smem_map(bits, m, 12288, 1024).local, 0);  // room for the local pieces
      EXPECT_LE(gemv_smem_map(bits, m, 5120, 1024).total, kGemvMaxSmem);
    }
  // M = 5..16 on K = 5120 (glm47 q, shared_gu) at k = 2..4: 16 rows need x's rows on both
  // sides of the table (6 before, 10 after, to the byte); at 8 the local pieces still fit.
  for (int bits = 2; bits <= 4; ++bits)
    for (int64_t m = 5; m <= kGemvMaxM; ++m) {
      SCOPED_TRACE(testing::Message() << "k=" << bits << " M=" << m);
      const GemvSmem s = gemv_smem_map(bits, m, 5120, 1024, 0, gemv_instance_m(m));
      EXPECT_LE(s.total, kGemvMaxSmem);
      if (m <= 8) EXPECT_GE(s.local, 0);
      EXPECT_GT(gemv_smem_bytes(bits, m, 5120), 0);
    }
  EXPECT_EQ(gemv_smem_map(4, 16, 5120, 1024, 0, 16).x_rows_first, 6);
  // K = 12288 (glm47 o, shared_dn) to M = 6 (2 rows of 24 KB before the table, the rest after),
  // not from M = 7: those take the fused kernel.
  for (int64_t m = 5; m <= kGemvMaxM; ++m) EXPECT_EQ(gemv_smem_bytes(4, m, 12288) > 0, m <= 6) << "M=" << m;
  EXPECT_EQ(gemv_smem_bytes(4, 17, 512), 0);  // past the GEMV's M
}

TEST(GemvSmem, InstanceOfEachTokenCount) {
  for (int64_t m = 1; m <= 4; ++m) EXPECT_EQ(gemv_instance_m(m), m);
  for (int64_t m = 5; m <= 8; ++m) EXPECT_EQ(gemv_instance_m(m), 8);
  for (int64_t m = 9; m <= 16; ++m) EXPECT_EQ(gemv_instance_m(m), 16);
}

}  // namespace
}  // namespace kbit::cuda::detail
