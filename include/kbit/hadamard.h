// Hadamard rotation (spec: "Hadamard rotation"). For a chunk of length B along K:
// y = (1/sqrt(B)) * H_B * D * x, D a +-1 diagonal from a sign bit vector (bit p % 32
// of word p / 32 set negates element p of the chunk). Chunks are fixed blocks
// (32, 64, 128, 256) or whole rows. H_B is Sylvester's matrix for B = 2^m and,
// for B = p * 2^m with p in {12, 20, 28}, the Kronecker product H_p (x) H_{2^m}
// with H_12 and H_20 from Paley's first construction (q = 11, 19) and H_28 from
// Paley's second (q = 13), each as built by kbit::hadamard_small below. Rotating
// the rows of W and of x by the same R leaves x W^T unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kbit/tensor.h"

namespace kbit {

enum class RotationMode : uint8_t { block, row };

struct Rotation {
  RotationMode mode = RotationMode::block;
  int64_t size = 0;              // chunk length B
  std::vector<uint32_t> signs;   // ceil(B / 32) words, or empty for D = I

  // A rotation for rows of length `cols`: block mode B = size (K must be a multiple),
  // row mode B = cols. Signs from a seeded generator, or none without a seed.
  static Rotation make(RotationMode mode, int64_t block_size, int64_t cols, std::optional<uint64_t> seed);
  // "block:64" or "row".
  static Rotation parse(const std::string& spec, int64_t cols, std::optional<uint64_t> seed);
  std::string describe() const;  // "block:64" / "row:3584", with "+signs"
  bool negates(int64_t p) const { return !signs.empty() && ((signs[size_t(p / 32)] >> (p % 32)) & 1u); }
  friend bool operator==(const Rotation&, const Rotation&) = default;
};

// Sizes the transform supports: 2^m (1 <= 2^m <= 2^20) and 12, 20 or 28 times a power of two.
bool is_supported_hadamard_size(int64_t n);
void require_supported_rotation(const Rotation& r, int64_t cols);  // throws naming the problem

// The +-1 Hadamard matrix of order 1, 2, 12, 20 or 28 (row-major), H H^T = p I.
const std::vector<int8_t>& hadamard_small(int p);
// The dense +-1 matrix H_B (for tests and small references).
std::vector<int8_t> hadamard_matrix(int64_t n);

// Rotates every row of x in place (f32, f16 or bf16, host). inverse: x = D H^T y / sqrt(B).
void hadamard_rotate(const MutableTensorView& x, const Rotation& r, bool inverse = false);
// Out of place: rows of `in` rotated into `out` (same shape; dtypes may differ).
void hadamard_rotate(const TensorView& in, const MutableTensorView& out, const Rotation& r, bool inverse = false);

}  // namespace kbit
