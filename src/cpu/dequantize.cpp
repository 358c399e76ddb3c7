// CPU reference dequantize, matmul (y = x W^T) and quantization error.
#include <cmath>
#include <limits>
#include <vector>

#include "../core/checks.h"
#include "elements.h"
#include "kbit/cpu.h"
#include "parallel.h"

namespace kbit::cpu {
namespace {

// Row r of W as floats, w[c] = cb[idx] * (s * e4m4(e)) with one fp32 rounding.
void dequantize_row(const QuantizedMatrix& q, float s, int64_t r, float* out) {
  const Geometry& g = q.geometry();
  uint8_t idx[kBlockSize];
  for (int64_t b = 0; b < g.blocks_per_row(); ++b) {
    const float amax = decoded_block_amax(s, q.scales()[g.slot(q.layout(), r, b)]);
    read_block_indices(g, q.layout(), q.words(), r, b, idx);
    for (int j = 0; j < kBlockSize; ++j) out[b * kBlockSize + j] = kbit::detail::mul_rn(q.codebook()[idx[j]], amax);
  }
}

void check_output_view(const MutableTensorView& v, std::string_view what) {
  kbit::detail::check_float_view(v, what);
}

}  // namespace

void dequantize(const QuantizedMatrix& q, const MutableTensorView& out) {
  kbit::detail::check_matrix(q, "dequantize", Memory::host);
  check_output_view(out, "dequantize output");
  kbit::detail::check_same_shape(q, out, "dequantize");
  const float s = q.tensor_scale();
  detail::parallel_for(q.rows(), 64, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(q.geometry().padded_cols()));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(q, s, r, row.data());
      detail::store_row(out.data, out.dtype, out.stride(), r, q.cols(), row.data());
    }
  });
}

namespace {
template <typename Acc, typename Store>
void matmul_impl(const TensorView& x, const QuantizedMatrix& w, Store store) {
  kbit::detail::check_matrix(w, "matmul", Memory::host);
  kbit::detail::check_float_view(x, "matmul x");
  KBIT_REQUIRE(x.cols == w.cols(), "matmul: x has ", x.cols, " columns but W has K = ", w.cols());
  const int64_t K = w.cols(), M = x.rows;
  std::vector<float> xs(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m) detail::load_row(x.data, x.dtype, x.stride(), m, K, K, xs.data() + m * K);
  const float s = w.tensor_scale();
  detail::parallel_for(w.rows(), 16, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(static_cast<size_t>(w.geometry().padded_cols()));
    for (int64_t n = n0; n < n1; ++n) {
      dequantize_row(w, s, n, row.data());
      for (int64_t m = 0; m < M; ++m) {
        Acc acc = 0;
        const float* xm = xs.data() + m * K;
        for (int64_t c = 0; c < K; ++c) acc += Acc(xm[c]) * Acc(row[size_t(c)]);
        store(m, n, acc);
      }
    }
  });
}
}  // namespace

void matmul(const TensorView& x, const QuantizedMatrix& w, const MutableTensorView& y) {
  check_output_view(y, "matmul y");
  KBIT_REQUIRE(y.rows == x.rows && y.cols == w.rows(), "matmul: y must be [", x.rows, ", ", w.rows(), "], got [",
               y.rows, ", ", y.cols, "]");
  matmul_impl<float>(x, w, [&](int64_t m, int64_t n, float v) {
    detail::store_row(static_cast<char*>(y.data) + (m * y.stride() + n) * int64_t(dtype_size(y.dtype)), y.dtype, 0,
                      0, 1, &v);
  });
}

std::vector<double> matmul_fp64(const TensorView& x, const QuantizedMatrix& w) {
  std::vector<double> y(static_cast<size_t>(x.rows * w.rows()));
  matmul_impl<double>(x, w, [&](int64_t m, int64_t n, double v) { y[size_t(m * w.rows() + n)] = v; });
  return y;
}

double ErrorStats::sqnr_db() const {
  if (sum_sq_error == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sum_sq_ref / sum_sq_error);
}

ErrorStats quantization_error(const TensorView& original, const QuantizedMatrix& q) {
  kbit::detail::check_matrix(q, "quantization_error", Memory::host);
  kbit::detail::check_float_view(original, "quantization_error original");
  kbit::detail::check_same_shape(q, original, "quantization_error");
  const float s = q.tensor_scale();
  const int64_t padded = q.geometry().padded_cols();
  std::vector<ErrorStats> per_row(size_t(q.rows()));
  detail::parallel_for(q.rows(), 64, [&](int64_t r0, int64_t r1) {
    std::vector<float> deq(static_cast<size_t>(padded)), ref(static_cast<size_t>(padded));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(q, s, r, deq.data());
      detail::load_row(original.data, original.dtype, original.stride(), r, q.cols(), padded, ref.data());
      ErrorStats e;
      for (int64_t c = 0; c < q.cols(); ++c) {
        const double d = double(ref[size_t(c)]) - double(deq[size_t(c)]);
        e.sum_sq_error += d * d;
        e.sum_sq_ref += double(ref[size_t(c)]) * double(ref[size_t(c)]);
      }
      e.count = q.cols();
      per_row[size_t(r)] = e;
    }
  });
  ErrorStats total;
  for (const auto& e : per_row) total += e;
  return total;
}

}  // namespace kbit::cpu
