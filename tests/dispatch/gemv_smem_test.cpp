// The CUDA-core GEMV's shared-memory map (host only): regions apart, the prmt table on a
// 64 KB boundary of the window, and the decode shapes that must fit in one CTA.
#include <gtest/gtest.h>

#include <initializer_list>

#include "cuda/linear/gemv_args.h"
#include "cuda/linear/gemv_smem.h"

namespace kbit::cuda::detail {
namespace {

struct Region {
  int64_t begin, end;
};

TEST(GemvSmem, RegionsAreApartAlignedAndInside) {
  for (int bits = 2; bits <= 5; ++bits)
    for (int64_t rows : {1, 2, 3, 4, 8, 40})
      for (int64_t k = 128; k <= 16384; k += 384)
        for (int64_t base : {0, 1024, 3072})
          for (int64_t experts : {0, 8, 160, 512}) {
            const GemvSmem s = gemv_smem_map(bits, rows, k, base, experts);
            const int64_t supertiles = (k + 127) / 128;
            const int64_t x_end = s.x + rows * supertiles * 256;
            const int64_t table_bytes = experts ? (2 * (experts + 1) + kGemvWarps) * 4 : 0;
            const Region lut{s.lut, s.lut + gemv_lut_bytes(bits)};
            const Region xs{s.x, s.tile_table + table_bytes};
            SCOPED_TRACE(testing::Message() << "k=" << bits << " rows=" << rows << " K=" << k << " base=" << base
                                            << " experts=" << experts);
            EXPECT_TRUE(lut.end <= xs.begin || xs.end <= lut.begin);
            EXPECT_LE(std::max(lut.end, xs.end), s.total);
            if (s.local >= 0) {  // the local pieces, where they fit
              const Region local{s.local, s.local + gemv_local_bytes()};
              EXPECT_TRUE(local.end <= xs.begin || xs.end <= local.begin);
              EXPECT_TRUE(local.end <= lut.begin || lut.end <= local.begin);
              EXPECT_LE(local.end, s.total);
              EXPECT_EQ(s.local % 16, 0);
            } else {
              EXPECT_EQ(s.local, -1);
            }
            EXPECT_GE(s.x_scales, x_end);
            EXPECT_GE(s.tile_table, s.x_scales + rows * supertiles * 4);
            EXPECT_EQ(s.x % 16, 0);
            EXPECT_EQ(s.tile_table % 16, 0);
            if (gemv_prmt_table(bits)) EXPECT_EQ((base + s.lut) % 65536, 0);  // one prmt forms the address
          }
}

TEST(GemvSmem, DecodeShapesFitInOneCta) {
  // M = 1..4 on K up to 12288 (glm47 o and shared_dn) at k = 2..4; k = 5's 128 KB table
  // leaves room for M <= 3 there.
  for (int bits = 2; bits <= 5; ++bits)
    for (int64_t m = 1; m <= kGemvMaxM; ++m) {
      SCOPED_TRACE(testing::Message() << "k=" << bits << " M=" << m);
      const int64_t total = gemv_smem_map(bits, m, 12288, 1024).total;
      if (bits <= 4 || m <= 3) EXPECT_LE(total, kGemvMaxSmem);
      if (bits <= 4) EXPECT_GE(gemv_smem_map(bits, m, 12288, 1024).local, 0);  // room for the local pieces
      EXPECT_LE(gemv_smem_map(bits, m, 5120, 1024).total, kGemvMaxSmem);
    }
}

}  // namespace
}  // namespace kbit::cuda::detail
