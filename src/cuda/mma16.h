// Entry points of src/cuda/mma16.cu, used by repack and dequantize.
#pragma once

#include <cuda_runtime_api.h>

#include "kbit/quantized_matrix.h"

namespace kbit::cuda::detail {
// One of src, dst is mma16, the other flat or tiled_k64; same shape, bits, codebook.
void repack_mma16(const QuantizedMatrix& src, QuantizedMatrix& dst, cudaStream_t stream);
void dequantize_mma16(const QuantizedMatrix& q, const MutableTensorView& out, cudaStream_t stream);
}  // namespace kbit::cuda::detail
