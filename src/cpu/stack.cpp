// Stacking quantized matrices by rows (experts into one [E N, K] matrix) under one tensor scale.
#include <algorithm>
#include <atomic>
#include <string>

#include "../core/checks.h"
#include "kbit/cpu.h"
#include "parallel.h"
#include "quantize_block.h"

namespace kbit::cpu {
namespace {

bool all_blocks_zero(const QuantizedMatrix& q) {
  const uint8_t* s = q.scales();
  return std::all_of(s, s + q.scale_count(), [](uint8_t b) { return b == 0; });
}

std::string describe_rotation(const std::optional<Rotation>& r) { return r ? r->describe() : "none"; }

}  // namespace

QuantizedMatrix stack_rows(std::span<const QuantizedMatrix* const> parts, StackStats* stats,
                           std::span<const std::string> names) {
  KBIT_REQUIRE(!parts.empty(), "stack_rows: no matrices to stack");
  KBIT_REQUIRE(names.empty() || names.size() == parts.size(), "stack_rows: ", names.size(), " names for ",
               parts.size(), " matrices");
  auto part_name = [&](size_t i) { return names.empty() ? "matrix " + std::to_string(i) : "'" + names[i] + "'"; };
  for (size_t i = 0; i < parts.size(); ++i) KBIT_REQUIRE(parts[i], "stack_rows: ", part_name(i), " is null");
  const QuantizedMatrix& first = *parts[0];
  int64_t rows = 0;
  float scale = 0.0f;  // the largest tensor scale of a part with a nonzero block
  for (size_t i = 0; i < parts.size(); ++i) {
    const QuantizedMatrix& p = *parts[i];
    kbit::detail::check_matrix(p, "stack_rows", Memory::host);
    KBIT_REQUIRE(p.cols() == first.cols(), "stack_rows: ", part_name(i), " has K = ", p.cols(), ", ", part_name(0),
                 " has K = ", first.cols());
    KBIT_REQUIRE(p.bits() == first.bits(), "stack_rows: ", part_name(i), " has k = ", p.bits(), ", ", part_name(0),
                 " has k = ", first.bits());
    KBIT_REQUIRE(p.codebook() == first.codebook(), "stack_rows: ", part_name(i), " has codebook ", p.codebook().name(),
                 ", ", part_name(0), " has ", first.codebook().name(), " (one codebook for all rows)");
    KBIT_REQUIRE(p.rotation() == first.rotation(), "stack_rows: ", part_name(i), " has rotation ",
                 describe_rotation(p.rotation()), ", ", part_name(0), " has ", describe_rotation(first.rotation()));
    KBIT_REQUIRE(p.rows() <= kMaxQuantizedDim - rows, "stack_rows: more than ", kMaxQuantizedDim, " rows in all");
    rows += p.rows();
    if (!all_blocks_zero(p)) scale = std::max(scale, p.tensor_scale());
  }
  if (scale == 0.0f) scale = 1.0f;  // every part all zero: the spec's scale of a zero matrix

  QuantizedMatrix out = QuantizedMatrix::allocate(rows, first.cols(), first.codebook(), Layout::flat, Memory::host);
  out.set_tensor_scale(scale);
  out.set_rotation(first.rotation());
  const Geometry go = out.geometry();
  const int64_t nb = go.blocks_per_row();
  const Codebook& cb = out.codebook();
  const QuantizeTables& tables = cb.quantize_tables();
  std::atomic<int64_t> rescaled{0}, requantized{0};
  int64_t row0 = 0;
  for (const QuantizedMatrix* part : parts) {
    const QuantizedMatrix& p = *part;
    const Geometry g = p.geometry();
    const float s = p.tensor_scale();
    const float ratio = s / scale;  // a power of two (both are); exactly 1 for most parts
    detail::parallel_for(p.rows(), 64, [&](int64_t r0, int64_t r1) {
      uint8_t idx[kBlockSize];
      float x[kBlockSize];
      int64_t n_rescaled = 0, n_requantized = 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t b = 0; b < nb; ++b) {
          uint8_t code = p.scales()[g.slot(p.layout(), r, b)];
          read_block_indices(g, p.layout(), p.words(), r, b, idx);
          if (ratio != 1.0f && code != 0) {
            const float v = e4m4_decode(code) * ratio;
            const uint8_t scaled = e4m4_encode(v);
            if (e4m4_decode(scaled) == v) {
              code = scaled;  // amax = scale * v = s * e4m4(code): the same weights
              ++n_rescaled;
            } else {
              // Quantize the block's weights again; padding past K stays zero, as quantize has it.
              const float amax = decoded_block_amax(s, code);
              const int64_t valid = std::min<int64_t>(kBlockSize, g.cols - b * kBlockSize);
              for (int j = 0; j < kBlockSize; ++j) x[j] = j < valid ? kbit::detail::mul_rn(cb[idx[j]], amax) : 0.0f;
              code = detail::quantize_block(x, scale, tables, idx);
              ++n_requantized;
            }
          }
          out.scales()[go.slot(Layout::flat, row0 + r, b)] = code;
          write_block_indices(go, Layout::flat, out.words(), row0 + r, b, idx);
        }
      rescaled += n_rescaled;
      requantized += n_requantized;
    });
    row0 += p.rows();
  }
  if (stats) *stats = StackStats{go.blocks(), rescaled.load(), requantized.load()};
  return out;
}

}  // namespace kbit::cpu
