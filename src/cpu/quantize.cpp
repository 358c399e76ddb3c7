// CPU reference quantizer: two passes (global absmax for the tensor scale, then
// per-block scale bytes, indices and bit planes), parallel over rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../core/checks.h"
#include "elements.h"
#include "kbit/cpu.h"
#include "parallel.h"
#include "quantize_block.h"

namespace kbit::cpu {
namespace {

constexpr uint32_t kFiniteLimit = 0x7f800000u;  // |x| bits at or above this are Inf/NaN

// Max |x| over the matrix as float bits (a NaN has bits above +Inf's).
uint32_t max_abs_bits(const TensorView& w) {
  const int64_t padded = Geometry{w.rows, w.cols, 2}.padded_cols();
  std::vector<uint32_t> row_max(size_t(w.rows), 0);
  detail::parallel_for(w.rows, 64, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(padded));
    for (int64_t r = r0; r < r1; ++r) {
      detail::load_row(w.data, w.dtype, w.stride(), r, w.cols, padded, row.data());
      uint32_t m = 0;
      for (int64_t c = 0; c < w.cols; ++c) m = std::max(m, kbit::detail::float_bits(row[size_t(c)]) & 0x7fffffffu);
      row_max[size_t(r)] = m;
    }
  });
  for (int64_t r = 0; r < w.rows; ++r) {
    if (row_max[size_t(r)] >= kFiniteLimit) {
      std::vector<float> row(static_cast<size_t>(padded));
      detail::load_row(w.data, w.dtype, w.stride(), r, w.cols, padded, row.data());
      for (int64_t c = 0; c < w.cols; ++c)
        KBIT_REQUIRE(std::isfinite(row[size_t(c)]), "quantize: the input contains ", row[size_t(c)], " at row ", r,
                     ", column ", c, "; only finite weights can be quantized");
    }
  }
  return *std::max_element(row_max.begin(), row_max.end());
}

}  // namespace

namespace detail {

uint8_t quantize_block(const float* x, float s, const QuantizeTables& tables, uint8_t* idx) {
  const float inv_s = 1.0f / s;  // exact: s is a power of two
  float amax = 0.0f;
  for (int j = 0; j < kBlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
  const uint8_t code = block_scale_code(amax, inv_s);
  const float divisor = index_divisor(s, code);
  const float* row = tables.thresholds.data() + size_t(code) * size_t(tables.rule.levels);
  const float inv_dec = 1.0f / e4m4_decode(code);
  for (int j = 0; j < kBlockSize; ++j)
    idx[j] = uint8_t(quantize_index(tables.rule, row, code, x[j], inv_s, s > 1.0f, divisor, inv_dec));
  return code;
}

}  // namespace detail

void quantize_into(const TensorView& w, QuantizedMatrix& out) {
  kbit::detail::check_float_view(w, "quantize");
  kbit::detail::check_matrix(out, "quantize", Memory::host);
  kbit::detail::check_same_shape(out, w, "quantize");
  KBIT_REQUIRE(out.layout() == Layout::flat, "quantize_into: the output must use the flat layout");

  const float s = tensor_scale_for_amax(kbit::detail::bits_float(max_abs_bits(w)));
  out.set_tensor_scale(s);
  const Geometry g = out.geometry();
  const int k = g.bits;
  const int64_t nb = g.blocks_per_row();
  const QuantizeTables& tables = out.codebook().quantize_tables();
  uint32_t* words = out.words();
  uint8_t* scales = out.scales();

  detail::parallel_for(g.rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(g.padded_cols()));
    uint8_t idx[kBlockSize];
    for (int64_t r = r0; r < r1; ++r) {
      detail::load_row(w.data, w.dtype, w.stride(), r, w.cols, g.padded_cols(), row.data());
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t code = detail::quantize_block(row.data() + b * kBlockSize, s, tables, idx);
        const int64_t slot = g.slot(Layout::flat, r, b);
        scales[slot] = code;
        pack_block(idx, k, words + slot * k);
      }
    }
  });
}

QuantizedMatrix quantize(const TensorView& w, const Codebook& codebook, Layout layout) {
  kbit::detail::check_float_view(w, "quantize");
  QuantizedMatrix q = QuantizedMatrix::allocate(w.rows, w.cols, codebook, Layout::flat, Memory::host);
  quantize_into(w, q);
  return layout == Layout::flat ? std::move(q) : repack(q, layout);
}

QuantizedMatrix repack(const QuantizedMatrix& q, Layout to) {
  kbit::detail::check_matrix(q, "repack", Memory::host);
  QuantizedMatrix out = QuantizedMatrix::allocate(q.rows(), q.cols(), q.codebook(), to, Memory::host);
  out.set_tensor_scale(q.tensor_scale());
  out.set_rotation(q.rotation());
  const Geometry g = q.geometry();
  const int64_t nb = g.blocks_per_row();
  // Whole stripes per task: mma16 rows of one stripe share words (padding stays zero).
  const int64_t rows_per_task = 256;
  const int64_t tasks = (g.rows + rows_per_task - 1) / rows_per_task;
  detail::parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    uint8_t idx[kBlockSize];
    for (int64_t r = t0 * rows_per_task; r < std::min(g.rows, t1 * rows_per_task); ++r)
      for (int64_t b = 0; b < nb; ++b) {
        out.scales()[g.slot(to, r, b)] = q.scales()[g.slot(q.layout(), r, b)];
        read_block_indices(g, q.layout(), q.words(), r, b, idx);
        write_block_indices(g, to, out.words(), r, b, idx);
      }
  });
  return out;
}

}  // namespace kbit::cpu
