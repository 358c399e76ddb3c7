// The CPU reference: the oracle for every GPU test and the path the tools take
// on machines without a GPU. Multi-threaded over rows; results do not depend on
// the thread count.
#pragma once

#include <span>
#include <string>
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

// The rows of several matrices as one: parts[0]'s rows, then parts[1]'s, ... For instance E experts'
// [N, K] weights, quantized one by one, into the [E N, K] stack that kbit::expert_linear and
// kbit::moe_forward take (or an expert's gate rows, then its up rows). Host matrices of one K, bit width,
// codebook and rotation, in any layout; the result is flat, under the largest tensor scale of the parts
// that are not all zero. A part under a smaller tensor scale (2^-d times it) keeps its indices and gets
// each block's E4M4 byte divided by 2^d where E4M4 holds the result exactly, so its dequantized weights
// are bit-identical; blocks small enough to fall out of E4M4's range that way are quantized again from
// their dequantized values under the common scale, and counted in `stats`. Errors name a part by
// `names[i]` where names are given (one per part), else as "matrix i".
struct StackStats {
  int64_t blocks = 0;       // blocks in the result
  int64_t rescaled = 0;     // blocks whose byte was rescaled (exact)
  int64_t requantized = 0;  // blocks quantized again under the common tensor scale
};
QuantizedMatrix stack_rows(std::span<const QuantizedMatrix* const> parts, StackStats* stats = nullptr,
                           std::span<const std::string> names = {});

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
