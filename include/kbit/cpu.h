// The CPU reference: the oracle for every GPU test and the path the tools take
// on machines without a GPU. Multi-threaded over rows; results do not depend on
// the thread count.
#pragma once

#include <vector>

#include "kbit/quantized_matrix.h"
#include "kbit/tensor.h"

namespace kbit::cpu {

// Worker threads for large tensors (default: std::thread::hardware_concurrency()).
void set_num_threads(int n);
int num_threads();

// Quantize an f32/f16/bf16 host matrix. Throws on NaN/Inf, empty shapes, bad k.
QuantizedMatrix quantize(const TensorView& w, const Codebook& codebook, Layout layout = Layout::flat);
void quantize_into(const TensorView& w, QuantizedMatrix& out);  // out: host, flat, same shape

// w_hat[n][c] = T(cb[idx] * s * e4m4(e)) into an f32/f16/bf16 host view of N x K.
void dequantize(const QuantizedMatrix& q, const MutableTensorView& out);

// Same matrix in another layout (bit-exact round trip).
QuantizedMatrix repack(const QuantizedMatrix& q, Layout to);

// y[M, N] = x[M, K] @ W^T, W dequantized on the fly; fp32 accumulation.
void matmul(const TensorView& x, const QuantizedMatrix& w, const MutableTensorView& y);
// The same in fp64 with fp64 output: the reference GPU matmuls are checked against.
std::vector<double> matmul_fp64(const TensorView& x, const QuantizedMatrix& w);

struct ErrorStats {
  double sum_sq_error = 0;  // sum (w - w_hat)^2
  double sum_sq_ref = 0;    // sum w^2
  int64_t count = 0;
  double mse() const { return count ? sum_sq_error / double(count) : 0.0; }
  double sqnr_db() const;   // 10 log10(sum w^2 / sum err^2)
  ErrorStats& operator+=(const ErrorStats& o) {
    sum_sq_error += o.sum_sq_error, sum_sq_ref += o.sum_sq_ref, count += o.count;
    return *this;
  }
};
// Quantization error of q against the matrix it came from (both on the host).
ErrorStats quantization_error(const TensorView& original, const QuantizedMatrix& q);

}  // namespace kbit::cpu
