// Where the fused kernel's wgmma items keep one supertile of activations (128 columns of
// 8 * n_tiles tokens) in shared memory: wgmma's B operand, K-major without swizzle, as
// 8-token x 16-byte core matrices (PTX ISA, "Shared Memory Matrix Layout"). Plain C++ so
// that host tests check it against the mma16 k order (tests/dispatch/wgmma_layout_test.cpp).
#pragma once

#include <cstdint>

#include "kbit/hd.h"

namespace kbit::cuda::detail {

// Bytes from one 8-token group to the next: the supertile's 16 core matrices.
constexpr uint32_t kWgmmaGroupBytes = 16 * 128;
// Bytes between the two core matrices (k slots 0-7, 8-15) of one k16 step (the descriptor's
// leading byte offset) and from one k16 step to the next.
constexpr uint32_t kWgmmaKHalfBytes = 128;
constexpr uint32_t kWgmmaStepBytes = 256;

// The x column (0..127 in the supertile) that k slot `kappa` (0..15) of k16 step q (0..7)
// multiplies: the mma16 layout gives lane c the columns 32j + 8c + 4s + {0..3} of k-step
// s of block j (q = 2j + s), in the k slots 2c, 2c + 1 (columns + 0, 1) and 2c + 8, 2c + 9
// (columns + 2, 3), as the mma.sync path's B fragments (x's 16-byte chunk 8c..8c+7: .x, .y
// for s = 0, .z, .w for s = 1) take them.
KBIT_HD constexpr int wgmma_column_of(int q, int kappa) {
  const int j = q / 2, s = q % 2, h = kappa / 8, c = (kappa % 8) / 2, e = kappa % 2;
  return 32 * j + 8 * c + 4 * s + 2 * h + e;
}

// Byte offset in a ring slot of token t's activation pair at columns col, col + 1 of the
// supertile (col even): the pair's core matrix (q, h) and k slot 2c of the token's row.
KBIT_HD constexpr uint32_t wgmma_pair_offset(int t, int col) {
  const int j = col / 32, c = (col % 32) / 8, s = (col % 8) / 4, h = (col % 4) / 2;
  return uint32_t(t / 8) * kWgmmaGroupBytes + uint32_t(2 * j + s) * kWgmmaStepBytes + uint32_t(h) * kWgmmaKHalfBytes +
         uint32_t(t % 8) * 16 + uint32_t(c) * 4;
}

// Where wgmma reads B element (token n, k slot kappa) of k16 step q: the descriptor's start
// (q * kWgmmaStepBytes), leading byte offset (kWgmmaKHalfBytes: the K halves) and stride byte
// offset (kWgmmaGroupBytes: the 8-token groups) applied to a core matrix's 8 rows of 16 bytes.
KBIT_HD constexpr uint32_t wgmma_b_element_offset(int q, int n, int kappa) {
  return uint32_t(q) * kWgmmaStepBytes + uint32_t(n / 8) * kWgmmaGroupBytes + uint32_t(kappa / 8) * kWgmmaKHalfBytes +
         uint32_t(n % 8) * 16 + uint32_t(kappa % 8) * 2;
}

// The tile kernel (tile_linear.cuh): K-major operands with the 128-byte swizzle, in atoms of
// 8 rows x 64 16-bit elements (1024 bytes, 1024-byte aligned). The byte offset of 16-byte
// chunk `chunk` (0..7, columns 8 chunk .. + 7 of the atom) of row `row` in a run of atoms
// stacked along the rows: the hardware XORs address bits 4-6 with bits 7-9 (the row in the atom).
constexpr uint32_t kSw128AtomBytes = 1024;
KBIT_HD constexpr uint32_t sw128_offset(int row, int chunk) {
  return uint32_t(row / 8) * kSw128AtomBytes + uint32_t(row % 8) * 128 + (uint32_t(chunk ^ (row % 8)) << 4);
}

// Where wgmma reads element (row, k) of a k16 step whose descriptor starts `start` bytes into
// the atom run (the atom's start plus 32 bytes per k16 step), rows 1024 bytes apart per 8:
// the unswizzled address, then the XOR.
KBIT_HD constexpr uint32_t sw128_read_offset(uint32_t start, int row, int k) {
  const uint32_t plain = start + uint32_t(row / 8) * kSw128AtomBytes + uint32_t(row % 8) * 128 + uint32_t(k) * 2;
  return plain ^ (((plain >> 7) & 7u) << 4);
}

}  // namespace kbit::cuda::detail
