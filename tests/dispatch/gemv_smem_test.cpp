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
            const Region xs{s.x, s.x_bar + kGemvXBarBytes};
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
            EXPECT_GE(s.x_bar, s.tile_table + table_bytes);  // x's mbarrier after the tile table
            EXPECT_EQ(s.x_bar % 16, 0);
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

// Tiles by expert: a class on gemv_class_min_ctas CTAs never has a CTA whose units span
// more tiles than its staged rows hold. The ranges here are the kernel's (gemv_body): whole
// (tile, stripe) segments per warp where an even share is within kGemvSplitSlack units of
// one, else even shares over min(warps, units) warps.
TEST(GemvSmem, TilesByExpertClassesStageTheirTilesRows) {
  EXPECT_EQ(gemv_class_min_ctas(0, 100, 4, 14), 0);
  EXPECT_EQ(gemv_class_min_ctas(5, 100, 4, 7), 0x7fffffff) << "one tile of 4 rows per CTA leaves no room to straddle";
  for (int64_t stripes : {1, 3, 16, 96, 192})
    for (int64_t supertiles : {1, 2, 12, 40})
      for (int rows_per_tile : {1, 2, 4})
        for (int64_t x_rows : {4, 7, 14, 48, 64})
          for (int64_t tiles : {1, 2, 7, 23, 57, 128, 256}) {
            const int64_t us = stripes * supertiles, min_ctas = gemv_class_min_ctas(tiles, us, rows_per_tile, x_rows);
            if (min_ctas > 4096) continue;  // no count suffices (too few staged rows)
            for (int64_t ctas : {min_ctas, min_ctas + 1, min_ctas + 17}) {
              const int64_t units = tiles * us, segments = tiles * stripes, all_warps = ctas * kGemvWarps;
              const int64_t even_share = (units + all_warps - 1) / all_warps;
              const int64_t active = segments < all_warps && supertiles <= even_share + kGemvSplitSlack
                                         ? segments
                                         : std::min(all_warps, units);
              const int64_t uq = units / active, ur = units - uq * active;
              auto range_start = [&](int64_t w) { return w * uq + std::min(w, ur); };
              for (int64_t cta = 0; cta * kGemvWarps < active; ++cta) {
                const int64_t w_first = cta * kGemvWarps, w_last = std::min(w_first + kGemvWarps, active) - 1;
                const int64_t t_first = range_start(w_first) / us, t_last = (range_start(w_last + 1) - 1) / us;
                ASSERT_LE((t_last - t_first + 1) * rows_per_tile, x_rows)
                    << "stripes=" << stripes << " S=" << supertiles << " rows/tile=" << rows_per_tile
                    << " x_rows=" << x_rows << " tiles=" << tiles << " ctas=" << ctas << " cta=" << cta;
              }
            }
          }
}

TEST(GemvSmem, TilesByExpertClassesByRows) {
  EXPECT_EQ(gemv_class_of(0), -1);
  EXPECT_EQ(gemv_class_of(1), 0);
  EXPECT_EQ(gemv_class_of(2), 1);
  for (int64_t rows : {3, 4, 5, 8, 9, 100}) EXPECT_EQ(gemv_class_of(rows), 2) << rows;
  const int64_t tiles[] = {0, 1, 1, 1, 1, 2, 2, 2, 2, 3};  // 4-row tiles from 3 rows on
  for (int64_t rows = 0; rows < 10; ++rows)
    for (int c = 0; c < kGemvClasses; ++c) {
      EXPECT_EQ(gemv_class_tiles(c, rows), c == gemv_class_of(rows) ? tiles[rows] : 0) << rows;
      EXPECT_EQ(gemv_class_holds(c, rows), c == gemv_class_of(rows)) << rows;
    }
  for (int c = 0; c < kGemvClasses; ++c) EXPECT_EQ(gemv_class_rows(c), 1 << c);
}

// The class split: the whole grid, every class with tiles on at least its minimum, the rest
// in proportion to work; a class held at its minimum gets no share on top (GLM-4.7 moe_gu
// T = 16: 9 staged rows at K = 5120 make each 4-row tile need a CTA of its own).
TEST(GemvSmem, TilesByExpertSplitTheGridByWorkAboveTheMinima) {
  const int cost[kGemvClasses] = {gemv_class_cost(4, 0), gemv_class_cost(4, 1), gemv_class_cost(4, 2)};
  for (int64_t x_rows : {9, 14, 64})
    for (int64_t t0 : {0, 1, 10, 70, 128})
      for (int64_t t1 : {0, 1, 12, 40})
        for (int64_t t2 : {0, 1, 5, 11, 30}) {
          const int64_t tiles[kGemvClasses] = {t0, t1, t2}, us = 192 * 40, grid = 132;
          int64_t ctas[kGemvClasses] = {-1, -1, -1}, minima = 0;
          for (int c = 0; c < kGemvClasses; ++c) minima += gemv_class_min_ctas(tiles[c], us, gemv_class_rows(c), x_rows);
          SCOPED_TRACE(testing::Message() << "x_rows=" << x_rows << " tiles=" << t0 << "," << t1 << "," << t2);
          const bool ok = gemv_class_split(tiles, us, x_rows, cost, grid, ctas);
          ASSERT_EQ(ok, minima <= grid);
          if (!ok) continue;
          int64_t sum = 0, work = 0;
          for (int c = 0; c < kGemvClasses; ++c) sum += ctas[c], work += tiles[c] * cost[c];
          EXPECT_EQ(sum, t0 + t1 + t2 ? grid : 0);
          for (int c = 0; c < kGemvClasses; ++c) {
            const int64_t min_c = gemv_class_min_ctas(tiles[c], us, gemv_class_rows(c), x_rows);
            EXPECT_GE(ctas[c], min_c) << c;
            if (tiles[c] == 0) EXPECT_EQ(ctas[c], 0) << c;
            // Above its minimum a class holds no more than its share of the grid (+ the floor's remainder).
            if (ctas[c] > min_c) EXPECT_LE(ctas[c], grid * tiles[c] * cost[c] / work + kGemvClasses + 1) << c;
          }
        }
  // 4-row tiles that each need a CTA of their own (their share, 10 CTAs, is below that) get
  // just those, not those and a share again; and with the share above the minimum, the share.
  const int64_t tiles[kGemvClasses] = {120, 10, 10};
  int64_t ctas[kGemvClasses] = {};
  ASSERT_TRUE(gemv_class_split(tiles, 192 * 40, 9, cost, 132, ctas));
  EXPECT_EQ(ctas[2], gemv_class_min_ctas(10, 192 * 40, 4, 9));
  EXPECT_EQ(ctas[2], 11);
  const int64_t more[kGemvClasses] = {70, 20, 11};
  ASSERT_TRUE(gemv_class_split(more, 192 * 40, 9, cost, 132, ctas));
  EXPECT_EQ(ctas[2], 132 * 11 * cost[2] / (70 * cost[0] + 20 * cost[1] + 11 * cost[2]));
  EXPECT_EQ(ctas[0] + ctas[1] + ctas[2], 132);
}

TEST(GemvSmem, TilesByExpertKeepTheStagedRowsMap) {
  for (int64_t experts : {8, 160, 512})
    for (int64_t x_rows : {1, 14, 64}) {
      const int64_t table = (2 * (experts + 1) + kGemvWarps + x_rows) * 4;
      EXPECT_GE(gemv_tile_table_bytes(experts, x_rows, true), table);
      const GemvSmem s = gemv_smem_map(4, x_rows, 5120, 0, experts, true);
      EXPECT_TRUE(s.tile_table + table <= s.lut || s.tile_table >= s.lut + 65536) << "the row map overlaps the table";
    }
}

// x by bulk copies: only 16-byte rows at 16-byte addresses without SwiGLU; dense always,
// grouped above kGemvXBulkMinValues staged values (KBIT_GEMV_X_BULK unset in the tests).
TEST(GemvSmem, BulkCopiesOfXWhereRowsAllowThem) {
  GemvArgs a;
  a.x_vec = true, a.K = 5120, a.M = 1;
  EXPECT_TRUE(gemv_x_bulk(a, 1));
  a.K = 5120 + 4;  // rows of 10248 bytes: not a multiple of 16
  EXPECT_FALSE(gemv_x_bulk(a, 1));
  a.K = 5120, a.x_vec = false;  // misaligned x or stride
  EXPECT_FALSE(gemv_x_bulk(a, 1));
  a.x_vec = true, a.x_swiglu = true;  // two halves per row
  EXPECT_FALSE(gemv_x_bulk(a, 1));
  a.x_swiglu = false;
  const int32_t offsets[2] = {0, 1};
  a.expert_offsets = offsets, a.experts = 1;
  EXPECT_FALSE(gemv_x_bulk(a, 1));  // grouped: 5120 staged values
  EXPECT_TRUE(gemv_x_bulk(a, 2));
  a.K = 1536;
  EXPECT_FALSE(gemv_x_bulk(a, 4));
  EXPECT_TRUE(gemv_x_bulk(a, 6));
}

// The dense grid: equal ranges over one wave of warps, or whole stripes where a split gains
// too little (below 2x at k = 5, below 1.33x at k = 2..4).
TEST(GemvDenseSplit, WholeStripesOnlyWhereSplittingGainsTooLittle) {
  const int64_t sms = 132, all_warps = sms * kGemvWarps;
  // glm47 shared_gu: 1536 stripes x 40 supertiles. Split at k = 2..4 (1.375x more warps), whole at k = 5.
  for (int bits = 2; bits <= 5; ++bits) {
    const GemvDenseSplit s = gemv_dense_split(bits, 1536, 1536 * 40, sms, 1, 0);
    EXPECT_EQ(s.warps, bits <= 4 ? all_warps : 1536) << bits;
    EXPECT_EQ(s.ctas, bits <= 4 ? sms : 1536 / kGemvWarps) << bits;
  }
  // glm47 q (768 stripes x 40): split at every k; kv (128 x 40) too.
  for (int bits = 2; bits <= 5; ++bits) {
    EXPECT_EQ(gemv_dense_split(bits, 768, 768 * 40, sms, 1, 0).warps, all_warps);
    EXPECT_EQ(gemv_dense_split(bits, 128, 128 * 40, sms, 1, 0).warps, all_warps);
  }
  // More stripes than warps: the whole wave.
  EXPECT_EQ(gemv_dense_split(2, 4000, 4000 * 8, sms, 1, 0).warps, all_warps);
  EXPECT_EQ(gemv_dense_split(4, 4000, 4000 * 8, sms, 1, 0).ctas, sms);
  // Few units: kGemvMinUnits per warp at least, never fewer than one CTA; max_ctas caps the grid.
  const GemvDenseSplit tiny = gemv_dense_split(4, 2, 2, sms, 1, 0);
  EXPECT_EQ(tiny.ctas, 1);
  EXPECT_EQ(tiny.warps, 2);
  const GemvDenseSplit capped = gemv_dense_split(3, 768, 768 * 40, sms, 1, 10);  // whole stripes, within the cap
  EXPECT_EQ(capped.ctas, 10);
  EXPECT_EQ(capped.warps, 10 * kGemvWarps);
  const GemvDenseSplit capped_split = gemv_dense_split(3, 40, 40 * 40, sms, 1, 10);
  EXPECT_EQ(capped_split.ctas, 10);
  EXPECT_EQ(capped_split.warps, 10 * kGemvWarps);
  // The thresholds themselves, at their edges.
  EXPECT_TRUE(gemv_whole_stripes(3, 1584, 2112));   // 2112 / 1584 = 1.33x: not worth a split
  EXPECT_FALSE(gemv_whole_stripes(3, 1583, 2112));
  EXPECT_TRUE(gemv_whole_stripes(4, 1584, 2112));
  EXPECT_FALSE(gemv_whole_stripes(4, 1583, 2112));
  EXPECT_TRUE(gemv_whole_stripes(5, 1056, 2112));   // 2x
  EXPECT_FALSE(gemv_whole_stripes(5, 1055, 2112));
}

}  // namespace
}  // namespace kbit::cuda::detail
