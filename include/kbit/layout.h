// Where a quantized matrix's words and scale bytes live, for each layout.
//
// flat      (spec, on disk):  words [N][nb][k],            scales [N][nb]
// tiled_k64 (spec reference): words [kt][N][2][k],          scales [kt][N][2]
//   with nb = K32/32 blocks per row and kt = ceil(nb/2) tiles of TILE_K = 64;
//   a missing second block of the last tile is zero padding.
// All offsets are 64-bit: a 151936 x 5120 embedding has 24.3M blocks.
#pragma once

#include <cstdint>
#include <string_view>

#include "kbit/format.h"

namespace kbit {

enum class Layout : uint8_t { flat, tiled_k64 };
std::string_view layout_name(Layout l);

inline constexpr int kTileBlocks = 2;  // TILE_K = 64 in the reference tiled layout

struct Geometry {
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K (unpadded)
  int bits = 0;      // k

  KBIT_HD int64_t blocks_per_row() const { return (cols + kBlockSize - 1) / kBlockSize; }
  KBIT_HD int64_t padded_cols() const { return blocks_per_row() * kBlockSize; }
  KBIT_HD int64_t tiles_per_row() const { return (blocks_per_row() + kTileBlocks - 1) / kTileBlocks; }
  KBIT_HD int64_t blocks() const { return rows * blocks_per_row(); }

  // Number of block slots a layout stores (padding included).
  KBIT_HD int64_t block_slots(Layout l) const {
    return l == Layout::flat ? blocks() : tiles_per_row() * rows * kTileBlocks;
  }
  KBIT_HD int64_t packed_words(Layout l) const { return block_slots(l) * bits; }
  KBIT_HD int64_t scale_bytes(Layout l) const { return block_slots(l); }

  // Slot of block (n, b): its scale byte, and its first word is slot * bits.
  KBIT_HD int64_t slot(Layout l, int64_t n, int64_t b) const {
    if (l == Layout::flat) return n * blocks_per_row() + b;
    return ((b / kTileBlocks) * rows + n) * kTileBlocks + (b % kTileBlocks);
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
    const int64_t pair = slot / kTileBlocks;
    const int64_t kb = slot - pair * kTileBlocks;
    const int64_t kt = pair / rows;
    n = pair - kt * rows;
    b = kt * kTileBlocks + kb;
  }
};

}  // namespace kbit
