// Where a quantized matrix's words and scale bytes live, for each layout.
//
// flat      (spec, on disk):  words [N][nb][k],            scales [N][nb]
// tiled_k64 (spec reference): words [kt][N][2][k],          scales [kt][N][2]
//   with nb = K32/32 blocks per row and kt = ceil(nb/2) tiles of TILE_K = 64;
//   a missing second block of the last tile is zero padding.
// mma16     (runtime, kbit::linear): stripes of 16 rows x supertiles of 128 columns
//   (4 blocks), arranged so that lane l = 4g + c of a warp loads, with one 8-byte
//   load per plane u < k, the codes of its mma.m16n8k16 A fragments:
//   words  [stripe][supertile][u][lane][2]   (2k words per lane and supertile)
//   scales [stripe][supertile][g][half][j]   (row g + 8 half, block j of the supertile)
//   Lane (g, c) holds rows g and g+8, elements 8c..8c+7 of each of the 4 blocks, as
//   32 pairs of neighbouring elements; see mma16_pair / mma16_code_bit below and
//   src/cuda/linear/fused_linear.cuh for why. Rows and blocks are zero-padded.
// All offsets are 64-bit: a 151936 x 5120 embedding has 24.3M blocks.
#pragma once

#include <cstdint>
#include <string_view>

#include "kbit/format.h"

namespace kbit {

enum class Layout : uint8_t { flat, tiled_k64, mma16 };
std::string_view layout_name(Layout l);

inline constexpr int kTileBlocks = 2;  // TILE_K = 64 in the reference tiled layout
inline constexpr int kStripeRows = 16;      // mma16: rows per stripe (the MMA's m)
inline constexpr int kSupertileBlocks = 4;  // mma16: blocks per supertile (128 columns)

// The largest quantized matrix: with these bounds every count and offset of every layout (padding included,
// times k and the 4-byte word) fits int64 and size_t with room, so a shape read from a file cannot overflow them.
inline constexpr int64_t kMaxQuantizedDim = (int64_t(1) << 31) - 1;   // rows, and columns
inline constexpr int64_t kMaxQuantizedElements = int64_t(1) << 48;   // rows x columns
// Throws kbit::Error naming the shape unless 0 < rows, cols <= kMaxQuantizedDim and rows x cols <= the maximum.
void require_quantized_shape(int64_t rows, int64_t cols);

struct Geometry {
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K (unpadded)
  int bits = 0;      // k

  KBIT_HD int64_t blocks_per_row() const { return (cols + kBlockSize - 1) / kBlockSize; }
  KBIT_HD int64_t padded_cols() const { return blocks_per_row() * kBlockSize; }
  KBIT_HD int64_t tiles_per_row() const { return (blocks_per_row() + kTileBlocks - 1) / kTileBlocks; }
  KBIT_HD int64_t blocks() const { return rows * blocks_per_row(); }

  KBIT_HD int64_t stripes() const { return (rows + kStripeRows - 1) / kStripeRows; }
  KBIT_HD int64_t supertiles() const { return (blocks_per_row() + kSupertileBlocks - 1) / kSupertileBlocks; }

  // Number of block slots a layout stores (padding included).
  KBIT_HD int64_t block_slots(Layout l) const {
    if (l == Layout::flat) return blocks();
    if (l == Layout::tiled_k64) return tiles_per_row() * rows * kTileBlocks;
    return stripes() * kStripeRows * supertiles() * kSupertileBlocks;
  }
  KBIT_HD int64_t packed_words(Layout l) const { return block_slots(l) * bits; }
  KBIT_HD int64_t scale_bytes(Layout l) const { return block_slots(l); }

  // Slot of block (n, b): its scale byte, and (flat, tiled_k64) its first word is slot * bits.
  // mma16 spreads a block's words over 4 lanes: see mma16_word().
  KBIT_HD int64_t slot(Layout l, int64_t n, int64_t b) const {
    if (l == Layout::flat) return n * blocks_per_row() + b;
    if (l == Layout::tiled_k64) return ((b / kTileBlocks) * rows + n) * kTileBlocks + (b % kTileBlocks);
    const int64_t unit = (n / kStripeRows) * supertiles() + b / kSupertileBlocks;
    const int64_t r16 = n % kStripeRows;
    return unit * 64 + (r16 % 8) * 8 + (r16 / 8) * 4 + b % kSupertileBlocks;
  }

  // Inverse of slot(): the block a slot holds. For tiled layouts b may be >= blocks_per_row()
  // (a padding slot).
  KBIT_HD void block_of_slot(Layout l, int64_t slot, int64_t& n, int64_t& b) const {
    if (l == Layout::flat) {
      const int64_t nb = blocks_per_row();
      n = slot / nb;
      b = slot - n * nb;
      return;
    }
    if (l == Layout::mma16) {
      const int64_t unit = slot / 64, within = slot % 64;
      const int64_t stripe = unit / supertiles(), st = unit % supertiles();
      n = stripe * kStripeRows + (within / 8) + 8 * ((within % 8) / 4);
      b = st * kSupertileBlocks + within % 4;
      return;
    }
    const int64_t pair = slot / kTileBlocks;
    const int64_t kb = slot - pair * kTileBlocks;
    const int64_t kt = pair / rows;
    n = pair - kt * rows;
    b = kt * kTileBlocks + kb;
  }

  // mma16: index of word w (0 .. 2*bits-1) of `lane` in the unit (stripe, supertile).
  KBIT_HD int64_t mma16_word(int64_t stripe, int64_t st, int lane, int w) const {
    return ((stripe * supertiles() + st) * bits + w / 2) * 64 + lane * 2 + (w % 2);
  }
};

// mma16: which lane holds element i (0..31) of block j (0..3 in its supertile) of row
// r16 (0..15 in its stripe), as element e (0 low, 1 high) of its pair q (0..31).
// q = 8j + 4s + r: k-step s of block j, A register r (a0..a3 of mma.m16n8k16).
struct Mma16Pair {
  int lane, q, e;
};
KBIT_HD Mma16Pair mma16_pair(int r16, int j, int i) {
  const int p = i / 2, c = p / 4, s = (p % 4) / 2, r = 2 * (p % 2) + r16 / 8;
  return Mma16Pair{4 * (r16 % 8) + c, 8 * j + 4 * s + r, i % 2};
}

// mma16: where bit b (0 .. 2k-1) of pair q's code (index of element 0 in bits 0..k-1,
// element 1 in bits k..2k-1) lives among a lane's 2k words: word * 32 + bit.
// k=2: word j, byte 2*(r&1)+e, bits 2*(2s + r/2) (two prmt selectors per byte-quad)
// k=4: the code byte r of word 2j+s.
// k=3: blocks j < 3: bits 0-5 of byte r of word 2j+s (one prmt per pair); block 3:
// bit pair b/2 of the code in bits 6-7 of byte r of word 3s + b/2 (three shifts and two
// lop3 gather the four codes of a k-step into the bytes of one word).
// k=5: the low 8 code bits as k = 4's (byte r of word 2j+s); bits 8-9 in word 8 + j/2, byte r,
// bits 2m, 2m+1 with m = 2(j%2) + s: one shift and one mask give the four pairs' high bits of a
// k-step, one per byte (zero above), and one prmt then joins a pair's 10-bit code.
KBIT_HD int mma16_code_bit(int k, int q, int b) {
  const int j = q / 8, s = (q / 4) % 2, r = q % 4;
  switch (k) {
    case 2: {
      const int e = b / 2, t = b % 2;
      return j * 32 + 8 * (2 * (r & 1) + e) + 2 * (2 * s + r / 2) + t;
    }
    case 3:
      return j < 3 ? (2 * j + s) * 32 + 8 * r + b : (3 * s + b / 2) * 32 + 8 * r + 6 + b % 2;
    case 4:
      return (2 * j + s) * 32 + 8 * r + b;
    default:
      return b < 8 ? (q / 4) * 32 + 8 * (q % 4) + b : (8 + q / 16) * 32 + 8 * (q % 4) + 2 * ((q % 16) / 4) + (b - 8);
  }
}

}  // namespace kbit

namespace kbit {

// The 32 indices of block (n, b) in any layout (format.h's unpack_block for the
// contiguous layouts, a gather over 4 lanes for mma16).
KBIT_HD void read_block_indices(const Geometry& g, Layout l, const uint32_t* words, int64_t n, int64_t b,
                                       uint8_t* idx) {
  if (l != Layout::mma16) {
    unpack_block(words + g.slot(l, n, b) * g.bits, g.bits, idx);
    return;
  }
  const int64_t stripe = n / kStripeRows, st = b / kSupertileBlocks;
  const int r16 = int(n % kStripeRows), j = int(b % kSupertileBlocks);
  for (int i = 0; i < kBlockSize; ++i) {
    const Mma16Pair p = mma16_pair(r16, j, i);
    uint8_t v = 0;
    for (int t = 0; t < g.bits; ++t) {
      const int pos = mma16_code_bit(g.bits, p.q, p.e * g.bits + t);
      v |= uint8_t(((words[g.mma16_word(stripe, st, p.lane, pos / 32)] >> (pos % 32)) & 1u) << t);
    }
    idx[i] = v;
  }
}

// Stores the 32 indices of block (n, b). For mma16 the words are shared by the 16 rows
// of a stripe: callers write one stripe from one thread.
KBIT_HD void write_block_indices(const Geometry& g, Layout l, uint32_t* words, int64_t n, int64_t b,
                                        const uint8_t* idx) {
  if (l != Layout::mma16) {
    pack_block(idx, g.bits, words + g.slot(l, n, b) * g.bits);
    return;
  }
  const int64_t stripe = n / kStripeRows, st = b / kSupertileBlocks;
  const int r16 = int(n % kStripeRows), j = int(b % kSupertileBlocks);
  for (int i = 0; i < kBlockSize; ++i) {
    const Mma16Pair p = mma16_pair(r16, j, i);
    for (int t = 0; t < g.bits; ++t) {
      const int pos = mma16_code_bit(g.bits, p.q, p.e * g.bits + t);
      uint32_t& w = words[g.mma16_word(stripe, st, p.lane, pos / 32)];
      w = (w & ~(1u << (pos % 32))) | (uint32_t((idx[i] >> t) & 1u) << (pos % 32));
    }
  }
}

}  // namespace kbit
