// Bit-plane packing, geometry and layout slot maps.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "kbit/layout.h"

namespace kbit {
namespace {

TEST(Packing, SpecExampleK3) {
  uint8_t idx[32];
  for (int j = 0; j < 32; ++j) idx[j] = uint8_t(j % 8);
  uint32_t w[3];
  pack_block(idx, 3, w);
  EXPECT_EQ(w[0], 0xAAAAAAAAu);
  EXPECT_EQ(w[1], 0xCCCCCCCCu);
  EXPECT_EQ(w[2], 0xF0F0F0F0u);
}

TEST(Packing, RoundTripsEveryBitWidth) {
  std::mt19937 rng(5);
  for (int k = 2; k <= 5; ++k)
    for (int trial = 0; trial < 1000; ++trial) {
      uint8_t idx[32], back[32];
      for (auto& i : idx) i = uint8_t(rng() % (1u << k));
      uint32_t w[5] = {};
      pack_block(idx, k, w);
      unpack_block(w, k, back);
      for (int j = 0; j < 32; ++j) ASSERT_EQ(back[j], idx[j]);
      for (int j = 0; j < 32; ++j)  // bit j of word t is bit t of idx_j
        for (int t = 0; t < k; ++t) ASSERT_EQ((w[t] >> j) & 1u, (idx[j] >> t) & 1u);
    }
}

TEST(Geometry, SizesForAwkwardShapes) {
  for (int64_t n : {1, 31, 32, 33, 100, 4096, 5120})
    for (int64_t kc : {1, 31, 32, 33, 100, 4096, 5120})
      for (int k = 2; k <= 5; ++k) {
        const Geometry g{n, kc, k};
        const int64_t nb = (kc + 31) / 32;
        EXPECT_EQ(g.blocks_per_row(), nb);
        EXPECT_EQ(g.padded_cols(), nb * 32);
        EXPECT_EQ(g.packed_words(Layout::flat), n * nb * k);
        EXPECT_EQ(g.scale_bytes(Layout::flat), n * nb);
        const int64_t tiles = (nb + 1) / 2;
        EXPECT_EQ(g.packed_words(Layout::tiled_k64), tiles * n * 2 * k);
        EXPECT_EQ(g.scale_bytes(Layout::tiled_k64), tiles * n * 2);
        // k bits + 0.25 bits per (padded) weight
        EXPECT_EQ(g.packed_words(Layout::flat) * 32 + g.scale_bytes(Layout::flat) * 8, n * nb * 32 * k + n * nb * 8);
      }
}

TEST(Geometry, SlotMapsAreBijections) {
  for (int64_t n : {1, 3, 17})
    for (int64_t kc : {1, 32, 33, 64, 65, 200}) {
      const Geometry g{n, kc, 3};
      for (Layout l : {Layout::flat, Layout::tiled_k64, Layout::mma16}) {
        std::set<int64_t> seen;
        for (int64_t r = 0; r < n; ++r)
          for (int64_t b = 0; b < g.blocks_per_row(); ++b) {
            const int64_t s = g.slot(l, r, b);
            ASSERT_GE(s, 0);
            ASSERT_LT(s, g.block_slots(l));
            ASSERT_TRUE(seen.insert(s).second);
            int64_t r2, b2;
            g.block_of_slot(l, s, r2, b2);
            ASSERT_EQ(r2, r);
            ASSERT_EQ(b2, b);
          }
      }
    }
}

TEST(Geometry, TiledOrderIsTileRowBlock) {
  const Geometry g{3, 128, 4};  // 4 blocks per row, 2 tiles
  EXPECT_EQ(g.slot(Layout::tiled_k64, 0, 0), 0);
  EXPECT_EQ(g.slot(Layout::tiled_k64, 0, 1), 1);
  EXPECT_EQ(g.slot(Layout::tiled_k64, 1, 0), 2);
  EXPECT_EQ(g.slot(Layout::tiled_k64, 0, 2), 6);  // second tile after all rows of the first
}

TEST(Geometry, SixtyFourBitIndexingForAnEmbedding) {
  const Geometry g{151936, 5120, 5};
  EXPECT_EQ(g.blocks(), int64_t(151936) * 160);
  EXPECT_EQ(g.packed_words(Layout::flat), int64_t(151936) * 160 * 5);
  const Geometry big{1 << 20, 1 << 16, 5};  // 2^36 weights: offsets past 2^32
  EXPECT_EQ(big.slot(Layout::flat, (1 << 20) - 1, 2047) * 5 + 4, big.packed_words(Layout::flat) - 1);
  int64_t r, b;
  big.block_of_slot(Layout::tiled_k64, big.block_slots(Layout::tiled_k64) - 1, r, b);
  EXPECT_EQ(r, (1 << 20) - 1);
  EXPECT_EQ(b, 2047);
}

// mma16: every (lane, pair, element, index bit) of a unit lands on a distinct word bit,
// and the 2k words of a lane hold exactly its 64 indices.
TEST(Mma16, CodeBitsAreABijectionPerLane) {
  for (int k = 2; k <= 5; ++k) {
    std::set<int> seen;
    for (int q = 0; q < 32; ++q)
      for (int b = 0; b < 2 * k; ++b) {
        const int pos = mma16_code_bit(k, q, b);
        ASSERT_GE(pos, 0);
        ASSERT_LT(pos, 64 * k);
        ASSERT_TRUE(seen.insert(pos).second) << "k=" << k << " q=" << q << " b=" << b;
      }
    // each lane owns 64 distinct (row, element) positions: rows g, g+8 and elements 8c..8c+7
    std::set<std::tuple<int, int, int>> owned;
    for (int r16 = 0; r16 < 16; ++r16)
      for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 32; ++i) {
          const Mma16Pair p = mma16_pair(r16, j, i);
          ASSERT_EQ(p.lane / 4, r16 % 8);
          ASSERT_EQ(p.lane % 4, i / 8);
          ASSERT_TRUE(owned.insert({p.lane, p.q, p.e}).second);
        }
    EXPECT_EQ(owned.size(), 32u * 64u);
  }
}

// k = 5's decode (fused_linear.cuh: k5_high_bytes, k5_pair_code) takes pair q = 8j + 4s + r's low
// code byte from byte r of word 2j + s and its bits 8-9 from byte r of word 8 + j/2, bit pair
// 2(j%2) + s: one shift and one mask serve a k-step's four pairs.
TEST(Mma16, K5HighBitsSitInTheLowBytesIndex) {
  for (int q = 0; q < 32; ++q) {
    const int j = q / 8, s = (q / 4) % 2, r = q % 4;
    for (int b = 0; b < 8; ++b) EXPECT_EQ(mma16_code_bit(5, q, b), (2 * j + s) * 32 + 8 * r + b) << q;
    for (int t = 0; t < 2; ++t)
      EXPECT_EQ(mma16_code_bit(5, q, 8 + t), (8 + j / 2) * 32 + 8 * r + 2 * (2 * (j % 2) + s) + t) << q;
  }
}

TEST(Mma16, WriteThenReadRoundTripsEveryBlock) {
  std::mt19937 rng(3);
  for (int k = 2; k <= 5; ++k) {
    const Geometry g{19, 200, k};
    std::vector<uint32_t> words(size_t(g.packed_words(Layout::mma16)), 0);
    std::vector<std::vector<uint8_t>> blocks;
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t b = 0; b < g.blocks_per_row(); ++b) {
        std::vector<uint8_t> idx(32);
        for (auto& v : idx) v = uint8_t(rng() % (1u << k));
        write_block_indices(g, Layout::mma16, words.data(), r, b, idx.data());
        blocks.push_back(idx);
      }
    size_t i = 0;
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t b = 0; b < g.blocks_per_row(); ++b) {
        uint8_t got[32];
        read_block_indices(g, Layout::mma16, words.data(), r, b, got);
        ASSERT_EQ(std::vector<uint8_t>(got, got + 32), blocks[i++]) << "k=" << k << " r=" << r << " b=" << b;
      }
  }
}

}  // namespace
}  // namespace kbit
